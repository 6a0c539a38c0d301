"""Warnings that go with an answer: noise that dwarfs it, and groups that partition selection withheld.

Each is computed from the plan (public: the policy and the query) and from the released rows (already
public), never from the data, so a warning costs no budget and tells nothing new about anyone.

The rules: (1) from the plan: a measurement's 95% noise exceeds the most 10^10 units (more people
than live on Earth) could add to it, each at most its sensitivity, so no table answers above the
noise; (2) from the release: every value of a count or sum lies within its 95% noise of 0; (3) an
AVG's or a variance's interval covers its whole bounds in every row; (4) partition selection: only
its rule when the candidate groups come from the data (their number is private), the number withheld
when they come from the policy (candidates minus released rows is then public); (5) a quantile that
propose-test-release left without an answer (NULL, a released value) in some rows; (6) a ratio of
released values left NULL by the ratio rule (plan/outputs.py ``ratios``) in some rows; (7) rows chosen
by released values (ORDER BY ... LIMIT/OFFSET, HAVING) whose spread the noise exceeds: the half-width
within which every candidate's noise lies at 95% (a union bound over the candidate groups: the policy's
number of partitions, or the released rows under partition selection) is larger than the spread of the
chosen values (max - min, against twice that half-width: noise alone spreads values that far; one row:
its distance from 0, against the half-width), so noise alone could have chosen and ordered them; (8) most, but not all, released rows of a count or sum lie within their 95% noise of 0 (all: rule 2);
(9) with the clipping report (plan/clipping.py, a release paid for by the query), some group's share of
people whose contribution bounding cut is material: the lower end of its interval (api/clipping.py) is
above MATERIAL.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from dpsql.api.display import CLIPPING_FIELDS
from dpsql.plan.aggregates import AGGREGATES, released_directly
from dpsql.plan.kinds import OutputKind, Quantity
from dpsql.plan.outputs import half_width, has_ratio
from dpsql.plan.text import CONFIDENCE

if TYPE_CHECKING:
    from dpsql.plan.model import Plan
    from dpsql.plan.parts import Output

# More people than live on Earth: no exact answer can exceed what this many units contribute at
# most (each moves a measurement by at most its sensitivity), whatever the table holds.
PLAUSIBLE_UNITS = 10 ** 10
_LEVEL = f"{int(CONFIDENCE * 100)}%"


def plan_warnings(plan: Plan) -> list[str]:
    """What the plan alone tells (explain shows it before anything is spent)."""
    out = []
    swamped = _swamped(plan)
    if swamped:
        named = ", ".join(f"{o.name} (+-{error:.3g})" for o, error in swamped)
        out.append(f"epsilon {plan.epsilon:g} is so small that the noise dwarfs any plausible answer: the "
                   f"{_LEVEL} noise of {named} exceeds what 10^10 people (more than live on Earth) could "
                   "contribute at most; these answers are noise")
    if plan.selection is not None and not _countable(plan):
        # The candidate groups come from the data: how many there were, and so how many were dropped,
        # is private. Only the rule is public.
        out.append(f"groups with few people are suppressed: DP partition selection releases a group only if its "
                   f"noisy count of people reaches {plan.selection.threshold}; how many were withheld is not "
                   "released")
    return out


# Rule 9: a share of a group's people cut by bounding that changes an answer materially.
MATERIAL = 0.05


def clipping_warning(report: pa.Table | None) -> list[str]:
    """Rule 9: groups whose released share of people cut by bounding is, at its interval's lower end,
    above MATERIAL (the clipping report's release: post-processing, free)."""
    if report is None or report.num_rows == 0:
        return []
    lows = report.column("fraction_ci_low").to_pylist()
    material = [i for i, low in enumerate(lows) if low is not None and low > MATERIAL]
    if not material:
        return []
    worst = max(material, key=lambda i: lows[i])
    keys = [c for c in report.column_names if c not in CLIPPING_FIELDS]
    where = ", ".join(f"{k} = {report.column(k)[worst].as_py()!r}" for k in keys)
    return [f"bounding changed the answer materially: in {len(material)} of {report.num_rows} group(s) at least "
            f"{MATERIAL:.0%} of the people had rows cut or values clamped (the lower end of the clipping report's "
            f"{_LEVEL} interval; {lows[worst]:.0%} at least" + (f" where {where}" if where else "") + "); the "
            "intervals cover the noise around the bounded values, not this bias; raising max_rows_per_unit, "
            "max_groups_per_unit (OPTIONS(max_groups_contributed)) or the columns' bounds cuts fewer (and adds "
            "noise); result.clipping has every group's share"]


def result_warnings(plan: Plan, table: pa.Table, clipping: pa.Table | None = None) -> list[str]:
    """What the plan and the released rows tell together, and the clipping report if released
    (post-processing: free)."""
    out = plan_warnings(plan) + clipping_warning(clipping)
    if plan.then is not None:   # the rows are the public last stage's, not the release's (plan/model.py PublicStage)
        return out
    swamped = {o.name for o, _ in _swamped(plan)}
    visible = [o for o in plan.visible_outputs if o.name not in swamped and o.name in table.column_names]
    noisy = [f"{o.name} (+-{plan.measurement(o.measurements[0]).error:.3g})" for o in visible
             if released_directly(o) and _within_noise(plan, o, table)]
    if noisy:
        out.append(f"the {_LEVEL} noise of {', '.join(noisy)} is at least as large as every value released: "
                   "these answers cannot be told from 0; a larger epsilon (or coarser groups) gives clearer ones")
    whole = [o.name for o in visible if _clamped(o) and _interval_is_bounds(o, table)]
    if whole:
        out.append(f"the confidence interval of {', '.join(whole)} covers the whole of its bounds in every row: "
                   "the noise dominates; a larger epsilon (or coarser groups) gives clearer answers")
    out += _noisy_choices(plan, table) + _mostly_empty(plan, table, swamped)
    unanswered = _unanswered(plan, table)
    if unanswered:
        out.append(f"no answer (NULL) for {unanswered}: {NO_ANSWER}")
    nulled = _nulled_ratios(plan, table)
    if nulled:
        out.append(f"no answer (NULL) for {nulled}: {NULL_RATIO}")
    dropped = _dropped(plan, table)
    if dropped:
        out.append(f"DP partition selection withheld {dropped} of {plan.partitions} possible groups: too few "
                   f"people (a noisy count below {plan.selection.threshold})")
    return out


# Only propose-test-release answers NULL (mechanisms/stable_quantile.py): its released refusal.
NO_ANSWER = ("its propose-test-release test failed: too few values lie near the quantile for its proposal, so "
             "releasing it could reveal a person; the NULL is the answer, paid for and private")


# The ratio rule (plan/outputs.py ratios; grammar/README.md, "Ratios of released values").
NULL_RATIO = ("a ratio of released values is NULL where its divisor's released value is 0, or <= 0 for a count or a "
              "sum of values >= 0 (noise alone took it there): never NaN or infinite; a larger epsilon (or coarser "
              "groups) gives fewer")


def _noisy_choices(plan: Plan, table: pa.Table) -> list[str]:
    """Rule 7: an output whose released values choose the rows, where the noise exceeds their spread."""
    out = []
    for clause, o in _choosing(plan):
        values = [v for v in table.column(o.name).to_pylist() if v is not None] if o.name in table.column_names else []
        if not values or not released_directly(o):
            continue
        candidates = plan.partitions or table.num_rows
        reach = half_width(plan.measurement(o.measurements[0]), 1 - (1 - CONFIDENCE) / max(candidates, 1))
        # Noise alone spreads the candidates' values over up to 2 * reach (one up, one down); one row: reach from 0.
        spread, alone = (max(values) - min(values), 2 * reach) if len(values) > 1 else (abs(values[0]), reach)
        if alone > spread:
            out.append(f"{clause} chooses rows by {o.name}, whose noise exceeds the spread of its values: they span "
                       f"{spread:.3g}, while the noise of {candidates} candidate group(s) reaches +-{reach:.3g} "
                       f"({_LEVEL} for all of them); which rows were kept, and their order, may be the noise's; a "
                       "larger epsilon (or fewer groups) gives a clearer choice")
    return out


def _choosing(plan: Plan) -> list[tuple[str, Output]]:
    """(clause, output) for each output whose released values choose rows: ORDER BY's first term under a
    LIMIT or OFFSET, and every output HAVING reads."""
    found = []
    if (plan.limit is not None or plan.offset is not None) and plan.order:
        found.append(("ORDER BY ... LIMIT", plan.order[0][0]))
    if plan.having is not None:
        found += [("HAVING", c.name) for c in plan.having.find_all(exp.Column)]
    chosen: dict[int, tuple[str, Output]] = {}
    for clause, slot in found:
        if _SLOT.fullmatch(slot) and int(slot[1:]) < len(plan.outputs):
            chosen.setdefault(int(slot[1:]), (clause, plan.outputs[int(slot[1:])]))
    return list(chosen.values())


_SLOT = re.compile(r"o\d+")


def _mostly_empty(plan: Plan, table: pa.Table, swamped: set[str]) -> list[str]:
    """Rule 8: a count or sum within its noise of 0 in most released rows, but not all (rule 2)."""
    found = []
    for o in plan.visible_outputs:
        if o.name in swamped or o.name not in table.column_names or not released_directly(o):
            continue
        error = plan.measurement(o.measurements[0]).error
        values = [v for v in table.column(o.name).to_pylist() if v is not None]
        near = sum(abs(v) <= error for v in values)
        if 2 * near > len(values) and near < len(values):
            found.append(f"{o.name} in {near} of {len(values)} rows (+-{error:.3g})")
    if not found:
        return []
    return [f"most released groups cannot be told from empty: {', '.join(found)} lie within their {_LEVEL} noise "
            "of 0; the groups that hold data may be far fewer; a larger epsilon (or fewer groups) gives clearer answers"]


def _nulled_ratios(plan: Plan, table: pa.Table) -> str:
    """Outputs that divide released values, and in how many rows they are NULL (released values)."""
    found = []
    for o in plan.visible_outputs:
        if o.kind == OutputKind.EXPR and has_ratio(o.expression) and o.name in table.column_names:
            nulls = table.column(o.name).null_count
            if nulls:
                found.append(f"{o.name} in {nulls} of {table.num_rows} row(s)")
    return ", ".join(found)


def _unanswered(plan: Plan, table: pa.Table) -> str:
    """Quantile outputs that a quantile rule left NULL in some rows, and in how many (released values)."""
    found = []
    for o in plan.visible_outputs:
        histogram = [m for m in o.measurements if plan.measurement(m).kind == Quantity.HISTOGRAM]
        if histogram and o.name in table.column_names:
            nulls = table.column(o.name).null_count
            if nulls:
                found.append(f"{o.name} in {nulls} of {table.num_rows} row(s)")
    return ", ".join(found)


def _swamped(plan: Plan) -> list[tuple[Output, float]]:
    """Outputs whose noise exceeds the largest total PLAUSIBLE_UNITS units could make."""
    found = []
    for o in plan.visible_outputs:
        errors = [plan.measurement(name).error for name in o.measurements
                  if plan.measurement(name).error > PLAUSIBLE_UNITS * float(plan.measurement(name).sensitivity.l1)
                  * plan.measurement(name).granularity]
        if errors:
            found.append((o, max(errors)))
    return found


def _clamped(o: Output) -> bool:
    """Clamped into its bounds whatever the noise (AVG, variances): only its interval shows the noise."""
    spec = AGGREGATES.get(o.kind)
    return spec is not None and spec.clamped


def _within_noise(plan: Plan, o: Output, table: pa.Table) -> bool:
    error = plan.measurement(o.measurements[0]).error
    values = [v for v in table.column(o.name).to_pylist() if v is not None]
    return bool(values) and all(abs(v) <= error for v in values)


def _interval_is_bounds(o: Output, table: pa.Table) -> bool:
    low, high = f"{o.name}_ci_low", f"{o.name}_ci_high"
    if low not in table.column_names or high not in table.column_names or o.lower is None:
        return False
    pairs = list(zip(table.column(low).to_pylist(), table.column(high).to_pylist()))
    return bool(pairs) and all(lo is not None and hi is not None and lo <= o.lower and hi >= o.upper
                               for lo, hi in pairs)


def _dropped(plan: Plan, table: pa.Table) -> int:
    """Candidate groups minus released ones, when the candidates are public (a domain from the policy):
    then the count is a function of public facts and of the release. HAVING and LIMIT also remove
    rows (on released values), so then no count is given."""
    return max(plan.partitions - table.num_rows, 0) if _countable(plan) else 0


def _countable(plan: Plan) -> bool:
    return (plan.selection is not None and plan.partitions is not None and plan.having is None
            and plan.limit is None and plan.offset is None)
