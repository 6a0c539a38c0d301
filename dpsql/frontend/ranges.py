"""A bounded column's bounds narrowed by the WHERE's top-level range conjuncts (issue 24, item 3), before
group keys are derived from them (frontend/derived.py): ``o_orderdate BETWEEN DATE '1995-01-01' AND
DATE '1996-12-31'`` makes ``EXTRACT(YEAR FROM o_orderdate)``'s groups 1995 and 1996, not the policy's
1992..1998; ``age >= 30`` makes ``FLOOR(age / 10)``'s start at 3.

Why it is private: the narrowed bounds are a function of the policy and the query text only, like
the policy's: the derived groups are still public. Whatever the WHERE does on a row, the derived
keys' own row filter (``DerivedKeys.condition``, written from the narrowed bounds and applied by the
lowering) drops every row outside their periods or bins, so a unit reaches at most that many groups,
and plan/build.py ``_contribution_limits`` takes L = min(L, the number of groups): GoogleSQL's
min(max_groups_contributed, number of public partitions). Why it is exact: each conjunct holds on
every row the WHERE keeps, so a kept row's value lies within the narrowed bounds and no row the
query counts is dropped (bounds are closed; a strict one is moved to the next day, or integer, only
where the column's type makes that exact; numbers are rounded outward to doubles).

>>> import datetime, sqlglot
>>> d = ColumnPolicy("d", dates=(datetime.date(1992, 1, 1), datetime.date(1998, 12, 31)), sql_type="DATE")
>>> where = sqlglot.parse_one("SELECT 1 FROM t WHERE d BETWEEN DATE '1995-01-01' AND DATE '1996-12-31' AND x = 1")
>>> narrowed(d, where.args["where"].this).dates
(datetime.date(1995, 1, 1), datetime.date(1996, 12, 31))
>>> n = ColumnPolicy("n", lower=0, upper=100, sql_type="BIGINT")
>>> w = sqlglot.parse_one("SELECT 1 FROM t WHERE 30 < n AND n <= 59.5").args["where"].this
>>> (narrowed(n, w).lower, narrowed(n, w).upper)
(31.0, 59.0)
"""
from __future__ import annotations

import dataclasses
import datetime
import math
import sys
from fractions import Fraction

from sqlglot import exp

from dpsql.frontend.relation import conjuncts
from dpsql.policy.model import ColumnPolicy
from dpsql.sql.literals import is_date, temporal_value
from dpsql.sql.types import INTEGER_TYPES, base_type, temporal_type

# comparison -> (which bound it sets, strict), with the column on the left
_SIDES = {exp.GT: ("lower", True), exp.GTE: ("lower", False), exp.LT: ("upper", True), exp.LTE: ("upper", False)}
_FLIPPED = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}
DAY = datetime.timedelta(days=1)


def narrowed(column: ColumnPolicy, where: exp.Expression | None) -> ColumnPolicy:
    """``column`` with its bounds (number bounds, or a DATE/TIMESTAMP column's dates) intersected with
    the ranges the WHERE's top-level conjuncts put on it; unchanged when none does, or when the
    intersection is empty (no row passes: the policy's bounds then serve as well as any)."""
    limits = [limit for c in conjuncts(where) for limit in _limits(c, column.name)]
    if not limits:
        return column
    temporal = temporal_type(column.sql_type)
    if column.dates is not None and temporal is not None:
        instants = any(isinstance(d, datetime.datetime) for d in column.dates)
        if instants and temporal != "TIMESTAMP":
            return column
        bound = _instant if instants else _day
        days = [(side, bound(value, side, strict, temporal)) for side, value, strict in limits
                if isinstance(value, datetime.date)]
        first, last = (_as_instant(column.dates[0], False), _as_instant(column.dates[1], True)) if instants \
            else column.dates
        lo = max([first] + [d for side, d in days if side == "lower" and d is not None])
        hi = min([last] + [d for side, d in days if side == "upper" and d is not None])
        return dataclasses.replace(column, dates=(lo, hi)) if lo <= hi and (lo, hi) != (first, last) else column
    if not column.bounded:
        return column
    integer = base_type(column.sql_type) in INTEGER_TYPES
    numbers = [(side, _number(value, side, strict, integer)) for side, value, strict in limits
               if isinstance(value, Fraction)]
    lo = max([column.lower] + [v for side, v in numbers if side == "lower"])
    hi = min([column.upper] + [v for side, v in numbers if side == "upper"])
    return dataclasses.replace(column, lower=lo, upper=hi) if lo <= hi and (lo, hi) != (column.lower, column.upper) \
        else column


