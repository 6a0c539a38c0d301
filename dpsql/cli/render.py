"""Renderers shared by the commands and the demo: result tables as text, CSV, JSON, NDJSON and Markdown,
and the budget. (Cells are read as in ``dpsql.api.display``, which the Python Result shares.)"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import Any, Sequence

from dpsql.api.display import format_cell, is_number_or_null, to_json_value


def _amount(x: float) -> str:
    return f"{x:.12g}"


def render_budget(state, exists: bool = True) -> str:
    """The budget as text: totals, then one line per charged query.

    >>> from dpsql.accounting.budget import Budget
    >>> print(render_budget(Budget(1.0, 1e-6, 0.25, 0.0, ledger="b.sqlite"), exists=False), end="")
    ledger b.sqlite (no file yet: nothing spent)
               epsilon  delta
    ---------  -------  -----
    total      1        1e-06
    spent      0.25     0
    remaining  0.75     1e-06
    """
    note = "" if exists else " (no file yet: nothing spent)"
    out = [f"ledger {state.ledger}{note}"]
    out.append(render_table(["", "epsilon", "delta"], [
        (label, _amount(eps), _amount(dlt)) for label, eps, dlt in (
            ("total", state.total_epsilon, state.total_delta),
            ("spent", state.spent_epsilon, state.spent_delta),
            ("remaining", state.remaining_epsilon, state.remaining_delta))]).rstrip().rsplit("\n", 1)[0])
    if state.at_delta:
        out.append(_accounted(state))
    if state.history:
        counts = {s: sum(c.status == s for c in state.history) for s in ("released", "failed", "reserved")}
        replays = sum(c.replays for c in state.history)
        out.append(f"charged queries: {state.queries} ({counts['released']} released, {counts['failed']} failed "
                   f"after the charge, {counts['reserved']} reserved: running or interrupted, counted as spent); "
                   f"repeats answered again at no cost: {replays}")
        out.append("history:")
        out.append(render_table(["id", "time", "status", "epsilon", "delta", "replays", "sql", "plan"], [
            (c.id, c.time, c.status, _amount(c.epsilon), _amount(c.delta), c.replays, c.sql, c.plan)
            for c in state.history]).rstrip().rsplit("\n", 1)[0])
    return "\n".join(out) + "\n"


def _accounted(state) -> str:
    """How a composing accountant states the figures above, and its own terms (rho for zcdp).

    >>> from dpsql.accounting.budget import Budget
    >>> print(_accounted(Budget(1.0, 1e-6, 0.5, 1e-6, accountant="zcdp", terms={"rho": 0.01, "rho_total": 0.02},
    ...                         remaining=(0.5, 1e-6))))
    accountant zcdp: spent and remaining above are epsilons at delta 1e-06, the smaller of its bound and the sum; its own terms: rho 0.01, rho total 0.02
    """
    terms = "; its own terms: " + ", ".join(f"{k.replace('_', ' ')} {_amount(v)}" for k, v in state.terms.items()) \
        if state.terms else ""
    return (f"accountant {state.accountant}: spent and remaining above are epsilons at delta {_amount(state.total_delta)}, "
            f"the smaller of its bound and the sum{terms}")


REWRITTEN = "rewritten SQL:"   # the line of an explain text after which the rewritten SQL is printed


def plan_output(plan, fmt: str, show_sql: bool) -> str:
    """``dpsql explain``'s output: the explain text, or its JSON (dpsql serve's PLAN); the rewritten SQL only
    when asked for (it is long, and the plan above it says what it does).

    >>> from dpsql.client.remote import RemotePlan
    >>> print(plan_output(RemotePlan(1.0, 0.0, "dpsql plan for: q\\nrewritten SQL:\\n  SELECT 1"), "text", False), end="")
    dpsql plan for: q
    rewritten SQL: 1 line(s), shown with --sql
    """
    text = str(plan)
    head, found, tail = text.partition("\n" + REWRITTEN + "\n")
    if found and not show_sql:
        text = f"{head}\n{REWRITTEN} {len(tail.splitlines())} line(s), shown with --sql"
    if fmt == "text":
        return text + "\n"
    from dpsql.client.remote import RemotePlan
    from dpsql.server.encode import plan_doc
    doc = dataclasses.asdict(plan) if isinstance(plan, RemotePlan) else plan_doc(plan)
    doc["text"] = text
    if not show_sql:
        doc.pop("rewritten_sql", None)
    return json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n"


def _unique_keys(columns: Sequence[str]) -> list[str]:
    """Output names as JSON keys; a repeated name gets a ``_2``, ``_3`` suffix instead of
    silently overwriting the earlier column's value."""
    keys: list[str] = []
    for name in map(str, columns):
        key, n = name, 1
        while key in keys:
            n += 1
            key = f"{name}_{n}"
        keys.append(key)
    return keys


def render_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON array, one object per row, keyed by output column name."""
    keys = _unique_keys(columns)
    data = [{k: to_json_value(v) for k, v in zip(keys, row)} for row in rows]
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def render_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]], delimiter: str = ",") -> str:
    """RFC 4180 CSV with a header row; NULL is an empty field."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", delimiter=delimiter)
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else _csv_cell(v) for v in row])
    return buffer.getvalue()


def render_tsv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Tab-separated values with a header row (CSV's quoting where a field holds a tab or a newline).

    >>> render_tsv(["sex", "n"], [("F", 10), ("M", None)]).splitlines()
    ['sex\\tn', 'F\\t10', 'M\\t']
    """
    return render_csv(columns, rows, delimiter="\t")


def _csv_cell(value: Any) -> Any:
    value = to_json_value(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned text table: numbers right-aligned, text left-aligned, then a row count.

    >>> print(render_table(["sex", "n"], [("F", 10.5), ("M", 9)]), end="")
    sex      n
    ---  -----
    F    10.50
    M        9
    (2 rows)
    """
    header = [str(c) for c in columns]
    cells = [[format_cell(v) for v in row] for row in rows]
    numeric = [bool(rows) and all(is_number_or_null(row[i]) for row in rows)
               for i in range(len(header))]
    widths = [max([len(header[i])] + [len(r[i]) for r in cells]) for i in range(len(header))]

    def line(values):
        parts = [v.rjust(w) if numeric[i] else v.ljust(w)
                 for i, (v, w) in enumerate(zip(values, widths))]
        return "  ".join(parts).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out) + "\n"


def render_ndjson(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON object per line (JSON Lines), keyed by output column name.

    >>> print(render_ndjson(["sex", "n"], [("F", 10), ("M", None)]), end="")
    {"sex": "F", "n": 10}
    {"sex": "M", "n": null}
    """
    keys = _unique_keys(columns)
    return "".join(json.dumps({k: to_json_value(v) for k, v in zip(keys, row)}, allow_nan=False) + "\n"
                   for row in rows)


def render_markdown(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table: numbers right-aligned, ``|`` escaped.

    >>> print(render_markdown(["sex", "n"], [("F", 10.5), ("M", 9)]), end="")
    | sex | n |
    | :-- | --: |
    | F | 10.50 |
    | M | 9 |
    """
    numeric = [bool(rows) and all(is_number_or_null(row[i]) for row in rows) for i in range(len(columns))]

    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    out = [line(columns), line(["--:" if n else ":--" for n in numeric])]
    out += [line([format_cell(v) for v in row]) for row in rows]
    return "\n".join(out) + "\n"
