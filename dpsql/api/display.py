"""How a Result looks: cells as text, a box table like DuckDB's (``str``), an HTML table (Jupyter).

Noisy columns are marked ``~`` in the type row, and a column's confidence interval, when asked for,
is shown beside its value (``338 [329, 347]``) instead of as two more columns.
"""
from __future__ import annotations


import datetime
import decimal
import html
import json
import math
import textwrap
import uuid
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from dpsql.plan.model import Plan
from dpsql.plan.local import LocalPlan
from dpsql.plan.public import PublicPlan

NOISY = "~"


def to_json_value(value: Any) -> Any:
    """Convert one result cell to a JSON value; numbers stay numbers.

    >>> to_json_value(decimal.Decimal("2.50")), to_json_value(decimal.Decimal("3"))
    (2.5, 3)
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return None
        return int(value) if value == value.to_integral_value() and value.as_tuple().exponent >= 0 \
            else float(value)
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalars and 0-d arrays
        return to_json_value(value.item())
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    return str(value)


def format_cell(value: Any) -> str:
    """Human-readable text for one table cell: NULL, and floats rounded for reading."""
    value = to_json_value(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e15:
            return f"{value:.6g}"
        return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def is_number_or_null(value: Any) -> bool:
    value = to_json_value(value)
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


@dataclass(frozen=True)
class Released:
    """What display reads of a Result (api/result.py): its rows, its plan, and what the footer says."""
    table: pa.Table
    plan: Plan | PublicPlan | LocalPlan
    replayed: bool = False
    warnings: tuple[str, ...] | list[str] = ()
    clipping: pa.Table | None = None   # the clipping report (api/clipping.py), when asked for

    def __len__(self) -> int:
        return self.table.num_rows


@dataclass(frozen=True)
class Shown:
    """One displayed column: its name, type (with the noisy mark) and cells, intervals merged in."""
    name: str
    type: str
    cells: tuple[str, ...]
    numeric: bool


def shown_columns(result: Released, max_rows: int | None = None) -> tuple[list[Shown], int]:
    """The columns to display and how many rows they hold (the first and last when over max_rows)."""
    table, n = result.table, len(result)
    picked = list(range(n)) if max_rows is None or n <= max_rows else \
        list(range(max_rows - max_rows // 2)) + list(range(n - max_rows // 2, n))
    names, types = table.column_names, column_types(table)
    noisy, merged = noisy_columns(result.plan), set()
    shown = []
    for i, name in enumerate(names):
        if name in merged:
            continue
        values = table.column(i).to_pylist()
        cells = [format_cell(values[r]) for r in picked]
        low, high = f"{name}_ci_low", f"{name}_ci_high"
        if low in names and high in names:
            lows, highs = table.column(low).to_pylist(), table.column(high).to_pylist()
            cells = [f"{c} [{format_cell(lows[r])}, {format_cell(highs[r])}]" for c, r in zip(cells, picked)]
            merged |= {low, high}
        mark = f"{NOISY} " if name in noisy else ""
        shown.append(Shown(name, mark + str(types[i]).lower(), tuple(cells),
                           all(is_number_or_null(values[r]) for r in picked)))
    return shown, len(picked)


def noisy_columns(plan: Any) -> set[str]:
    """Released columns that carry noise: aggregates, and expressions over them (a remote plan's as the
    server named them: its outputs are plain dicts, client/remote.py)."""
    if isinstance(getattr(plan, "noisy", None), tuple):
        return set(plan.noisy)
    outputs = getattr(plan, "outputs", ())
    slots = {f"o{i}" for i, o in enumerate(outputs) if o.kind.aggregate}
    noisy = set()
    for o in outputs:
        # Only an expression output has an expression: noisy when it reads an aggregate's slot.
        over = o.expression is not None and any(c.name in slots for c in o.expression.find_all(exp.Column))
        if o.kind.aggregate or over:
            noisy |= {o.name, f"{o.name}_ci_low", f"{o.name}_ci_high"}
    return noisy


def interval_note(confidence: float) -> str:
    """What an interval covers (issue 25, item 2): the noise around the bounded value, not the bias of
    bounding (rows a person's caps dropped, values clamped), which only a measurement of it could tell."""
    return (f"{confidence * 100:g}% confidence intervals of the noise around the bounded value (each person's rows "
            "capped, values clamped to their bounds); they do not cover what bounding removed")


def footer(result: Released, shown_rows: int) -> list[str]:
    """The row count, what ``~`` and ``[low, high]`` mean, and the warnings."""
    n, plan = len(result), result.plan
    rows = f"{n} row{'' if n == 1 else 's'}" + (f" ({shown_rows} shown)" if shown_rows < n else "")
    lines = [rows]
    if noisy_columns(plan):
        lines.append(f"{NOISY} noisy: differentially private (epsilon {plan.epsilon:g}, delta {plan.delta:g})"
                     + ("; replayed at no cost" if result.replayed else ""))
    if getattr(plan, "confidence", None) is not None and any("_ci_low" in c for c in result.table.column_names):
        lines.append(f"[low, high]: {interval_note(plan.confidence)}")
    if isinstance(plan, PublicPlan) or getattr(plan, "public_only", False) is True:
        lines.append("exact: public tables only, no budget spent")
    if isinstance(plan, LocalPlan):
        lines.append(f"local model: debiased from reports randomized at epsilon {plan.respondent_epsilon:g} per "
                     f"respondent, [low, high] {plan.confidence * 100:g}% intervals; no central budget spent")
    lines += clipping_lines(result.clipping) if result.clipping is not None else []
    return lines + [f"warning: {w}" for w in result.warnings]


# The clipping report's groups shown in the footer (result.clipping has them all).
CLIPPING_SHOWN = 5


def clipping_lines(report: pa.Table) -> list[str]:
    """The clipping report in one line: each group's share of people whose rows or values bounding
    cut, with its interval and the noisy count of people (the first CLIPPING_SHOWN groups)."""
    keys = [c for c in report.column_names if c not in CLIPPING_FIELDS]
    rows = report.to_pylist()

    def one(row: dict) -> str:
        where = ", ".join(format_cell(row[k]) for k in keys)
        share = "-" if row["fraction"] is None else f"{row['fraction']:.0%}"
        return (f"{where + ': ' if where else ''}{share} [{row['fraction_ci_low']:.0%}, "
                f"{row['fraction_ci_high']:.0%}] of ~{row['people']} people")
    more = f"; ... {len(rows) - CLIPPING_SHOWN} more in result.clipping" if len(rows) > CLIPPING_SHOWN else ""
    return ["clipping report (people whose rows or values the bounds cut, 95% intervals): "
            + "; ".join(one(r) for r in rows[:CLIPPING_SHOWN]) + more]


CLIPPING_FIELDS = ("clipped", "clipped_ci_low", "clipped_ci_high", "people", "fraction", "fraction_ci_low",
                   "fraction_ci_high")


def box_table(result: Released, max_rows: int | None = 40, max_width: int | None = None) -> str:
    """DuckDB's box rendering: names, types, rows; then the footer. Wider than ``max_width`` characters,
    the middle columns give way to one "…" column, as DuckDB's own rendering does."""
    shown, count = shown_columns(result, max_rows)
    if not shown:
        return "\n".join(["(no columns)"] + footer(result, count))
    widths = [max(len(c.name), len(c.type), *(len(v) for v in c.cells)) for c in shown]
    every = len(shown)
    if max_width is not None:
        shown, widths = _fit(shown, widths, max_width, count)

    def rule(left, mid, right):
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def line(values, align):
        return "│" + "│".join(f" {align(v, w, c)} " for v, w, c in zip(values, widths, shown)) + "│"

    centre = lambda v, w, c: v.center(w)
    cell = lambda v, w, c: v.rjust(w) if c.numeric else v.ljust(w)
    out = [rule("┌", "┬", "┐"), line([c.name for c in shown], centre), line([c.type for c in shown], centre),
           rule("├", "┼", "┤")]
    rows = [line([c.cells[r] for c in shown], cell) for r in range(count)]
    if count < len(result):
        half = count - count // 2
        rows.insert(half, line(["…"] * len(shown), centre))
    out += rows + [rule("└", "┴", "┘")]
    hidden = [f"{every - len(shown) + 1} of {every} columns left out to fit {max_width} characters"] \
        if len(shown) < every else []
    notes = footer(result, count)
    if max_width is not None:   # a terminal's width holds the notes too, wrapped at words
        notes = [part for note in notes for part in textwrap.wrap(note, max_width, subsequent_indent="  ") or [""]]
    return "\n".join(out + notes + hidden)


def _fit(shown: list[Shown], widths: list[int], max_width: int, count: int) -> tuple[list[Shown], list[int]]:
    """The first and last columns that fit ``max_width`` (each takes its width and 3 of the frame), one
    "…" column between them; at least the first and the last column."""
    if sum(widths) + 3 * len(widths) + 1 <= max_width or len(shown) < 3:
        return shown, widths
    left, right = [0], [len(shown) - 1]
    room = max_width - 1 - (1 + 3) - (widths[0] + 3) - (widths[-1] + 3)
    while left[-1] + 1 < right[0]:
        take_left = len(left) <= len(right)
        i = left[-1] + 1 if take_left else right[0] - 1
        if widths[i] + 3 > room:
            break
        room -= widths[i] + 3
        if take_left:
            left.append(i)
        else:
            right.insert(0, i)
    if left[-1] + 1 == right[0]:
        return shown, widths
    gap = Shown("…", "", ("…",) * count, False)
    return ([shown[i] for i in left] + [gap] + [shown[i] for i in right],
            [widths[i] for i in left] + [1] + [widths[i] for i in right])


def html_table(result: Released, max_rows: int | None = 100) -> str:
    """An HTML table for Jupyter: types under names, noisy columns marked, intervals beside values."""
    shown, count = shown_columns(result, max_rows)
    esc = html.escape
    head = "".join(f"<th>{esc(c.name)}<br><small>{esc(c.type)}</small></th>" for c in shown)
    body = "".join("<tr>" + "".join(
        f"<td style=\"text-align: {'right' if c.numeric else 'left'}\">{esc(c.cells[r])}</td>" for c in shown)
        + "</tr>" for r in range(count))
    if count < len(result):
        body += "<tr>" + "<td>…</td>" * len(shown) + "</tr>"
    notes = "<br>".join(esc(line) for line in footer(result, count))
    return (f"<table class=\"dpsql-result\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<small>{notes}</small>")


def column_types(table: pa.Table) -> list[str]:
    """DuckDB's name of each column's type."""
    return [duckdb_type(t) for t in table.schema.types]


_SIMPLE = {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT", "uint8": "UTINYINT",
           "uint16": "USMALLINT", "uint32": "UINTEGER", "uint64": "UBIGINT", "halffloat": "FLOAT", "float": "FLOAT",
           "double": "DOUBLE", "bool": "BOOLEAN", "string": "VARCHAR", "large_string": "VARCHAR",
           "string_view": "VARCHAR", "binary": "BLOB", "large_binary": "BLOB", "date32[day]": "DATE",
           "date64[ms]": "DATE", "null": '"NULL"'}
_TIMESTAMPS = {"s": "TIMESTAMP_S", "ms": "TIMESTAMP_MS", "us": "TIMESTAMP", "ns": "TIMESTAMP_NS"}


def duckdb_type(t: pa.DataType) -> str:
    """The name DuckDB gives an Arrow type (as a DuckDBPyRelation's ``types`` would), without opening DuckDB:
    a connection costs ~150 ms, too much for printing a result."""
    if str(t) in _SIMPLE:
        return _SIMPLE[str(t)]
    if pa.types.is_timestamp(t):
        return "TIMESTAMP WITH TIME ZONE" if t.tz else _TIMESTAMPS[t.unit]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_time(t):
        return "TIME"
    if pa.types.is_duration(t):
        return "INTERVAL"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{duckdb_type(t.value_type)}[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f"{f.name} {duckdb_type(f.type)}" for f in t) + ")"
    return str(duckdb.connect().from_arrow(pa.table({"c": pa.array([], t)})).types[0])   # anything rarer
