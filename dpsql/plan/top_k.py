"""Noisy top-k (issue 23): ``GROUP BY ... ORDER BY <one aggregate> [DESC | ASC] LIMIT k`` answered by
choosing k groups with k peeled choices of the exponential mechanism over the candidate groups, their
values released by a separate measurement; MODE(col) is its top-1 (frontend/mode.py).

Each candidate's utility is the exact bounded total of the ordering aggregate's quantity (the same
integer, in grid steps, its noise would be added to), negated for ASC. The choices run inside the
engine (lower/top_k.py, mechanisms/base.py ``choose_top``); only the chosen groups reach the output.

Privacy. Neighbours differ by one unit; contribution bounding makes every other unit's contribution a
function of its own rows, so the two utility vectors differ only by that unit's contributions: in at
most L partitions, by at most Linf (the quantity's ``per_partition``) each. One peel is one exponential
mechanism over all remaining candidates, whose loss depends on the largest change of any one utility,
not on how many change (McSherry-Talwar 2007): its range max_i (u_i - u'_i) - min_i (u_i - u'_i) is at
most 2 Linf, and at most Linf when the utilities are monotone (``ORDERABLE``: every change has one sign).
So each peel is (range / s)-DP at temperature s, whatever L, and k peels compose to k range / s: one
release of Sensitivity(k, range) (the exponential map's L0 partitions are separate choices). Peeling
has the law of one-shot top-k with Gumbel noise (Durfee-Rogers 2019, Lemma 4.2). With private keys
the candidates are the groups partition selection released, a DP output of its own; choosing among a
set fixed by it composes with it. The released values are a measurement like any other (L partitions,
Linf each), only read for the chosen groups.

When: OPTIONS(top_k = 'exponential') asks for it; by default only where the choice is less noisy
than the noisy value every group would get instead (``TopK.better``), compared on the plan alone.
Both add independent noise to each candidate and keep the k largest, but the choice pays for k
choices of one group's range and the values for a person's whole move once (L0 partitions): the
choice wins where k is small against L (MODE, the top few at user level) and loses at row level for
k > 1; OPTIONS(top_k = 'noisy_values') asks for the values.

Side channels: the rows released are min(k, candidates) (then OFFSET and LIMIT): the public key set's
size, or the selected groups' count; their order is by the released values (or the order chosen), the
keys last; the candidates are numbered by key, and capped at ``TOP_K_CANDIDATES`` by noisy unit count.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from sqlglot import exp

from dpsql.limits import MAX_TOP_K, TOP_K_CANDIDATES
from dpsql.mechanisms.base import SELECTION
from dpsql.mechanisms.losses import Loss
from dpsql.mechanisms.releases import Release, Sensitivity
from dpsql.plan.aggregates import AGGREGATES, Sharing
from dpsql.plan.kinds import Bounding, OutputKind, Quantity
from dpsql.plan.parts import Measurement, Output
from dpsql.plan.quantities import Need
from dpsql.plan.text import fmt

RANK = "__rank"   # the order a group was chosen in (1 first), a column of lower/top_k.py's __top


def _nonnegative(need: Need) -> bool:
    """Every value a unit adds is >= 0: its rows clamped into [lower, upper] with lower >= 0 (a sum
    of C rows' worth of them, plan/exact.py bounded_unit_sum, or its total clamped so, UNIT_TOTAL)."""
    return need.offset is None and need.lower is not None and need.lower >= 0 and need.bounding != Bounding.UNIT_MEAN


# What a top-k may order by: quantities whose exact total is a sum of what each unit adds to the
# partition, and whether that is monotone. A count adds a unit's capped count, >= 0 (COUNT(*),
# COUNT(x), COUNT_IF; per-group bounds are whole numbers >= 0); a unit count adds 1; COUNT(DISTINCT)
# only adds values (plan/sensitivity.py distinct_sensitivity); a SUM adds a value >= 0 when its lower
# bound is >= 0. Adding a unit then moves every utility up (ASC: down), never both ways: range Linf.
ORDERABLE: dict[Quantity, Callable[[Need], bool]] = {
    Quantity.COUNT: lambda need: True,
    Quantity.COUNT_COL: lambda need: True,
    Quantity.COUNT_IF: lambda need: True,
    Quantity.UNITS: lambda need: True,
    Quantity.DISTINCT: lambda need: True,
    Quantity.SUM: _nonnegative,
}


@dataclass(frozen=True)
class Ask:
    """A query of the top-k shape, before its budget is split."""
    output: int         # the ordering output's index
    need: Need          # what its utility totals
    k: int              # how many groups are chosen: LIMIT + OFFSET, at most the candidates
    descending: bool
    by_rank: bool       # no output shows its value: the groups come in the order chosen, and no
                        # measurement is made for it
    ties: tuple[tuple[int, bool], ...]   # (GROUP BY item, descending): the rest of ORDER BY, then the keys


@dataclass(frozen=True)
class TopK:
    """The choice of the groups: k peeled choices of SELECTION at temperature ``scale`` over the
    candidates' exact totals of ``utility`` (grid steps), spending ``loss`` (pure) together."""
    utility: Measurement   # one of the plan's measurements, or (by_rank) an exact total never noised
    k: int
    descending: bool
    by_rank: bool
    monotone: bool
    loss: Loss
    scale: Fraction
    ties: tuple[tuple[int, bool], ...] = ()   # the candidates are numbered in this order of the keys
    against: float = math.inf   # the std of the noisy value each group would get instead (grid steps)

    @property
    def noise_std(self) -> float:
        """The std of the choice's noise in grid steps: peeling is one-shot top-k with Gumbel noise of
        scale s (Durfee-Rogers 2019), whose std is pi s / sqrt(6)."""
        return math.pi * float(self.scale) / math.sqrt(6)

    @property
    def better(self) -> bool:
        """Whether the choice is less noisy than every group's noisy value at the budget it would get
        (the meaning before): the default. Both add independent noise to each candidate and keep the
        top k; the choice pays k choices of one group's range (Linf), the values a person's whole
        move (L0 Linf) once: the choice wins where k is small against L, MODE above all, and loses at
        row level for k > 1 (benchmarks/topk.py)."""
        return self.noise_std < self.against

    @property
    def range(self) -> Fraction:
        """How far one unit moves the spread of the utilities' changes: Linf (monotone), else 2 Linf."""
        linf = self.utility.sensitivity.per_partition
        return linf if self.monotone else 2 * linf

    @property
    def release(self) -> Release:
        """The k choices as one release: k partitions of the exponential map, each its range."""
        return Release(SELECTION.name, Sensitivity(self.k, self.range), self.scale)

    def lines(self, selecting: bool, partitions: int | None) -> list[str]:
        g = self.utility.granularity
        order = "largest" if self.descending else "smallest"
        candidates = (f"the groups partition selection releases (at most {TOP_K_CANDIDATES}, by noisy unit count)"
                      if selecting else f"every group (<= {partitions}), empty ones included")
        values = ("not released: the groups in the order chosen" if self.by_rank else
                  f"by {self.utility.mechanism} ({self.utility.name}), for the chosen groups only")
        return [f"top-k by the {SELECTION.name} mechanism: {self.k} peeled choice(s) at epsilon "
                f"{fmt(float(self.loss.epsilon) / self.k)} each, temperature {fmt(float(self.scale) * g)}",
                f"  the {order} {self.utility.label} (exact, bounded); range {fmt(float(self.range) * g)} per choice"
                f" ({'monotone: Linf' if self.monotone else '2 Linf'}); candidates: {candidates}",
                f"  choice noise std {fmt(self.noise_std * g)} (Gumbel); every group's noisy value would have std "
                f"{fmt(self.against * g)}", f"  values {values}"]


def asked(select: exp.Select, scope, outputs: list[Output], order: list[tuple[str, bool]], limits: tuple,
          partitions: int | None, sharing: Sharing) -> Ask | None:
    """The top-k a query asks for, or None: ``ORDER BY`` one orderable aggregate (then GROUP BY items
    only: ties) and ``LIMIT``, with GROUP BY and no HAVING, k = LIMIT + OFFSET in 1..MAX_TOP_K and
    fewer than the candidates (all of them chosen needs no choice), unless OPTIONS(top_k =
    'noisy_values'); DP308 where OPTIONS(top_k = 'exponential') asks for it and the query is not of
    that shape."""
    limit, offset = limits
    wanted = scope.options.top_k
    index = _slot(order[0][0]) if select.args.get("order") is not None else None
    o = outputs[index] if index is not None else None
    needs = AGGREGATES[o.kind].needs(o, sharing) if o is not None and o.kind.aggregate else []
    ties = [(outputs[i].key_index, d) for i, d in ((_slot(s), d) for s, d in order[1:])
            if i is not None and outputs[i].kind == OutputKind.KEY]
    k = (limit or 0) + (offset or 0)
    shaped = (select.args.get("group") is not None and select.args.get("having") is None and limit is not None
              and 1 <= k <= MAX_TOP_K and len(needs) == 1 and needs[0].kind in ORDERABLE and len(ties) == len(order) - 1
              and (partitions is None or partitions <= TOP_K_CANDIDATES)   # the work a choice may take
              # A quantile's own stage (tree or rule) is joined to every released group: not beside a choice.
              and not any(x.kind in (OutputKind.QUANTILE, OutputKind.MIN, OutputKind.MAX) for x in outputs))
    if wanted == "noisy_values" or (not shaped and wanted is None):
        return None
    if not shaped:
        option = next(o for o in select.meta["dp"].options() if o.this.name.lower() == "top_k")
        raise scope.refuse("DP308", f"top_k = 'exponential' needs GROUP BY (at most {TOP_K_CANDIDATES} public groups), "
                           "ORDER BY one aggregate (COUNT, COUNT_IF, COUNT(DISTINCT), SUM) then keys only, LIMIT k with "
                           f"k + OFFSET <= {MAX_TOP_K}, no HAVING and no quantile, MIN or MAX",
                           option, hint="drop the option to release noisy values for every group", rule="top_k_shape")
    if partitions is not None and partitions <= k:
        return None   # every group is chosen: nothing to choose, the values are the answer
    referenced = any(isinstance(n, exp.Column) and n.name == f"o{index}" for other in outputs
                     if other.expression is not None for n in other.expression.walk())
    return Ask(output=index, need=needs[0], k=k, descending=order[0][1], by_rank=o.hidden and not referenced,
               ties=tuple(ties))


def _slot(slot: str) -> int | None:
    return int(slot[1:]) if slot.startswith("o") and slot[1:].isdigit() else None


def ranked(outputs: list[Output], ask: Ask) -> list[Output]:
    """The outputs with the ordering one, when it shows no value, read as the order of choice: an
    expression over __rank (descending: -rank, so the first chosen sorts first either way)."""
    if not ask.by_rank:
        return outputs
    rank: exp.Expression = exp.column(RANK)
    o = outputs[ask.output]
    replaced = Output(name=o.name, kind=OutputKind.EXPR, column=None, hidden=True,
                      expression=exp.Neg(this=rank) if ask.descending else rank)
    return [replaced if i == ask.output else x for i, x in enumerate(outputs)]


def chosen(ask: Ask, utility: Measurement, epsilon: float, against: float) -> TopK:
    """The TopK of an Ask: the k choices within pure ``epsilon`` (its share, plan/allocation.py),
    the temperature the exponential map's calibration gives (a grid rational, so the engine gets it
    exactly); ``against``: the std of the noisy values it replaces. A quantity no unit can move
    (range 0) needs no temperature: 1 keeps it finite."""
    monotone = ORDERABLE[ask.need.kind](ask.need)
    top = TopK(utility=utility, k=ask.k, descending=ask.descending, by_rank=ask.by_rank, monotone=monotone,
               loss=Loss.pure(epsilon), scale=Fraction(1), ties=ask.ties, against=against)
    if top.range == 0:
        return top
    scale = SELECTION.calibrate(Sensitivity(ask.k, top.range), top.loss)
    return dataclasses.replace(top, scale=scale)
