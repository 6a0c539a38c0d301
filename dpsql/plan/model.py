"""The typed, immutable Plan: what each output releases, with what sensitivity, noise and budget.

Noisy quantities are Measurements (each spends a share of epsilon); outputs are keys or
post-processing of measurements (free): the parts, in plan/parts.py. ``plan.build`` makes a Plan;
``lower`` fills its ``rewritten_sql`` with ``dataclasses.replace``; ``str(plan)`` is the explain
text, joined here from the parts' lines (plan/explain.py).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import sqlglot
from sqlglot import exp

from dpsql.mechanisms.losses import APPROXIMATE, ZCDP, compose
from dpsql.mechanisms.releases import Release
from dpsql.frontend.arg_max import Lookup
from dpsql.plan.clipping import ClippingReport
from dpsql.plan.explain import key_description, measurement_lines, output_line
from dpsql.plan.parts import GroupKey, Measurement, Output, Selection, joint_of, partition_bound
from dpsql.plan.top_k import TopK
from dpsql.plan.public import PublicPlan
from dpsql.plan.text import heading
from dpsql.policy.model import TablePolicy


class BudgetNote(Protocol):
    """What a ledger says of a plan's cost before it runs (api/budget_note.py): explain's lines."""

    def lines(self) -> list[str]: ...


@dataclass(frozen=True)
class Plan:
    """Everything a query releases and spends. ``str(plan)`` is the explain text."""
    sql: str
    table: TablePolicy
    where: exp.Expression | None
    group_keys: tuple[GroupKey, ...]
    measurements: tuple[Measurement, ...]
    outputs: tuple[Output, ...]
    having: exp.Expression | None      # over output slots o0, o1, ...
    order: tuple[tuple[str, bool], ...]  # (output slot, descending)
    limit: int | None
    offset: int | None
    epsilon: float
    delta: float
    max_groups_option: int | None = None   # GoogleSQL max_groups_contributed, overriding the policy's L
    selection: Selection | None = None     # for GROUP BY keys that are not public
    confidence: float | None = None        # add <output>_ci_low/_ci_high at this level (post-processing)
    nonnegative: bool = True               # counts (and sums of non-negative values) clamped at 0
    top_k: TopK | None = None              # ORDER BY one aggregate LIMIT k: the groups chosen (plan/top_k.py)
    stages: tuple[Stage, ...] = ()         # scalar subqueries released first (frontend/stages.py); epsilon
                                           # and delta above are then the whole query's, theirs included
    lookup: Lookup | None = None           # a public table's columns read by the released top-1 key
                                           # (frontend/arg_max.py): post-processing of public data
    then: PublicStage | None = None        # this plan is a correlated stage; the query's last stage reads
                                           # public tables and its released values only (answered exactly)
    clipping: ClippingReport | None = None  # the clipping report's measurements (plan/clipping.py)
    rewritten_sql: str = field(default="", compare=False)
    salted: bool = field(default=False, compare=False)   # rewritten_sql reads the run's salt (lower/names.py SALT)
    # rewritten_sql's own tree (lower/rewrite.py), never changed once printed: an engine that runs the
    # query in stages (engines/spark.py) splits and prints it in its own dialect (lower/program.py)
    lowered: exp.Select | None = field(default=None, compare=False, repr=False)
    budget_note: BudgetNote | None = field(default=None, compare=False)   # explain's: the remaining budget

    @property
    def partitions(self) -> int | None:
        """An upper bound on the number of GROUP BY partitions (None: private keys, not known)."""
        return partition_bound(self.group_keys, self.table.joint_keys)

    @property
    def max_groups(self) -> int:
        """L: partitions one unit may reach (never more than there are)."""
        if self.table.row_level:
            return 1
        L = min(self.max_groups_option or self.table.max_groups_per_unit, self.table.max_groups_per_unit)
        if self.max_groups_option and any(k == "groups" for _, k in self.table.auto_contributions):
            L = self.max_groups_option   # an automatic L: chosen for this query (api/auto_contributions.py)
        return L if self.partitions is None else min(L, self.partitions)

    @property
    def max_rows(self) -> int:
        return 1 if self.table.row_level else self.table.max_rows_per_unit

    @property
    def visible_outputs(self) -> tuple[Output, ...]:
        return tuple(o for o in self.outputs if not o.hidden)

    def slot(self, output: Output | int) -> str:
        """The column of an output (its position, or the output itself) in the lowered query: o0, o1, ...
        By position, never by equality: two equal outputs (ORDER BY one expression twice) are two
        columns, and a lookup costs O(1), so planning stays linear in the number of outputs."""
        return f"o{output if isinstance(output, int) else self._positions[id(output)]}"

    def releases(self) -> tuple[Release, ...]:
        """What this plan releases, in each mechanism's own terms (mechanisms/releases.py): one release
        per measurement, with its (L0, Linf) sensitivity, mechanism and scale, and partition
        selection's delta as an (0, delta) guarantee beside the noisy unit count it thresholds (the
        count's own release carries its loss). What the ledger stores and an accountant composes."""
        found = tuple(r for m in self.measurements for r in m.releases)
        if self.selection is not None and self.selection.delta > 0:
            found += (Release.approximate(0, self.selection.delta),)
        if self.top_k is not None:
            found += (self.top_k.release,)
        return tuple(r for s in self.stages for r in s.plan.releases()) + found

    @property
    def own_budget(self) -> tuple[float, float]:
        """(epsilon, delta) of this plan's own measurements: the query's less its earlier stages'."""
        return (self.epsilon - sum(s.plan.epsilon for s in self.stages),
                self.delta - sum(s.plan.delta for s in self.stages))

    @property
    def computed(self) -> tuple[Measurement, ...]:
        """Every quantity whose exact bounded total the lowering computes: the measurements, and a
        top-k's utility where no measurement is (its groups come in the order chosen): never noised,
        never released, read by the choice alone."""
        top = self.top_k
        if top is None or top.utility.name in self._by_name:
            return self.measurements
        return (*self.measurements, top.utility)

    def measurement(self, name: str) -> Measurement:
        return self._by_name[name]

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {id(o): i for i, o in enumerate(self.outputs)}

    @cached_property
    def _by_name(self) -> dict[str, Measurement]:
        return {m.name: m for m in self.measurements}

    def __str__(self) -> str:
        return _explain(self)


