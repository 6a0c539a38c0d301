"""A quantile rule's answer per group, inside DuckDB: MIN, MAX and the quantiles asked with
``mechanism => 'exponential' | 'ptr' | 'smooth'`` (mechanisms/quantile_rules.py).

Each group's exact bounded histogram is the quantile tree's leaves (lower/quantile.py ``leaf_counts``:
C values per unit and partition, counted per (unit, partition, leaf), no list of a person's values),
gathered per group into two lists of at most K = 65536 cells, and handed to the engine's choice
function once per released group (every public group, empty ones with empty lists; or the groups
partition selection keeps), which returns the released cell or NULL (PTR's "no answer").

CTEs per measurement ``m`` (``k..`` the group keys)::

    __m_leaf   (k.., leaf, n): values per cell (the tree's leaf_counts)
    __m_hist   (k.., cells, counts, total): each group's histogram as two lists, in cell order
    __m_cell   (__m_k.., cell): the released cell of each released group (MATERIALIZED: one call each)
    __m_out    (__m_k.., m_q): its midpoint, the released value
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.lower.names import key_names
from dpsql.lower.quantile import leaf_counts, released_groups
from dpsql.mechanisms.quantile_rules import arguments
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.plan.quantities import QUANTITIES, Stage, rule_of
from dpsql.plan.sensitivity import TREE_LEAVES
from dpsql.sql.build import alias, cast, clamp, col, fn, ident, join, num, table

def histograms(plan: Plan) -> list[Measurement]:
    """The measurements a quantile rule answers from a histogram (plan/quantities.py Stage.HISTOGRAM)."""
    return [m for m in plan.measurements if QUANTITIES[m.kind].stage is Stage.HISTOGRAM]


def output_column(m: Measurement) -> str:
    return f"{m.name}_q"


def _same_keys(plan: Plan, left: str, right: str, prefix: str = "") -> exp.Expression:
    """Group keys equal, NULL-safely (a NULL group is a group); TRUE without keys."""
    found = [exp.NullSafeEQ(this=col(k, left), expression=col(f"{prefix}{k}", right)) for k in key_names(plan)]
    return exp.and_(*found) if found else exp.true()


def _ordered_list(value: str) -> exp.Expression:
    """ARRAY_AGG(value ORDER BY leaf): the group's cells (or counts) in cell order, so the choice
    function's input is a function of the histogram alone."""
    order = exp.Order(this=col(value), expressions=[exp.Ordered(this=col("leaf"), nulls_first=False)])
    return exp.ArrayAgg(this=order)


def _empty(value: exp.Expression) -> exp.Expression:
    """A group without values reads two empty lists, never NULL."""
    return fn("COALESCE", value, cast(exp.Array(expressions=[]), "BIGINT[]"))


def choice_call(plan: Plan, m: Measurement, function: str) -> exp.Expression:
    """system.main.<function>(cells, counts, [code, K, num, den, ...]): the rule's cell, or NULL."""
    given = arguments(rule_of(m), m.release, m.loss, m.quantile, TREE_LEAVES)
    parameters = cast(exp.Array(expressions=[num(int(a)) for a in given]), "BIGINT[]")
    call = exp.Anonymous(this=function, expressions=[_empty(col("cells", "h")), _empty(col("counts", "h")),
                                                     parameters])
    return exp.Dot(this=exp.Dot(this=exp.to_identifier("system"), expression=exp.to_identifier("main")),
                   expression=call)


def histogram_ctes(plan: Plan, m: Measurement, bounded: str | None, function: str) -> list[tuple[str, exp.Expression]]:
    """Every CTE of one rule's measurement; ``__m_cell``, the one that calls the choice function, is to be
    MATERIALIZED (one call per group)."""
    prefix, keys = f"__{m.name}_", [col(k) for k in key_names(plan)]
    lists = exp.select(*keys, alias(_ordered_list("leaf"), "cells"), alias(_ordered_list("n"), "counts"),
                       alias(cast(exp.Sum(this=col("n")), "BIGINT"), "total")).from_(table(f"{prefix}leaf"), copy=False)
    if keys:
        lists = lists.group_by(*[k.copy() for k in keys], copy=False)
    groups = exp.Subquery(this=released_groups(plan), alias=exp.TableAlias(this=ident("g")))
    chosen = exp.select(*[alias(col(k, "g"), f"__{m.name}_{k}") for k in key_names(plan)],
                        alias(choice_call(plan, m, function), "cell")).from_(groups, copy=False)
    chosen = join(chosen, exp.Table(this=ident(f"{prefix}hist"), alias=exp.TableAlias(this=ident("h"))),
                  _same_keys(plan, "g", "h"), "LEFT")
    # The cell's midpoint lies inside the bounds; clamped against rounding (NULL, no answer, stays
    # NULL). Read from the materialised choice: the clamp reads the value three times, one draw.
    width = (m.upper - m.lower) / TREE_LEAVES
    value = exp.Add(this=num(float(m.lower)), expression=exp.Mul(
        this=exp.Paren(this=exp.Add(this=cast(col("cell"), "DOUBLE"), expression=num(0.5))), expression=num(float(width))))
    out = exp.select(*[col(f"__{m.name}_{k}") for k in key_names(plan)],
                     alias(clamp(value, m.lower, m.upper), output_column(m))).from_(table(f"{prefix}cell"), copy=False)
    return [(f"{prefix}leaf", leaf_counts(plan, m, bounded)), (f"{prefix}hist", lists), (f"{prefix}cell", chosen),
            (f"{prefix}out", out)]


def join_outputs(plan: Plan, query: exp.Select) -> exp.Select:
    """__out reads __noisy joined with every rule's released values, group by group."""
    for m in histograms(plan):
        on = _same_keys(plan, "__noisy", f"__{m.name}_out", prefix=f"__{m.name}_")
        query = join(query, exp.Table(this=ident(f"__{m.name}_out")), on, "LEFT")
    return query


def join_totals(plan: Plan, query: exp.Select) -> exp.Select:
    """The test seam's measurements stage: each rule's histogram total per group, named as the
    measurement (what the leak test bounds by its sensitivity: C values in L partitions)."""
    for m in histograms(plan):
        source = f"__{m.name}_hist"
        query = query.select(alias(fn("COALESCE", col("total", source), num(0)), m.name), copy=False)
        query = join(query, exp.Table(this=ident(source)), _same_keys(plan, "__noisy", source), "LEFT")
    return query
