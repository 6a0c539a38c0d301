"""A release's report, one self-contained HTML file (inline CSS and SVG, no script, no link to any other
file) and a Markdown one: the budget used overall, then per statistic its epsilon and share of the
budget, its SQL, a chart of its estimates with their confidence intervals and its table.

Made from the manifest and the released tables only (post-processing: free), so a re-run that replays
the release writes the same report. Every text from the spec or the data is escaped.
"""
from __future__ import annotations

from html import escape
from typing import Sequence

import pyarrow as pa

from dpsql.publish.charts import points, svg_chart, text_chart

HTML = "report.html"
MARKDOWN = "report.md"
MAX_ROWS = 200   # a table shows its first rows; the file holds them all

STYLE = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;color:#222;padding:0 1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}th{background:#f3f3f3}
pre{background:#f6f6f6;padding:.5rem;overflow-x:auto}.bar{background:#eee;height:1rem;width:30rem}
.bar div{background:#4a7bd0;height:1rem}.failed{color:#a00}section{margin-bottom:2.5rem}
svg text{font-size:12px;fill:#333}svg .ci{stroke:#4a7bd0;stroke-width:2}svg .dot{fill:#1d3f8a}
svg .zero{stroke:#bbb;stroke-dasharray:3 3}"""


def _charted(stat: dict) -> tuple[list[str], list[str]]:
    """The key columns (labels) and the aggregate columns (charted) of a statistic's outputs."""
    kinds = {o["name"]: o["kind"] for o in stat["outputs"]}
    keys = [c for c in stat["columns"] if kinds.get(c) == "key"]
    return keys, [c for c in stat["columns"] if kinds.get(c) not in (None, "key")]


def _cell(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else "NULL" if value is None else str(value)


def _rows(table: pa.Table) -> list[list[str]]:
    return [[_cell(v) for v in row.values()] for row in table.slice(0, MAX_ROWS).to_pylist()]


def _share(stat: dict) -> str:
    return f"epsilon {stat['epsilon']:g} ({stat['share']:.1%} of the budget), delta {stat['delta']:g}"


def _overall(doc: dict) -> tuple[str, float]:
    spent, budget = doc["spent"], doc["budget"]
    used = spent["epsilon"] / budget["epsilon"] if budget["epsilon"] else 0.0
    return (f"{len(doc['statistics'])} statistics; epsilon {spent['epsilon']:g} of {budget['epsilon']:g} "
            f"({used:.1%}), delta {spent['delta']:g} of {budget['delta']:g}; status {doc['status']}"), used


def _html_table(table: pa.Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in table.column_names)
    body = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for row in _rows(table))
    more = f"<p>first {MAX_ROWS} of {table.num_rows} rows</p>" if table.num_rows > MAX_ROWS else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _html_statistic(stat: dict, table: pa.Table | None) -> str:
    name = escape(stat["name"])
    parts = [f'<section id="{name}"><h2>{name}</h2><p>{escape(_share(stat))}</p>',
             f"<pre>{escape(stat['sql'].strip())}</pre>"]
    if table is None:
        error = stat.get("error") or {}
        parts.append(f'<p class="failed">not released: {escape(str(error.get("code")))} '
                     f'{escape(str(error.get("message")))} (spent; a re-run pays for it again)</p></section>')
        return "".join(parts)
    keys, values = _charted(stat)
    for column in values:
        parts.append(svg_chart(points(table, column, keys), f"{stat['name']}: {column}"))
    parts.append(_html_table(table) + "</section>")
    return "".join(parts)


def html(doc: dict, tables: dict[str, pa.Table]) -> str:
    """The HTML report: one file, nothing to fetch."""
    summary, used = _overall(doc)
    title = escape(doc["title"])
    body = "".join(_html_statistic(s, tables.get(s["name"])) for s in doc["statistics"])
    ci = "" if doc["ci"] is None else f" Intervals: {doc['ci']:.0%} confidence."
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>{STYLE}</style></head><body><h1>{title}</h1><p>{escape(summary)}.{escape(ci)}</p>"
            f'<div class="bar" title="budget used"><div style="width:{min(used, 1.0):.1%}"></div></div>'
            f"<p>dpsql {escape(doc['dpsql_version'])}; policy {escape(doc['policy'][:16])}; first charge "
            f"{escape(str(doc['times']['first_charge']))}</p>{body}</body></html>\n")


def _markdown_table(table: pa.Table) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(c) for c in table.column_names) + " |",
             "|" + "---|" * table.num_columns]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in _rows(table)]
    return lines + (["", f"first {MAX_ROWS} of {table.num_rows} rows"] if table.num_rows > MAX_ROWS else [])


def _markdown_statistic(stat: dict, table: pa.Table | None) -> list[str]:
    lines = [f"## {stat['name']}", "", _share(stat), "", "```sql", stat["sql"].strip(), "```", ""]
    if table is None:
        error = stat.get("error") or {}
        return lines + [f"Not released: {error.get('code')} {error.get('message')} (spent; a re-run pays for it "
                        "again)", ""]
    keys, values = _charted(stat)
    for column in values:
        chart = text_chart(points(table, column, keys))
        if chart:
            lines += [f"{column} (o: the estimate, [-]: its interval)", "", "```text", chart, "```", ""]
    return lines + _markdown_table(table) + [""]


def markdown(doc: dict, tables: dict[str, pa.Table]) -> str:
    """The Markdown report: the same content, charts as text."""
    lines: Sequence[str] = [f"# {doc['title']}", "", _overall(doc)[0] + ".", ""]
    for stat in doc["statistics"]:
        lines = [*lines, *_markdown_statistic(stat, tables.get(stat["name"]))]
    return "\n".join(lines).rstrip("\n") + "\n"
