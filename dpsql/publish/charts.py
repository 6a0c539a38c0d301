"""Charts of a released table's estimates with their confidence intervals: inline SVG for the HTML
report, a text chart for the Markdown one. Released values only (post-processing: free).

>>> points = [Point("F", 10.0, 8.0, 12.0), Point("M", 5.0, None, None)]
>>> print(text_chart(points, width=20))
F 10 |        [----o----] |
M  5 | o                  |
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Sequence

import pyarrow as pa

MAX_POINTS = 40   # a chart shows the first rows; the table and the file hold them all
ROW = 22          # SVG pixels per row
LABEL = 180       # SVG pixels for the labels


@dataclass(frozen=True)
class Point:
    label: str
    value: float
    low: float | None
    high: float | None


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def points(table: pa.Table, column: str, keys: Sequence[str]) -> list[Point]:
    """The rows of ``column`` with their ``_ci_low``/``_ci_high`` (if the table has them), labelled by the
    key columns; rows whose value is not a finite number are left out."""
    rows = table.slice(0, MAX_POINTS).to_pylist()
    found = []
    for row in rows:
        value = _number(row.get(column))
        if value is None:
            continue
        label = ", ".join(str(row.get(k)) for k in keys) or column
        found.append(Point(label, value, _number(row.get(f"{column}_ci_low")), _number(row.get(f"{column}_ci_high"))))
    return found


def _span(found: Sequence[Point]) -> tuple[float, float]:
    values = [v for p in found for v in (p.value, p.low, p.high) if v is not None]
    low, high = min(values), max(values)
    pad = (high - low) * 0.05 if high > low else max(abs(low) * 0.05, 1.0)
    return low - pad, high + pad


def svg_chart(found: Sequence[Point], title: str, width: int = 640) -> str:
    """A dot per estimate and a whisker for its interval, one row each (a zero line where 0 is in range)."""
    if not found:
        return ""
    low, high = _span(found)
    inner = width - LABEL - 20

    def x(v: float) -> float:
        return round(LABEL + (v - low) / (high - low) * inner, 1)
    height = ROW * len(found) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
             *([f'<line x1="{x(0.0)}" y1="0" x2="{x(0.0)}" y2="{height - 24}" class="zero"/>'] if low < 0 < high
               else [])]
    for i, p in enumerate(found):
        y = ROW * i + ROW // 2 + 2
        parts.append(f'<text x="{LABEL - 8}" y="{y + 4}" text-anchor="end">{escape(p.label[:28])}</text>')
        if p.low is not None and p.high is not None:
            parts.append(f'<line x1="{x(p.low)}" y1="{y}" x2="{x(p.high)}" y2="{y}" class="ci"/>')
        parts.append(f'<circle cx="{x(p.value)}" cy="{y}" r="4" class="dot"><title>{escape(p.label)}: '
                     f'{p.value:.6g}</title></circle>')
    parts.append(f'<text x="{LABEL}" y="{height - 8}">{low:.4g}</text>'
                 f'<text x="{width - 20}" y="{height - 8}" text-anchor="end">{high:.4g}</text></svg>')
    return "".join(parts)


def text_chart(found: Sequence[Point], width: int = 48) -> str:
    """The same chart in characters: ``o`` the estimate, ``[---]`` its interval."""
    if not found:
        return ""
    low, high = _span(found)

    def at(v: float) -> int:
        return min(width - 1, max(0, round((v - low) / (high - low) * (width - 1))))
    label = max(len(p.label[:28]) for p in found)
    shown = [f"{p.value:.4g}" for p in found]
    number = max(map(len, shown))
    lines = []
    for p, value in zip(found, shown):
        cells = [" "] * width
        if p.low is not None and p.high is not None:
            a, b = at(p.low), at(p.high)
            cells[a:b + 1] = ["-"] * (b - a + 1)
            cells[a], cells[b] = "[", "]"
        cells[at(p.value)] = "o"
        lines.append(f"{p.label[:28]:<{label}} {value:>{number}} |{''.join(cells)}|")
    return "\n".join(lines)
