"""One handler per aggregate: which sqlglot node it is, DuckDB's default output name, the noisy
quantities (Needs) behind it (AVG as a centred sum and a count, VAR/STDDEV as three, ...), whether it
gets a confidence interval, and its explain line. Lowering keeps the matching table of SQL
(``lower/post.py`` ``OUTPUT_VALUES``); ``docs/architecture.md`` says how to add one."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

from sqlglot import exp
from dpsql.policy.model import TablePolicy
from dpsql.frontend.scope import QUANTILES, name_of, unqualified
from dpsql.plan.kinds import Bounding, OutputKind, Quantity
from dpsql.plan.parts import Measurement, Output
from dpsql.plan.text import CONFIDENCE, fmt


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


def centre(o: Output) -> tuple[float, float]:
    """Midpoint and half-width of the bounds: AVG and variances are computed from centred values,
    whose sums need noise for (hi - lo) / 2 instead of max(|lo|, |hi|)."""
    return (o.lower + o.upper) / 2, (o.upper - o.lower) / 2


class Aggregate(ABC):
    """The plan's view of one aggregate; subclasses override what differs."""
    kind: ClassVar[OutputKind]
    interval: ClassVar[bool] = False   # released with <name>_ci_low/_ci_high when ci is asked
    count: ClassVar[bool] = False      # a count: an integer, never below 0 with ``nonnegative``

    def name(self, column: str | None, q: float | None) -> str:
        """DuckDB's own default name, so results read as they would from plain DuckDB."""
        return f"{self.kind}({column})"

    @abstractmethod
    def needs(self, o: Output) -> list[Need]:
        """The noisy quantities behind the output (each aggregate says its own)."""

    def explain(self, measurement: Callable[[str], Measurement], o: Output, hidden: str) -> str:
        """The right-hand side of the output's explain line (``measurement``: the plan's, by name;
        ``hidden``: a note for hidden outputs)."""
        error = measurement(o.measurements[0]).error
        return f"{o.measurements[0]}{hidden}   ({int(CONFIDENCE * 100)}%: within +-{fmt(error)})"


class Count(Aggregate):
    kind, interval, count = OutputKind.COUNT, True, True

    def name(self, column, q):
        return "count_star()"

    def needs(self, o):
        if o.per_group is None:
            return [Need(Quantity.COUNT, None)]
        return [Need(Quantity.COUNT, None, *o.per_group, Bounding.UNIT_TOTAL)]


class CountColumn(Aggregate):
    kind, interval, count = OutputKind.COUNT_COL, True, True

    def name(self, column, q):
        return f"count({column})"

    def needs(self, o):
        if o.per_group is None:
            return [Need(Quantity.COUNT_COL, o.column, argument=o.argument)]
        return [Need(Quantity.COUNT_COL, o.column, *o.per_group, Bounding.UNIT_TOTAL, argument=o.argument)]


class Units(Aggregate):
    """COUNT(DISTINCT unit): one per unit in each of its partitions."""
    kind, interval, count = OutputKind.UNITS, True, True

    def name(self, column, q):
        return f"count(DISTINCT {column})"

    def needs(self, o):
        return [Need(Quantity.UNITS, None)]


class Distinct(Units):
    kind = OutputKind.DISTINCT

    def needs(self, o):
        return [Need(Quantity.DISTINCT, o.column, argument=o.argument)]


class Sum(Aggregate):
    kind, interval = OutputKind.SUM, True

    def needs(self, o):
        if o.per_group is None:
            return [Need(Quantity.SUM, o.column, *(o.per_row or (o.lower, o.upper)), argument=o.argument)]
        return [Need(Quantity.SUM, o.column, *o.per_group, Bounding.UNIT_TOTAL, *(o.per_row or (None, None)),
                     argument=o.argument)]


class Avg(Aggregate):
    kind, interval = OutputKind.AVG, True

    def needs(self, o):
        arg, label = o.argument, o.column
        if o.per_group is None:
            # AVG = m + sum(x - m) / n: the centred sum has sensitivity r = (hi - lo) / 2 instead of
            # max(|lo|, |hi|), and the count's noise moves the answer by |avg - m| <= r, not |avg|.
            m, r = centre(o)
            return [Need(Quantity.SUM, label, -r, r, argument=arg, offset=m),
                    Need(Quantity.COUNT_COL, label, argument=arg)]
        return [Need(Quantity.SUM, label, *o.per_group, Bounding.UNIT_MEAN, *(o.per_row or (None, None)), argument=arg),
                Need(Quantity.COUNT_UNITS, label, argument=arg)]

    def explain(self, measurement, o, hidden):
        ms = o.measurements
        offset = measurement(ms[0]).offset
        start = f"{fmt(offset)} + " if offset is not None else ""
        return f"{start}{ms[0]} / max({ms[1]}, 1), clamped to [{fmt(o.lower)}, {fmt(o.upper)}]{hidden}"


