// The tables an analyst may query (GET /v1/schema): names, types, bounds and public keys, so that
// SQL can be written without the policy file. Clicking a name inserts it into the editor.
import { el, fmt } from "./dom.js";

const MAX_KEYS_SHOWN = 8;

/** What a column offers: its bounds or public keys, or that it cannot be read at all. */
function columnNote(c) {
  if (c.identifier) return "identifier: its values are never released";
  if (c.keys) {
    const keys = c.keys.slice(0, MAX_KEYS_SHOWN).map(fmt).join(", ");
    return "keys: " + keys + (c.keys.length > MAX_KEYS_SHOWN ? ", … (" + c.keys.length + ")" : "");
  }
  if (c.lower !== null && c.upper !== null) return "bounds [" + fmt(c.lower) + ", " + fmt(c.upper) + "]";
  return "";
}

function tableNote(t) {
  if (t.public) return "public: read exactly, free";
  const unit = t.via ? "person via " + t.via : t.privacy_unit === "row" ? "one person per row" : "person: " + t.privacy_unit;
  return unit + "; L " + fmt(t.max_groups_per_unit) + ", C " + fmt(t.max_rows_per_unit);
}

/** The schema as a list of collapsible tables; ``insert(text)`` puts a name into the editor. */
export function schemaList(doc, insert) {
  const name = (text, shown) => {
    const button = el("button", { type: "button", className: "name", title: "Insert " + text + " into the query" },
      shown || text);
    button.addEventListener("click", () => insert(text));
    return button;
  };
  return Object.entries(doc.tables || {}).map(([table, t]) => el("li", {},
    el("details", {},
      el("summary", {}, el("code", {}, table), " ", el("span", { className: "muted small" }, tableNote(t))),
      el("p", { className: "insert-table" }, name(table, "insert " + table)),
      el("ul", { className: "columns" }, Object.entries(t.columns || {}).map(([column, c]) => el("li", {},
        name(column),
        " ", el("span", { className: "muted" }, String(c.type || "").toLowerCase()),
        columnNote(c) ? el("span", { className: "note small" }, " · " + columnNote(c)) : null))))));
}
