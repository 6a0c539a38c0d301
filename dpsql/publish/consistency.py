"""Released tables that are marginals of one another made consistent: post-processing, free.

A release often holds a total, a table per state and one per state and county, or any set of
GROUP BY subsets of one set of keys ({(), (state,), (sex,), (state, sex)}), each with its own noise.
Their cells disagree (the states do not sum to the total). ``make_consistent`` estimates the finest
cells by weighted least squares over every table (weights 1 / the table's noise variance: the best
linear unbiased estimate, Hay et al. 2010 for hierarchies), optionally non-negative and integer, and
gives every table back as the sums of those cells, so each coarser cell equals the sum of its finer
cells exactly. It reads released values only: no data, no budget.

The finest cells are the cells of the table(s) grouped by every key. Cells missing from a table
(not released, e.g. below partition selection's threshold) are handled so:

* a finest cell that was not released is taken as 0: with public keys every cell is released, so a
  missing one does not exist (under partition selection its count was small, so the tables' sums
  lean down by the suppressed cells' total);
* a coarser cell under which no finest cell was released gets one cell of its own, "the rest" (its
  keys, NULL for the finer ones), which only the coarser tables measure; every table grouped by a
  key it lacks shows it in a NULL group, as SQL's GROUP BY would;
* a coarser cell that was not released while finer cells under it were is added to its table (the
  sum of those cells).

>>> import pyarrow as pa
>>> total = Marginal(pa.table({"n": [12.0]}), (), "n", 2.0)
>>> parts = Marginal(pa.table({"state": ["a", "b", "c"], "n": [3.0, 4.0, 1.0]}), ("state",), "n", 2.0)
>>> out = make_consistent([total, parts])
>>> out[0]["n"].to_pylist(), out[1]["n"].to_pylist()
([11.0], [4.0, 5.0, 2.0])
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from dpsql.errors import ConsistencyError
from dpsql.plan.kinds import OutputKind
from dpsql.publish import least_squares as ls

# The outputs whose released value is one measurement's noisy total (plus nothing): their noise
# variance is that measurement's.
LINEAR = (OutputKind.COUNT, OutputKind.COUNT_COL, OutputKind.COUNT_IF, OutputKind.UNITS, OutputKind.DISTINCT,
          OutputKind.SUM)


@dataclass(frozen=True)
class Marginal:
    """One released table: its key columns (``keys``, any order; ``()`` for a total), the column of
    noisy values (``value``: a COUNT or SUM) and the variance of each cell's noise (Laplace of scale
    b: 2 b^2; Gaussian of sigma s: s^2; ``Marginal.from_result`` reads it from the plan)."""
    table: pa.Table
    keys: tuple[str, ...]
    value: str
    variance: float

    @classmethod
    def from_result(cls, result, value: str) -> Marginal:
        """A dpsql Result's table with its GROUP BY outputs as keys and the noise variance of the output
        ``value`` from its plan. Only outputs that are one measurement's noisy total (COUNT, SUM, ...).
        Ask with ``nonnegative=False``: by default dpsql releases a count as GREATEST(noisy, 0), which
        leans small counts up, and the least squares would carry that bias into every table.

        Example: ``Marginal.from_result(db.sql("SELECT state, COUNT(*) AS n FROM t GROUP BY state",
        nonnegative=False), "n")``
        """
        plan = result.plan
        outputs = {o.name: o for o in getattr(plan, "visible_outputs", ())}
        out = outputs.get(value)
        measured = plan.measurement(out.measurements[0]) if out is not None and len(out.measurements) == 1 else None
        if out is None or out.kind not in LINEAR or measured is None or measured.offset is not None:
            raise ConsistencyError("DP523", f"output {value!r} is not a DP COUNT or SUM of one measurement: its "
                                   "noise variance cannot be read from the plan")
        keys = tuple(o.name for o in plan.visible_outputs if o.kind == OutputKind.KEY)
        return cls(result.arrow(), keys, value, measured.std_dev ** 2)


@dataclass
class _Cells:
    """The finest cells: each key's values (a code is an index into them; -1: "the rest") and the
    codes of each cell, one column per key of ``names``."""
    names: tuple[str, ...]
    values: list[list]
    codes: np.ndarray


def make_consistent(marginals: Sequence[Marginal], *, nonnegative: bool = True,
                    integer: bool = False) -> list[pa.Table]:
    """The tables made consistent, in the order given: each with its key columns and its value
    column (float64; int64 when ``integer``), its released cells first, in their order, then the
    cells it gains (see the module's docstring); other columns are left out.

    Args:
        marginals: released tables over subsets of one set of keys; one of them grouped by all.
        nonnegative: no cell below 0 (counts, sums of values >= 0), every table still consistent.
        integer: whole numbers, every table still consistent (largest remainders down a chain of
            the tables from the total to the finest: those cells move by less than 1).

    Raises:
        ConsistencyError: DP520 a malformed table, DP521 a cell twice, DP522 keys that are not
            subsets of one table's.
    """
    for m in marginals:
        _check(m)
    if not marginals:
        return []
    cells, rows = _universe(marginals)
    pairs = [_grouping(cells, m, r) for m, r in zip(marginals, rows)]
    groupings, groups = [p[0] for p in pairs], [p[1] for p in pairs]
    solve = _solver(list(marginals), groupings)
    n = len(cells.codes)
    x = ls.nonnegative(solve, groupings, n) if nonnegative else solve(np.zeros(n, dtype=bool))
    if integer:
        x = ls.rounded(x, _chain(cells, marginals))
    return [_table(cells, m, g, r, x, integer) for m, g, r in zip(marginals, groupings, groups)]


def _check(m: Marginal) -> None:
    """DP520: the table must have its columns, no NULL key, finite numbers, a variance > 0."""
    def bad(what: str) -> ConsistencyError:
        return ConsistencyError("DP520", f"marginal over {list(m.keys)}: {what}")
    if not (isinstance(m.variance, (int, float)) and math.isfinite(m.variance) and m.variance > 0):
        raise bad(f"the noise variance {m.variance!r} is not a finite number > 0")
    if len(set(m.keys)) != len(m.keys) or m.value in m.keys:
        raise bad("a column is named twice among the keys and the value")
    missing = [c for c in (*m.keys, m.value) if c not in m.table.column_names]
    if missing:
        raise bad(f"the table has no column {missing[0]!r} (it has {m.table.column_names})")
    if not (pa.types.is_integer(m.table[m.value].type) or pa.types.is_floating(m.table[m.value].type)):
        raise bad(f"the value column {m.value!r} is {m.table[m.value].type}, not a number")
    values = m.table[m.value].to_numpy(zero_copy_only=False)
    if m.table[m.value].null_count or not np.isfinite(values.astype(float)).all():
        raise bad(f"the value column {m.value!r} holds NULL, NaN or an infinity")
    for k in m.keys:
        if m.table[k].null_count:
            raise bad(f"the key column {k!r} holds NULL: give it a value first (COALESCE({k}, 'unknown'))")


def _universe(marginals: Sequence[Marginal]) -> tuple[_Cells, list[np.ndarray]]:
    """The finest cells (the tables grouped by every key, then "the rest" of coarser cells with none
    below them, finer tables first) and each table's rows as codes of its keys."""
    names = max((m.keys for m in marginals), key=len)
    outside = [m.keys for m in marginals if not set(m.keys) <= set(names)]
    if outside:
        raise ConsistencyError("DP522", f"the marginals are not over subsets of one set of keys: {list(outside[0])} "
                               f"is not within {list(names)}, the largest")
    lookup: list[dict] = [{} for _ in names]
    cells = _Cells(names, [[] for _ in names], np.zeros((0, len(names)), dtype=np.int64))
    rows = [_encode(cells, lookup, m) for m in marginals]
    at = [[names.index(k) for k in m.keys] for m in marginals]
    full = [r for m, r in zip(marginals, rows) if len(m.keys) == len(names)]
    codes = np.unique(np.concatenate([r[:, np.argsort(a)] if len(a) else r for r, a in zip(full, at)]), axis=0) \
        if full else np.zeros((0, len(names)), dtype=np.int64)
    for i in sorted(range(len(marginals)), key=lambda i: -len(marginals[i].keys)):
        cols = at[i]
        present = {tuple(c) for c in codes[:, cols].tolist()}
        lone = [r for r in rows[i].tolist() if tuple(r) not in present]
        if lone:
            rest = np.full((len(lone), len(names)), -1, dtype=np.int64)
            rest[:, cols] = np.array(lone, dtype=np.int64).reshape(len(lone), len(cols))
            codes = np.concatenate([codes, rest])
    cells.codes = codes
    return cells, rows


def _encode(cells: _Cells, lookup: list[dict], m: Marginal) -> np.ndarray:
    """A table's rows as codes of its keys (in the order of ``m.keys``); DP521 for a cell twice."""
    out = np.zeros((m.table.num_rows, len(m.keys)), dtype=np.int64)
    for j, k in enumerate(m.keys):
        i = cells.names.index(k)
        for r, v in enumerate(m.table[k].to_pylist()):
            code = lookup[i].get(v)
            if code is None:
                code = lookup[i][v] = len(cells.values[i])
                cells.values[i].append(v)
            out[r, j] = code
    if len(np.unique(out, axis=0)) < len(out):
        raise ConsistencyError("DP521", f"marginal over {list(m.keys)} holds a cell twice: each group is released once")
    return out


def _grouping(cells: _Cells, m: Marginal, rows: np.ndarray) -> tuple[ls.Grouping, np.ndarray]:
    """The table over the finest cells, and the group of each of its released rows."""
    cols = [cells.names.index(k) for k in m.keys]
    keys, group = _groups(cells.codes, cols)
    index = {tuple(k): g for g, k in enumerate(keys.tolist())}
    of_rows = np.array([index[tuple(r)] for r in rows.tolist()], dtype=np.int64)
    y = np.full(len(keys), np.nan)
    y[of_rows] = m.table[m.value].to_numpy(zero_copy_only=False).astype(float)
    return ls.Grouping(group, y, 1 / float(m.variance)), of_rows


def _groups(codes: np.ndarray, cols: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct key codes of the cells on ``cols`` and each cell's group among them."""
    if not cols:   # a total: one group, none without cells
        return np.zeros((min(len(codes), 1), 0), dtype=np.int64), np.zeros(len(codes), dtype=np.int64)
    keys, group = np.unique(codes[:, cols], axis=0, return_inverse=True)
    return keys, group.reshape(-1).astype(np.int64)


def _solver(marginals: list[Marginal], groupings: list[ls.Grouping]):
    """The tree solver when the tables' key sets nest, one table each; else conjugate gradients."""
    order = sorted(range(len(marginals)), key=lambda i: len(marginals[i].keys))
    sets = [set(marginals[i].keys) for i in order]
    nested = all(a < b for a, b in zip(sets, sets[1:]))
    if nested and groupings:
        levels = [groupings[i] for i in order]
        return lambda fixed: ls.tree(levels, fixed)
    return lambda fixed: ls.conjugate_gradients(groupings, fixed)


def _chain(cells: _Cells, marginals: Sequence[Marginal]) -> list[np.ndarray]:
    """The longest chain of the tables' key sets from the total to the cells, as groupings of the
    cells (the rounding's hierarchy)."""
    sets = sorted({frozenset(m.keys) for m in marginals}, key=len)
    best: dict[frozenset, list[frozenset]] = {}
    for s in sets:
        below = [best[t] for t in best if t < s]
        best[s] = max(below, key=len, default=[]) + [s]
    chain = [frozenset()] + [s for s in best[frozenset(cells.names)] if s]
    return [_groups(cells.codes, [i for i, k in enumerate(cells.names) if k in s])[1] for s in chain]


def _table(cells: _Cells, m: Marginal, g: ls.Grouping, rows: np.ndarray, x: np.ndarray, integer: bool) -> pa.Table:
    """The table's cells as sums of the finest cells: its released rows first, then those it gains."""
    sums = g.sums(x)
    gained = np.setdiff1d(np.arange(len(sums)), rows)
    order = np.concatenate([rows, gained]).astype(np.int64)
    first = np.zeros(len(sums), dtype=np.int64)
    first[g.group] = np.arange(len(g.group))   # a cell of each group, to read its keys
    columns = {}
    for k in m.keys:
        i = cells.names.index(k)
        codes = cells.codes[first[order], i]
        columns[k] = pa.array([cells.values[i][c] if c >= 0 else None for c in codes.tolist()], type=m.table[k].type)
    values = sums[order]
    columns[m.value] = pa.array(np.rint(values).astype(np.int64) if integer else values)
    return pa.table(columns)