class Variance(Aggregate):
    """VAR/STDDEV, population or sample: from a count and centred first and second moments."""

    def __init__(self, kind: OutputKind):
        self.kind = kind   # type: ignore[misc]

    @property
    def sample(self) -> bool:
        return self.kind.endswith("_samp")

    @property
    def root(self) -> bool:
        return self.kind.startswith("stddev")

    def needs(self, o):
        m, r = centre(o)
        return [Need(Quantity.COUNT_COL, o.column, argument=o.argument),
                Need(Quantity.SUM, o.column, -r, r, argument=o.argument, offset=m),
                Need(Quantity.SUM, o.column, 0.0, r * r, argument=o.argument, offset=m, moment=2)]

    def explain(self, measurement, o, hidden):
        ms = o.measurements
        return (f"{'sqrt of ' if self.root else ''}{ms[2]}/n - ({ms[1]}/n)^2 with n = max({ms[0]}, 1), "
                f"{'times n/(n-1), ' if self.sample else ''}never negative{hidden}")


class Quantile(Aggregate):
    kind = OutputKind.QUANTILE

    def name(self, column, q):
        return f"median({column})" if q is None else f"quantile_cont({column}, {q:g})"

    def needs(self, o):
        # One tree per argument and bounds: several quantiles of it descend the same noisy tree.
        return [Need(Quantity.QUANTILE, o.column, *(o.per_row or (o.lower, o.upper)), argument=o.argument)]

    def explain(self, measurement, o, hidden):
        return (f"quantile {o.quantile:g} by descending {o.measurements[0]} (noisy counts < 0 read as 0), "
                f"interpolated in its leaf, clamped to [{fmt(o.lower)}, {fmt(o.upper)}]{hidden}")


HANDLERS: dict[OutputKind, Aggregate] = {h.kind: h for h in (
    Count(), CountColumn(), Units(), Distinct(), Sum(), Avg(), Quantile(),
    *(Variance(k) for k in (OutputKind.VAR_POP, OutputKind.VAR_SAMP, OutputKind.STDDEV_POP, OutputKind.STDDEV_SAMP)))}

# sqlglot's node for each aggregate with one argument (COUNT(*) and COUNT(DISTINCT) are told apart below).
NODES: dict[type, OutputKind] = {exp.Count: OutputKind.COUNT_COL, exp.Sum: OutputKind.SUM, exp.Avg: OutputKind.AVG,
                                 exp.VariancePop: OutputKind.VAR_POP, exp.Variance: OutputKind.VAR_SAMP,
                                 exp.StddevPop: OutputKind.STDDEV_POP, exp.Stddev: OutputKind.STDDEV_SAMP,
                                 exp.StddevSamp: OutputKind.STDDEV_SAMP,
                                 **{node: OutputKind.QUANTILE for node in QUANTILES}}


def handler(kind: OutputKind) -> Aggregate:
    return HANDLERS[kind]


def signature(agg: exp.Expression, table: TablePolicy) -> tuple[OutputKind, str | None, exp.Expression | None]:
    """(kind, label, argument): the label is the argument's SQL, the argument unqualified."""
    if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Distinct):
        column = unqualified(agg.this.expressions[0])
        if name_of(column) == table.privacy_unit:
            return (OutputKind.UNITS, name_of(column), None)
        return (OutputKind.DISTINCT, name_of(column), column)
    if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Star):
        return (OutputKind.COUNT, None, None)
    argument = unqualified(agg.this)
    label = argument.name.lower() if isinstance(argument, exp.Column) else argument.sql(dialect="duckdb")
    kind = NODES.get(type(agg)) or next(k for node, k in NODES.items() if isinstance(agg, node))
    return (kind, label, argument)


def needs(o: Output) -> list[Need]:
    """The measurements behind one output; identical ones are shared between outputs."""
    return handler(o.kind).needs(o)
