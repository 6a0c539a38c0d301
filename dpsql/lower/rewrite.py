"""Rewrite a Plan into DuckDB SQL, built as a sqlglot AST (user text enters only as validated nodes).

The stages, each in its own module, recombined here into one query for DuckDB (user level; row
level skips ``__units``/``__bounded``)::

    bounding.py  __rows     filtered rows of the private table, values clamped and quantised to an integer grid
                 __units    one row per (unit, partition): counts capped at C, sums capped at C rows' worth
                 __bounded  at most L partitions per unit, by a salted hash (__cut first with private keys)
                 __agg      exact integer aggregates per partition
    distinct.py  __m<i>_values, __m<i>_agg   COUNT(DISTINCT col): C values per unit and kept partition
    noise.py     __noisy    every public key combination LEFT JOIN __agg, noise UDF once per group
                            (MATERIALIZED: each draw is made once even where post-processing reads it twice)
    top_k.py     __cand, __top   a top-k's candidates, and the groups its one call of the choice
                            function chose (MATERIALIZED: one choice)
    quantile.py  __m<i>_*   the descent of each quantile tree, over the released groups
    histogram.py __m<i>_*   a quantile rule's answer per released group, from its histogram (MIN, MAX, ...)
    post.py      __out      post-processing (sums back to real units, AVG = sum / count clamped to bounds)
                 final      HAVING, ORDER BY, LIMIT on released values only

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> from dpsql.frontend.validate import validate
>>> from dpsql.plan.build import build_plan
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {}}}}})
>>> q = parse("SELECT COUNT(*) FROM t"); plan = build_plan(q, validate(q, "", p), epsilon=1, delta=0)
>>> "system.main.noise(" in rewrite(plan, "noise").rewritten_sql
True
"""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from dpsql.lower import distinct, histogram, quantile, top_k
from dpsql.lower.names import SALT, choice_function, clipping_columns
from dpsql.plan.model import Plan
from dpsql.sql.build import DIALECT, alias, col, ident, join, num, table
from dpsql.sql.compare import compare
from dpsql.lower.noise import noisy_cte, scalar_totals
from dpsql.lower.post import final_select, measurements_select, output_interval, output_value
from dpsql.lower.bounding import agg_cte, cuts_ranks_first, rows_cte, user_level_ctes


def looked_up(plan: Plan, query: exp.Select) -> exp.Select:
    """The released top-1 row with its public table's columns read by its key (frontend/arg_max.py
    ``Lookup``): a LEFT JOIN on the table's key, unique in it (checked as the query's lookup was, DP207),
    compared by sql/compare.py; public data joined to a released key, so post-processing."""
    lookup = plan.lookup
    assert lookup is not None
    kind = lookup.kind
    top = exp.Subquery(this=query, alias=exp.TableAlias(this=ident("__top")))
    on = compare(exp.EQ, col(lookup.column, "__p"), kind, col(lookup.key, "__top"), kind)
    items = [alias(col(column, "__top" if released else "__p"), name) for name, released, column in lookup.outputs]
    public = exp.Table(this=ident(lookup.table), alias=exp.TableAlias(this=ident("__p")))
    return join(exp.select(*items).from_(top, copy=False), public, on, "LEFT")


STAGES = ("output", "measurements", "released")


def out_cte(plan: Plan) -> exp.Select:
    """__out: every output (and interval) from __noisy's released values, the selected groups only."""
    values = [alias(output_value(plan, i), plan.slot(i)) for i in range(len(plan.outputs))]
    for i in range(len(plan.outputs)):
        interval = output_interval(plan, i)
        if interval is not None:
            values += [alias(interval[0], f"{plan.slot(i)}_lo"), alias(interval[1], f"{plan.slot(i)}_hi")]
    values += [alias(col(m), name) for m, name in clipping_columns(plan)]
    out = histogram.join_outputs(plan, quantile.join_outputs(
        plan, top_k.chosen_only(plan, exp.select(*values).from_(table("__noisy"), copy=False))))
    return released_only(plan, out)


