"""The quantile rules' exact laws, computed here from their definitions (not from dpsql's candidates),
and neighbouring histograms, for tests/mechanisms/test_quantile_choice.py, test_stable_quantile.py
and tests/lower/test_histogram.py.

A dataset is a list of cells (one per value) on a grid of K cells; its neighbour adds or removes up
to C values (one person's, at user level).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def histogram(values) -> tuple[list[int], list[int]]:
    """(cells, counts) of a list of cells, as the engine hands them."""
    cells, counts = np.unique(np.asarray(values, dtype=np.int64), return_counts=True)
    return cells.tolist(), counts.tolist()


def utilities(values, grid: int, q: Fraction) -> np.ndarray:
    """Smith's utility of every cell j, in ranks: minus the distance from q n to [B(j), B(j) + a(j)]."""
    n = len(values)
    counts = np.bincount(np.asarray(values, dtype=np.int64), minlength=grid).astype(object)
    below = np.concatenate([[0], np.cumsum(counts)[:-1]])
    target = q * n
    return np.array([-float(max(Fraction(0), Fraction(int(b)) - target, target - int(b) - int(a)))
                     for b, a in zip(below, counts)])


def exponential_law(values, grid: int, q: Fraction, temperature) -> np.ndarray:
    """P(cell j) proportional to exp(u(j) / s) over the K cells."""
    u = utilities(values, grid, q)
    w = np.exp((u - u.max()) / float(temperature))
    return w / w.sum()


def statistic(values, j: int, grid: int) -> int:
    """x_(j): the j-th smallest value; 0 below 1, K - 1 above n."""
    ordered = sorted(values)
    return 0 if j < 1 else grid - 1 if j > len(ordered) else ordered[j - 1]


def target(values, q: Fraction) -> int:
    return math.ceil(q * len(values))


def neighbours(rng: np.random.Generator, values, grid: int, C: int, extremes: bool = True):
    """D' for D: up to C values added (at random cells, or all at one end of the grid or at the
    median's cell), or up to C of D's values removed."""
    k = int(rng.integers(1, C + 1))
    out = [list(values) + rng.integers(0, grid, k).tolist()]
    if extremes:
        middle = statistic(values, max(1, len(values) // 2), grid)
        out += [list(values) + [0] * k, list(values) + [grid - 1] * k, list(values) + [middle] * k]
    if len(values) >= k:
        drop = set(rng.choice(len(values), k, replace=False).tolist())
        out.append([v for i, v in enumerate(values) if i not in drop])
    return out


def dataset(rng: np.random.Generator, grid: int, most: int = 12, clustered: bool = False) -> list[int]:
    """A random list of cells: spread over the grid, or around one cell (stable quantiles)."""
    n = int(rng.integers(0, most + 1))
    if clustered:
        centre = int(rng.integers(0, grid))
        return np.clip(centre + rng.integers(-2, 3, n), 0, grid - 1).tolist()
    return rng.integers(0, grid, n).tolist()


def hockey_stick(p: dict, p_other: dict, epsilon: float) -> float:
    """sum over outcomes of max(0, P(o) - e^epsilon P'(o)): the smallest delta for (epsilon, delta)."""
    bound = math.exp(epsilon)
    return math.fsum(max(0.0, v - bound * p_other.get(o, 0.0)) for o, v in p.items())


def clamped_laplace(centre: int, pmf, grid: int) -> dict:
    """The law of clamp(centre + Z, 0, K - 1) for Z with pmf(z) over the integers (a dict of cells)."""
    reach = np.arange(-4 * grid, 4 * grid + 1)
    weights = pmf(reach)
    out: dict = {}
    for z, w in zip(reach.tolist(), weights.tolist()):
        cell = min(max(centre + z, 0), grid - 1)
        out[cell] = out.get(cell, 0.0) + w
    # The far tails (|z| > 4K) all clamp to an end: give each end what the sum misses, half each.
    missing = max(0.0, 1.0 - math.fsum(out.values())) / 2
    out[0] = out.get(0, 0.0) + missing
    out[grid - 1] = out.get(grid - 1, 0.0) + missing
    return out
