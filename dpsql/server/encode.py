"""What the server sends: plans, results, budgets, the schema and errors as JSON (or Arrow IPC).

Everything here is already public to the analyst who asked: noisy outputs, the plan (the explain
text), their own budget, the analyst-visible part of the policy (no file paths, no budget of other
analysts) and the errors dpsql raises on purpose. Owner-side errors (the ledger, the policy, the
database) become a generic message: their text names files.

>>> from dpsql.errors import BudgetExceeded
>>> status, body = error_body(BudgetExceeded((1, 0), (0.5, 0)))
>>> status, body["error"]["code"], body["error"]["requested"]
(402, 'DP402', {'epsilon': 1.0, 'delta': 0.0})
"""
from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from dpsql.api import clipping
from dpsql.api.display import noisy_columns, to_json_value
from dpsql.errors import DpsqlError
from dpsql.plan.aggregates import released_directly
from dpsql.plan.model import Plan
from dpsql.plan.public import PublicPlan
from dpsql.plan.text import CONFIDENCE

ARROW_STREAM = "application/vnd.apache.arrow.stream"
HEADER_LIMIT = 16_384   # a header past this drops the plan's text (clients read the Arrow schema's copy)

# Set-up errors: true, but their messages name the owner's files; the analyst gets the code only.
_OWNER_SIDE = {"DP403", "DP404", "DP405", "DP406", "DP501", "DP502", "DP503", "DP504"}


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=False, separators=(",", ":")).encode()


def plan_doc(plan) -> dict:
    """PLAN: epsilon, delta, the explain text, outputs with their expected error, the rewritten SQL; an
    explained plan's ``budget_before``: the analyst's own budget before it and whether it would fit
    (api/budget_note.py), or that it could not be read (a code and a reason, no path)."""
    doc = {"epsilon": float(plan.epsilon), "delta": float(plan.delta), "text": str(plan),
           "public_only": isinstance(plan, PublicPlan), "outputs": [],
           "rewritten_sql": plan.rewritten_sql, "ci": getattr(plan, "confidence", None),
           "noisy": sorted(noisy_columns(plan))}   # what a client's display marks ~ (api/display.py)
    shape = clipping.shape(plan)
    if shape is not None:   # the clipping report's keys and errors: the client shows it as Result.clipping
        doc["clipping"] = shape.as_dict()
    if getattr(plan, "budget_note", None) is not None:
        doc["budget_before"] = plan.budget_note.as_dict()
    if isinstance(plan, Plan):
        for o in plan.visible_outputs:
            single = released_directly(o)   # one measurement as released: its error bar is the output's
            error = plan.measurement(o.measurements[0]).error if single else None
            doc["outputs"].append({"name": o.name, "kind": o.kind.value, "expected_error": error,
                                   "confidence": CONFIDENCE if single else None})
    return doc


def budget_doc(budget, analyst: str) -> dict:
    """BUDGET: the analyst's own total, spent, remaining and number of queries (no ledger path); the
    accountant in force and its own terms (accounting/budget.py ``Figures.figures``)."""
    return {"analyst": analyst, **budget.figures(), "queries": budget.queries}


def history_doc(budget) -> dict:
    """The analyst's own charged queries, oldest first, numbered 1, 2, 3 ... as ``numbered`` says."""
    return {"queries": [{"id": n, "time": c.time, "sql": c.sql, "epsilon": c.epsilon, "delta": c.delta,
                         "status": c.status, "plan": c.plan, "replays": c.replays,
                         "replayable": bool(getattr(c, "replayable", c.status == "released" and c.epsilon > 0))}
                        for n, c in enumerate(budget.history, 1)]}


def numbered(history, number: int):
    """The charge an analyst calls ``number``: its place in their own history (oldest 1), or None.

    Analysts never see the ledger's row ids: those count every analyst's queries, so the gap between
    two of one analyst's ids would tell them how much the others asked meanwhile. A place in their
    own append-only history is stable, and tells them only what they did themselves.

    >>> numbered(["a", "b"], 2), numbered(["a", "b"], 0), numbered(["a", "b"], 3)
    ('b', None, None)
    """
    return history[number - 1] if 1 <= number <= len(history) else None


