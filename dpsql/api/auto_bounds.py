"""Automatic bounds: a ``bounds: auto`` column's clamping bounds, chosen from the data with DP.

The owner declares ``bounds: auto`` where a fixed guess would either clip a skewed column or add
needless noise. The first query that needs the bounds (a SUM, an AVG, a quantile of the column:
frontend/rules/aggregates.py raises NeedsBounds, DP330) has the connection ask a DP query first:
the column's histogram over powers of two (Google's approximate bounds), positive and negative
magnitudes from 2**-16 (1 for integers) to 2**50, one bin for what is nearer 0, every bin a public
key (the CASE's literal branches: frontend/derived.py), counted at the table's L and C. It goes
through the whole pipeline like any query (the same rules, bounding, noise and ledger charge, at the
policy's ``auto_bounds.epsilon``, pure Laplace), so its cost is in the ledger and an identical
histogram asked again (by anyone, for the same data version) is the paid answer replayed for free:
the bounds are chosen once per data version.

The choice is post-processing of the noisy counts, so free. Bins whose noisy count is below the
threshold an empty bin exceeds with probability at most 0.1% / bins (the mechanism's error bound)
count as empty, except the tail beyond them, which counts as its decay predicts where the noisy
counts agree (``kept``); among the powers of two up to the largest non-empty bin, the upper bound (and,
mirrored, the lower) minimises the estimated root-mean-square error of a SUM at
``auto_bounds.for_epsilon``: the values clipped (each bin's count times its distance from the bound,
at the bin's middle) against the Laplace noise of a sum bounded there (sqrt 2 C max(|lower|, upper) /
epsilon). A column with nothing above the threshold on one side is bounded by 0 there.
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Callable, Mapping

from dpsql.mechanisms.base import mechanism
from dpsql.policy.model import ColumnPolicy, Policy
from dpsql.sql.types import INTEGER_TYPES, base_type

LOWEST_FLOAT = -16       # the smallest magnitude binned for a non-integer column: 2**-16
HIGHEST = 50             # the largest bound a policy may hold (policy/loading.py MAX_BOUND)
MISSED = 1e-3            # probability that any empty bin is taken as non-empty: a far one costs much


def _edges(integer: bool) -> list[Fraction]:
    """T_1 < ... < T_K: bin i > 0 holds T_i <= x < T_(i+1) (the last: x >= T_K), bin -i its mirror,
    bin 0 holds |x| < T_1."""
    lowest = 0 if integer else LOWEST_FLOAT
    return [Fraction(2) ** k for k in range(lowest, HIGHEST + 1)]


def _literal(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


def histogram_sql(table: str, column: str, integer: bool) -> str:
    """The DP query whose noisy counts the bounds are chosen from (module doc)."""
    edges = _edges(integer)
    k = len(edges)
    col = f'"{column}"'
    branches = [f"WHEN {col} >= {_literal(edges[i - 1])} THEN {i}" for i in range(k, 0, -1)]
    branches.append(f"WHEN {col} > -{_literal(edges[0])} THEN 0")
    branches += [f"WHEN {col} > -{_literal(edges[i])} THEN -{i}" for i in range(1, k)]
    branches.append(f"WHEN {col} <= -{_literal(edges[-1])} THEN -{k}")
    case = "CASE " + " ".join(branches) + " END"
    return f'SELECT {case} AS bin, COUNT(*) AS n FROM "{table}" GROUP BY {case}'


def _span(i: int, edges: list[Fraction]) -> tuple[float, float]:
    """Bin i > 0's magnitudes [T_i, T_(i+1)); the last, open bin is taken as [T_K, 2 T_K)."""
    low = float(edges[i - 1])
    return low, 2 * low


def _clipped(counts: Mapping[int, float], sign: int, bound: float, edges: list[Fraction]) -> float:
    """The total distance, estimated, of the values beyond ``bound`` on the side ``sign`` from it,
    each bin's values taken as spread evenly over it."""
    total = 0.0
    for b, n in counts.items():
        if b * sign <= 0:
            continue
        a, z = _span(abs(b), edges)
        if bound <= a:
            total += n * ((a + z) / 2 - bound)
        elif bound < z:
            total += n * (z - bound) ** 2 / (2 * (z - a))
    return total


def clipped_above(counts: Mapping[int, float], bound: float) -> float:
    """``_clipped`` of an integer histogram's positive side: how far above ``bound`` its values are, in all."""
    return _clipped(counts, 1, bound, _edges(True))


