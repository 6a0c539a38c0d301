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

export const isNumericType = (t) => /^(u?int|float|double|halffloat|decimal)/.test(String(t || ""));