def answer_doc(table: pa.Table, plan: dict, budget: dict, replayed: bool, warnings: list[str]) -> dict:
    """A query answer as JSON: column names, Arrow type names, rows as lists; the Result's warnings
    (api/advice.py: from the plan and the released rows, free)."""
    columns = [c.to_pylist() for c in table.columns]
    rows = [[to_json_value(v) for v in row] for row in zip(*columns)] if columns else []
    return {"columns": list(table.column_names), "types": [str(t) for t in table.schema.types],
            "rows": rows, "replayed": replayed, "plan": plan, "budget": budget, "warnings": warnings}


def arrow_answer(table: pa.Table, plan: dict, budget: dict, replayed: bool,
                 warnings: list[str]) -> tuple[bytes, dict[str, str]]:
    """An answer as an Arrow IPC stream; plan and budget in the schema's metadata and in headers, the
    warnings in the metadata."""
    meta = {"dpsql.plan": dumps(plan), "dpsql.budget": dumps(budget), "dpsql.replayed": dumps(replayed),
            "dpsql.warnings": dumps(warnings)}
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    header = dumps(plan)
    if len(header) > HEADER_LIMIT:   # a long rewritten SQL: headers stay small, the schema has it all
        header = dumps({**plan, "text": None, "rewritten_sql": None, "truncated": True})
    headers = {"X-Dpsql-Plan": header.decode(), "X-Dpsql-Budget": dumps(budget).decode(),
               "X-Dpsql-Replayed": "true" if replayed else "false"}
    return sink.getvalue().to_pybytes(), headers


def schema_doc(policy) -> dict:
    """The analyst-visible part of the policy: tables, columns, types, bounds, public keys, L, C."""
    links = {(link.references_table, link.references_column) for link in policy.links}
    tables = {}
    for name, t in policy.tables.items():
        columns = {}
        for c in t.columns.values():
            lower, upper = c.dates if c.dates is not None else (c.lower, c.upper)
            columns[c.name] = {
                "type": c.sql_type or c.type, "lower": to_json_value(lower), "upper": to_json_value(upper),
                "keys": None if c.keys is None else [to_json_value(k) for k in c.keys],
                "identifier": t.is_identifier(c.name) or (name, c.name) in links}
        tables[name] = {"public": t.public, "privacy_unit": None if t.public else t.privacy_unit,
                        "via": None if t.link is None else str(t.link),
                        "max_groups_per_unit": None if t.public else t.max_groups_per_unit,
                        "max_rows_per_unit": None if t.public else t.max_rows_per_unit, "columns": columns}
    return {"tables": tables}


def status_of(code: str) -> int:
    """The HTTP status of a dpsql code (see README, "The HTTP API")."""
    return {"DP402": 402, "DP407": 401, "DP420": 404, "DP421": 429, "DP422": 413, "DP423": 408, "DP424": 429,
            "DP425": 503}.get(code, 500 if code.startswith("DP9") or code in _OWNER_SIDE else 400)


def error_body(err: DpsqlError) -> tuple[int, dict]:
    """(status, body) for a DpsqlError: code, message, hint, rule, and the SQL position if any."""
    code = err.code
    if code in _OWNER_SIDE:
        doc: dict = {"code": code, "message": "the server cannot answer: its data, policy or budget ledger "
                     "is unavailable; nothing was spent", "hint": "tell the data owner"}
        return 503 if code == "DP405" else 500, {"error": doc}
    if code == "DP999":
        doc = {"code": code, "message": "internal error: this is probably a bug in dpsql", "hint": ""}
        return 500, {"error": doc}
    doc = {"code": code, "type": type(err).__name__, "message": err.message, "hint": err.hint, "rule": err.rule}
    if err.line is not None:
        doc.update(line=err.line, column=err.col, start=err.start, end=err.end, excerpt="\n".join(err.excerpt()))
    if code == "DP402":
        requested, remaining = getattr(err, "requested", (0, 0)), getattr(err, "remaining", (0, 0))
        doc["requested"] = {"epsilon": float(requested[0]), "delta": float(requested[1])}
        if remaining is not None:   # None: the shared total, whose figures are not the analyst's (errors.py)
            doc["remaining"] = {"epsilon": float(remaining[0]), "delta": float(remaining[1])}
    return status_of(code), {"error": doc}