def _candidates(counts: Mapping[int, float], sign: int, edges: list[Fraction]) -> list[float]:
    """0, and the powers of two and their halfway points up to the outermost non-empty bin's end."""
    top = max((abs(b) for b in counts if b * sign > 0), default=0)
    powers = [float(e) for e in edges[: top + 1]]
    return [0.0] + sorted(powers + [1.5 * p for p in powers[:-1]])


def kept(counts: Mapping[int, float], strict: float, sd: float) -> dict[int, float]:
    """The bins taken as non-empty: those at or above ``strict`` (an empty bin passes with probability
    at most MISSED in all), and on each side the tail beyond the outermost of them, bin after bin, as
    its decay predicts (the ratio of that bin's count to the one before it, shrinking as the ratio
    before it did: log-concave), each at most its noisy
    count plus one sd, until the prediction is below half a value or more than 3 sd above the noisy
    count (a column that ends there, such as an age). A real tail thins out gradually, and its few
    rows are what a SUM's bound clips; noise alone cannot show them at a tenth of an epsilon."""
    kept = {b: c for b, c in counts.items() if c >= strict and b != 0}
    for sign in (1, -1):
        edge = max((abs(b) for b in kept if b * sign > 0), default=0)
        last, before = kept.get(sign * edge, 0.0), counts.get(sign * (edge - 1), 0.0)
        if not edge or not before > last > 0:
            continue
        # Log-concave: each ratio shrinks as the last two did (a lognormal's do; a power law's stay).
        earlier = counts.get(sign * (edge - 2), 0.0)
        predicted, ratio = last, last / before
        shrink = min(1.0, ratio / (before / earlier)) if earlier > before else 1.0
        while True:
            edge += 1
            ratio *= shrink
            predicted *= ratio
            seen = counts.get(sign * edge)
            if seen is None or predicted < 0.5 or predicted > seen + 3 * sd:
                break
            kept[sign * edge] = min(predicted, max(seen, 0.0) + sd)
    return kept


def choose(counts: Mapping[int, float], threshold: float, integer: bool, rows_per_unit: int,
           for_epsilon: float, sd: float = 0.0) -> tuple[float, float]:
    """(lower, upper) from the noisy bin counts (module doc).

    >>> choose({1: 0.0, 3: 500.0, 4: 40.0, 9: 1.0}, 5.0, True, 1, 1.0)
    (0.0, 16.0)
    """
    kept_bins = kept(counts, threshold, sd)
    edges = _edges(integer)
    lows = [(low, _clipped(kept_bins, -1, low, edges)) for low in _candidates(kept_bins, -1, edges)]
    best: tuple[float, float, float] | None = None
    for high in _candidates(kept_bins, 1, edges):
        over = _clipped(kept_bins, 1, high, edges)
        for low, under in lows:
            noise = math.sqrt(2) * rows_per_unit * max(low, high) / for_epsilon
            error = math.hypot(over + under, noise)
            if best is None or error < best[0]:
                best = (error, -low, high)
    assert best is not None
    return best[1] + 0.0, best[2]


def thresholds(plan) -> tuple[float, float]:
    """The count an empty bin's noise exceeds with probability at most MISSED / bins, and the noise's sd."""
    m = plan.measurements[0]
    bins = max(plan.partitions or 1, 1)
    noise = mechanism(m.mechanism)
    return float(noise.error_bound(m.release, 1 - 2 * MISSED / bins)), math.sqrt(noise.variance(m.release))


def chosen(policy: Policy, table: str, column: ColumnPolicy,
           ask: Callable[[str, float], tuple[dict[int, float], tuple[float, float]]]) -> tuple[float, float]:
    """The bounds of one ``bounds: auto`` column: ``ask`` answers the histogram query at an epsilon
    (its noisy counts by bin, and the thresholds from its plan)."""
    integer = base_type(column.sql_type) in INTEGER_TYPES
    rules = policy.auto_bounds
    assert rules is not None
    counts, (strict, sd) = ask(histogram_sql(table, column.name, integer), rules.epsilon)
    rows = policy.tables[table].max_rows_per_unit
    return choose(counts, strict, integer, rows, rules.for_epsilon, sd)


def with_bounds(policy: Policy, bounds: Mapping[tuple[str, str], tuple[float, float]]) -> Policy:
    """The policy with each auto column's chosen (lower, upper) in place of its missing bounds."""
    tables = dict(policy.tables)
    for (table, name), (low, high) in bounds.items():
        t = tables[table]
        columns = dict(t.columns)
        columns[name] = dataclasses.replace(columns[name], lower=low, upper=high)
        tables[table] = dataclasses.replace(t, columns=columns)
    return dataclasses.replace(policy, tables=tables)
