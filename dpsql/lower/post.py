"""Post-processing of released measurements into outputs (each aggregate's SQL and interval is its
spec's: plan/aggregates.py, plan/outputs.py) and the final SELECT (HAVING, ORDER BY with keys as
tie-breakers, LIMIT)."""
from __future__ import annotations

from sqlglot import exp
from dpsql.lower import histogram, quantile
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement
from dpsql.sql.build import alias, cast, col, num, table
from dpsql.lower.names import clipping_columns, key_name, key_names
from dpsql.sql.guard import guarded, per_operation
from dpsql.lower.noise import scalar_measurements
from dpsql.plan.aggregates import AGGREGATES, never_negative
from dpsql.plan.kinds import OutputKind
from dpsql.plan.outputs import Released, ratios
from dpsql.plan.quantities import QUANTITIES, Stage


def noisy_total(m: Measurement) -> exp.Expression:
    return col(m.name) if m.granularity == 1 else exp.Mul(this=cast(col(m.name), "DOUBLE"), expression=num(m.granularity))


def has_interval(plan: Plan, o) -> bool:
    """Whether an output gets <name>_ci_low/_ci_high: noisy counts, sums and AVG, when ci is asked."""
    return plan.confidence is not None and not o.hidden and o.kind.aggregate and AGGREGATES[o.kind].interval is not None


def released(plan: Plan, o) -> Released:
    """What an aggregate's output reads (plan/outputs.py): each measurement's released value in
    output units, a noisy total of __noisy, or the column of a tree's quantile (lower/quantile.py)."""
    ms = tuple(plan.measurement(n) for n in o.measurements)

    def value(i: int) -> exp.Expression:
        if QUANTITIES[ms[i].kind].stage is Stage.TREE:   # a tree releases one column per q asked of it
            return col(quantile.output_column(ms[i], o.quantile, plan))
        if QUANTITIES[ms[i].kind].stage is Stage.HISTOGRAM:   # a quantile rule: its answer's column
            return col(histogram.output_column(ms[i]))
        return noisy_total(ms[i])
    return Released(ms, value, plan.nonnegative, plan.confidence)


def output_interval(plan: Plan, index: int) -> tuple[exp.Expression, exp.Expression] | None:
    """(low, high) of the confidence interval of one output around its bounded exact value."""
    o = plan.outputs[index]
    return AGGREGATES[o.kind].interval(o, released(plan, o)) if has_interval(plan, o) else None


def output_value(plan: Plan, index: int) -> exp.Expression:
    """Post-processing of released measurements into one output column."""
    o = plan.outputs[index]
    # An output is a group key, an expression over other outputs, or an aggregate (its spec says).
    if o.kind == OutputKind.KEY:
        return col(key_name(o.key_index))
    if o.kind == OutputKind.EXPR:
        # On released values only, but it may still cast a key (NOT 'F'): each operation that could fail
        # is guarded on its own (the slots' types unknown here), then the slots are inlined.
        written = per_operation(guarded_ratios(plan, o.expression.copy()), slot_types(plan))
        return written.transform(lambda n: output_value(plan, slot) if (slot := _slot_index(plan, n)) is not None else n)
    return AGGREGATES[o.kind].output(o, released(plan, o))


def guarded_ratios(plan: Plan, expression: exp.Expression) -> exp.Expression:
    """An expression over output slots with its divisions made NULL where the divisor's released value
    is 0, or <= 0 for a divisor that is an aggregate never negative in truth (plan/outputs.py ``ratios``)."""
    def slot_never_negative(node: exp.Expression) -> bool:
        slot = _slot_index(plan, node.unnest())
        return slot is not None and never_negative(plan.outputs[slot])
    return ratios(expression, slot_never_negative)


def slot_types(plan: Plan):
    """Output slot (``o3``) -> its type as the totality typing reads it: an aggregate's released value
    is a number (BIGINT or DOUBLE), a key that is a plain column has the column's type, anything else
    is unknown. So a HAVING ``COUNT(*) > 10`` runs bare, a comparison with a key's string guarded."""
    def of(name: str) -> str | None:
        slot = _slot_index(plan, exp.column(name))
        if slot is None:
            return None
        o = plan.outputs[slot]
        if o.kind.aggregate:
            # BIGINT or DOUBLE: typed as the one whose arithmetic can fail (sql/totality.py calls DOUBLE
            # arithmetic total; a noisy count near 2^62 times 2 overflows a BIGINT)
            return "BIGINT"
        key = plan.group_keys[o.key_index].expression if o.kind == OutputKind.KEY else None
        if isinstance(key, exp.Column) and len(plan.group_keys[o.key_index].columns) == 1:
            return plan.group_keys[o.key_index].columns[0].sql_type
        return None
    return of


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
    columns += [col(name) for _, name in clipping_columns(plan)]   # the clipping report's, last
    query = exp.select(*columns).from_(table("__out"), copy=False)
    if plan.having is not None:
        # On released values only, but it may still compare a key with a number: never an error.
        condition = guarded_ratios(plan, plan.having.copy()).transform(
            lambda n: col(n.name) if _slot_index(plan, n) is not None else n)
        query = query.where(guarded(condition, slot_types(plan)))
    if plan.order:
        # Qualified: DuckDB's ORDER BY reads an output's alias before an input column, and an analyst's
        # alias may be a slot's name (``COUNT(*) AS o0``; the slow differential test found it).
        query = query.order_by(*[exp.Ordered(this=col(slot, "__out"), desc=desc, nulls_first=False)
                                 for slot, desc in plan.order])
    if plan.limit is not None:
        query = query.limit(plan.limit)
    if plan.offset is not None:
        query = query.offset(plan.offset)
    return query


def measurements_select(plan: Plan) -> exp.Select:
    """Every candidate group's keys and scalar measurements (and a top-k's utility, ``__u``), ordered
    by key (the test seam's stage)."""
    names, joined = key_names(plan), "__noisy" if histogram.histograms(plan) else None   # qualified beside a join
    columns = [col(n, joined) for n in names] + [col(m.name, joined) for m in scalar_measurements(plan)]
    columns += [col("__u", joined)] if plan.top_k is not None else []
    query = exp.select(*(columns or ([] if joined else [exp.Star()]))).from_(table("__noisy"), copy=False)
    query = histogram.join_totals(plan, query)
    return query.order_by(*[exp.Ordered(this=col(n, joined), nulls_first=False) for n in names]) if names else query
