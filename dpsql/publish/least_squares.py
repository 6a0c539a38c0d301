"""Weighted least squares over the finest cells of a set of released marginals: numpy only.

The model: ``x`` the finest cells; each released table ``T`` measures ``A_T x`` (the sums of its
groups' cells) with independent noise of one variance ``v_T``; the estimate minimises
``sum_T |y_T - A_T x|^2 / v_T`` (generalised least squares, the best linear unbiased estimate).
A ``Grouping`` is one table as the solvers see it: each cell's group, each group's released value
(NaN where the group was not released) and the table's weight ``1 / v_T``.

Two solvers of the same problem: ``tree`` when the tables' key sets nest (a hierarchy), exact and
linear in two passes; ``conjugate_gradients`` for any set, on the normal equations with sparse
products (``np.bincount``). ``nonnegative`` is non-negative least squares by an active set over either; ``rounded`` makes
the cells integers keeping every group of a chain of tables within 1 of its real value.

>>> g = Grouping(np.array([0, 0, 0]), np.array([12.0]), 1.0)          # a total of 12
>>> parts = Grouping(np.array([0, 1, 2]), np.array([3.0, 4.0, 1.0]), 1.0)
>>> [round(float(v), 6) for v in tree([g, parts], np.zeros(3, bool))]   # each part gets (12 - 8) / 4
[4.0, 5.0, 2.0]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOLERANCE = 1e-12   # the conjugate gradients' relative residual


@dataclass(frozen=True)
class Grouping:
    """One released table over the finest cells: ``group[i]`` is cell i's group, ``y[g]`` group g's
    released value (NaN: not released), ``weight`` 1 / its noise variance."""
    group: np.ndarray
    y: np.ndarray
    weight: float

    @property
    def released(self) -> np.ndarray:
        return ~np.isnan(self.y)

    def sums(self, x: np.ndarray) -> np.ndarray:
        """Each group's total of ``x``: A_T x."""
        return np.bincount(self.group, weights=x, minlength=len(self.y)).astype(float)   # float when empty too


def parents(finer: Grouping, coarser: Grouping) -> np.ndarray:
    """The coarser group of each finer group (the finer table's keys include the coarser's)."""
    out = np.empty(len(finer.y), dtype=np.int64)
    out[finer.group] = coarser.group
    return out


def tree(levels: list[Grouping], fixed: np.ndarray) -> np.ndarray:
    """GLS over a hierarchy (``levels`` coarsest first, each one's keys within the next's; the last
    one's groups are the cells): Hay, Rastogi, Miklau and Suciu 2010, "Boosting the accuracy of
    differentially private histograms through consistency", section 4, with a variance per node
    (the Gaussian tree smoother): up, each node's best estimate from its subtree and that estimate's
    variance; down, the parent's final value minus its children's estimates shared in proportion to
    their variances. Unreleased nodes carry no measurement (infinite variance); ``fixed`` cells are
    known to be 0 (variance 0)."""
    ups = _upward(levels, fixed)
    x = ups[0][0]
    for j in range(1, len(levels)):
        z, t = ups[j]
        up = parents(levels[j], levels[j - 1])
        residual = x - np.bincount(up, weights=z, minlength=len(x))
        x = z + _shares(up, t, len(x)) * residual[up]
    final = levels[-1]
    return x[final.group]


