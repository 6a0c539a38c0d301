"""Noise placement: each scalar measurement noised once per output group (every public key
combination, or the candidate groups of partition selection), its exact total saturated first."""
from __future__ import annotations

from sqlglot import exp

from dpsql.mechanisms.base import mechanism
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.plan.quantities import QUANTITIES, Stage
from dpsql.sql.build import alias, cast, col, fn, ident, join, num, saturate, table
from dpsql.lower.names import key_names, value_column
from dpsql.lower import top_k
from dpsql.lower.keys import keys_source


# Exact aggregates are saturated at +-2**62 before the noise: the sum with any noise draw the sampler
# makes (scale < 2**50; a Gaussian's draws in its units below 2**56) stays inside int64.
MAX_EXACT = 2 ** 62


def scalar_measurements(plan: Plan) -> list[Measurement]:
    """The measurements noised once per group in __noisy (quantile trees are noised node by node, a
    quantile rule answers from a histogram)."""
    return [m for m in plan.measurements if QUANTITIES[m.kind].stage not in (Stage.TREE, Stage.HISTOGRAM)]


def scalar_totals(plan: Plan) -> list[Measurement]:
    """The exact totals __agg holds: the scalar measurements' and a top-k's utility (Plan.computed)."""
    return [m for m in plan.computed if QUANTITIES[m.kind].stage not in (Stage.TREE, Stage.HISTOGRAM)]


def noise_call(m: Measurement, value: exp.Expression, function: str) -> exp.Expression:
    """system.main.<function>(exact BIGINT, code, a, b, c): the released value, the noise of the
    mechanism of that ``code`` added with its own three integer arguments (``Mechanism.arguments``:
    a Laplace scale n / 2**k, a Gaussian sigma and its units), dispatched in mechanisms/base.py ``noise``.

    Called fully qualified: a TEMP MACRO of the same bare name would otherwise shadow it.
    """
    chosen = mechanism(m.mechanism)
    # Saturated before the cast: a total beyond BIGINT (huge per-unit bounds times many units) would
    # otherwise fail the query exactly when enough units match.
    exact = cast(saturate(value, MAX_EXACT, nullable=False), "BIGINT")   # value: COALESCE(total, 0)
    arguments = [num(chosen.code), *(num(a) for a in chosen.arguments(m.release))]
    call = exp.Anonymous(this=function, expressions=[exact, *arguments])
    qualifier = exp.Dot(this=exp.to_identifier("system"), expression=exp.to_identifier("main"))
    return exp.Dot(this=qualifier, expression=call)


def noisy_cte(plan: Plan, function: str) -> exp.Select:
    names = key_names(plan)
    values = [alias(noise_call(m, fn("COALESCE", col(value_column(m), "__agg"), num(0)), function), m.name)
              for m in scalar_measurements(plan)]
    values += top_k.noisy_columns(plan, "__agg" if plan.selection is not None else "__keys")
    if not values and plan.selection is None:
        # Only quantiles: __noisy is just the released groups (one row without GROUP BY).
        if not plan.group_keys:
            return exp.select(alias(num(1), "__one"))
        return exp.select(*[col(n) for n in names]).from_(
            exp.Subquery(this=keys_source(plan), alias=exp.TableAlias(this=ident("__keys"))))
    if not plan.group_keys:
        return exp.select(*values).from_(table("__agg"), copy=False)
    if plan.selection is not None:
        # Private keys: the candidate groups are those in the data; __out keeps the selected ones.
        return exp.select(*[col(n, "__agg") for n in names], *values).from_(table("__agg"), copy=False)
    # A key expression may map declared keys to NULL (CASE without ELSE): the NULL group is a group.
    on = exp.and_(*[exp.NullSafeEQ(this=col(n, "__keys"), expression=col(n, "__agg")) for n in names])
    source = exp.Subquery(this=keys_source(plan), alias=exp.TableAlias(this=ident("__keys")))
    query = exp.select(*[col(n, "__keys") for n in names], *values).from_(source, copy=False)
    return join(query, exp.Table(this=ident("__agg")), on, "LEFT")
