"""One specification per measured quantity (what a Measurement adds noise to), in one table: its
label, its sensitivity (each bound proven in plan/sensitivity.py), its explain lines, and its SQL at
every stage the lowering assembles: how a row reads its argument, the value a row contributes, a
unit's bounded contribution to one partition, the exact per-partition total, and which stage bounds
it. Planning and lowering look a quantity up here (``QUANTITIES``) instead of comparing kinds;
docs/architecture.md says how to add one.

>>> g, s = QUANTITIES[Quantity.COUNT].calibrate(Need(Quantity.COUNT, None), 2, 3, None); g, s.partitions, s.l1
(1.0, 2, Fraction(6, 1))
>>> QUANTITIES[Quantity.SUM].stage.value, QUANTITIES[Quantity.QUANTILE].stage.value
('state', 'tree')
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

from sqlglot import exp

from dpsql.errors import InternalError
from dpsql.sql.build import case_when, col, num
from dpsql.plan.exact import Columns, Reading, capped, declared_key, leaf_index, summed_row, unit_sum, with_value
from dpsql.plan.kinds import Bounding, Quantity
from dpsql.plan.cuts import own_cut, rows_cut, sum_cut, sum_range, values_cut, values_range
from dpsql.mechanisms.quantile_ranks import fraction_of
from dpsql.mechanisms.quantile_rules import BY_NAME, rule
from dpsql.mechanisms.releases import Sensitivity
from dpsql.plan.sensitivity import (TREE_BRANCHING, TREE_DEPTH, TREE_LEAVES, clipped_sensitivity, count_sensitivity,
                                    distinct_sensitivity, granularity, grid_bound, histogram_sensitivity, quantile_tree_sensitivity,
                                    sum_sensitivity, unit_total_sensitivity)
from dpsql.plan.text import fmt


@dataclass(frozen=True)
class Need:
    """A noisy quantity an output needs, before it gets a name and a share of epsilon."""
    kind: Quantity
    column: str | None                      # label: the argument's SQL
    lower: float | None = None
    upper: float | None = None
    bounding: Bounding = Bounding.ROWS
    row_lower: float | None = None
    row_upper: float | None = None
    argument: exp.Expression | None = None  # what is counted or summed, per row
    offset: float | None = None             # sum (x - offset) ** moment instead of x
    moment: int = 1
    quantile: float | None = None           # a quantile rule's q
    rule: str | None = None                 # ... and the rule's option (mechanisms/quantile_rules.py)


class Stage(Enum):
    """Where a unit's contribution to one partition is bounded at user level: which stage lowers it."""
    STATE = "state"        # a fixed-size state per (unit, partition) in __units, summed in __agg (bounding.py)
    DISTINCT = "distinct"  # a unit's C smallest distinct values in the partitions it keeps (distinct.py)
    TREE = "tree"          # a unit's C values counted per leaf, noised node by node (quantile.py)
    HISTOGRAM = "histogram"   # the same leaves, one rule's answer per group from their list (histogram.py)


@dataclass(frozen=True)
class QuantitySpec:
    """What one kind of measurement is, for planning and lowering alike. ``m`` below is a Measurement
    (or, for ``calibrate``, the Need it is made from); SQL builders get the columns lowering names."""
    kind: Quantity
    label: Callable[[Any], str]                                   # how explain and the ledger name it
    calibrate: Callable[[Need, int, int, Any], tuple[float, Sensitivity]]   # (grid step, (L0, Linf) in steps) from L, C, table
    exact: Callable[[Any, Columns], exp.Expression] | None        # its per-partition total at row level (__agg)
    unit: Callable[[Any, int, Columns], exp.Expression] | None = None   # a unit's contribution, bounded (__units)
    stage: Stage = Stage.STATE
    argument: bool = False     # its argument is evaluated once per row into c_<label>, shared by that label's
    numeric: bool = False      # ... measurements: as DOUBLE, columns clamped (numeric), else as written
    row: Callable[[Any, Columns, bool], exp.Expression] | None = None   # v_<m> from c_<label> (bool: row level)
    read: Callable[[Any, Reading], exp.Expression] | None = None        # v_<m> read from the row itself
    details: Callable[[Any], list[str]] = lambda m: []             # explain lines before its sensitivity
    noised: str | Callable[[Any], str] = "answers"                  # what its noise is added to (explain)
    # The clipping report (plan/clipping.py, plan/cuts.py): whether bounding cut a unit's contribution to
    # one partition (an aggregate over its rows there), and the range each row's argument is clamped into.
    cut: Callable[[Any, int, Columns], exp.Expression] | None = None
    clamped: Callable[[Any], tuple[float, float] | None] | None = None