def _upward(levels: list[Grouping], fixed: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each level's (estimate, variance) from its subtree, finest first, returned coarsest first."""
    last = levels[-1]
    known = np.zeros(len(last.y), dtype=bool)
    known[last.group[fixed]] = True
    z = np.where(last.released & ~known, last.y, 0.0)
    t = np.where(known, 0.0, np.where(last.released, 1 / last.weight, np.inf))
    out = [(z, t)]
    for j in range(len(levels) - 2, -1, -1):
        level, up = levels[j], parents(levels[j + 1], levels[j])
        c = np.bincount(up, weights=z, minlength=len(level.y))
        vc = np.bincount(up, weights=t, minlength=len(level.y))
        z, t = _combine(level, c, vc)
        out.append((z, t))
    return out[::-1]


def _combine(level: Grouping, c: np.ndarray, vc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A node's own measurement (variance 1 / weight) and its children's sum (variance ``vc``)
    combined by their precisions; either alone where the other is missing (vc infinite, or the node
    not released); the children's sum alone where it is exact (vc 0: every cell below is fixed)."""
    v = 1 / level.weight
    both = level.released & np.isfinite(vc) & (vc > 0)
    safe = np.where(both, vc, 1.0)
    z = np.where(both, (level.y * safe + c * v) / (safe + v), c)
    t = np.where(both, safe * v / (safe + v), vc)
    own = level.released & np.isinf(vc)
    return np.where(own, level.y, z), np.where(own, v, t)


def _shares(up: np.ndarray, t: np.ndarray, parents_count: int) -> np.ndarray:
    """Each child's share of its parent's residual: its variance over its siblings' total; where a
    sibling has no measurement below it (infinite variance), those siblings share it evenly (only one
    can: an unreleased cell has released ancestors)."""
    total = np.bincount(up, weights=t, minlength=parents_count)[up]
    infinite = np.isinf(t)
    open_ = np.bincount(up, weights=infinite.astype(float), minlength=parents_count)[up]
    finite_share = np.divide(t, total, out=np.zeros_like(t), where=np.isfinite(total) & (total > 0))
    return np.where(open_ > 0, infinite / np.maximum(open_, 1), finite_share)


def conjugate_gradients(tables: list[Grouping], fixed: np.ndarray) -> np.ndarray:
    """GLS over any set of tables: the normal equations ``sum_T w_T A_T' A_T x = sum_T w_T A_T' y_T``
    solved by conjugate gradients with a diagonal preconditioner (Hestenes and Stiefel 1952), each
    product two ``np.bincount`` passes per table; ``fixed`` cells held at 0. Exact in as many steps as
    the matrix has distinct eigenvalues: at most 2^d for complete marginals of d keys."""
    free = ~fixed
    b = sum(t.weight * np.where(t.released, t.y, 0.0)[t.group] for t in tables) * free
    diag = sum(t.weight * t.released[t.group] for t in tables)
    inverse = np.where(free & (diag > 0), 1 / np.maximum(diag, 1e-300), 0.0)

    def product(x: np.ndarray) -> np.ndarray:
        return sum(t.weight * np.where(t.released, t.sums(x), 0.0)[t.group] for t in tables) * free

    x = b * inverse
    r = b - product(x)
    z = r * inverse
    p, rz = z, float(r @ z)
    limit = TOLERANCE * max(float(np.linalg.norm(b)), 1e-300)
    for _ in range(10 * len(x) + 10):
        if float(np.linalg.norm(r)) <= limit:
            break
        q = product(p)
        step = rz / float(p @ q)
        x, r = x + step * p, r - step * q
        z = r * inverse
        rz, before = float(r @ z), rz
        p = z + (rz / before) * p
    return x


def nonnegative(solve, tables: list[Grouping], cells: int) -> np.ndarray:
    """Non-negative cells that keep every table consistent: non-negative least squares by the
    active-set method of Lawson and Hanson 1974 ("Solving least squares problems", ch. 23), in blocks:
    solve, fix the negative cells at 0 and solve again over the rest; once none is negative, free the
    fixed cells whose gradient says the objective falls as they grow, and go on. It stops at the
    optimum (the KKT conditions hold), in a few solves in practice, or after ``4 * cells + 8`` solves
    with negative cells at 0. ``solve(fixed)`` is ``tree`` or ``conjugate_gradients`` over ``tables``."""
    fixed = np.zeros(cells, dtype=bool)
    x = solve(fixed)
    scale = max(float(np.abs(x).max(initial=0.0)), 1.0)
    slope = 1e-9 * max([1.0] + [t.weight * float(np.abs(np.nan_to_num(t.y)).max(initial=0.0)) for t in tables])
    for _ in range(4 * cells + 8):
        negative = (x < -1e-9 * scale) & ~fixed
        if negative.any():
            fixed |= negative
        else:
            freed = fixed & (gradient(tables, x) < -slope)
            if not freed.any():
                break
            fixed &= ~freed
        x = solve(fixed)
    return np.where(fixed, 0.0, np.maximum(x, 0.0))


def gradient(tables: list[Grouping], x: np.ndarray) -> np.ndarray:
    """Half the objective's gradient at ``x``: sum_T w_T A_T' (A_T x - y_T) over released groups."""
    return sum(t.weight * np.where(t.released, t.sums(x) - np.nan_to_num(t.y), 0.0)[t.group] for t in tables)


def rounded(x: np.ndarray, chain: list[np.ndarray]) -> np.ndarray:
    """Integer cells by largest remainders (Hamilton's method) down a chain of groupings, coarsest
    first (``chain[j][i]`` cell i's group at level j; the first is the grand total, the last the cells
    themselves): the total is rounded to the nearest integer, then each group's integer is shared
    among its subgroups as their floors plus one for those with the largest fractions. Every group of
    the chain ends within 1 of its real value (a controlled rounding of the hierarchy, Cox 1987); a
    group of a table off the chain is a sum of integers, consistent, though it may move further."""
    whole = np.array([np.floor(x.sum() + 0.5)])
    for j in range(1, len(chain)):
        parent_of = np.empty(int(chain[j].max(initial=-1)) + 1, dtype=np.int64)
        parent_of[chain[j]] = chain[j - 1]
        real = np.bincount(chain[j], weights=x, minlength=len(parent_of))
        floors = np.floor(real)
        left = whole - np.bincount(parent_of, weights=floors, minlength=len(whole))
        order = np.lexsort((-(real - floors), parent_of))
        rank = np.empty(len(order), dtype=np.int64)
        starts = np.searchsorted(parent_of[order], np.arange(len(whole)))
        rank[order] = np.arange(len(order)) - starts[parent_of[order]]
        whole = floors + (rank < np.rint(left)[parent_of])
    return whole[chain[-1]]
