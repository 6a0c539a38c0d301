"""Post-processing of released measurements into outputs (AVG, variances, confidence intervals,
non-negative clamps) and the final SELECT (HAVING, ORDER BY with keys as tie-breakers, LIMIT)."""
from __future__ import annotations

from sqlglot import exp
from dpsql.mechanisms.base import mechanism
from dpsql.lower import quantile
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.sql.build import alias, case_when, cast, col, fn, num, table
from dpsql.lower.names import key_names
from dpsql.sql.guard import guarded
from dpsql.lower.noise import scalar_measurements
from dpsql.plan.aggregates import Variance, handler
from dpsql.plan.kinds import OutputKind


def sign_clamp(value: exp.Expression, lower: float | None, upper: float | None, plan: Plan) -> exp.Expression:
    """With ``nonnegative``, a count or a sum of values >= 0 is never released below 0 (and a sum of
    values <= 0 never above): post-processing, free, and it only moves answers toward the truth."""
    if not plan.nonnegative or lower is None:
        return value
    if lower >= 0:
        return fn("GREATEST", value, num(0))
    if upper <= 0:
        return fn("LEAST", value, num(0))
    return value


def noisy_total(m: Measurement) -> exp.Expression:
    return col(m.name) if m.granularity == 1 else exp.Mul(this=cast(col(m.name), "DOUBLE"), expression=num(m.granularity))


def half_width(m: Measurement, confidence: float) -> float:
    """The exact half-width of the noise's central interval at ``confidence``, in output units."""
    return mechanism(m.mechanism).error_bound(m.scale, confidence) * m.granularity


def has_interval(plan: Plan, o) -> bool:
    """Whether an output gets <name>_ci_low/_ci_high: noisy counts, sums and AVG, when ci is asked."""
    return plan.confidence is not None and not o.hidden and o.kind.aggregate and handler(o.kind).interval


def output_interval(plan: Plan, index: int) -> tuple[exp.Expression, exp.Expression] | None:
    """(low, high) of the confidence interval of one output around its bounded exact value.

    Counts and sums: exact for the discrete Laplace noise (coverage >= ci, the smallest such width).
    AVG: from a (1+ci)/2 interval for each of its sum and count (union bound): coverage >= ci.
    """
    o = plan.outputs[index]
    if not has_interval(plan, o):
        return None
    ms = [plan.measurement(n) for n in o.measurements]
    if o.kind != OutputKind.AVG:   # a count or a sum
        m = ms[0]
        a = half_width(m, plan.confidence)
        a = int(a) if m.granularity == 1 else a   # counts stay integers
        lower, upper = (0.0, None) if handler(o.kind).count else (m.lower, m.upper)
        return tuple(sign_clamp(op(this=noisy_total(m), expression=num(a)), lower, upper, plan)
                     for op in (exp.Sub, exp.Add))
    level = (1 + plan.confidence) / 2
    total, count = ms
    a, b = half_width(total, level), half_width(count, level)
    s, n = noisy_total(total), cast(col(count.name), "DOUBLE")
    midpoint = total.offset or 0.0   # centred sums
    corners = [exp.Add(this=num(midpoint), expression=exp.Div(
                   this=exp.Paren(this=op_s(this=s.copy(), expression=num(a))),
                   expression=exp.Paren(this=op_n(this=n.copy(), expression=num(b)))))
               for op_s in (exp.Sub, exp.Add) for op_n in (exp.Sub, exp.Add)]
    unknown = exp.LTE(this=exp.Sub(this=n.copy(), expression=num(b)), expression=num(0))

    def bounded(value):
        return fn("LEAST", fn("GREATEST", value, num(float(o.lower))), num(float(o.upper)))
    low = case_when(unknown, num(float(o.lower)), bounded(fn("LEAST", *corners)))
    high = case_when(unknown.copy(), num(float(o.upper)), bounded(fn("GREATEST", *[c.copy() for c in corners])))
    return low, high


def output_value(plan: Plan, index: int) -> exp.Expression:
    """Post-processing of released measurements into one output column."""
    o = plan.outputs[index]
    if o.kind == OutputKind.KEY:
        return col(f"k{o.key_index}")
    if o.kind == OutputKind.EXPR:
        inlined = o.expression.copy().transform(
            lambda n: output_value(plan, slot) if (slot := _slot_index(plan, n)) is not None else n)
        # On released values only, but it may still cast a key (NOT 'F'): never an error.
        return exp.Anonymous(this="TRY", expressions=[inlined])
    return OUTPUT_VALUES[o.kind](plan, o, [plan.measurement(n) for n in o.measurements])


def count_value(plan: Plan, o, ms) -> exp.Expression:
    return sign_clamp(col(ms[0].name), 0.0, None, plan)


