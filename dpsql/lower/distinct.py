"""COUNT(DISTINCT col) at user level: each unit keeps at most C of its distinct values per partition,
in the partitions it keeps, and each group counts the values its units kept.

CTEs per measurement ``m`` (``k..`` the group keys)::

    __m_values  (__unit, k.., v_m): a unit's C smallest distinct values in one of its kept partitions
    __m_agg     (k.., v_m): the distinct values the units kept, counted per group (read by __agg)

No state grows with a person's rows or partitions before the caps: the distinct values of each
(unit, partition) come from a hash aggregate (DuckDB spills it), only the partitions __bounded keeps
(at most L per unit) meet MIN(v, C), a bounded heap of C values, and the groups count the kept
values with COUNT(DISTINCT) (a hash aggregate again). The values at user level compare bytewise
(plan/exact.py ``declared_key``) in the column's collation, so what a unit keeps is a function of its rows alone.
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.lower.names import key_names, value_column
from dpsql.sql.build import alias, col, ident, num, select
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.plan.quantities import QUANTITIES, Stage


def measurements(plan: Plan) -> list[Measurement]:
    """The COUNT(DISTINCT col) measurements lowered here (user level)."""
    return [] if plan.table.row_level else [m for m in plan.computed
                                            if QUANTITIES[m.kind].stage is Stage.DISTINCT]


def _subquery(query: exp.Expression, name: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=ident(name)))


def _same_pair(plan: Plan, left: str, right: str) -> exp.Expression:
    """The same unit and partition (a NULL key is a key)."""
    return exp.and_(exp.EQ(this=col("__unit", left), expression=col("__unit", right)),
                    *[exp.NullSafeEQ(this=col(k, left), expression=col(k, right)) for k in key_names(plan)])


def distinct_ctes(plan: Plan, m: Measurement, bounded: str | None) -> list[tuple[str, exp.Select]]:
    """__m_values and __m_agg of one measurement, over the partitions ``bounded`` keeps (None: all)."""
    keys, v = key_names(plan), value_column(m)
    pair = [col("__unit", "__d"), *[col(k, "__d") for k in keys]]
    found = select(col("__unit"), *[col(k) for k in keys], col(v), source="__rows",
                   where=exp.Not(this=exp.Is(this=col(v), expression=exp.Null())))
    values = exp.select(*pair, alias(exp.Min(this=col(v, "__d"), count=num(plan.max_rows)), v)).from_(
        _subquery(found.distinct(), "__d"))
    if bounded is not None:
        values = values.join(exp.Table(this=ident(bounded), alias=exp.TableAlias(this=ident("__b"))),
                             on=_same_pair(plan, "__d", "__b"))
    values = values.group_by(*[p.copy() for p in pair])
    each = select(*[col(k) for k in keys], alias(exp.Unnest(expressions=[col(v)]), "__value"),
                  source=f"__{m.name}_values")
    counted = select(*[col(k) for k in keys], alias(exp.Count(this=exp.Distinct(expressions=[col("__value")])), v),
                     source=_subquery(each, "__e"), group=[col(k) for k in keys])
    return [(f"__{m.name}_values", values), (f"__{m.name}_agg", counted)]


def join_counts(plan: Plan, totals: exp.Select) -> exp.Select:
    """__agg: the groups' other totals (``totals``) and each COUNT(DISTINCT)'s count (NULL: none)."""
    query = exp.select(exp.Column(this=exp.Star(), table=ident("__a")),
                       *[col(value_column(m), f"__{m.name}_agg") for m in measurements(plan)]).from_(
        _subquery(totals, "__a"))
    for m in measurements(plan):
        name = f"__{m.name}_agg"
        on = [exp.NullSafeEQ(this=col(k, "__a"), expression=col(k, name)) for k in key_names(plan)]
        query = query.join(exp.Table(this=ident(name)), on=exp.and_(*on) if on else exp.true(), join_type="LEFT")
    return query
