"""The clipping report's SQL (plan/clipping.py): each person's 0/1 flag per partition, that bounding
cut their contribution there, summed per group and noised like any count.

The flag is 1 where the person's rows in the partition met any measurement's cut (plan/cuts.py: more
than C rows or values, a per-group total or mean clamped) or clamp (a row's value outside the range
it is clamped into), in __units; or where the person had more partitions than L, so __bounded dropped
some (``over_limit``). Each is a function of the person's own rows alone; plan/sensitivity.py
``clipped_sensitivity`` gives the argument. Row level: a row is a person, nothing is capped (L = C = 1),
so a row counts where a value of it was clamped.
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.lower.names import columns
from dpsql.plan.cuts import outside
from dpsql.plan.kinds import Quantity
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.plan.quantities import QUANTITIES
from dpsql.sql.build import case_when, cast, col, fn, num

OVER = "__over"   # __bounded: 1 where the person had more partitions than L


def clipped(m: Measurement) -> bool:
    return m.kind == Quantity.CLIPPED


def _flag(conditions: list[exp.Expression]) -> exp.Expression:
    """CASE WHEN any THEN 1 ELSE 0 END, each condition once (two measurements may share one)."""
    unique = list({c.sql(): c for c in conditions}.values())
    if not unique:
        return num(0)
    return case_when(exp.or_(*unique, copy=False), num(1), num(0))


def _measured(plan: Plan) -> list[Measurement]:
    return [m for m in plan.computed if not clipped(m)]


def unit_flag(plan: Plan) -> exp.Expression:
    """A person's flag in one partition, an aggregate over their rows there (in __units)."""
    conditions = []
    for m in _measured(plan):
        spec = QUANTITIES[m.kind]
        if spec.cut is not None:
            conditions.append(spec.cut(m, plan.max_rows, columns(m)))
        bounds = spec.clamped(m) if spec.clamped is not None else None
        if bounds is not None:
            raw = col(columns(m).raw)
            conditions.append(outside(exp.Min(this=raw), exp.Max(this=raw.copy()), bounds))
    return _flag(conditions)


def row_count(plan: Plan) -> exp.Expression:
    """Row level: the group's rows with a value clamped (in __agg, over __rows)."""
    conditions = []
    for m in _measured(plan):
        spec = QUANTITIES[m.kind]
        bounds = spec.clamped(m) if spec.clamped is not None else None
        if bounds is not None:
            raw = col(columns(m).raw)
            conditions.append(outside(raw, raw.copy(), bounds))
    return exp.Sum(this=_flag(conditions))


def over_limit(plan: Plan, partitions: exp.Expression) -> exp.Expression:
    """1 where the person's (declared) partitions number more than L: __bounded dropped some."""
    return cast(exp.GT(this=partitions, expression=num(plan.max_groups)), "INTEGER")


def bounded_total(plan: Plan, m: Measurement, sampled: bool) -> exp.Expression:
    """The flag as __agg sums it: the person's own flag, or 1 where L dropped partitions of theirs."""
    value = col(columns(m).value)
    return exp.Sum(this=fn("GREATEST", value, col(OVER)) if sampled else value)
