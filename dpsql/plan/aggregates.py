"""One specification per aggregate, in one table: the sqlglot node(s) it is written as and which of
their forms it is, DuckDB's default output name, the noisy quantities behind it (plan/quantities.py:
AVG as a centred sum and a count, VAR/STDDEV as three, ...), its explain line, the SQL of its output
and of its confidence interval over the released values (plan/outputs.py), and whether it is
released as its one measurement. Planning, lowering, warnings and the server look an aggregate up
here (``AGGREGATES``) instead of comparing kinds.

How an aggregate is written and what its argument may be is the frontend's, which sits below the
plan: its row of ``frontend/scope.py`` ``FORMS`` (tests/plan/test_specs.py checks both tables name the
same nodes). docs/architecture.md says how to add an aggregate.

>>> [k.value for k, s in AGGREGATES.items() if s.direct]
['units', 'distinct', 'count', 'count_col', 'count_if', 'sum']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from sqlglot import exp
from dpsql.errors import InternalError
from dpsql.frontend.scope import FORMS, name_of, unqualified
from dpsql.mechanisms.quantile_rules import DEFAULT_EXTREMES, TREE
from dpsql.plan.kinds import Bounding, OutputKind, Quantity
from dpsql.plan.parts import Measurement, Output
from dpsql.plan.outputs import (Released, avg_interval, avg_value, count_interval, count_value, quantile_value,
                                sum_interval, sum_value, variance)
from dpsql.plan.quantities import Need
from dpsql.plan.text import CONFIDENCE, fmt


@dataclass(frozen=True)
class Sharing:
    """What planning knows when it picks an output's measurements, so that one aggregate may reuse
    a measurement another makes anyway (identical Needs are shared in any case)."""
    selecting: bool = False              # DP partition selection measures the unit count
    row_level: bool = False              # each row is a unit
    planned: frozenset[Need] = frozenset()   # every output's own needs


@dataclass(frozen=True)
class AggregateSpec:
    """What one aggregate is, for planning, lowering and what reads a plan. ``o`` is its Output."""
    kind: OutputKind
    nodes: tuple[type[exp.Expression], ...]     # the sqlglot nodes it is written as
    matches: Callable[[exp.Expression, Any], tuple[str | None, exp.Expression | None] | None]   # (label,
    # argument) if a node is written as this aggregate (COUNT(*), COUNT(DISTINCT x), ...), else None
    name: Callable[[exp.Expression, str | None, float | None], str]   # DuckDB's default output name
    needs: Callable[[Any, Sharing], list[Need]]                      # the noisy quantities behind it
    explain: Callable[[Callable[[str], Any], Any, str], str]         # (the plan's measurements by name, o, note)
    output: Callable[[Any, Released], exp.Expression]                # its value over their released values
    interval: Callable[[Any, Released], tuple[exp.Expression, exp.Expression]] | None = None   # (low, high) at ci
    quantile: bool = False   # takes q in [0, 1] (frontend/scope.py quantile_of)
    direct: bool = False     # released as its one measurement: that one's noise is its error bar
    clamped: bool = False    # released clamped into its bounds: only its interval shows how noisy it is
    counts: bool = False     # its exact value is never negative, whatever its argument (a count, a variance)


def centre(o: Output) -> tuple[float, float]:
    """Midpoint and half-width of the bounds: AVG and variances are computed from centred values,
    whose sums need noise for (hi - lo) / 2 instead of max(|lo|, |hi|)."""
    return (o.lower + o.upper) / 2, (o.upper - o.lower) / 2


# --- which form of a node an aggregate is, read as (label, argument): None if not its form --------
def _argument(agg: exp.Expression, table) -> tuple[str | None, exp.Expression | None]:
    """The argument unqualified, labelled by its SQL (a column by its name)."""
    argument = unqualified(agg.this)
    return (argument.name.lower() if isinstance(argument, exp.Column) else argument.sql(dialect="duckdb")), argument


def _star(agg: exp.Expression, table) -> tuple[None, None] | None:
    return (None, None) if isinstance(agg.this, exp.Star) else None


def _distinct(agg: exp.Expression, table) -> tuple[str, exp.Expression] | None:
    if not isinstance(agg.this, exp.Distinct):
        return None
    column = unqualified(agg.this.expressions[0])
    return name_of(column), column


def _units(agg: exp.Expression, table) -> tuple[str, None] | None:
    found = _distinct(agg, table)
    return (found[0], None) if found is not None and found[0] == table.privacy_unit else None


# --- the noisy quantities behind each ------------------------------------------------------------
def _count(o: Output, s: Sharing) -> list[Need]:
    if o.per_group is None and s.selecting and s.row_level:
        # At row level COUNT(*) is the unit count partition selection measures anyway: release
        # that one noisy count (as GoogleSQL and SmartNoise do) instead of splitting epsilon
        # for a second. Counts of groups just above the threshold then lean high.
        return [Need(Quantity.UNITS, None)]
    if o.per_group is None:
        return [Need(Quantity.COUNT, None)]
    return [Need(Quantity.COUNT, None, *o.per_group, Bounding.UNIT_TOTAL)]


def _count_column(o: Output, s: Sharing) -> list[Need]:
    if o.per_group is None:
        return [Need(Quantity.COUNT_COL, o.column, argument=o.argument)]
    return [Need(Quantity.COUNT_COL, o.column, *o.per_group, Bounding.UNIT_TOTAL, argument=o.argument)]


def _sum(o: Output, s: Sharing) -> list[Need]:
    if o.per_group is None:
        return [Need(Quantity.SUM, o.column, *(o.per_row or (o.lower, o.upper)), argument=o.argument)]
    return [Need(Quantity.SUM, o.column, *o.per_group, Bounding.UNIT_TOTAL, *(o.per_row or (None, None)),
                 argument=o.argument)]


def _avg(o: Output, s: Sharing) -> list[Need]:
    arg, label = o.argument, o.column
    if o.per_group is not None:
        return [Need(Quantity.SUM, label, *o.per_group, Bounding.UNIT_MEAN, *(o.per_row or (None, None)), argument=arg),
                Need(Quantity.COUNT_UNITS, label, argument=arg)]
    plain = Need(Quantity.SUM, label, *(o.per_row or (o.lower, o.upper)), argument=arg)
    if plain in s.planned:
        # An AVG beside a plain SUM of the same values reuses it: with that sum released anyway,
        # centring gains nothing (m + (S - m*n)/n = S/n) and a second sum would split epsilon further.
        return [plain, Need(Quantity.COUNT_COL, label, argument=arg)]
    # AVG = m + sum(x - m) / n: the centred sum has sensitivity r = (hi - lo) / 2 instead of
    # max(|lo|, |hi|), and the count's noise moves the answer by |avg - m| <= r, not |avg|.
    m, r = centre(o)
    return [Need(Quantity.SUM, label, -r, r, argument=arg, offset=m), Need(Quantity.COUNT_COL, label, argument=arg)]


def _moments(o: Output, s: Sharing) -> list[Need]:
    """VAR/STDDEV, population or sample: from a count and centred first and second moments."""
    m, r = centre(o)
    return [Need(Quantity.COUNT_COL, o.column, argument=o.argument),
            Need(Quantity.SUM, o.column, -r, r, argument=o.argument, offset=m),
            Need(Quantity.SUM, o.column, 0.0, r * r, argument=o.argument, offset=m, moment=2)]


def _quantile(default: str) -> Callable[[Output, Sharing], list[Need]]:
    """A quantile's measurement: the tree (one per argument and bounds: several quantiles of it descend
    the same noisy tree), or a quantile rule's answer per group (one per q: mechanisms/quantile_rules.py)."""
    def needs(o: Output, s: Sharing) -> list[Need]:
        option = o.mechanism or default
        bounds = o.per_row or (o.lower, o.upper)
        if option == TREE:
            return [Need(Quantity.QUANTILE, o.column, *bounds, argument=o.argument)]
        return [Need(Quantity.HISTOGRAM, o.column, *bounds, argument=o.argument, quantile=o.quantile, rule=option)]
    return needs