def sum_value(plan: Plan, o, ms) -> exp.Expression:
    return sign_clamp(noisy_total(ms[0]), ms[0].lower, ms[0].upper, plan)


def avg_value(plan: Plan, o, ms) -> exp.Expression:
    """AVG = midpoint + noisy centred sum / noisy count (per-group bounds: noisy sum of per-unit means
    / noisy unit count), never dividing by <= 0, clamped back into the bounds."""
    mean = exp.Div(this=noisy_total(ms[0]), expression=fn("GREATEST", col(ms[1].name), num(1)))
    if ms[0].offset is not None:
        mean = exp.Add(this=num(float(ms[0].offset)), expression=mean)
    return fn("LEAST", fn("GREATEST", mean, num(float(o.lower))), num(float(o.upper)))


def quantile_value(plan: Plan, o, ms) -> exp.Expression:
    return col(quantile.output_column(ms[0], o.quantile, plan))


def variance(plan: Plan, o, ms) -> exp.Expression:
    """VAR/STDDEV from noisy n, sum(x - m) and sum((x - m)^2) (m the bounds' midpoint, r the half-width):
    var = S2/n - (S1/n)^2, clamped to [0, r^2], the most a variable within the bounds can have;
    never dividing by <= 0. Sample versions scale by n/(n-1)."""
    count, first, second = ms
    n = cast(fn("GREATEST", col(count.name), num(1)), "DOUBLE")
    mean = exp.Div(this=noisy_total(first), expression=n)
    value = exp.Sub(this=exp.Div(this=noisy_total(second), expression=n.copy()),
                    expression=exp.Mul(this=exp.Paren(this=mean), expression=exp.Paren(this=mean.copy())))
    r = (o.upper - o.lower) / 2
    kind = handler(o.kind)
    assert isinstance(kind, Variance)
    if kind.sample:
        value = exp.Div(this=exp.Mul(this=exp.Paren(this=value), expression=n.copy()),
                        expression=fn("GREATEST", exp.Sub(this=n.copy(), expression=num(1)), num(1)))
    value = fn("LEAST", fn("GREATEST", value, num(0.0)), num(float(r * r) * (2 if kind.sample else 1)))
    return fn("SQRT", value) if kind.root else value


# The SQL of each aggregate's output over its measurements (plan/aggregates.py has the rest of it).
OUTPUT_VALUES = {OutputKind.COUNT: count_value, OutputKind.COUNT_COL: count_value, OutputKind.UNITS: count_value,
                 OutputKind.DISTINCT: count_value, OutputKind.SUM: sum_value, OutputKind.AVG: avg_value,
                 OutputKind.QUANTILE: quantile_value, OutputKind.VAR_POP: variance, OutputKind.VAR_SAMP: variance,
                 OutputKind.STDDEV_POP: variance, OutputKind.STDDEV_SAMP: variance}


def _slot_index(plan: Plan, node: exp.Expression) -> int | None:
    """The output a column of an expression over outputs names (``o3``: 3), else None."""
    if not isinstance(node, exp.Column) or node.table or not node.name.startswith("o"):
        return None
    digits = node.name[1:]
    ok = digits.isdigit() and digits == str(int(digits)) and int(digits) < len(plan.outputs)
    return int(digits) if ok else None


def final_select(plan: Plan) -> exp.Select:
    columns = []
    for i, o in enumerate(plan.outputs):
        if o.hidden:
            continue
        columns.append(alias(col(plan.slot(i)), o.name))
        if has_interval(plan, o):
            columns += [alias(col(f"{plan.slot(i)}_lo"), f"{o.name}_ci_low"),
                        alias(col(f"{plan.slot(i)}_hi"), f"{o.name}_ci_high")]
    query = exp.select(*columns).from_(table("__out"), copy=False)
    if plan.having is not None:
        # On released values only, but it may still compare a key with a number: never an error.
        condition = plan.having.copy().transform(
            lambda n: col(n.name) if _slot_index(plan, n) is not None else n)
        query = query.where(guarded(condition, lambda name: None))
    if plan.order:
        query = query.order_by(*[exp.Ordered(this=col(slot), desc=desc, nulls_first=False)
                                 for slot, desc in plan.order])
    if plan.limit is not None:
        query = query.limit(plan.limit)
    if plan.offset is not None:
        query = query.offset(plan.offset)
    return query


def measurements_select(plan: Plan) -> exp.Select:
    """Every candidate group's keys and scalar measurements, ordered by key (the test seam's stage)."""
    names = key_names(plan)
    columns = [col(n) for n in names] + [col(m.name) for m in scalar_measurements(plan)]
    query = exp.select(*(columns or [exp.Star()])).from_(table("__noisy"), copy=False)
    return query.order_by(*[exp.Ordered(this=col(n), nulls_first=False) for n in names]) if names else query
