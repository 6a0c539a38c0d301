"""What each aggregate needs measured: its kind and label, DuckDB's default output name, and the
noisy quantities (Needs) behind it (AVG as a centred sum and a count, VAR/STDDEV as three, ...)."""
from __future__ import annotations

from dataclasses import dataclass
from sqlglot import exp
from dpsql.policy import TablePolicy
from dpsql.frontend.scope import QUANTILES, name_of, unqualified
from dpsql.plan.model import Output


VARIANCES = {exp.VariancePop: "var_pop", exp.Variance: "var_samp", exp.StddevPop: "stddev_pop",
             exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp"}


def _aggregate_signature(agg: exp.Expression, table: TablePolicy) -> tuple[str, str | None, exp.Expression | None]:
    """(kind, label, argument): the label is the argument's SQL, the argument unqualified."""
    if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Distinct):
        column = unqualified(agg.this.expressions[0])
        if name_of(column) == table.privacy_unit:
            return ("units", name_of(column), None)
        return ("distinct", name_of(column), column)
    if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Star):
        return ("count", None, None)
    argument = unqualified(agg.this)
    label = argument.name.lower() if isinstance(argument, exp.Column) else argument.sql(dialect="duckdb")
    kind = "count_col" if isinstance(agg, exp.Count) else "sum" if isinstance(agg, exp.Sum) else \
        "avg" if isinstance(agg, exp.Avg) else "quantile" if isinstance(agg, QUANTILES) else VARIANCES[type(agg)]
    return (kind, label, argument)


def _default_name(kind: str, column: str | None, q: float | None = None) -> str:
    # DuckDB's own default names, so results read as they would from plain DuckDB.
    if kind == "quantile":
        return f"median({column})" if q is None else f"quantile_cont({column}, {q:g})"
    if kind == "count":
        return "count_star()"
    if kind in ("units", "distinct"):
        return f"count(DISTINCT {column})"
    return f"{'count' if kind == 'count_col' else kind}({column})"


@dataclass(frozen=True)
class Need:
    """A noisy quantity an output needs, before it gets a name and a share of epsilon."""
    kind: str
    column: str | None                      # label: the argument's SQL
    lower: float | None = None
    upper: float | None = None
    bounding: str = "rows"
    row_lower: float | None = None
    row_upper: float | None = None
    argument: exp.Expression | None = None  # what is counted or summed, per row
    offset: float | None = None             # sum (x - offset) ** moment instead of x
    moment: int = 1


def centre(o: Output) -> tuple[float, float]:
    """Midpoint and half-width of a variance's bounds: it is computed from centred values, whose
    squares lie in [0, r^2] instead of [0, max(lo^2, hi^2)], so their sum needs less noise."""
    return (o.lower + o.upper) / 2, (o.upper - o.lower) / 2


def needs(o: Output) -> list[Need]:
    """The measurements behind one output; identical ones are shared between outputs."""
    if o.kind == "units":
        return [Need("units", None)]
    if o.kind == "distinct":
        return [Need("distinct", o.column, argument=o.argument)]
    if o.kind == "quantile":
        # One tree per argument and bounds: several quantiles of it descend the same noisy tree.
        return [Need("quantile", o.column, *(o.per_row or (o.lower, o.upper)), argument=o.argument)]
    if o.kind == "count":
        return [Need("count", None)] if o.per_group is None else [Need("count", None, *o.per_group, "unit_total")]
    arg, label = o.argument, o.column
    if o.kind in VARIANCES.values():
        m, r = centre(o)
        return [Need("count_col", label, argument=arg),
                Need("sum", label, -r, r, argument=arg, offset=m),
                Need("sum", label, 0.0, r * r, argument=arg, offset=m, moment=2)]
    row = o.per_row or (o.lower, o.upper)
    if o.kind == "avg" and o.per_group is None:
        # AVG = m + sum(x - m) / n: the centred sum has sensitivity r = (hi - lo) / 2 instead of
        # max(|lo|, |hi|), and the count's noise moves the answer by |avg - m| <= r, not |avg|.
        m, r = centre(o)
        return [Need("sum", label, -r, r, argument=arg, offset=m), Need("count_col", label, argument=arg)]
    if o.per_group is None:
        return {"count_col": [Need("count_col", label, argument=arg)],
                "sum": [Need("sum", label, *row, argument=arg)]}[o.kind]
    pre = o.per_row or (None, None)
    if o.kind == "count_col":
        return [Need("count_col", label, *o.per_group, "unit_total", argument=arg)]
    if o.kind == "sum":
        return [Need("sum", label, *o.per_group, "unit_total", *pre, argument=arg)]
    return [Need("sum", label, *o.per_group, "unit_mean", *pre, argument=arg),
            Need("count_units", label, argument=arg)]
