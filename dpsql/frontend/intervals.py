"""Interval arithmetic: a finite [lower, upper] that an aggregate's argument can never leave.

Columns contribute their policy bounds (the rewrite clamps them to those bounds first), literals
themselves; operators combine intervals soundly. Conditions (WHERE-like parts of CASE) need no
bounds. Anything without a finite bound is None, and the aggregate is refused.

>>> import sqlglot
>>> bounds = {"price": (0.0, 10.0), "qty": (1.0, 5.0), "age": (0.0, 120.0)}
>>> interval(sqlglot.parse_one("price * qty - 1"), bounds.get)
(-1.0, 49.0)
>>> interval(sqlglot.parse_one("CASE WHEN age > 60 THEN 1 ELSE 0 END"), bounds.get)
(0.0, 1.0)
>>> interval(sqlglot.parse_one("price / (qty - 1)"), bounds.get) is None
True
"""
from __future__ import annotations

import math
from typing import Callable

from sqlglot import exp

from dpsql.sql.types import INTEGER_TYPES, NUMBERS

Interval = tuple[float, float]


def _hull(parts: list[Interval | None]) -> Interval | None:
    if not parts or any(p is None for p in parts):
        return None
    return min(p[0] for p in parts), max(p[1] for p in parts)


def _corners(a: Interval, b: Interval, op) -> Interval | None:
    with_errors = [op(x, y) for x in a for y in b]
    if any(not math.isfinite(v) for v in with_errors):
        return None
    return min(with_errors), max(with_errors)


def interval(node: exp.Expression, column_bounds: Callable[[str], Interval | None]) -> Interval | None:
    """A sound [lower, upper] for ``node``'s numeric value, or None where none can be derived."""
    result = _interval(node, column_bounds)
    if result is None or not all(math.isfinite(v) for v in result):
        return None
    return float(result[0]), float(result[1])


def _interval(node: exp.Expression, bounds) -> Interval | None:
    if isinstance(node, exp.Paren):
        return _interval(node.this, bounds)
    if isinstance(node, exp.Column):
        return bounds(node.name.lower())
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = float(node.this)
        except ValueError:
            return None
        return (value, value)
    if isinstance(node, exp.Boolean):
        return (float(node.this), float(node.this))
    for kinds, rule in _RULES:
        if isinstance(node, kinds):
            return rule(node, bounds)
    return None


def _arithmetic(node: exp.Expression, bounds) -> Interval | None:
    if isinstance(node, exp.Neg):
        inner = _interval(node.this, bounds)
        return None if inner is None else (-inner[1], -inner[0])
    a, b = _interval(node.this, bounds), _interval(node.expression, bounds)
    if a is None or b is None:
        return None
    if isinstance(node, exp.Div):
        if b[0] <= 0 <= b[1]:
            return None   # a divisor that can be 0 has no finite bound
        return _corners(a, b, lambda x, y: x / y)
    op = {exp.Add: lambda x, y: x + y, exp.Sub: lambda x, y: x - y, exp.Mul: lambda x, y: x * y}[type(node)]
    return _corners(a, b, op)


def _branches(node: exp.Expression, bounds) -> Interval | None:
    """CASE/IF/COALESCE: the hull of what any branch yields (NULL branches yield nothing)."""
    if isinstance(node, exp.Coalesce):
        return _hull([_interval(a, bounds) for a in [node.this, *node.expressions]])
    branches = [i.args.get("true") for i in node.args.get("ifs", [])] if isinstance(node, exp.Case) \
        else [node.args.get("true")]
    default = node.args.get("default") if isinstance(node, exp.Case) else node.args.get("false")
    branches = [b for b in branches + [default] if b is not None and not isinstance(b, exp.Null)]
    return _hull([_interval(b, bounds) for b in branches])


def _extremes(node: exp.Expression, bounds) -> Interval | None:
    """GREATEST/LEAST. DuckDB skips NULL arguments: ``LEAST(TRY_CAST(x AS UBIGINT), 10)`` is 10 where
    the cast fails. So an argument that can be NULL (anything but a literal) may drop out, and the far
    bound is the literals' alone, or with no literal any one argument's."""
    arguments = [node.this, *node.expressions]
    parts = [_interval(a, bounds) for a in arguments]
    if any(p is None for p in parts):
        return None
    fixed = [p for a, p in zip(arguments, parts) if isinstance(a.unnest(), (exp.Literal, exp.Boolean))]
    if isinstance(node, exp.Greatest):
        return max(p[0] for p in fixed) if fixed else min(p[0] for p in parts), max(p[1] for p in parts)
    return min(p[0] for p in parts), min(p[1] for p in fixed) if fixed else max(p[1] for p in parts)


def _absolute(node: exp.Expression, bounds) -> Interval | None:
    a = _interval(node.this, bounds)
    if a is None:
        return None
    if a[0] >= 0:
        return a
    if a[1] <= 0:
        return (-a[1], -a[0])
    return (0.0, max(-a[0], a[1]))


def _rounded(node: exp.Expression, bounds) -> Interval | None:
    a = _interval(node.this, bounds)
    return None if a is None else (math.floor(a[0]), math.ceil(a[1]))


def _cast(node: exp.Cast, bounds) -> Interval | None:
    a = _interval(node.this, bounds)
    target = node.to.sql(dialect="duckdb").upper()
    base = target.split("(")[0].strip()
    if a is None or base not in NUMBERS:
        return None
    if base in INTEGER_TYPES:
        # An integer cast rounds: it can move a value by up to one half in either direction.
        return (math.floor(a[0]), math.ceil(a[1]))
    if base in ("DECIMAL", "NUMERIC"):
        # Rounded to its scale (DuckDB's default DECIMAL is (18, 3)): by at most half a last digit.
        params = [int(p.name) for p in node.to.expressions if p.name.isdigit()]
        half = 0.5 * 10.0 ** -(params[1] if len(params) > 1 else 3)
        return (a[0] - half, a[1] + half)
    return a


_RULES = (((exp.Neg, exp.Add, exp.Sub, exp.Mul, exp.Div), _arithmetic), ((exp.Case, exp.If, exp.Coalesce), _branches),
          ((exp.Greatest, exp.Least), _extremes), (exp.Abs, _absolute), ((exp.Round, exp.Floor, exp.Ceil), _rounded),
          ((exp.Cast, exp.TryCast), _cast))
