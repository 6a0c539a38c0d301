"""Automatic contribution bounds: ``max_rows_per_unit: auto`` (C) and ``max_groups_per_unit: auto`` (L),
chosen from the data with DP for each query's tables and groups, as PipelineDP's private contribution
bounds are.

A fixed guess either drops most of a heavy person's rows or adds noise for contributions nobody
makes, and the right L and C depend on the grouping: by clinic a person has a few rows in each of a
few groups, by day one row in each of many. The first time a query needs them (plan/build.py raises
NeedsBounds, DP330), the connection asks a DP query first: people counted by their number of rows n
and their number of the query's groups g (``COUNT(*)``, ``COUNT(DISTINCT keys)`` over the query's own
FROM and joins, its WHERE left out so that queries differing only in filters share one histogram:
without a filter a person's n and g are no smaller), each over powers of two (bin i holds
2**(i-1) <= n < 2**i). It goes through the per-person path (frontend/per_person.py: one row per
person, so each person is counted in exactly one cell) and the whole pipeline's rules, bounding, noise
and ledger charge, at the policy's ``auto_bounds.epsilon``, pure Laplace; asked again (for the same
data version) it replays its paid answer free.

The choice is post-processing of the noisy counts, so free: among powers of two and their halfway
points, the (L, C) that minimises the estimated root-mean-square error of a partition's count: the noise
(sqrt 2 L C / epsilon at ``auto_bounds.for_epsilon``) against the rows the bounds drop, shared by its
P partitions (a cell's people keep min(g, L) groups of n / g rows each, at most C, taken at the
cells' middles). P is the number of partitions when the keys are public, else the most groups the
histogram shows a person reaching (a lower bound). A declared bound, or the query's
max_groups_contributed, stays as given. Cells are taken as empty below the threshold an empty cell
passes with probability 0.1%, except a run of cells beyond them towards more rows above two sd of the
noise (``nonempty``). The bounds then act exactly as declared ones (lower/bounding.py): the sensitivity
proofs are unchanged.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping

from sqlglot import exp

from dpsql.frontend.parse import parse
from dpsql.frontend.scope import Scope, grouped_by
from dpsql.policy.model import Policy

HIGHEST = 20   # bins up to 2**20 rows or groups per person; more fall in the last bin
SPREAD = 16   # points a rows bin's people are spread over when estimating what the bounds drop
TAIL = 2.0     # a cell beyond the kept ones, towards more rows, is kept at this many sd of the noise
Cells = Mapping[tuple[int, int], float]
Ask = Callable[[str], tuple[dict[tuple[int, int], float], float]]


def _binned(column: str) -> str:
    branches = [f"WHEN {column} >= {2 ** (i - 1)} THEN {i}" for i in range(HIGHEST, 0, -1)]
    return "CASE " + " ".join(branches) + " ELSE 0 END"


def histogram_sql(sql: str, unit: str, policy: Policy) -> str:
    """The DP query the bounds are chosen from (module doc): people by rows and groups, for the query
    ``sql``, whose person is read as ``unit``."""
    select = parse(sql)
    assert isinstance(select, exp.Select)
    group = select.args.get("group")
    # A GROUP BY item as validation reads it (frontend/scope.py grouped_by); a name any table of the
    # policy holds is taken as that column, as DuckDB takes it over an output alias.
    columns = {name for t in policy.tables.values() for name in t.columns}
    keys = [(grouped_by(select, item, columns) or item).copy() for item in (group.expressions if group else ())]
    person = exp.column(unit, quoted=True)
    groups = exp.Count(this=exp.Distinct(expressions=keys)) if keys else exp.Count(this=exp.Star())
    inner = exp.select(person, exp.alias_(exp.Count(this=exp.Star()), "__n"), exp.alias_(groups, "__g"))
    for arg in ("with_", "from_", "joins"):
        if select.args.get(arg):
            value = select.args[arg]
            inner.set(arg, [j.copy() for j in value] if isinstance(value, list) else value.copy())
    inner = inner.group_by(person.copy(), copy=False)
    if not keys:   # one group: people by their rows only (cells (i, 1), ``cells``)
        return (f"SELECT {_binned('__n')} AS rows_bin, COUNT(*) AS people "
                f"FROM ({inner.sql('duckdb')}) AS __per_person GROUP BY rows_bin")
    return (f"SELECT {_binned('__n')} AS rows_bin, {_binned('__g')} AS groups_bin, COUNT(*) AS people "
            f"FROM ({inner.sql('duckdb')}) AS __per_person GROUP BY rows_bin, groups_bin")


def _middle(i: int) -> float:
    """A bin's representative count: 0 for bin 0, else the middle of 2**(i-1) .. 2**i - 1."""
    return 0.0 if i <= 0 else 1.5 * 2 ** (i - 1) - 0.5


