// dpsql query console: plain browser JavaScript, no build step, no library, nothing from elsewhere.
// Talks to the same server's /v1/ API with the analyst's token (kept in sessionStorage only).
// Every server string (SQL, messages, values) is user-controlled: it goes into the page as text
// (textContent, createTextNode, SVG text), never as HTML.

import { el, fmt } from "./dom.js";
import { charts, layout, tableParts } from "./results.js";
import { schemaList } from "./schema.js";

const TOKEN_KEY = "dpsql.token";
const EXPLAIN_DELAY_MS = 600;   // explain once typing pauses

const state = { token: null, session: 0, budget: null, plan: null, explainSeq: 0, explainTimer: null,
                explainAbort: null };
const STALE = -1;   // the status of an answer that arrived after its analyst logged out
const $ = (id) => document.getElementById(id);

function show(id, visible) { $(id).hidden = !visible; }

// --- the API ------------------------------------------------------------------------------------

/** One API call: {status, data}; a network failure or a non-JSON answer becomes an error body; an
 * answer for an analyst who has logged out meanwhile is STALE, shown to no one. */
async function api(method, path, body, signal) {
  const session = state.session;
  const headers = { Authorization: "Bearer " + state.token, Accept: "application/json" };
  const init = { method, headers, signal, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    return { status: 0, data: { error: { code: "network", message: "cannot reach the dpsql server",
                                          hint: "is `dpsql serve` still running?" } } };
  }
  let data;
  try {
    data = await response.json();
  } catch (err) {
    data = { error: { code: "HTTP " + response.status, message: "the server sent an unexpected answer" } };
  }
  if (session !== state.session) return { status: STALE, data: {} };
  return { status: response.status, data };
}

/** The query's parameters from the form, or an error message for a field that is not a number. */
function parameters() {
  const out = {};
  for (const name of ["epsilon", "delta", "ci"]) {
    const input = $(name);
    if (input.validity.badInput) return { error: name + " is not a number" };
    if (input.value.trim() !== "") out[name] = Number(input.value);
  }
  return { params: out };
}

// --- log in and out -----------------------------------------------------------------------------

