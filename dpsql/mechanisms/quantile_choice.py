"""A quantile by the exponential mechanism on the grid (Smith 2011's form; McSherry-Talwar 2007).

The output is a grid cell j of the clamped domain (K cells, value lower + (j + 1/2) width). Cell j
holds a(j) of the group's n values and has B(j) below it, so its values take the ranks
B(j)+1..B(j)+a(j), and Smith's utility of answering j for quantile q is minus the distance from the
target rank q n to the ranks it covers:

    u(j) = -dist(q n, [B(j), B(j) + a(j)])       (in ranks; 0 where q n falls in or at the edge of j)

n is the group's own count, read from its histogram inside the mechanism and never released. Runs
of empty cells between two occupied ones share B and a, so they are one candidate whose width is
their number of cells (Smith's intervals between order statistics, on the grid): the candidate is
chosen with probability proportional to width * exp(u / s), then a cell uniformly inside it, which
is exactly the exponential mechanism over the K cells. Utilities are integers in units of 1 / den
rank (q = num / den), floored at -2**52 so the exact sampler's range holds.

Sensitivity (the range of exponential.py). One person adds or removes at most C values in a
partition (the histogram's bound, plan/sensitivity.py ``histogram_sensitivity``); take one value
added at cell x (removal is the reverse). Then n and q n grow by 1 and q. For j < x the ranks of j
stay and the target moves by q: u moves by at most q. For j > x both ends of j's ranks move by 1
and the target by q: at most 1 - q. At j = x the top end moves up by 1 and the target by q: if the
target was below j's ranks the distance falls by q (or to 0), above it by at most 1 - q, inside it
stays 0. So each value moves every u(j) by at most M = max(q, 1 - q), C values by at most C M, and
the range of (u - u') is at most 2 C M. For q = 0, u(j) = -B(j), and for q = 1, u(j) = -(n - B(j) -
a(j)): an added value moves every utility down or not at all (monotone), so the range is C. The
floor moves no two utilities further apart and keeps them monotone: the same bounds hold.

Accuracy: some cell has u = 0, so the normaliser is at least 1 and P(u(chosen) <= -t) <= K exp(-t/s):
with probability 1 - beta the chosen cell's ranks lie within s ln(K / beta) of the target.

>>> from dpsql.mechanisms.quantile_ranks import Histogram
>>> h = Histogram.of([2, 5], [3, 1], 8)
>>> candidates(h, 1, 2)
([0, 2, 3, 5, 6], [2, 1, 2, 1, 2], [-4, 0, -2, -2, -4])
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpsql.mechanisms.exponential import Exponential, choose
from dpsql.mechanisms.losses import PURE, Loss
from dpsql.mechanisms.quantile_ranks import Histogram, spread
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import Release, Sensitivity

FLOOR = 2 ** 52   # utilities below -FLOOR read as -FLOOR (choose needs a range below 2**53)
_MAP = Exponential()


def candidates(h: Histogram, num: int, den: int) -> tuple[list[int], list[int], list[int]]:
    """(first cell, width, utility) of each candidate in grid order: the runs of empty cells and the
    occupied cells, utilities in units of 1 / den rank (module doc)."""
    cells, counts = h.cells, h.counts
    below = h.cumulative - counts                        # B of each occupied cell
    gap_start = np.concatenate([[0], cells[:-1] + 1]) if cells.size else np.zeros(0, dtype=np.int64)
    starts = np.empty(2 * cells.size + 1, dtype=np.int64)
    widths, lows, highs = np.empty_like(starts), np.empty_like(starts), np.empty_like(starts)
    starts[0:-1:2], widths[0:-1:2] = gap_start, cells - gap_start          # the run before each cell
    lows[0:-1:2] = highs[0:-1:2] = below
    starts[1::2], widths[1::2], lows[1::2], highs[1::2] = cells, 1, below, h.cumulative
    last = int(cells[-1]) + 1 if cells.size else 0
    starts[-1], widths[-1], lows[-1], highs[-1] = last, h.grid - last, h.n, h.n
    keep = widths > 0
    target = num * h.n
    distance = np.maximum(0, np.maximum(den * lows[keep] - target, target - den * highs[keep]))
    utilities = -np.minimum(distance, FLOOR)
    return starts[keep].tolist(), widths[keep].tolist(), utilities.tolist()


def choose_cell(source: RandomSource, h: Histogram, num: int, den: int, temperature: Fraction) -> int:
    """A cell by the exponential mechanism at ``temperature`` (in ranks): the candidate exactly
    (exponential.py ``choose``), then a uniform cell of it."""
    starts, widths, utilities = candidates(h, num, den)
    i = choose(source, utilities, 1 / (temperature * den), widths)
    offset = int(source.below(np.array([widths[i]], dtype=np.int64))[0]) if widths[i] > 1 else 0
    return starts[i] + offset


class ExponentialQuantile:
    """The quantile rule ``mechanism => 'exponential'``: one choice per group; its release is the
    exponential mechanism's (mechanisms/exponential.py), in ranks."""

    name = _MAP.name
    option = "exponential"
    code = 1
    measure = PURE
    scale_name = "temperature (ranks)"
    noised = "chosen ranks"
    needs_delta = False
    about = ("the exponential mechanism over the cells (Smith 2011): utility minus the distance in ranks from "
             "q n to the cell's values, a run of empty cells weighted by its width, one cell per group; its "
             "sensitivity is the utilities' range, in ranks")

    def sensitivity(self, histogram: Sensitivity, num: int, den: int) -> Sensitivity:
        """The range of the utilities (module doc): C per partition at q in {0, 1}, 2 C max(q, 1 - q)
        else, in ranks, in the histogram's L0 partitions."""
        C = histogram.per_partition
        per = C if num in (0, den) else 2 * C * spread(num, den)
        return Sensitivity(histogram.partitions, per)

    def loss(self, loss: Loss, delta: float) -> Loss:
        return loss

    def calibrate(self, sensitivity: Sensitivity, loss: Loss) -> Fraction:
        return _MAP.calibrate(sensitivity, loss)

    def covers(self, release: Release, loss: Loss) -> bool:
        return _MAP.covers(Release(_MAP.name, release.sensitivity, release.scale), loss)

    def releases(self, release: Release, loss: Loss) -> tuple[Release, ...]:
        return (Release(_MAP.name, release.sensitivity, release.scale),)

    def variance(self, release: Release) -> float:
        return math.nan   # of ranks, not of values: explain shows the error bound alone

    def error_bound(self, release: Release, confidence: float, grid: int = 65536) -> float:
        """s ln(K / (1 - confidence)): the chosen cell's ranks lie that close to the target's."""
        return float(release.scale) * math.log(grid / (1 - confidence))

    def arguments(self, release: Release, loss: Loss, num: int, den: int) -> list[int]:
        """(numerator, log2 of the denominator) of the temperature, a dyadic rational."""
        s = release.scale
        return [s.numerator, s.denominator.bit_length() - 1]

    def answer(self, source: RandomSource, h: Histogram, num: int, den: int, arguments: list[int]) -> int | None:
        return choose_cell(source, h, num, den, Fraction(arguments[0], 2 ** arguments[1]))


__all__ = ["ExponentialQuantile", "candidates", "choose_cell"]