def _spread(i: int) -> list[float]:
    """A rows bin's counts, its people taken as spread evenly over them (at most SPREAD points)."""
    if i <= 0:
        return [0.0]
    low, high = 2 ** (i - 1), 2 ** i - 1
    steps = min(SPREAD, high - low + 1)
    return [low + (high - low) * k / max(steps - 1, 1) for k in range(steps)]


def dropped(cells: Cells, L: int, C: int) -> float:
    """The rows bounds L and C drop, estimated: a cell's people, their rows spread evenly over its rows
    bin, keep min(g, L) groups of n / g rows each (g the middle of its groups bin), at most C."""
    total = 0.0
    for (i, j), people in cells.items():
        points = _spread(i)
        for n in points:
            g = min(max(_middle(j), 1.0), n) if n else 1.0
            total += people / len(points) * max(0.0, n - min(g, L) * min(C, n / g))
    return total


def _candidates(top: int, fixed: int | None) -> list[int]:
    if fixed is not None:
        return [fixed]
    powers = [2 ** k for k in range(top + 1)]
    return sorted({1, *powers, *(3 * p // 2 for p in powers if p >= 2)})


def choose(cells: Cells, for_epsilon: float, partitions: int | None, L: int | None,
           C: int | None) -> tuple[int, int]:
    """(L, C) (module doc); a bound given as a number stays as given.

    >>> choose({(2, 1): 900.0, (3, 2): 100.0}, 1.0, None, None, None)
    (3, 3)
    >>> choose({(2, 1): 900.0, (3, 2): 100.0}, 0.1, None, None, None)
    (2, 3)
    """
    rows_top = max((i for i, _ in cells), default=1)
    groups_top = max((j for _, j in cells), default=1)
    P = partitions or 2 ** max(groups_top - 1, 0)
    Ls = [x for x in _candidates(groups_top, L) if partitions is None or x <= partitions] or [1]
    best = min(((math.hypot(math.sqrt(2) * g * c / for_epsilon, dropped(cells, g, c) / P), g, c)
                for g in Ls for c in _candidates(rows_top, C)))
    return best[1], best[2]


def nonempty(counts: Mapping, threshold: float, sd: float) -> dict[tuple[int, int], float]:
    """The cells taken as non-empty (a histogram by rows only has its bins in cells (i, 1)): those at
    or above the threshold an empty one passes rarely, and in each column of groups the run of cells
    beyond them, towards more rows, at or above TAIL standard deviations of the noise: a heavy
    person's cell is sparse, and what it holds is what the bounds drop; an empty cell passes TAIL sd
    with probability about 3%, and a run of them far less."""
    cells = {cell if isinstance(cell, tuple) else (cell, 1): n for cell, n in counts.items()}
    kept = {cell: n for cell, n in cells.items() if n >= threshold}
    for j in {j for _, j in kept}:
        i = max(i for i, g in kept if g == j) + 1
        while cells.get((i, j), 0.0) >= TAIL * sd:
            kept[(i, j)] = cells[(i, j)]
            i += 1
    return kept


def applied(scope: Scope, L: int | None, C: int | None) -> Scope:
    """The query's scope with the chosen bounds in place of its tables' ``auto`` ones."""
    table, options = scope.table, scope.options
    if C is not None and any(k == "rows" for _, k in table.auto_contributions):
        table = dataclasses.replace(table, max_rows_per_unit=C, auto_chosen=True,
                                    auto_contributions=tuple(a for a in table.auto_contributions if a[1] != "rows"))
    if L is not None and options.max_groups is None:
        options = dataclasses.replace(options, max_groups=L)
    return dataclasses.replace(scope, table=table, options=options)
