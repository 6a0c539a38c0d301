"""A group's exact bounded histogram on the quantile grid, and the ranks the quantile rules read.

The engine hands each group's histogram as two lists: the grid cells (leaves 0..K-1 of the clamped
domain) that hold values, and how many values each holds (at most C per person and partition: the
bounding of lower/quantile.py ``leaf_counts``). ``Histogram`` sorts them once; its order statistics
x_(j) are grid cells, with the conventions x_(j) = 0 for j <= 0 and x_(j) = K - 1 for j > n, which
the proofs of the quantile rules use (mechanisms/quantile_choice.py, mechanisms/stable_quantile.py).

The target rank of quantile q = num / den among n values is m = ceil(q n); its value x_(m).

>>> h = Histogram.of([7, 2, 9], [1, 2, 1], 16)
>>> h.n, h.statistic([0, 1, 2, 3, 4, 5]).tolist(), h.target(1, 2)
(4, [0, 2, 2, 7, 9, 15], 2)
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

MAX_DENOMINATOR = 1 << 20   # q is read as the nearest fraction num / den with den at most this


def fraction_of(q: float) -> tuple[int, int]:
    """(num, den) of q in [0, 1]: the literal's own fraction for decimals such as 0.9 (9/10).

    >>> fraction_of(0.9), fraction_of(0.5), fraction_of(1.0)
    ((9, 10), (1, 2), (1, 1))
    """
    f = Fraction(q).limit_denominator(MAX_DENOMINATOR)
    if not 0 <= f <= 1:
        raise ValueError(f"a quantile lies in [0, 1], got {q}")
    return f.numerator, f.denominator


def spread(num: int, den: int) -> Fraction:
    """max(q, 1 - q): how far one added or removed value moves the target rank q n, relative to the
    ranks of the values (those below it move by 1 - q, those above by q)."""
    return Fraction(max(num, den - num), den)


@dataclass(frozen=True)
class Histogram:
    """The cells holding values (sorted, distinct), their counts, the cumulative counts, n and K."""
    cells: np.ndarray
    counts: np.ndarray
    cumulative: np.ndarray
    n: int
    grid: int

    @classmethod
    def of(cls, cells, counts, grid: int) -> "Histogram":
        """From the engine's lists (any order; empty cells dropped). Cells lie in [0, grid)."""
        c = np.asarray(cells, dtype=np.int64).reshape(-1)
        k = np.asarray(counts, dtype=np.int64).reshape(-1)
        if c.size != k.size or (c.size and (c.min() < 0 or c.max() >= grid)) or (k < 0).any():
            raise ValueError("a histogram needs one count >= 0 per cell, each cell in [0, grid)")
        order = np.argsort(c, kind="stable")
        c, k = c[order], k[order]
        if c.size > 1 and (np.diff(c) == 0).any():
            raise ValueError("a histogram lists each cell once")
        keep = k > 0
        c, k = c[keep], k[keep]
        cumulative = np.cumsum(k, dtype=np.int64)
        return cls(c, k, cumulative, int(cumulative[-1]) if k.size else 0, int(grid))

    def statistic(self, ranks) -> np.ndarray:
        """x_(j) for each rank j: the cell of the j-th smallest value; 0 below 1, K - 1 above n."""
        j = np.asarray(ranks, dtype=np.int64)
        inside = (j >= 1) & (j <= self.n)
        at = np.searchsorted(self.cumulative, np.clip(j, 1, max(self.n, 1)), side="left")
        found = self.cells[np.minimum(at, max(self.cells.size - 1, 0))] if self.cells.size else np.zeros_like(j)
        return np.where(inside, found, np.where(j < 1, 0, self.grid - 1)).astype(np.int64)

    def target(self, num: int, den: int) -> int:
        """m = ceil(q n): the rank of quantile q = num / den (0 when q n = 0)."""
        return -(-num * self.n // den)

    def exact(self, num: int, den: int) -> int:
        """The noiseless answer: x_(max(m, 1)), the quantile's own value (MIN's smallest, MAX's largest)."""
        return int(self.statistic([max(self.target(num, den), 1)])[0])
