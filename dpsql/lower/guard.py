"""The plan's guards (sql/guard.py guards one expression): the WHERE, a key and an argument guarded
per operation where the plan's column types do not prove them total, and DECIMAL arithmetic shown
total on the bounds."""
from __future__ import annotations

import re
from decimal import Decimal

from sqlglot import exp
from dpsql.plan.model import Plan
from dpsql.sql.guard import guarded, per_operation, quoted
from dpsql.sql.totality import BOOLEAN, family, is_total, narrow_dates
from dpsql.sql.types import base_type, type_bounds


def column_types(plan: Plan):
    """Column name -> DuckDB type of the queried table (the typing behind totality.is_total)."""
    columns = plan.table.columns
    return lambda name: columns[name].sql_type if name in columns else None


def safe(node: exp.Expression, plan: Plan) -> exp.Expression:
    """``node`` with each operation that could fail on a row guarded on its own (sql/guard.py
    ``per_operation``): an error becomes NULL there, never a failure. Literals compared with a DATE or
    TIMESTAMP column are first written in its type (``narrow_dates``)."""
    types = column_types(plan)
    return per_operation(narrow_dates(node, types), types)


def user_where(plan: Plan) -> exp.Expression | None:
    """The validated WHERE, guarded: a row where it would fail (a function, or a literal that does not
    cast to its column's type) is a row where it is NULL, excluded. Whether a query fails must never
    depend on a row, or the failure itself would release it without noise."""
    return None if plan.where is None else condition(plan, plan.where)


def condition(plan: Plan, node: exp.Expression) -> exp.Expression:
    """A validated user condition over the queried table, guarded part by part as the WHERE is."""
    types = column_types(plan)
    return guarded(narrow_dates(quoted(node), types), types)


# DuckDB types a DECIMAL +, - or * as DECIMAL(w, s): s the larger scale (+, -) or the sum (*), w wide
# enough for any operands of their types, except that w is capped: at 18 for a product of two
# DECIMALs of width <= 18 (computed in 64 bits), at 38 otherwise. An operation fails only past its
# cap, where |result| >= 10 ** (w - s); so |result| < 10 ** (18 - s) at every node is safe whatever w.
DECIMAL_SAFE_DIGITS = 18
PLAIN_NUMBER = re.compile(r"\d+(\.\d+)?")   # a literal DuckDB reads as an integer or a DECIMAL


def decimal_total(node: exp.Expression, plan: Plan) -> bool:
    """Whether ``node``, an aggregate's argument evaluated with every bounded column clamped to its
    bounds in its own type (``bounding.clamp_in_type``), can never fail: ``+``, ``-``, ``*`` and
    negation of bounded DECIMAL columns and plain number literals, and a CASE of total conditions
    choosing between such values (TPC-H Q14; DuckDB's common DECIMAL has the largest scale and at
    least the integer digits of each, or 38 - scale: either holds the bound below), each result below
    10 ** (18 - scale) (interval arithmetic on the clamped bounds). Then no operation needs a guard,
    and DuckDB keeps the columns' statistics (a TRY() hides them: TPC-H Q1 ran 1.3x slower).
    ``tests/lower/test_decimal_totality.py`` checks it in DuckDB on the corners of the bounds."""
    return _decimal_range(node, plan.table.columns, column_types(plan)) is not None


def _decimal_range(node: exp.Expression, columns, types) -> tuple[Decimal, int] | None:
    """(M, s): |value| <= M on every row, DuckDB's scale s; None when not shown safe."""
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    if isinstance(node, exp.Case):
        conditions = [i.this for i in node.args.get("ifs", [])]
        branches = [i.args.get("true") for i in node.args.get("ifs", [])] + [node.args.get("default") or exp.Null()]
        if not all(is_total(c, types) and family(c, types) == BOOLEAN for c in conditions):
            return None
        ranges = [(Decimal(0), 0) if isinstance(b, exp.Null) else _decimal_range(b, columns, types) for b in branches]
        if None in ranges:
            return None
        bound, scale = max(r[0] for r in ranges), max(r[1] for r in ranges)
        return (bound, scale) if bound < Decimal(10) ** (DECIMAL_SAFE_DIGITS - scale) else None
    if isinstance(node, exp.Column):
        policy = columns.get(node.name.lower())
        if policy is None or not policy.bounded or base_type(policy.sql_type) not in ("DECIMAL", "NUMERIC"):
            return None
        fitted = type_bounds(policy.sql_type, policy.lower, policy.upper)
        digits = [int(d) for d in re.findall(r"\d+", policy.sql_type)]
        if fitted is None or len(digits) != 2:
            return None
        return max(abs(Decimal(fitted[0])), abs(Decimal(fitted[1]))), digits[1]
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        operands = [node.this, node.expression]
        if not all(_has_column(o) or _is_literal(o) for o in operands):
            return None   # literals combined with literals: typed as integers, they could overflow
        left, right = (_decimal_range(o, columns, types) for o in operands)
        if left is None or right is None or not any(_has_column(o) for o in operands):
            return None
        if isinstance(node, exp.Mul):
            bound, scale = left[0] * right[0], left[1] + right[1]
        else:
            bound, scale = left[0] + right[0], max(left[1], right[1])
        return (bound, scale) if bound < Decimal(10) ** (DECIMAL_SAFE_DIGITS - scale) else None
    if isinstance(node, exp.Literal) and not node.is_string and PLAIN_NUMBER.fullmatch(node.this):
        return abs(Decimal(node.this)), len(node.this.partition(".")[2])
    return None


def _is_literal(node: exp.Expression) -> bool:
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    return isinstance(node, exp.Literal)


def _has_column(node: exp.Expression) -> bool:
    return node.find(exp.Column) is not None