async function logIn(token, fromStorage) {
  state.token = token;
  state.session++;
  const { status, data } = await api("GET", "/v1/budget");
  if (status === STALE) return;
  if (status !== 200) {
    state.token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    const err = data.error || {};
    const why = status === 401
      ? (fromStorage ? "Your saved token is no longer accepted" : "That token was not accepted")
        + ": " + (err.message || "unknown or revoked analyst token") + " (" + (err.code || "DP407") + ")."
      : "Cannot log in: " + (err.message || "the server did not answer") + ".";
    showLogin(why + (err.hint ? " " + err.hint + "." : ""));
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("analyst").textContent = data.analyst;
  renderBudget(data);
  show("login", false);
  show("who", true);
  show("console", true);
  $("token").value = "";
  $("sql").focus();
  loadHistory();
  loadSchema();
  if ($("sql").value.trim()) explainNow();
}

function showLogin(message) {
  show("console", false);
  show("who", false);
  show("login", true);
  $("login-error").textContent = message || "";
  $("token").focus();
}

function logOut(message) {
  state.token = null;
  state.session++;   // answers still on their way are for no one now (api: STALE)
  state.budget = null;
  sessionStorage.removeItem(TOKEN_KEY);
  clearTimeout(state.explainTimer);
  if (state.explainAbort) state.explainAbort.abort();
  // Nothing of this analyst's stays on the page for whoever logs in next in this tab: not their SQL
  // (nor its cost recomputed for the next), parameters, answers, history, budget or name.
  $("query-form").reset();
  for (const id of ["history", "tables", "result-table", "chart-plots", "result-error", "explain-error", "cost",
                    "plan-text", "budget-text", "analyst", "result-note", "chart-caption"]) $(id).replaceChildren();
  $("outputs").tBodies[0].replaceChildren();
  $("budget-meter").value = 0;
  $("run-button").disabled = false;   // a Run of theirs still on its way is STALE when it comes back
  show("chart", false);
  show("result-body", false);
  show("result-error", false);
  show("result-empty", true);
  resetExplain();
  setStatus("");
  showLogin(message);
}

/** A 401 in the middle of a session: the token was revoked; back to the login form. A STALE answer
 * (its analyst logged out) is over too, silently. */
function expired(status) {
  if (status === STALE) return true;
  if (status !== 401) return false;
  logOut("Your token is no longer accepted (revoked?): log in again.");
  return true;
}

// --- refusals -----------------------------------------------------------------------------------

/** A refusal: its code, message, hint and the SQL excerpt with its caret (monospace, as sent).
 * Only a refused Run is an alert; explain's refusals come as you type, in a polite live region. */
function refusal(err, status, what, alert) {
  err = err || {};
  const box = el("div", { className: "refusal", role: alert ? "alert" : null },
    el("p", { className: "refusal-head" },
      el("span", { className: "code" }, err.code || ("HTTP " + status)), " ", what),
    el("p", { className: "message" }, err.message || "no message"));
  if (err.excerpt) box.append(el("pre", { className: "excerpt mono" }, err.excerpt));
  if (err.hint) box.append(el("p", { className: "hint" }, el("strong", {}, "Hint: "), err.hint));
  return box;
}

// --- explain before spending ---------------------------------------------------------------------

function scheduleExplain() {
  clearTimeout(state.explainTimer);
  state.explainTimer = setTimeout(explainNow, EXPLAIN_DELAY_MS);
}

async function explainNow() {
  clearTimeout(state.explainTimer);
  if (state.explainAbort) state.explainAbort.abort();
  const sql = $("sql").value;
  if (!sql.trim() || !state.token) return resetExplain();
  const { params, error } = parameters();
  if (error) return showExplainError({ code: "input", message: error }, 0);
  const seq = ++state.explainSeq;
  state.explainAbort = new AbortController();
  $("explain").setAttribute("aria-busy", "true");
  let answer;
  try {
    answer = await api("POST", "/v1/explain", { sql, ...params }, state.explainAbort.signal);
  } catch (err) {
    return;   // aborted: a newer explain is on its way
  }
  if (seq !== state.explainSeq) return;   // a newer one was sent meanwhile
  $("explain").removeAttribute("aria-busy");
  if (expired(answer.status)) return;
  if (answer.status !== 200) return showExplainError(answer.data.error, answer.status);
  renderExplain(answer.data.plan);
}

function resetExplain() {
  state.explainSeq++;
  state.plan = null;
  $("explain").removeAttribute("aria-busy");
  show("explain-empty", true);
  show("explain-body", false);
  show("explain-error", false);
}

function showExplainError(err, status) {
  state.plan = null;
  show("explain-empty", false);
  show("explain-body", false);
  $("explain-error").replaceChildren(refusal(err, status, "this query would be refused; nothing spent"));
  show("explain-error", true);
}

function renderExplain(plan) {
  state.plan = plan;
  show("explain-empty", false);
  show("explain-error", false);
  const cost = $("cost");
  cost.className = "cost";
  if (plan.public_only) {
    cost.textContent = "Public tables only: answered exactly, costs nothing.";
  } else {
    cost.replaceChildren("Running this costs ", el("strong", { id: "cost-value" },
      "ε " + fmt(plan.epsilon) + ", δ " + fmt(plan.delta)), ".");
    // The server's own check, the accountant's (under zcdp and pld remaining budgets do not add).
    const before = plan.budget_before;
    if (before && before.readable) {
      const at = before.at_delta ? " at δ " + fmt(before.total.delta) + " (" + before.accountant + " accounting)" : "";
      cost.append(" You have ε " + fmt(before.remaining.epsilon || 0) + at + " left");
      if (before.fits) {
        cost.append(": it fits.");
      } else {
        cost.classList.add("over");
        cost.append(": that is more than your budget, so Run would be refused (DP402) unless an identical "
          + "query was answered before (replays are free).");
      }
    } else if (before) {
      cost.append(" Your budget could not be read now (" + before.problem + ").");
    }
  }
  const rows = (plan.outputs || []).map((o) => el("tr", {},
    el("td", {}, el("code", {}, o.name)), el("td", {}, o.kind || ""), el("td", {}, expectedError(o))));
  $("outputs").tBodies[0].replaceChildren(...rows);
  show("outputs", rows.length > 0);
  $("plan-text").textContent = plan.text || "";
  show("explain-body", true);
}

function expectedError(o) {
  if (o.kind === "key") return "exact (group key)";
  if (o.expected_error === null || o.expected_error === undefined) return "see the full plan";
  const level = o.confidence ? " at " + fmt(o.confidence * 100) + "%" : "";
  return "± " + fmt(o.expected_error) + level;
}

// --- run ----------------------------------------------------------------------------------------

async function run() {
  const sql = $("sql").value;
  if (!sql.trim()) return setStatus("Type a query first.");
  const { params, error } = parameters();
  if (error) return setStatus(error + ".");
  if ($("fresh").checked) params.fresh = true;
  $("run-button").disabled = true;
  setStatus("Running…");
  try {
    const { status, data } = await api("POST", "/v1/query", { sql, ...params });
    if (expired(status)) return;
    if (status !== 200) {
      showResultError(data.error, status);
      setStatus("Refused: nothing spent.");
      refreshBudget();
      return;
    }
    renderResult(data, data.replayed ? "Replayed: identical to your earlier answer, nothing spent."
      : "Spent ε " + fmt(data.plan.epsilon) + ", δ " + fmt(data.plan.delta) + ".");
    renderBudget(data.budget);
    setStatus("Done.");
    loadHistory();
  } finally {
    $("run-button").disabled = false;
  }
}

function setStatus(text) { $("status").textContent = text; }

function showResultError(err, status) {
  show("result-empty", false);
  show("result-body", false);
  $("result-error").replaceChildren(refusal(err, status, "refused; nothing spent", true));
  show("result-error", true);
}

// --- the result table ---------------------------------------------------------------------------

/** An answer, fresh or stored: its intervals' level is the one it was released with (the plan's ci). */
function renderResult(doc, note) {
  const cols = layout(doc);
  const ci = doc.plan && doc.plan.ci;
  const level = ci ? fmt(ci * 100) + "% " : "";
  $("result-table").replaceChildren(...tableParts(doc, cols, level));
  $("result-note").textContent = note + " " + doc.rows.length + (doc.rows.length === 1 ? " row." : " rows.");
  const chart = charts(doc, cols, level);
  $("chart-plots").replaceChildren(...(chart ? chart.plots : []));
  $("chart-caption").textContent = chart ? chart.caption : "";
  show("chart", chart !== null);
  show("result-empty", false);
  show("result-error", false);
  show("result-body", true);
}

// --- budget and history -------------------------------------------------------------------------

function renderBudget(b) {
  state.budget = b;
  const meter = $("budget-meter");
  const total = b.total.epsilon, left = b.remaining.epsilon || 0;   // null: nothing left at that delta
  meter.max = total > 0 ? total : 1;
  meter.value = Math.max(0, left);
  meter.low = meter.max * 0.25;
  meter.high = meter.max * 0.5;
  meter.optimum = meter.max;
  let text = "ε " + fmt(left) + " of " + fmt(total) + " left";
  if (b.at_delta) {
    // The accountant's epsilon at the total's delta, and its own terms (rho for zcdp).
    text += " at δ " + fmt(b.total.delta) + " (" + b.accountant + " accounting";
    for (const [k, v] of Object.entries(b.terms || {})) text += ", " + k.replace(/_/g, " ") + " " + fmt(v);
    text += ")";
  } else if (b.total.delta > 0) text += "; δ " + fmt(b.remaining.delta) + " of " + fmt(b.total.delta);
  text += " · " + b.queries + (b.queries === 1 ? " query" : " queries") + " charged";
  $("budget-text").textContent = text;
  meter.textContent = text;
  if (state.plan) renderExplain(state.plan);   // "you have ... left" follows the budget
}

async function refreshBudget() {
  const { status, data } = await api("GET", "/v1/budget");
  if (status === 200) renderBudget(data); else expired(status);
}

async function loadHistory() {
  const { status, data } = await api("GET", "/v1/history");
  if (expired(status) || status !== 200) return;
  const items = data.queries.slice().reverse().map(historyItem);
  $("history").replaceChildren(...(items.length ? items : [el("li", { className: "muted" }, "No queries yet.")]));
}

/** One query of the history: its number in this analyst's own history, date and time, cost, and
 * its SQL over a few lines (the whole of it as the tooltip), so that similar queries differ. */
function historyItem(q) {
  const when = new Date(q.time);
  const time = Number.isNaN(when.getTime()) ? String(q.time)
    : when.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "medium" });
  const meta = el("span", { className: "meta" }, "#" + q.id + " · ", el("time", { datetime: q.time, title: q.time }, time),
    " · ε " + fmt(q.epsilon) + (q.delta ? ", δ " + fmt(q.delta) : "") + (q.status !== "released" ? " · " + q.status : ""));
  const sql = el("code", { className: "sql", title: q.sql }, q.sql.replace(/\s+/g, " ").trim());
  if (!q.replayable) {
    return el("li", { className: "stored-none", title: "no stored answer to show (exact or not released)" }, meta, sql);
  }
  const button = el("button", { type: "button", className: "history-item",
                                title: "Show stored answer #" + q.id + " (free): " + q.sql }, meta, sql);
  button.addEventListener("click", () => showStored(q));
  return el("li", {}, button);
}