# --- explain lines ---------------------------------------------------------------------------------
def _one(measurement: Callable[[str], Measurement], o: Output, hidden: str) -> str:
    error = measurement(o.measurements[0]).error
    return f"{o.measurements[0]}{hidden}   ({int(CONFIDENCE * 100)}%: within +-{fmt(error)})"


def _mean(measurement: Callable[[str], Measurement], o: Output, hidden: str) -> str:
    ms = o.measurements
    offset = measurement(ms[0]).offset
    start = f"{fmt(offset)} + " if offset is not None else ""
    return f"{start}{ms[0]} / max({ms[1]}, 1), clamped to [{fmt(o.lower)}, {fmt(o.upper)}]{hidden}"


def _spread(sample: bool, root: bool) -> Callable[[Callable[[str], Measurement], Output, str], str]:
    def line(measurement, o: Output, hidden: str) -> str:
        ms = o.measurements
        return (f"{'sqrt of ' if root else ''}{ms[2]}/n - ({ms[1]}/n)^2 with n = max({ms[0]}, 1), "
                f"{'times n/(n-1), ' if sample else ''}never negative{hidden}")
    return line


def _descent(measurement: Callable[[str], Measurement], o: Output, hidden: str) -> str:
    m = measurement(o.measurements[0])
    if m.kind == Quantity.HISTOGRAM:
        return f"the midpoint of the cell {m.name} releases (its rule: {m.mechanism}), within [{fmt(o.lower)}, " \
               f"{fmt(o.upper)}]{hidden}"
    return (f"quantile {o.quantile:g} by descending {o.measurements[0]} (noisy counts < 0 read as 0), "
            f"interpolated in its leaf, clamped to [{fmt(o.lower)}, {fmt(o.upper)}]{hidden}")


