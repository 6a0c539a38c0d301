"""Where contribution bounding changes a quantity, for the clipping report (plan/clipping.py): the
range each row's value is clamped into, and the test that a unit's contribution to one partition was
cut (more than C rows, or a per-group total or mean clamped). Pure functions of a Measurement and of
the columns lowering names (``Columns``), as plan/exact.py's are; lower/clipping.py joins them into a
person's 0/1 flag per partition.

>>> from dpsql.plan.quantities import Need
>>> sum_range(Need("sum", "x", lower=0.0, upper=10.0))
(0.0, 10.0)
>>> rows_cut(Need("count", None), 3, Columns(None, "v_m0")).sql("duckdb")
'COUNT(*) > 3'
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.plan.exact import Columns
from dpsql.plan.kinds import Bounding
from dpsql.sql.build import col, num


def _centred(m) -> tuple[float, float]:
    """The clamp of a row-clamped sum, a tree's or a histogram's leaves: [lower, upper], or for a
    centred sum [offset - r, offset + r] (plan/exact.py quantised_row)."""
    if m.offset is None:
        return (m.lower, m.upper)
    r = m.upper if m.moment == 1 else m.upper ** 0.5
    return (m.offset - r, m.offset + r)


def values_range(m) -> tuple[float, float]:
    """A quantile's leaves: each row's value clamped into [lower, upper]."""
    return _centred(m)


def sum_range(m) -> tuple[float, float] | None:
    """A SUM's per-row clamp: its bounds (each row clamped), else its per-row bounds before a per-group
    clamp (None: no row is clamped, only the unit's total or mean)."""
    if m.bounding == Bounding.ROWS:
        return _centred(m)
    return None if m.row_lower is None else (m.row_lower, m.row_upper)


def outside(low: exp.Expression, high: exp.Expression, bounds: tuple[float, float]) -> exp.Expression:
    """low < lo OR high > hi: a value (a unit's MIN and MAX of them) that its clamp moved. NaN is the
    largest DOUBLE in DuckDB, so a NaN (clamped to hi) counts; NULL is no value and does not."""
    return exp.Or(this=exp.LT(this=low, expression=num(float(bounds[0]))),
                  expression=exp.GT(this=high, expression=num(float(bounds[1]))))


def _capped(n: exp.Expression, m, C: int) -> exp.Expression:
    """A count capped at C (plan/exact.py capped), or clamped into per-group bounds: cut when beyond."""
    if m.bounding == Bounding.UNIT_TOTAL:
        return outside(n, n.copy(), (m.lower, m.upper))
    return exp.GT(this=n, expression=num(C))


def rows_cut(m, C: int, c: Columns) -> exp.Expression:
    """COUNT(*): more than C rows (or a count outside per-group bounds)."""
    return _capped(exp.Count(this=exp.Star()), m, C)


def values_cut(m, C: int, c: Columns) -> exp.Expression:
    """COUNT(x), a tree's or a histogram's values: more than C rows with a value."""
    return _capped(exp.Count(this=col(c.raw)), m, C)


def own_cut(m, C: int, c: Columns) -> exp.Expression:
    """COUNT_IF(cond): more than C rows where it holds."""
    return _capped(exp.Count(this=col(c.value)), m, C)


def sum_cut(m, C: int, c: Columns) -> exp.Expression:
    """SUM: more than C values (plan/exact.py bounded_unit_sum scales them to C), or a unit's total or
    mean outside its per-group bounds (GoogleSQL's contribution_bounds_per_group)."""
    if m.bounding == Bounding.ROWS:
        return values_cut(m, C, c)
    value = exp.Sum(this=col(c.value)) if m.bounding == Bounding.UNIT_TOTAL else exp.Avg(this=col(c.value))
    return outside(value, value.copy(), (m.lower, m.upper))