@dataclass(frozen=True)
class Stage:
    """A scalar subquery over private data released before the query that uses it (frontend/stages.py):
    its own plan at its share of the query's budget; the query reads its released value as a constant, or,
    correlated (frontend/correlated.py), its released values by key from the table ``values``."""
    plan: Plan
    values: TablePolicy | None = None

    def lines(self, number: int, of: int) -> list[str]:
        used = (f"its released value is a constant of stage {of}" if self.values is None else
                f"its released values, one per key (each with the noise below), are a public lookup table of "
                f"stage {of}, joined on the keys")
        head = (f"stage {number} of {of}: {' '.join(self.plan.sql.split())}: epsilon {self.plan.epsilon:.6g}, "
                f"delta {self.plan.delta:g}; {used}")
        return [head] + _stage_body(self.plan)


@dataclass(frozen=True)
class PublicStage:
    """The last stage of a query whose one stage is correlated and whose rest reads public tables only
    (frontend/stages.py ``public``, TPC-H Q20): the query over public tables and the stage's released values
    (the table ``values``), answered exactly. A function of public data and the release: post-processing,
    epsilon 0, so the query costs its stage, which takes the whole budget."""
    plan: PublicPlan
    values: TablePolicy
    release_sql: str   # the stage's own SQL (explain)
    probe: PublicPlan   # the query over every key stage 1 may release, values NULL: run before the charge

    def lines(self, release: Plan) -> list[str]:
        """Explain's text for the query: both stages, the release's at the whole budget."""
        lines = [heading(release.sql),
                 "stages: 2, charged once: stage 1 is the release (the whole budget); stage 2 reads public tables and "
                 "stage 1's released values only, answered exactly (post-processing: epsilon 0)",
                 f"budget: epsilon {release.epsilon:.6g}, delta {release.delta:g}"]
        lines += release.budget_note.lines() if release.budget_note is not None else []
        inner = dataclasses.replace(release, then=None, sql=self.release_sql, budget_note=None)
        lines += Stage(inner, self.values).lines(1, 2)
        lines.append("stage 2 of 2: the query below over public tables and stage 1's released values, answered "
                     "exactly at epsilon 0; the values are noisy, so the rows it keeps are chosen by noisy thresholds "
                     "(a row near one may be kept or dropped where the exact query would not: stage 1's error above); tried before "
                     "the charge on every key stage 1 may release, each value NULL (an engine error there refuses the "
                     "query free: DP318)")
        return lines + ["  " + line for line in str(self.plan).splitlines()[4:]]