async function showStored(q) {
  setStatus("Loading the stored answer…");
  const { status, data } = await api("GET", "/v1/history/" + encodeURIComponent(q.id));
  if (expired(status)) return;
  if (status !== 200) {
    showResultError(data.error, status);
    setStatus("");
    return;
  }
  // The editor shows the query this answer belongs to (as the ledger recorded it) and its parameters,
  // so the answer on the page is never read as another query's.
  $("sql").value = q.sql;
  $("epsilon").value = q.epsilon;
  $("delta").value = q.delta ? q.delta : "";
  const intervals = data.columns.some((c) => c.endsWith("_ci_low"));
  if (data.plan.ci || !intervals) $("ci").value = data.plan.ci || "";
  renderResult(data, "Stored answer #" + q.id + " of your history (the query now in the editor): shown again, "
    + "nothing spent.");
  renderBudget(data.budget);
  setStatus("");
  explainNow();
}

async function loadSchema() {
  const { status, data } = await api("GET", "/v1/schema");
  if (expired(status) || status !== 200) return;
  $("tables").replaceChildren(...schemaList(data, insertName));
}

/** A table or column name into the editor at the cursor (replacing the selection), then explain. */
function insertName(text) {
  const sql = $("sql");
  sql.focus();
  sql.setRangeText(text, sql.selectionStart, sql.selectionEnd, "end");
  scheduleExplain();
}

// --- wiring -------------------------------------------------------------------------------------

function init() {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = $("token").value.trim();
    if (token) logIn(token, false); else $("login-error").textContent = "Paste your token first.";
  });
  $("logout").addEventListener("click", () => logOut(""));
  $("query-form").addEventListener("submit", (e) => e.preventDefault());   // Enter in a field never spends
  $("run-button").addEventListener("click", run);
  $("explain-button").addEventListener("click", explainNow);
  for (const id of ["sql", "epsilon", "delta", "ci"]) $(id).addEventListener("input", scheduleExplain);
  $("query-form").addEventListener("keydown", (e) => {   // in the editor or any parameter field
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) logIn(saved, true); else showLogin("");
}

document.addEventListener("DOMContentLoaded", init);