def _counted(need: Need, L: int, C: int, table) -> tuple[float, Sensitivity]:
    """Rows counted: L*C (sensitivity.count_sensitivity); with per-group bounds (GoogleSQL) each unit's
    count in a partition is clamped into them: L*B (unit_total_sensitivity)."""
    if need.bounding == Bounding.UNIT_TOTAL:
        return 1.0, unit_total_sensitivity(L, grid_bound(need.lower, need.upper, 1.0))
    return 1.0, count_sensitivity(L, C)


def _units(need: Need, L: int, C: int, table) -> tuple[float, Sensitivity]:
    return 1.0, count_sensitivity(L, 1)   # one unit counts once in each of <= L partitions


def _summed(need: Need, L: int, C: int, table) -> tuple[float, Sensitivity]:
    g = granularity(need.lower, need.upper)
    bound = grid_bound(need.lower, need.upper, g)
    return g, sum_sensitivity(L, C, bound) if need.bounding == Bounding.ROWS else unit_total_sensitivity(L, bound)


def _clipped(need: Need, L: int, C: int, table) -> tuple[float, Sensitivity]:
    return 1.0, clipped_sensitivity(L)   # one person's 0/1 flag in each of <= L partitions


def _of_the_plan(m, *args) -> exp.Expression:
    """The clipping flag reads the plan's other measurements: lower/clipping.py builds it from the plan."""
    raise InternalError("DP999", "the clipping report's SQL is built from the plan (lower/clipping.py): this is "
                        "probably a bug")


def _distinct(need: Need, L: int, C: int, table) -> tuple[float, Sensitivity]:
    keys = table.columns[need.column].keys
    return 1.0, distinct_sensitivity(L, C, None if keys is None else len(keys))


def _tree(need: Need, L: int, C: int, table) -> tuple[float, Sensitivity]:
    return 1.0, quantile_tree_sensitivity(L, C)


def _histogram(need: Need, L: int, C: int, table) -> tuple[float, Sensitivity]:
    """The histogram's (L, C) (sensitivity.histogram_sensitivity), as its rule's release states it."""
    return 1.0, rule(need.rule).sensitivity(histogram_sensitivity(L, C), *fraction_of(need.quantile))


def _histogram_label(m) -> str:
    return f"QUANTILE {m.quantile:g} ({m.mechanism}) OF {m.column}"


def _histogram_details(m) -> list[str]:
    width = (m.upper - m.lower) / TREE_LEAVES
    return [f"      clamp to [{fmt(m.lower)}, {fmt(m.upper)}]; {TREE_LEAVES} cells of width {fmt(width)}; each "
            "group's exact histogram (C values per unit and partition), answered inside the engine:",
            f"      {rule_of(m).about}"]


def rule_of(m):
    """The quantile rule that measures ``m`` (by its name)."""
    return BY_NAME[m.mechanism]


def _sum_label(m) -> str:
    if m.bounding == Bounding.UNIT_MEAN:
        return f"SUM(per-unit AVG({m.column}))"
    if m.offset is not None:
        centred = f"{m.column} - {m.offset:g}"
        return f"SUM({centred})" if m.moment == 1 else f"SUM(({centred})^{m.moment})"
    return f"SUM({m.column})"


def _sum_details(m) -> list[str]:
    return [f"      clamp to [{fmt(m.lower)}, {fmt(m.upper)}], exact sum on a grid of step {fmt(m.granularity)}"]