def _stage_body(plan: Plan) -> list[str]:
    """A stage's explain text, indented, without its first line (the head says it)."""
    return ["  " + line for line in str(plan).splitlines()[1:]]


def _stage_lines(plan: Plan) -> list[str]:
    """The earlier stages, then what the last one is, with its share of the budget; the threshold's noise."""
    n = len(plan.stages) + 1
    lines = [f"stages: {n} releases, charged once (sequential composition; the budget split equally)"]
    for i, stage in enumerate(plan.stages):
        lines += stage.lines(i + 1, n)
    epsilon, delta = plan.own_budget
    where = ("(NULL in its text here)" if all(s.values is None for s in plan.stages) else
             "(read by key from the table of released values, joined as a public lookup)")
    lines.append(f"stage {n} of {n}: the query below, each subquery replaced by its stage's released value "
                 f"{where}: epsilon {epsilon:.6g}, delta {delta:g}")
    lines.append("  the value is noisy: the rows this stage keeps are chosen by a noisy threshold, so a row near "
                 "it may be kept or dropped where the exact query would not (the stage's error above)")
    return lines


def _explain(plan: Plan) -> str:
    """The explain text: the table and its bounds, the groups, the measurements and outputs (their
    lines from plan/explain.py), the composition, and the rewritten SQL."""
    if plan.then is not None:
        return "\n".join(plan.then.lines(plan))
    t = plan.table
    unit = "each row is a person" if t.row_level else f"privacy unit {t.privacy_unit}"
    lines = [heading(plan.sql),
             f"table {t.name}: {unit}; L = {plan.max_groups} partition(s) per unit, "
             f"C = {plan.max_rows} row(s) per unit per partition"]
    if t.about:
        lines.append(f"rows: {t.about}")
    lines += _bounds_lines(t) + _contribution_lines(plan)
    if plan.group_keys:
        keys = ", ".join(key_description(k) for k in plan.group_keys)
        joint = joint_of(plan.group_keys, t.joint_keys)
        if joint is not None:
            where = f" where {joint.where}" if joint.where else ""
            keys = (f"({', '.join(joint.columns)}): the {joint.count} combinations the public tables' rows hold"
                    f"{where} (read from public data, not every combination of the columns' keys)")
        if plan.selection is None:
            released = "every one released" if plan.top_k is None else f"the {plan.top_k.k} chosen released"
            lines.append(f"groups: {keys}: <= {plan.partitions} partition(s), {released}")
        else:
            s = plan.selection
            lines.append(f"groups: {keys}")
            lines.append(f"partition selection: a group is released iff its noisy unit count {s.measurement} >= "
                         f"tau = {s.threshold} (epsilon_sel: {s.loss}; delta {s.delta:g}: a group held by "
                         f"one unit appears with probability <= delta / L)")
    lines.append(f"budget: epsilon {plan.epsilon:.6g}, delta {plan.delta:g}")
    lines += plan.budget_note.lines() if plan.budget_note is not None else []
    lines += _stage_lines(plan) if plan.stages else []
    lines.append("measurements:")
    for m in plan.measurements:
        lines += measurement_lines(m)
    if plan.top_k is not None:
        lines += plan.top_k.lines(plan.selection is not None, plan.partitions)
    lines += plan.clipping.lines(plan.own_budget[0]) if plan.clipping is not None else []
    lines.append("outputs (post-processing, no extra budget):")
    lines += [output_line(o, plan.group_keys, plan.measurement) for o in plan.outputs]
    n = len(plan.measurements)
    lines.append("composition:")
    if n or plan.top_k is None:
        lines.append(f"  sequential over {n} measurement(s): " + " + ".join(str(m.loss) for m in plan.measurements)
                     + _composed(plan))
    if plan.top_k is not None:
        lines.append(f"  {'+ ' if n else ''}the top-k choice: {plan.top_k.loss} (pure), k peels composed")
    if plan.stages:
        lines.append("  + the earlier stages: " + " + ".join(f"epsilon {s.plan.epsilon:.6g}" for s in plan.stages)
                     + f"; the query: epsilon {plan.epsilon:.6g}, delta {plan.delta:g}")
    if plan.group_keys:
        count = plan.partitions if plan.partitions is not None else "the selected"
        lines.append(f"  parallel over {count} partition(s), each unit in <= {plan.max_groups}: "
                     f"charged once (sensitivity carries the factor L = {plan.max_groups})")
    if plan.selection is not None:
        lines.append(f"  delta {plan.selection.delta:g} spent by partition selection")
    if plan.having is not None or plan.order or plan.limit is not None:
        lines.append("  HAVING / ORDER BY / LIMIT run on released values only")
    if plan.lookup is not None:
        lines.append("  " + plan.lookup.line())
    if plan.rewritten_sql:
        lines.append("rewritten SQL:")
        pretty = sqlglot.transpile(plan.rewritten_sql, read="duckdb", write="duckdb", pretty=True)[0]
        lines += ["  " + line for line in pretty.splitlines()]
    return "\n".join(lines)


