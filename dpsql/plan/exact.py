"""The SQL of a quantity's exact, bounded value, which plan/quantities.py gives each quantity: a row's
value on the integer grid, the leaf of a quantile tree it falls in, a unit's contribution to one
partition capped at C rows' worth (or clamped into per-group bounds). Pure functions of a
Measurement and of the columns lowering names (``Columns``); the stages that read them (__rows,
__units, __agg, the tree) are lower/'s.

>>> from dpsql.plan.quantities import Need
>>> clamped_row(Need("sum", "x", row_lower=0.0, row_upper=1.0), col("c_x")).sql("duckdb")
'CASE WHEN "c_x" < 0.0 THEN 0.0 WHEN "c_x" > 1.0 THEN 1.0 ELSE "c_x" END'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sqlglot import exp

from dpsql.sql.build import DoubleRound, case_when, cast, clamp, col, fn, num, saturate, typed, wide_integer
from dpsql.plan.kinds import Bounding
from dpsql.plan.sensitivity import TREE_LEAVES, grid_bound


@dataclass(frozen=True)
class Columns:
    """The columns of __rows that one measurement's SQL reads (lower/names.py names them)."""
    raw: str | None    # c_<label>: its argument, evaluated once per row (None: it has none)
    value: str         # v_<measurement>: the row's own value of this measurement


@dataclass(frozen=True)
class Reading:
    """What lowering reads from a row itself for a measurement's own value (lower/bounding.py)."""
    declared: Callable[[str], exp.Expression | None]           # the column holds one of its declared keys
                                                               # (None: it has no keys)
    condition: Callable[[exp.Expression], exp.Expression]      # a user condition, guarded as a WHERE is


def on_grid(value: exp.Expression, m, integer: bool = True) -> exp.Expression:
    """round(clamp(value) / g): an exact integer number of grid steps, |.| <= B < 2**21 (GRID_BITS)."""
    return grid_steps(clamp(value, m.lower, m.upper), m, integer)


def grid_steps(value: exp.Expression, m, integer: bool) -> exp.Expression:
    """round(value / g) as BIGINT, or left a DOUBLE (``integer=False``: bounded_unit_sum says why
    such a sum is exact)."""
    steps = DoubleRound(this=exp.Mul(this=value, expression=num(1.0 / m.granularity)))
    return cast(steps, "BIGINT") if integer else steps


def quantised_row(m, value: exp.Expression, integer: bool = True) -> exp.Expression:
    """A row's value (``value``: its argument, evaluated once in __rows) on the grid, |.| <= B.

    Centred (offset m, bounds lo = m - r, hi = m + r): (clamp(x, lo, hi) - m) ** moment, which lies in
    [-r, r] (or [0, r^2]) up to one rounding, far below half a grid step, so round(v / g) stays within
    B = ceil(r / g). Clamping x itself keeps the cheap CASE on a plain column. NULL stays NULL and
    nothing else becomes NULL, so a unit's count of values and its sum see the same rows.
    """
    if m.offset is None:
        return on_grid(value, m, integer)
    r = m.upper if m.moment == 1 else m.upper ** 0.5
    diff = exp.Paren(this=exp.Sub(this=clamp(value, m.offset - r, m.offset + r), expression=num(float(m.offset))))
    moment = diff if m.moment == 1 else exp.Mul(this=diff, expression=diff.copy())
    return grid_steps(moment, m, integer)


def clamped_row(m, value: exp.Expression) -> exp.Expression:
    """A row's value as DOUBLE (never an integer overflow), clamped per row when bounds say so."""
    return value if m.row_lower is None else clamp(value, m.row_lower, m.row_upper)


def summed_row(m, c: Columns, row_level: bool) -> exp.Expression:
    """What a row adds to a SUM: on the grid when each row is clamped (per unit the steps stay DOUBLE:
    bounded_unit_sum sums them exactly), as DOUBLE when a unit's total or mean is clamped instead."""
    if m.bounding == Bounding.ROWS:
        return quantised_row(m, col(c.raw), integer=row_level)
    return clamped_row(m, col(c.raw))


