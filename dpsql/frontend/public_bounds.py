"""Bounds of a joined public table's number column, read from its data (issue 24, item 1).

A public table holds nobody's data: its values, and so its smallest and largest value, are public.
A column of it joined as a lookup (frontend/lookups.py) and aggregated without declared bounds
(TPC-H Q9's ``ps_supplycost * l_quantity``) gets [MIN, MAX] of the column as bounds, read by the
engine (engines/duckdb.py ``public_bounds``, free, once per reader, in the analyst's turn).

Why it is private: neighbouring databases differ in one person's rows of the private tables only;
the public tables, and so these bounds, are the same in both. The bounds are then a function of
public data and the query, like declared ones: the sensitivity computed from them holds for every
pair of neighbours, and the rewrite clamps to them as to declared bounds (a no-op on every joined
row: a lookup's value is one of the column's values, or NULL past a LEFT JOIN). Explain shows them.

>>> import sqlglot
>>> from dpsql.policy import load_policy
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {}}}}})
>>> wanted(sqlglot.parse_one("SELECT SUM(x) FROM t"), p)
()
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.frontend.scope import FORMS, columns_in, name_of
from dpsql.policy.bounds import MAX_BOUND
from dpsql.policy.model import ColumnPolicy, Policy
from dpsql.sql.positions import span
from dpsql.sql.types import NUMBER, type_family

RULE = "public_bounds_read"


def wanted(select: exp.Expression, policy: Policy) -> tuple[tuple[ColumnPolicy, exp.Expression], ...]:
    """The public number columns without bounds that an aggregate's bounded argument reads, each with
    the first aggregate that reads it (where a refusal points)."""
    if not isinstance(select, exp.Select) or select.args.get("from_") is None:
        return ()
    table = policy.tables.get(name_of(select.args["from_"].this))
    if table is None or table.public:
        return ()
    found: dict[str, tuple[ColumnPolicy, exp.Expression]] = {}
    for agg in select.find_all(*FORMS):
        form = FORMS[type(agg)]
        if form.argument is None or not form.argument.bounded:
            continue
        for c in columns_in(agg):
            column = table.columns.get(name_of(c))
            if column is not None and column.public_source is not None and not column.bounded \
                    and type_family(column.sql_type) == NUMBER:
                found.setdefault(column.name, (column, agg))
    return tuple(found.values())


def with_bounds(select: exp.Select, policy: Policy, column: ColumnPolicy, node: exp.Expression,
                extremes: tuple, sql: str) -> Policy:
    """The policy with the queried table's ``column`` bounded by ``extremes`` (MIN, MAX as the engine
    read them), each rounded outward to a double: [lower, upper] holds every value exactly.

    Raises:
        UnsupportedConstruct (DP316): the column holds no value (an empty table, NULLs only), or its
        extremes are not finite numbers within 2**50 (policy/bounds.py MAX_BOUND).
    """
    low, high = extremes
    where = f"{column.public_source[0]}.{column.public_source[1]}"
    if low is None or high is None:
        raise _refusal(f"{where} has no bounds in the policy and no value to read them from (the public table "
                       "is empty, or the column is NULL in every row)", column, node, sql)
    lower, upper = _outward(low, -math.inf), _outward(high, math.inf)
    if not (math.isfinite(lower) and math.isfinite(upper) and max(-lower, upper) <= MAX_BOUND):
        raise _refusal(f"{where} has no bounds in the policy, and the extremes of its values ({low}, {high}) are "
                       f"not finite numbers within 2**50", column, node, sql)
    name = name_of(select.args["from_"].this)
    table = policy.tables[name]
    read = dataclasses.replace(column, lower=lower, upper=upper, bounds_read=True)
    columns = {**table.columns, column.name: read}
    return dataclasses.replace(policy, tables={**policy.tables, name: dataclasses.replace(table, columns=columns)})


def _outward(value, direction: float) -> float:
    """``value`` (an int, a float or a Decimal) as the nearest double on its outer side."""
    try:
        nearest = float(value)
        exact = Fraction(value)
    except (TypeError, ValueError, OverflowError):   # NaN, infinity: no exact value
        return math.nan
    if not math.isfinite(nearest):
        return nearest
    beyond = Fraction(nearest) > exact if direction < 0 else Fraction(nearest) < exact
    return math.nextafter(nearest, direction) if beyond else nearest


def _refusal(message: str, column: ColumnPolicy, node: exp.Expression, sql: str) -> UnsupportedConstruct:
    start, end = span(node, sql)
    return UnsupportedConstruct("DP316", message, sql=sql, start=start, end=end, rule=RULE,
                                hint=f"declare bounds for {column.public_source[1]!r} under tables."
                                     f"{column.public_source[0]}.columns in the policy, or leave it out of the "
                                     "aggregate")
