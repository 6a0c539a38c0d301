// DOM helpers of the console: every server string becomes text (a text node, textContent), never HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

/** An element with attributes and children (strings become text nodes, never HTML). */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "className") node.className = v; else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

export function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function fmt(v) {
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) return String(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return Number(v.toPrecision(6)).toLocaleString("en-US", { maximumFractionDigits: 6 });
  }
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

const SIGNIFICANT = 6;    // digits a column's largest value keeps
const MAX_DECIMALS = 6;

/** The decimals one column shows: the same for all its values (and their intervals), so that they
 * line up and none looks more precise than another; enough for SIGNIFICANT digits of the largest. */
export function decimalsFor(values) {
  const nums = values.filter((v) => typeof v === "number" && Number.isFinite(v));
  if (nums.every(Number.isInteger)) return 0;
  const top = Math.max(...nums.map(Math.abs));
  const digits = top > 0 ? Math.floor(Math.log10(top)) + 1 : 1;
  return Math.min(MAX_DECIMALS, Math.max(0, SIGNIFICANT - digits));
}

/** A value with ``decimals`` decimals (a number), or as ``fmt`` shows it (anything else). */
export function fmtFixed(v, decimals) {
  if (typeof v !== "number" || !Number.isFinite(v)) return fmt(v);
  return v.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

export const isNumericType = (t) => /^(u?int|float|double|halffloat|decimal)/.test(String(t || ""));
