"""Sensitivities, derived in one place: how far one privacy unit can move each bounded quantity.

Neighbouring databases differ by one privacy unit (a row, or every row of one person), added or
removed. Contribution bounding in the rewrite guarantees that a unit reaches at most L partitions
and, within each, adds at most C to a count and at most C*B to a quantised sum, where B bounds one
clamped, quantised value. Each bound is stated as (L0, Linf) (mechanisms/releases.py Sensitivity):
the partitions a unit touches and how far it moves each; a mechanism derives its L1 or L2 norm.
Sums are computed exactly on an integer grid of step ``g`` (a power of two), so these bounds hold
for the numbers DuckDB actually adds up, not only for real numbers.

>>> g = granularity(0.0, 120.0); g, grid_bound(0.0, 120.0, g)
(6.103515625e-05, 1966080)
>>> count_sensitivity(max_groups=2, max_rows=3)
Sensitivity(partitions=2, per_partition=Fraction(3, 1), l1=Fraction(6, 1), l2_squared=Fraction(18, 1))
"""
from __future__ import annotations

import math
from fractions import Fraction

from dpsql.mechanisms.releases import Sensitivity

# Values are quantised to about 2**-GRID_BITS of the bound's magnitude: far below the noise, and it
# keeps every quantised value < 2**(GRID_BITS + 1), so sums of up to 2**41 rows fit in BIGINT.
GRID_BITS = 20
# Bounds beyond policy/bounds.py's MAX_BOUND (2**50) are refused, so g < 2**31 (see there).


def granularity(lower: float, upper: float) -> float:
    """The power-of-two grid step for values clamped to [lower, upper].

    >>> granularity(0, 1), granularity(-3, 2)
    (9.5367431640625e-07, 1.9073486328125e-06)
    """
    magnitude = max(abs(lower), abs(upper))
    if magnitude == 0:
        return 1.0
    # Never below the smallest normal double, so the step and its inverse stay exact and finite.
    return 2.0 ** max(math.floor(math.log2(magnitude)) - GRID_BITS, -1022)


def grid_bound(lower: float, upper: float, g: float) -> int:
    """B: the largest |round(v / g)| over v in [lower, upper] (ceil covers any rounding mode)."""
    return int(math.ceil(max(abs(lower), abs(upper)) / g))


def count_sensitivity(max_groups: int, max_rows: int) -> Sensitivity:
    """COUNT(*), COUNT(col), COUNT_IF(cond): one unit adds <= C rows (its count is capped at C,
    plan/exact.py capped) to each of <= L partitions: L0 = L, Linf = C. Row level: L = C = 1."""
    return Sensitivity(max_groups, Fraction(max_rows))


def sum_sensitivity(max_groups: int, max_rows: int, bound: int) -> Sensitivity:
    """SUM on the grid: one unit adds, per partition, a value in [-C*B, C*B] (per-unit sums are
    clamped to C rows' worth, see plan/exact.py bounded_unit_sum), to <= L partitions: L0 = L,
    Linf = C*B grid steps."""
    return Sensitivity(max_groups, Fraction(max_rows * bound))


def unit_total_sensitivity(max_groups: int, bound: int) -> Sensitivity:
    """A per-unit aggregate clamped per partition (GoogleSQL contribution_bounds_per_group): one unit
    adds one value in [-B, B] grid steps to each of <= L partitions, whatever its number of rows."""
    return Sensitivity(max_groups, Fraction(bound))


def clipped_sensitivity(max_groups: int) -> Sensitivity:
    """The clipping report's count (plan/clipping.py): the people of a group whose contribution the
    bounding changed. Each person adds 0 or 1 to each of the <= L partitions __bounded keeps for them
    (their flag, lower/clipping.py, is a function of their own rows alone: their row count and values
    in the partition, their number of partitions), and nothing to any other: L0 = L, Linf = 1. Another
    person's flag reads none of this person's rows, so it is the same in both neighbours."""
    return Sensitivity(max_groups, Fraction(1))


def distinct_sensitivity(max_groups: int, max_rows: int, keys: int | None) -> Sensitivity:
    """COUNT(DISTINCT col): L0 = L, Linf = C, or min(C, |keys|) over a public key set.

    A unit keeps at most C of its distinct values in each of its <= L partitions (lower/distinct.py:
    MIN(v, C) over the distinct values of its rows there; at row level a row is a unit with one
    value), and a group's count is the number of distinct values among what its units kept. That
    number changes by at most one per kept value added or removed, whatever the equality (a
    collation's classes, -0.0 = 0.0), so the unit's <= C values move it by at most C; what every
    other unit keeps is a function of its own rows, the same in both neighbours. With public keys
    only declared keys are kept, so also by at most |keys|. Adding the unit only adds values: the
    count never falls (monotone)."""
    return Sensitivity(max_groups, Fraction(max_rows if keys is None else min(max_rows, keys)))


# The quantile tree (Hay et al. 2010 hierarchical histogram, as in Google's QuantileTree): branching
# factor and depth of Google's defaults, so [lower, upper] is cut into 16**4 = 65536 leaves.
TREE_BRANCHING = 16
TREE_DEPTH = 4
TREE_LEAVES = TREE_BRANCHING ** TREE_DEPTH


def quantile_tree_sensitivity(max_groups: int, max_rows: int, depth: int = TREE_DEPTH) -> Sensitivity:
    """The quantile tree's node counts: L0 = D*L*C, Linf = C, L1 = D*L*C, L2^2 = D*L*C^2.

    A row lies in exactly one node per level, so it adds 1 to D counts of its partition's tree. A unit
    keeps at most C values per partition (rewrite: evenly spaced ranks of its own sorted values) in
    at most L partitions: per level and partition its moves are >= 0 and add up to <= C, so at most C
    nodes move (L0 = D*L*C), none by more than C (Linf), by D*L*C in total (L1), and their squares add
    up to at most C^2 per level and partition (a sum of squares of terms >= 0 with sum C is largest
    with one term): D*L*C^2, tighter than L0 * Linf^2. The counts are integers, so this holds exactly.

    >>> s = quantile_tree_sensitivity(2, 3); s.partitions, s.per_partition, s.l1, s.l2_squared
    (24, Fraction(3, 1), Fraction(24, 1), Fraction(72, 1))
    """
    nodes = depth * max_groups * max_rows
    return Sensitivity(nodes, Fraction(max_rows), Fraction(nodes), Fraction(depth * max_groups * max_rows ** 2))


def histogram_sensitivity(max_groups: int, max_rows: int) -> Sensitivity:
    """A group's histogram over the quantile grid (a quantile rule's input: mechanisms/quantile_rules.py):
    a unit keeps at most C values per partition (lower/quantile.py ``leaf_counts``, the same bound as
    the tree's) in at most L partitions, so it adds or removes at most C values, each in one cell, in
    each of <= L histograms: L0 = L, Linf = C values. Each rule maps this to its own release's
    sensitivity (the exponential mechanism's utility range: mechanisms/quantile_choice.py)."""
    return Sensitivity(max_groups, Fraction(max_rows))