def released_only(plan: Plan, query: exp.Select) -> exp.Select:
    """The groups partition selection releases (all of them without it)."""
    if plan.selection is None:
        return query
    return query.where(exp.GTE(this=col(plan.selection.measurement), expression=num(plan.selection.threshold)))


def replayed_sql(plan: Plan, source: str) -> str:
    """The outputs of a plan of scalar measurements only, read from a table of its released measurements
    (``stage="released"``'s rows, fresh or kept by the ledger) instead of the private tables: the query's
    own __out and final SELECT over them, so post-processing only."""
    query = final_select(plan)
    noisy = exp.select(exp.Star()).from_(table(source), copy=False)
    for name, cte in (("__noisy", noisy), ("__out", out_cte(plan))):
        query = query.with_(ident(name), as_=cte, copy=False)
    return query.sql(dialect=DIALECT, copy=False)


def rewrite(plan: Plan, noise_function: str, *, sampling: str = "keyed", stage: str = "output") -> Plan:
    """Return the plan with ``rewritten_sql`` set: the whole DP query as one DuckDB SELECT.

    ``sampling`` and ``stage`` are for the trusted test seam (dpsql.testing) only: a hash without the
    run's salt for the choice of L partitions (``"hash"``, or ``"portable"``: the same on every engine),
    and the measurements (``stage="measurements"``) instead of the released outputs. ``stage="released"`` (api/executor.py, a plan of scalar measurements
    only): the measurements of the groups released, the rows the ledger keeps for replay, which
    ``replayed_sql`` turns into the outputs.
    """
    if sampling not in ("keyed", "hash", "portable") or stage not in STAGES:
        raise ValueError(f"unknown sampling {sampling!r} or stage {stage!r}")
    ctes: list[tuple[str, exp.Select]] = [("__rows", rows_cte(plan))]
    source = "__rows"
    if not plan.table.row_level:
        ctes += user_level_ctes(plan, sampling)
        source = ctes[-1][0]
    trees, rules = quantile.trees(plan), histogram.histograms(plan)
    materialized = {"__noisy", "__top"}   # one draw of the noise, one call of the top-k choice
    bounded = source if source == "__bounded" else None
    if (trees or rules or distinct.measurements(plan)) and bounded:
        materialized.add(bounded)   # __agg, the trees and the distinct values read one bounding, computed once
    if bounded and cuts_ranks_first(plan):
        materialized.add("__units")   # __cut and __bounded read it: aggregated once
    for m in distinct.measurements(plan):
        ctes += distinct.distinct_ctes(plan, m, bounded)
    if scalar_totals(plan):
        ctes.append(("__agg", agg_cte(plan, source)))
    ctes.append(("__noisy", noisy_cte(plan, noise_function)))
    ctes += top_k.top_k_ctes(plan, noise_function)
    for m in trees:
        tree = quantile.quantile_ctes(plan, m, bounded, noise_function)
        materialized.update(name for name, _ in tree if name.endswith(quantile.MATERIALIZED_SUFFIXES))
        ctes += tree
    for m in rules:
        answered = histogram.histogram_ctes(plan, m, bounded, choice_function(noise_function))
        materialized.update(name for name, _ in answered if name.endswith("_cell"))   # one call per group
        ctes += answered
    if stage == "released":   # the measurements the ledger keeps: no outputs read them here
        query = released_only(plan, measurements_select(plan))
    else:
        ctes.append(("__out", out_cte(plan)))
        query = final_select(plan) if stage == "output" else measurements_select(plan)
    for name, cte in ctes:
        query = query.with_(ident(name), as_=cte, materialized=True if name in materialized else None, copy=False)
    if plan.lookup is not None and stage == "output":
        query = looked_up(plan, query)
    # Compact and without sqlglot's defensive copy: this runs on every query; explain pretty-prints.
    salted = any(p.name == SALT for p in query.find_all(exp.Placeholder))
    return dataclasses.replace(plan, rewritten_sql=query.sql(dialect=DIALECT, copy=False), salted=salted, lowered=query)


