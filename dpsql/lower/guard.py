"""Guards that make user expressions total in the engine (see frontend/totality.py): every part that
cannot be proven total runs under TRY(); conditions are guarded part by part."""
from __future__ import annotations

import re
from decimal import Decimal

from sqlglot import exp
from dpsql.plan.model import Plan
from dpsql.frontend.totality import BOOLEAN, base_type, family, fold, is_total, narrow_dates, type_bounds
from dpsql.lower.sql import cast, col


def column_types(plan: Plan):
    """Column name -> DuckDB type of the queried table (the typing behind totality.is_total)."""
    columns = plan.table.columns
    return lambda name: columns[name].sql_type if name in columns else None


def quoted(node: exp.Expression) -> exp.Expression:
    """A validated user expression with its columns unqualified and quoted (one table: unambiguous),
    every operand that is itself an operation parenthesised (sqlglot would print ``a > 1 = b``,
    which DuckDB does not parse), and non-integer literals as DOUBLE (``totality.fold``)."""
    def fix(n):
        if isinstance(n, exp.Column):
            return col(n.name.lower())
        if isinstance(n, (exp.Binary, exp.Not, exp.Neg)):
            for key in ("this", "expression"):
                child = n.args.get(key)
                if isinstance(child, (exp.Binary, exp.Predicate, exp.Not)) and not isinstance(child, exp.Paren):
                    n.set(key, exp.Paren(this=child))
        return n
    return fold(node.transform(fix))   # transform copies


def safe(node: exp.Expression, plan: Plan) -> exp.Expression:
    """TRY(node) unless no row can make it fail (totality.is_total): an error becomes NULL, never a failure.
    Literals compared with a DATE or TIMESTAMP column are first written in its type (``narrow_dates``)."""
    types = column_types(plan)
    node = narrow_dates(node, types)
    return node if is_total(node, types) else exp.Anonymous(this="TRY", expressions=[node])


def user_where(plan: Plan) -> exp.Expression | None:
    """The validated WHERE, guarded: a row where it would fail (a function, or a literal that does not
    cast to its column's type) is a row where it is NULL, excluded. Whether a query fails must never
    depend on a row, or the failure itself would release it without noise."""
    return None if plan.where is None else condition(plan, plan.where)


def condition(plan: Plan, node: exp.Expression) -> exp.Expression:
    """A validated user condition over the queried table, guarded part by part as the WHERE is."""
    types = column_types(plan)
    return guarded(narrow_dates(quoted(node), types), types)


def guarded(condition: exp.Expression, types) -> exp.Expression:
    """A condition that no row can make fail: AND/OR/NOT kept bare, each other part bare if it is
    provably total (so DuckDB can push it into the scan: 100M rows, 0.38 s against 0.54 s under TRY),
    else TRY(CAST(part AS BOOLEAN)), the cast inside (`age || 5` must not fail converting '105').
    Guarding each part, not the whole, keeps what DuckDB's short-circuit gives: TRUE OR <error> is TRUE.
    """
    if isinstance(condition, exp.Paren):
        return exp.Paren(this=guarded(condition.this, types))
    if isinstance(condition, (exp.And, exp.Or)):
        return type(condition)(this=guarded(condition.this, types), expression=guarded(condition.expression, types))
    if isinstance(condition, exp.Not):
        return exp.Not(this=guarded(condition.this, types))
    if is_total(condition, types) and family(condition, types) == BOOLEAN:
        return condition
    return exp.Anonymous(this="TRY", expressions=[cast(condition, "BOOLEAN")])


# DuckDB types a DECIMAL +, - or * as DECIMAL(w, s): s the larger scale (+, -) or the sum (*), w wide
# enough for any operands of their types, except that w is capped: at 18 for a product of two
# DECIMALs of width <= 18 (computed in 64 bits), at 38 otherwise. An operation fails only past its
# cap, where |result| >= 10 ** (w - s); so |result| < 10 ** (18 - s) at every node is safe whatever w.
DECIMAL_SAFE_DIGITS = 18
PLAIN_NUMBER = re.compile(r"\d+(\.\d+)?")   # a literal DuckDB reads as an integer or a DECIMAL


def decimal_total(node: exp.Expression, plan: Plan) -> bool:
    """Whether ``node``, an aggregate's argument evaluated with every bounded column clamped to its
    bounds in its own type (``bounding.clamp_in_type``), can never fail: ``+``, ``-``, ``*`` and
    negation of bounded DECIMAL columns and plain number literals, each result below
    10 ** (18 - scale) (interval arithmetic on the clamped bounds). Then the cast to DOUBLE needs no
    TRY(), and DuckDB keeps the columns' statistics (a TRY() hides them: TPC-H Q1 ran 1.3x slower).
    ``tests/test_decimal_totality.py`` checks it in DuckDB on the corners of the bounds."""
    return _decimal_range(node, plan.table.columns) is not None


def _decimal_range(node: exp.Expression, columns) -> tuple[Decimal, int] | None:
    """(M, s): |value| <= M on every row, DuckDB's scale s; None when not shown safe."""
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
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
        left, right = (_decimal_range(o, columns) for o in operands)
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
