"""Noisy top-k in the engine (plan/top_k.py): the candidates numbered and their utilities, one call of
the engine's choice function over all of them, and the chosen groups kept.

    __noisy   + __i: each group's number in key order; __u: its utility (the exact bounded total,
                negated for ASC, saturated at +-(2**52 - 1): clamping moves no two totals further apart,
                and keeps the spread within the exact sampler's 2**53)
    __cand    the candidates: every group (public keys: the key set, empty groups with total 0), or
              those partition selection releases, at most TOP_K_CANDIDATES by noisy unit count (a
              function of released values only)
    __top     (__i, __rank): the ids the choice function returns, in the order chosen; MATERIALIZED,
              so it is called once
    __out     __noisy joined with __top: only the chosen groups are released

The exact utilities go in as a list and come back as ids only: no exact value leaves the engine.
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.limits import TOP_K_CANDIDATES
from dpsql.mechanisms.base import choice_arguments
from dpsql.lower.names import key_names, top_k_function, value_column
from dpsql.plan.model import Plan
from dpsql.plan.top_k import RANK
from dpsql.sql.build import alias, cast, col, fn, ident, num, saturate, table

MAX_UTILITY = 2 ** 52 - 1


def noisy_columns(plan: Plan, source: str) -> list[exp.Expression]:
    """__noisy's columns for a top-k: __i (the group's number, by its keys read from ``source``) and
    __u (its utility, read from __agg)."""
    top = plan.top_k
    if top is None:
        return []
    # the candidates in the order the query breaks ties in (its ORDER BY's keys, then the rest)
    names = key_names(plan)
    order = [exp.Ordered(this=col(names[i], source), desc=desc, nulls_first=False) for i, desc in top.ties]
    number = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order))
    total = fn("COALESCE", col(value_column(top.utility), "__agg"), num(0))
    value = cast(saturate(total, MAX_UTILITY, nullable=False), "BIGINT")
    return [alias(number, "__i"), alias(value if top.descending else exp.Neg(this=value), "__u")]


def top_k_ctes(plan: Plan, noise_function: str) -> list[tuple[str, exp.Select]]:
    """__cand and __top (module docstring)."""
    top, selection = plan.top_k, plan.selection
    if top is None:
        return []
    candidates = exp.select(col("__i"), col("__u")).from_(table("__noisy"), copy=False)
    if selection is not None:
        units = col(selection.measurement)
        candidates = candidates.where(exp.GTE(this=units, expression=num(selection.threshold)), copy=False) \
            .order_by(exp.Ordered(this=units.copy(), desc=True), exp.Ordered(this=col("__i")), copy=False) \
            .limit(TOP_K_CANDIDATES, copy=False)

    def listed(name: str) -> exp.Expression:
        return exp.ArrayAgg(this=exp.Order(this=col(name), expressions=[exp.Ordered(this=col("__i"))]))
    arguments = [listed("__i"), listed("__u"), num(top.k), *(num(a) for a in choice_arguments(top.release))]
    call = exp.Anonymous(this=top_k_function(noise_function), expressions=arguments)
    qualifier = exp.Dot(this=exp.to_identifier("system"), expression=exp.to_identifier("main"))
    chosen = exp.select(alias(exp.Dot(this=qualifier, expression=call), "__l")).from_(table("__cand"), copy=False)
    ranked = exp.select(alias(exp.Unnest(expressions=[col("__l")]), "__i"),
                        alias(exp.Anonymous(this="generate_subscripts", expressions=[col("__l"), num(1)]), RANK)) \
        .from_(exp.Subquery(this=chosen, alias=exp.TableAlias(this=ident("__c"))), copy=False)
    return [("__cand", candidates), ("__top", ranked)]


def chosen_only(plan: Plan, out: exp.Select) -> exp.Select:
    """__out restricted to the chosen groups, with their __rank."""
    if plan.top_k is None:
        return out
    on = exp.EQ(this=col("__i", "__noisy"), expression=col("__i", "__top"))
    return out.join(exp.Table(this=ident("__top")), on=on, copy=False)