def leaf_index(value: exp.Expression, m) -> exp.Expression:
    """floor((v - lower) / width * 65536) for v clamped to the bounds (NaN and +inf to upper, -inf to
    lower, NULL stays NULL). Rounding is monotone, so it lies in [0, 65536]: 65536 only for v = upper,
    moved into the last leaf by ``lower/quantile.py leaf_counts`` once NULLs are gone (LEAST would
    turn NULL into a leaf).
    """
    width = m.upper - m.lower
    shifted = exp.Paren(this=exp.Sub(this=clamp(value, m.lower, m.upper), expression=num(float(m.lower))))
    scaled = exp.Mul(this=exp.Div(this=shifted, expression=num(float(width))), expression=num(float(TREE_LEAVES))) \
        if width > 0 else exp.Mul(this=shifted, expression=num(0.0))
    return cast(fn("FLOOR", scaled), "BIGINT")


def declared_key(m, reading: Reading) -> exp.Expression:
    """A row's value for COUNT(DISTINCT column): only declared keys count, so the released count lies
    in [0, |keys|] whatever the data. Every step compares in the column's own collation, as the
    declared-key test does: under NOCASE, 'A' is the declared key 'a' (the policy's keys are distinct
    under it, DP502), a unit's DISTINCT keeps one value of the class (which one does not matter: the
    groups count classes too) and MIN(v, C) orders the classes, not the rows. Comparing bytewise here
    while the key test matches under NOCASE would count 'a' and 'A' as two keys: past |keys|.
    A column without keys counts its values as they are (C per unit and partition bounds them)."""
    test = reading.declared(m.column)
    return col(m.column) if test is None else case_when(test, col(m.column), exp.Null())


def capped(m, C: int, rows: exp.Expression) -> exp.Expression:
    """A unit's count in one partition: at most C rows, or clamped into per-group bounds."""
    if m.bounding == Bounding.UNIT_TOTAL:
        return fn("LEAST", fn("GREATEST", rows, num(int(m.lower))), num(int(m.upper)))
    return fn("LEAST", rows, num(C))


def with_value(m, C: int, c: Columns) -> exp.Expression:
    """1 if the unit has a value in this partition (AVG's denominator with per-group bounds)."""
    return case_when(exp.GT(this=exp.Count(this=col(c.raw)), expression=num(0)), num(1), num(0))


def unit_sum(m, C: int, c: Columns) -> exp.Expression:
    """A unit's sum in one partition: its total or mean clamped into per-group bounds, on the grid, or
    its rows' steps worth at most C rows."""
    v = col(c.value)
    if m.bounding == Bounding.UNIT_TOTAL:
        return on_grid(exp.Sum(this=v), m)
    if m.bounding == Bounding.UNIT_MEAN:
        return on_grid(exp.Avg(this=v), m)
    return bounded_unit_sum(m, C, c)


def bounded_unit_sum(m, C: int, c: Columns) -> exp.Expression:
    """A unit's sum in one partition, worth at most C of its rows: sum * C // n when it has n > C values.

    That is the expected sum of C of its values drawn at random, with no randomness: |result| <= C*B.
    Integer division truncates toward zero, so the bound holds exactly.

    The row values are integers |v| <= B in DOUBLE (rows_cte): DuckDB sums DOUBLEs with plain adds,
    where BIGINTs without statistics take a 128-bit state (Q1 at SF1: 14% of its CPU). Any order of
    adding n such values is exact while n * B <= 2**53 (every partial sum is an integer of at most
    that size); a unit with more rows in one partition (over 2**32: B < 2**21) adds nothing, so its
    value is always a function of its own rows alone, never of the order the engine added them in.
    """
    v = typed(col(c.value), "DOUBLE")   # for an engine that prints the cast of its sum by type
    n = exp.Count(this=col(c.raw))
    bound = grid_bound(m.lower, m.upper, m.granularity)
    total = cast(exp.Sum(this=v), "BIGINT")
    scaled = exp.IntDiv(this=exp.Mul(this=wide_integer(total), expression=num(C)), expression=n)
    # n counts exactly the rows with a value (one evaluation, rows_cte), so |result| <= C*B already;
    # the clamp makes that hold by construction. C*B < 2**62: BIGINT, the next SUM needs no 128-bit state.
    value = exp.Case(ifs=[exp.If(this=exp.GT(this=n.copy(), expression=num(EXACT_DOUBLE // max(bound, 1))), true=num(0)),
                          exp.If(this=exp.GT(this=n.copy(), expression=num(C)), true=scaled)], default=total.copy())
    return cast(saturate(value, C * bound), "BIGINT")


EXACT_DOUBLE = 2 ** 53   # every integer of at most this magnitude is a double