def _limits(condition: exp.Expression, name: str) -> list[tuple[str, object, bool]]:
    """(side, literal value, strict) of each bound one conjunct puts on the column ``name``."""
    if isinstance(condition, exp.Between) and _is(condition.this, name):
        low, high = _value(condition.args.get("low")), _value(condition.args.get("high"))
        return [(s, v, False) for s, v in (("lower", low), ("upper", high)) if v is not None]
    kind = type(condition)
    if kind not in _FLIPPED:
        return []
    left, right = condition.this, condition.expression
    if _is(right, name) and not _is(left, name):
        kind, left, right = _FLIPPED[kind], right, left
    value = _value(right) if _is(left, name) else None
    if value is None:
        return []
    if kind is exp.EQ:
        return [("lower", value, False), ("upper", value, False)]
    side, strict = _SIDES[kind]
    return [(side, value, strict)]


def _is(node: exp.Expression | None, name: str) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() == name


def _value(node: exp.Expression | None):
    """A number literal's exact value (a Fraction), a DATE/TIMESTAMP literal's, else None."""
    if node is None:
        return None
    node = node.unnest()
    temporal = temporal_value(node)
    if temporal is not None:
        return temporal
    negative = isinstance(node, exp.Neg)
    node = node.this if negative else node
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    try:
        value = Fraction(node.this)
    except (ValueError, ZeroDivisionError):
        return None
    return -value if negative else value


def _number(value: Fraction, side: str, strict: bool, integer: bool) -> float:
    """The closed bound a comparison puts on a number column, as a double on its outer side; a literal past
    the doubles' range (1e400) as an infinity of its sign, which narrows nothing (``narrowed``)."""
    if abs(value) > Fraction(sys.float_info.max):
        return math.inf if value > 0 else -math.inf
    if integer:   # an integer column: x > 5.5 and x > 5 both mean x >= 6
        whole = math.floor(value) + 1 if strict or value != math.floor(value) else value
        return float(whole if side == "lower" else (math.ceil(value) - 1 if strict or value != math.ceil(value)
                                                     else value))
    nearest = float(value)
    if side == "lower" and Fraction(nearest) > value:
        return math.nextafter(nearest, -math.inf)
    if side == "upper" and Fraction(nearest) < value:
        return math.nextafter(nearest, math.inf)
    return nearest


def _as_instant(value: datetime.date, end: bool) -> datetime.datetime:
    """A bound as an instant: a day bound of a TIMESTAMP column covers the whole day."""
    if isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.combine(value, datetime.time.max if end else datetime.time())


def _instant(value: datetime.date, side: str, strict: bool, temporal: str | None) -> datetime.datetime:
    """The closed instant bound a comparison puts on a TIMESTAMP column bounded by instants: the
    literal itself (a DATE literal compares as its midnight); strict or not, a closed bound holds."""
    return _as_instant(value, False)


def _day(value: datetime.date, side: str, strict: bool, temporal: str | None) -> datetime.date | None:
    """The closed day bound a comparison with a DATE or TIMESTAMP literal puts on a column of type
    ``temporal``. A DATE column compares as midnight of its day; a TIMESTAMP column's day bounds
    cover whole days (frontend/derived.py), so a day bound only needs the days a value may fall on."""
    day = value.date() if isinstance(value, datetime.datetime) else value
    midnight = is_date(value) or value == datetime.datetime.combine(day, datetime.time())
    try:
        if side == "lower":   # the first day a kept value can fall on
            later = strict or not midnight if temporal == "DATE" else False
            return day + DAY if later else day
        earlier = strict and midnight   # the last day: before a midnight, the day before
        return day - DAY if earlier else day
    except OverflowError:
        return None