def _extreme(measurement: Callable[[str], Measurement], o: Output, hidden: str) -> str:
    """MIN and MAX, with the caveat: no DP answer is the true extreme, which one person may hold."""
    side, beyond = ("smallest", "below") if o.kind == OutputKind.MIN else ("largest", "above")
    return (f"{_descent(measurement, o, '')}; the {o.quantile:g}-quantile: a value with few of the group's "
            f"clamped values {beyond} it (its measurement's rank error), not the true {side} value, which one person "
            f"may hold; with loose bounds it can lie anywhere between the bound and the {side} value{hidden}")


def _variance(kind: OutputKind, *nodes: type[exp.Expression]) -> AggregateSpec:
    sample, root = kind.endswith("_samp"), kind.startswith("stddev")
    return AggregateSpec(kind, nodes, _argument, lambda agg, column, q: f"{kind}({column})", _moments,
                         _spread(sample, root), variance(sample, root), clamped=True, counts=True)


def _named(text: str) -> Callable[[exp.Expression, str | None, float | None], str]:
    return lambda agg, column, q: text.format(column=column)


def _quantile_name(agg: exp.Expression, column: str | None, q: float | None) -> str:
    if isinstance(agg, (exp.Min, exp.Max)):
        return f"{agg.key}({column})"
    return f"median({column})" if FORMS[type(agg)].q is not None else f"quantile_cont({column}, {q:g})"


# In order: a node's special forms (COUNT(DISTINCT unit), COUNT(DISTINCT x), COUNT(*)) before its plain one.
AGGREGATES: dict[OutputKind, AggregateSpec] = {a.kind: a for a in (
    AggregateSpec(OutputKind.UNITS, (exp.Count,), _units, _named("count(DISTINCT {column})"),
                  lambda o, s: [Need(Quantity.UNITS, None)], _one, count_value, count_interval, direct=True,
                  counts=True),
    AggregateSpec(OutputKind.DISTINCT, (exp.Count,), _distinct, _named("count(DISTINCT {column})"),
                  lambda o, s: [Need(Quantity.DISTINCT, o.column, argument=o.argument)], _one, count_value,
                  count_interval, direct=True, counts=True),
    AggregateSpec(OutputKind.COUNT, (exp.Count,), _star, _named("count_star()"), _count, _one, count_value,
                  count_interval, direct=True, counts=True),
    AggregateSpec(OutputKind.COUNT_COL, (exp.Count,), _argument, _named("count({column})"), _count_column, _one,
                  count_value, count_interval, direct=True, counts=True),
    AggregateSpec(OutputKind.COUNT_IF, (exp.CountIf,), _argument, _named("count_if({column})"),
                  lambda o, s: [Need(Quantity.COUNT_IF, o.column, argument=o.argument)], _one, count_value,
                  count_interval, direct=True, counts=True),
    AggregateSpec(OutputKind.SUM, (exp.Sum,), _argument, _named("sum({column})"), _sum, _one, sum_value, sum_interval,
                  direct=True),
    AggregateSpec(OutputKind.AVG, (exp.Avg,), _argument, _named("avg({column})"), _avg, _mean, avg_value,
                  avg_interval, clamped=True),
    _variance(OutputKind.VAR_POP, exp.VariancePop),
    _variance(OutputKind.VAR_SAMP, exp.Variance),
    _variance(OutputKind.STDDEV_POP, exp.StddevPop),
    _variance(OutputKind.STDDEV_SAMP, exp.Stddev, exp.StddevSamp),
    AggregateSpec(OutputKind.QUANTILE, (exp.Median, exp.PercentileCont), _argument, _quantile_name, _quantile(TREE),
                  _descent, quantile_value, quantile=True),
    AggregateSpec(OutputKind.MIN, (exp.Min,), _argument, _quantile_name, _quantile(DEFAULT_EXTREMES), _extreme,
                  quantile_value, quantile=True),
    AggregateSpec(OutputKind.MAX, (exp.Max,), _argument, _quantile_name, _quantile(DEFAULT_EXTREMES), _extreme,
                  quantile_value, quantile=True),
)}


def signature(agg: exp.Expression, table) -> tuple[AggregateSpec, str | None, exp.Expression | None]:
    """(spec, label, argument) of an aggregate of a validated query: the label is the argument's SQL,
    the argument unqualified."""
    for spec in AGGREGATES.values():
        if type(agg) in spec.nodes:
            found = spec.matches(agg, table)
            if found is not None:
                return spec, *found
    raise InternalError("DP999", f"no aggregate reads {agg.sql(dialect='duckdb')}: this is probably a bug")


def never_negative(o: Output) -> bool:
    """An aggregate whose exact value is never below 0: a count or a variance, or any aggregate of values
    bounded below by 0 (SUM, AVG, a quantile). A ratio by its released value follows the stricter rule of
    plan/outputs.py ``ratios``."""
    spec = AGGREGATES.get(o.kind)
    return spec is not None and (spec.counts or (o.lower is not None and o.lower >= 0))


def released_directly(o: Output) -> bool:
    """An output that is one measurement as released (a count or a sum): its noise is its error bar."""
    spec = AGGREGATES.get(o.kind)
    return spec is not None and spec.direct and len(o.measurements) == 1
