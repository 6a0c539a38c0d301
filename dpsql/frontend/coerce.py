"""Literals written in their column's type, and COUNT of the privacy unit as a row count: what a
user means, made total before validation (issue 14, item 4).

DuckDB compares ``int_col = '8'`` by casting the string to the column's type once. That cast fails
or not whatever the rows hold, but whether the failure surfaces can depend on them (DuckDB does not
raise on an empty table), so dpsql refused every such comparison (DP306). A literal whose cast
provably succeeds is written in the column's type here, as DuckDB would convert it, so the
comparison is total and means the same on every row (``tests/frontend/test_keys_from_policy.py``
checks that against DuckDB itself):

* a number column (integers, DOUBLE; FLOAT for small whole numbers) compared with a string that is
  a plain number of its kind, within the type's range: ``educ = '8'`` -> ``educ = 8``;
* a number column compared with TRUE or FALSE: DuckDB compares the boolean as 1 or 0;
* a BOOLEAN column compared with 1 or 0 (DuckDB compares the column as 1 or 0) or with the strings
  'true' or 'false': ``active = 1`` -> ``active = TRUE``.

Anything else (a string with a fraction on an integer column, out of range, a VARCHAR column with a
number) is left alone and refused as before.

``COUNT(<privacy unit>)`` counts the rows whose unit is not NULL, and rows without a unit belong to
nobody and are dropped anyway (lower/bounding.py), so it is ``COUNT(*)``: rewritten here under the
name DuckDB would give it, before the rule against identifier columns sees it.

>>> import sqlglot
>>> types = {"educ": "BIGINT", "active": "BOOLEAN"}.get
>>> coerce_literals(sqlglot.parse_one("SELECT COUNT(*) FROM t WHERE educ IN ('8', 9) AND active = 1"), types).sql()
'SELECT COUNT(*) FROM t WHERE educ IN (8, 9) AND active = TRUE'
"""
from __future__ import annotations

import re
from typing import Callable

from sqlglot import exp

from dpsql.sql.totality import COMPARISONS
from dpsql.sql.types import FLOAT_TYPES, INTEGER_RANGES, base_type

Types = Callable[[str], "str | None"]
_INTEGER_TEXT = re.compile(r"\s*([+-]?)(\d+)\s*")
_NUMBER_TEXT = re.compile(r"\s*([+-]?)(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)\s*")
_INTEGER_ALIASES = {"INT": "INTEGER", "INT4": "INTEGER", "INT8": "BIGINT", "LONG": "BIGINT", "INT2": "SMALLINT",
                    "SHORT": "SMALLINT", "INT1": "TINYINT", "INT128": "HUGEINT", "SIGNED": "INTEGER",
                    "UINT8": "UTINYINT", "UINT16": "USMALLINT", "UINT32": "UINTEGER", "UINT64": "UBIGINT",
                    "UINT": "UINTEGER"}
FLOAT_EXACT = 2 ** 24   # whole numbers a FLOAT holds exactly
DOUBLES = {"DOUBLE", "FLOAT8", "DOUBLE PRECISION"}


def coerce_literals(select: exp.Expression, types: Types) -> exp.Expression:
    """Every comparison of a column with a literal of another type that casts cleanly, rewritten in
    place with the literal in the column's type (positions kept for error messages)."""
    for node in list(select.find_all(*COMPARISONS, exp.In, exp.Between)):
        column = node.this.unnest() if node.this is not None else None
        others = [node.args[k] for k in ("expression", "low", "high") if node.args.get(k) is not None]
        others += list(node.args.get("expressions") or [])
        if isinstance(node, COMPARISONS) and not isinstance(column, exp.Column):
            column, others = node.expression.unnest(), [node.this]   # the literal on the left: '8' = educ
        if not isinstance(column, exp.Column):
            continue
        sql_type = types(column.name.lower())
        for literal in others:
            written = _in_type(literal.unnest(), sql_type)
            if written is not None:
                written.meta.update(literal.meta)
                literal.replace(written)
    return select


def _in_type(literal: exp.Expression, sql_type: str | None) -> exp.Expression | None:
    """``literal`` as a literal of ``sql_type`` (what DuckDB's cast gives), or None: leave it."""
    base = base_type(sql_type)
    base = _INTEGER_ALIASES.get(base, base) if base else None
    if base == "BOOLEAN":
        if isinstance(literal, exp.Literal) and not literal.is_string and literal.this in ("0", "1"):
            return exp.Boolean(this=literal.this == "1")
        if isinstance(literal, exp.Literal) and literal.is_string and literal.this.strip().lower() in ("true", "false"):
            return exp.Boolean(this=literal.this.strip().lower() == "true")
        return None
    if base not in INTEGER_RANGES and base not in FLOAT_TYPES:
        return None
    if isinstance(literal, exp.Boolean):
        return exp.Literal.number(1 if literal.this else 0)
    if not (isinstance(literal, exp.Literal) and literal.is_string):
        return None
    if base in DOUBLES:
        match = _NUMBER_TEXT.fullmatch(literal.this)
        if match is None or float(match.group(2)) == float("inf"):
            return None
        return _number(match.group(2), match.group(1) == "-")
    match = _INTEGER_TEXT.fullmatch(literal.this)
    if match is None:
        return None
    value = int(match.group(1) + match.group(2))
    lo, hi = INTEGER_RANGES.get(base, (-FLOAT_EXACT, FLOAT_EXACT))   # a FLOAT: whole numbers it holds exactly
    return _number(str(abs(value)), value < 0) if lo <= value <= hi else None


def _number(text: str, negative: bool) -> exp.Expression:
    literal = exp.Literal.number(text)
    return exp.Neg(this=literal) if negative else literal


def unit_counts(select: exp.Select, unit: str | None) -> exp.Select:
    """``COUNT(<unit>)`` -> ``COUNT(*)`` (rows without a unit are dropped anyway), named as written."""
    if unit is None:
        return select
    for count in list(select.find_all(exp.Count)):
        arg = count.this
        if isinstance(arg, exp.Column) and arg.name.lower() == unit and not count.meta_get("named_args"):
            star = exp.Count(this=exp.Star())
            star.meta.update(count.meta)
            if count.parent is select:   # a SELECT output keeps the name DuckDB gives COUNT(unit)
                star = exp.alias_(star, f"count({arg.name})", quoted=True)
            count.replace(star)
    return select