def _contribution_lines(plan: Plan) -> list[str]:
    """Contribution bounds chosen for this query (``max_rows_per_unit: auto``, ``max_groups_per_unit: auto``)."""
    t = plan.table
    chosen = [f"C = {plan.max_rows} (max_rows_per_unit: auto)"] if t.auto_chosen else []
    if plan.max_groups_option and any(k == "groups" for _, k in t.auto_contributions):
        chosen.append(f"L = {plan.max_groups} (max_groups_per_unit: auto, unless the query's OPTIONS give "
                      "max_groups_contributed)")
    return ["automatic contribution bounds: " + "; ".join(chosen) + ", chosen for this query's tables and groups "
            "by a DP histogram of people by their rows and groups (paid once per data version)"] if chosen else []


def _bounds_lines(t) -> list[str]:
    """Bounds that are not the policy's own: chosen by a DP histogram (``bounds: auto``), or read from
    a joined public table's data (frontend/public_bounds.py)."""
    lines = []
    automatic = [c for c in t.columns.values() if c.auto and c.bounded]
    if automatic:
        lines.append("automatic bounds (bounds: auto; chosen by a DP histogram, paid once per data version): "
                     + ", ".join(f"{c.name} [{c.lower:g}, {c.upper:g}]" for c in automatic))
    read = [c for c in t.columns.values() if c.bounds_read]
    if read:
        lines.append("bounds read from public tables (public data, free): " + ", ".join(
            f"{c.name}: bounds [{c.lower:.15g}, {c.upper:.15g}] read from the public table {c.public_source[0]}"
            for c in read))
    return lines


def _composed(plan: Plan) -> str:
    """What the measurements' losses compose to within the query (mechanisms/losses.py compose), at
    the delta the noise was given (the query's, less partition selection's)."""
    noise_delta = plan.own_budget[1] - (plan.selection.delta if plan.selection is not None else 0.0)
    if any(m.loss.measure == ZCDP for m in plan.measurements):   # a quantile rule's delta is its own
        noise_delta -= sum(float(m.loss.delta) for m in plan.measurements if m.loss.measure == APPROXIMATE)
    epsilon, delta = compose([m.loss for m in plan.measurements], noise_delta)
    return f" = epsilon {epsilon:.6g}" + (f", delta {delta:g}" if delta else "")
