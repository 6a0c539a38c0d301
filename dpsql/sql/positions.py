"""Where a node stands in the SQL text: the character span an error's caret underlines.

>>> import sqlglot
>>> sql = "SELECT SUM(x) FROM t"
>>> start, end = span(sqlglot.parse_one(sql).expressions[0], sql); sql[start:end + 1]
'SUM(x)'
"""
from __future__ import annotations

import re

from sqlglot import exp


def offset_of(sql: str, line: int, col: int) -> int:
    """0-based character offset of a 1-based (line, col) position; sqlglot's col ends the token."""
    lines = sql.split("\n")
    line = max(1, min(line, len(lines)))
    return sum(len(text) + 1 for text in lines[: line - 1]) + max(0, min(col, len(lines[line - 1])) - 1)


def span(node: exp.Expression | None, sql: str | None = None) -> tuple[int | None, int | None]:
    """Character span (start, end) covering every positioned token of a node's subtree.

    Some nodes (e.g. ``random()``) carry no position: then the nearest positioned ancestor's is used.
    With ``sql``, the span also covers the closing parentheses and the END of a CASE that the node's
    own tokens leave out (``SUM(x`` becomes ``SUM(x)``).
    """
    while node is not None:
        starts, ends = [], []
        for n in node.walk():
            meta = getattr(n, "meta", None) or {}
            if "start" in meta:
                starts.append(meta["start"])
                ends.append(meta["end"])
        if starts:
            start, end = min(starts), max(ends)
            return (start, closed_end(sql, start, end, node)) if sql else (start, end)
        node = node.parent
    return None, None


_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|[()]|\bEND\b", re.S | re.I)


def closed_end(sql: str, start: int, end: int, node: exp.Expression) -> int:
    """``end`` moved past the parentheses opened inside [start, end] (and a CASE's END), skipping strings."""
    depth = sum(+1 if t.group() == "(" else -1 if t.group() == ")" else 0
                for t in _TOKENS.finditer(sql, start, end + 1))
    cases = isinstance(node, exp.Case)
    for token in _TOKENS.finditer(sql, end + 1):
        text = token.group()
        if depth > 0 and text in "()":
            depth += 1 if text == "(" else -1
            end = token.end() - 1
        elif cases and depth == 0 and text.upper() == "END":
            end, cases = token.end() - 1, False
        if depth == 0 and not cases:
            break
        if depth < 0:
            break
    return end


# A Select's argument keys as the SQL writes the clause (refusals name the clause: "not use GROUP BY").
CLAUSES = {"group": "GROUP BY", "order": "ORDER BY", "with_": "WITH", "joins": "JOIN", "having": "HAVING",
           "limit": "LIMIT", "offset": "OFFSET", "distinct": "DISTINCT", "qualify": "QUALIFY"}


def clause_name(key: str) -> str:
    """The clause a Select's argument key stands for.

    >>> clause_name("group"), clause_name("with_")
    ('GROUP BY', 'WITH')
    """
    return CLAUSES.get(key, key.upper().rstrip("_"))