def _tree_details(m) -> list[str]:
    width = (m.upper - m.lower) / TREE_LEAVES
    return [f"      clamp to [{fmt(m.lower)}, {fmt(m.upper)}]; tree of branching {TREE_BRANCHING}, depth "
            f"{TREE_DEPTH} ({TREE_LEAVES} leaves of width {fmt(width)}); noisy counts of the children "
            "of visited nodes only"]


def _rows(m, c: Columns) -> exp.Expression:
    return exp.Count(this=exp.Star())


def _values(m, c: Columns) -> exp.Expression:
    return exp.Count(this=col(c.raw))


def _own(m, c: Columns) -> exp.Expression:
    return exp.Count(this=col(c.value))


QUANTITIES: dict[Quantity, QuantitySpec] = {q.kind: q for q in (
    QuantitySpec(Quantity.COUNT, lambda m: "COUNT(*)", _counted, exact=_rows,
                 unit=lambda m, C, c: capped(m, C, _rows(m, c)), cut=rows_cut),
    QuantitySpec(Quantity.COUNT_COL, lambda m: f"COUNT({m.column})", _counted, exact=_values,
                 unit=lambda m, C, c: capped(m, C, _values(m, c)), argument=True, cut=values_cut),
    QuantitySpec(Quantity.SUM, _sum_label, _summed, exact=lambda m, c: exp.Sum(this=col(c.value)), unit=unit_sum,
                 argument=True, numeric=True, row=summed_row, details=_sum_details, cut=sum_cut, clamped=sum_range),
    # AVG's denominator with per-group bounds; at row level (never planned: per-group bounds need
    # units) each row is a unit, so its units with a value are its rows with one.
    QuantitySpec(Quantity.COUNT_UNITS, lambda m: f"COUNT(units with {m.column})", _units, exact=_values,
                 unit=with_value, argument=True),
    # COUNT(DISTINCT unit), and partition selection's count: a row of __units is one (unit, partition).
    QuantitySpec(Quantity.UNITS, lambda m: "COUNT(DISTINCT unit)", _units, exact=_rows, unit=lambda m, C, c: num(1)),
    QuantitySpec(Quantity.DISTINCT, lambda m: f"COUNT(DISTINCT {m.column})", _distinct,
                 exact=lambda m, c: exp.Count(this=exp.Distinct(expressions=[col(c.value)])),
                 stage=Stage.DISTINCT, read=declared_key),
    # COUNT_IF(cond): a row counts where its condition, guarded as a WHERE is, holds; capped at C rows per
    # unit and partition as any count, so L*C (sensitivity.count_sensitivity).
    QuantitySpec(Quantity.COUNT_IF, lambda m: f"COUNT_IF({m.column})", _counted, exact=_own,
                 unit=lambda m, C, c: capped(m, C, _own(m, c)), cut=own_cut,
                 read=lambda m, r: case_when(r.condition(m.argument), num(1), exp.Null())),
    QuantitySpec(Quantity.QUANTILE, lambda m: f"QUANTILE TREE({m.column})", _tree, exact=None, stage=Stage.TREE,
                 argument=True, numeric=True, row=lambda m, c, row_level: leaf_index(col(c.raw), m),
                 details=_tree_details, noised="node counts", cut=values_cut, clamped=values_range),
    # MEDIAN(x, mechanism => 'exponential'), MIN, MAX, ...: a rule's answer per group from the same leaves.
    QuantitySpec(Quantity.HISTOGRAM, _histogram_label, _histogram, exact=None, stage=Stage.HISTOGRAM,
                 argument=True, numeric=True, row=lambda m, c, row_level: leaf_index(col(c.raw), m),
                 details=_histogram_details, noised=lambda m: rule_of(m).noised, cut=values_cut,
                 clamped=values_range),
    # The clipping report: a person's 0/1 flag per kept partition, that bounding cut their rows or values
    # there (lower/clipping.py builds it from the other quantities' ``cut`` and ``clamped``); L, 1.
    QuantitySpec(Quantity.CLIPPED, lambda m: "COUNT(people whose rows or values bounding cut)", _clipped,
                 exact=_of_the_plan, unit=_of_the_plan, noised="counts"),
)}
