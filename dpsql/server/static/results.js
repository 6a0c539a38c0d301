// The result table and its charts, built from a query answer ({columns, types, rows, plan}) as nodes.

import { decimalsFor, el, fmt, fmtFixed, isNumericType, svg } from "./dom.js";

const INTERVALS = [["_ci_low", "_ci_high"], ["_lo", "_hi"]];
const MAX_CHART_GROUPS = 40;    // more bars than this are not readable
const MAX_CHARTS = 4;           // one small chart per numeric output, at most this many
// The charts' drawing width: the page shows each at 320-560 px (console.css), so its 13 px text is
// drawn at 11.5-20 px, however many charts stand side by side.
const CHART_W = 360;

/** Columns as the table shows them: each value column with its interval's columns, if any. */
export function layout(doc) {
  const index = new Map(doc.columns.map((c, i) => [c, i]));
  const kinds = new Map(((doc.plan && doc.plan.outputs) || []).map((o) => [o.name, o.kind]));
  const taken = new Set();
  const shown = [];
  for (const [i, name] of doc.columns.entries()) {
    for (const [lo, hi] of INTERVALS) {
      if (index.has(name + lo) && index.has(name + hi)) {
        shown.push({ name, i, lo: index.get(name + lo), hi: index.get(name + hi) });
        taken.add(name + lo).add(name + hi);
        break;
      }
    }
  }
  const withInterval = new Map(shown.map((s) => [s.i, s]));
  return doc.columns.flatMap((name, i) => {
    if (withInterval.has(i)) return [{ ...withInterval.get(i), kind: kinds.get(name), type: doc.types[i] }];
    if (taken.has(name)) return [];
    return [{ name, i, lo: null, hi: null, kind: kinds.get(name), type: doc.types[i] }];
  });
}

/** What an interval covers (as the Python display says): the noise, not what bounding removed. */
const COVERS = "of the noise around the bounded value (each person's rows capped, values clamped); not what bounding removed";

/** The table's head and body: each value with its interval beside it, "[low, high]"; a column's
 * numbers (its values and their intervals) all with the same decimals. */
export function tableParts(doc, cols, level) {
  const head = el("tr", {}, cols.map((c) => el("th", { scope: "col", className: isNumericType(c.type) ? "num" : null },
    c.name, c.lo !== null ? el("span", { className: "ci-head", title: COVERS }, " [" + level + "interval]") : null)));
  const decimals = cols.map((c) => decimalsFor(doc.rows.flatMap((r) => [c.i, c.lo, c.hi].filter((i) => i !== null)
    .map((i) => r[i]))));
  const body = doc.rows.map((row) => el("tr", {}, cols.map((c, n) => {
    const shown = (v) => fmtFixed(v, decimals[n]);
    const cell = el("td", { className: isNumericType(c.type) ? "num" : null }, shown(row[c.i]));
    if (c.lo !== null) cell.append(" ", el("span", { className: "ci" }, "[" + shown(row[c.lo]) + ", " + shown(row[c.hi]) + "]"));
    return cell;
  })));
  return [el("thead", {}, head), el("tbody", {}, body)];
}

/** One key column and numeric outputs: a bar chart per output, with its interval as error bars;
 * null when the answer has no such shape. */
export function charts(doc, cols, level) {
  const keys = cols.filter((c) => c.kind === "key" || (!c.kind && c.lo === null && !isNumericType(c.type)));
  const values = cols.filter((c) => !keys.includes(c) && isNumericType(c.type)).slice(0, MAX_CHARTS);
  if (keys.length !== 1 || values.length === 0 || doc.rows.length === 0 || doc.rows.length > MAX_CHART_GROUPS) {
    return null;
  }
  const key = keys[0];
  const bars = values.some((v) => v.lo !== null)
    ? "whiskers: the " + level + "confidence interval, " + COVERS + "." : "no intervals (set a confidence level to draw them).";
  return { plots: values.map((v) => barChart(doc.rows, key, v)),
           caption: "Noisy values by " + key.name + "; " + bars };
}

function niceTicks(lo, hi, count) {
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

function barChart(rows, key, value) {
  const points = rows.map((r) => ({ label: fmt(r[key.i]), v: r[value.i],
    lo: value.lo === null ? null : r[value.lo], hi: value.hi === null ? null : r[value.hi] }));
  const nums = points.flatMap((p) => [p.v, p.lo, p.hi]).filter((x) => typeof x === "number" && Number.isFinite(x));
  let lo = Math.min(0, ...nums), hi = Math.max(0, ...nums);
  if (hi === lo) hi = lo + 1;
  const labelW = Math.min(CHART_W / 3, 16 + 8.5 * Math.max(2, ...points.map((p) => p.label.length)));   // 13 px text
  const W = CHART_W, rowH = 26, top = 28, plotW = W - labelW - 20, H = top + rowH * points.length + 26;
  const x = (v) => labelW + ((v - lo) / (hi - lo)) * plotW;
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
                             "aria-label": `${value.name} by ${key.name}, bar chart` });
  chart.append(svg("text", { x: 0, y: 16, class: "chart-title" }, value.name + " by " + key.name));
  // As many ticks as their labels leave room for (about 8 px a character), 2 to 5.
  const room = Math.floor(plotW / (8 * Math.max(fmt(Math.round(lo)).length, fmt(Math.round(hi)).length) + 16));
  for (const t of niceTicks(lo, hi, Math.min(5, Math.max(2, room)))) {
    chart.append(svg("line", { x1: x(t), x2: x(t), y1: top - 4, y2: H - 20, class: t === 0 ? "axis" : "grid" }),
                 svg("text", { x: x(t), y: H - 6, class: "tick", "text-anchor": "middle" }, fmt(t)));
  }
  points.forEach((p, n) => chart.append(barRow(p, n, { x, top, rowH, labelW })));
  return chart;
}

function barRow(p, n, { x, top, rowH, labelW }) {
  const g = svg("g", { class: "row" });
  const y = top + n * rowH, mid = y + rowH / 2;
  g.append(svg("text", { x: labelW - 8, y: mid + 4, class: "label", "text-anchor": "end" }, p.label));
  if (typeof p.v !== "number") return g;
  const x0 = x(0), xv = x(p.v);
  const bar = svg("rect", { x: Math.min(x0, xv), y: y + 4, width: Math.max(1, Math.abs(xv - x0)), height: rowH - 8,
                            class: "bar" });
  bar.append(svg("title", {}, p.label + ": " + fmt(p.v) + (p.lo !== null ? " [" + fmt(p.lo) + ", " + fmt(p.hi) + "]" : "")));
  g.append(bar);
  if (typeof p.lo === "number" && typeof p.hi === "number") {
    const e = svg("g", { class: "errorbar" });
    e.append(svg("line", { x1: x(p.lo), x2: x(p.hi), y1: mid, y2: mid }),
             svg("line", { x1: x(p.lo), x2: x(p.lo), y1: mid - 5, y2: mid + 5 }),
             svg("line", { x1: x(p.hi), x2: x(p.hi), y1: mid - 5, y2: mid + 5 }));
    g.append(e);
  }
  return g;
}
