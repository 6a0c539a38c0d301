"""The explain text of a Plan: per measurement its bounds, sensitivity, mechanism, epsilon and noise;
the composition; and the rewritten SQL.

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> from dpsql.frontend.validate import validate
>>> from dpsql.plan.build import build_plan
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {}}}})
>>> q = parse("SELECT COUNT(*) FROM t")
>>> print(explain_text(build_plan(q, validate(q, "SELECT COUNT(*) FROM t", p), epsilon=1, delta=0)).splitlines()[0])
dpsql plan for: SELECT COUNT(*) FROM t
"""
from __future__ import annotations

import dataclasses
import math

import sqlglot

from typing import TYPE_CHECKING

from dpsql.plan.aggregates import AGGREGATES
from dpsql.plan.kinds import OutputKind
from dpsql.plan.quantities import QUANTITIES
from dpsql.plan.text import CONFIDENCE, fmt

if TYPE_CHECKING:   # the model renders itself with this module: it imports the model only for types
    from dpsql.plan.model import Measurement, Plan

def measurement_lines(m: Measurement) -> list[str]:
    g, spec = m.granularity, QUANTITIES[m.kind]
    lines = [f"  {m.name}  {m.label}", *spec.details(m)]
    lines += [
        f"      sensitivity {fmt(m.sensitivity * g)}  ({m.sensitivity} grid steps)" if g != 1
        else f"      sensitivity {m.sensitivity}",
        f"      mechanism {m.mechanism}" + (" on the grid" if g != 1 else " (integer)"),
        f"      epsilon {m.epsilon:.6g}, noise scale {fmt(m.scale * g)}"
        + (f" (std dev {fmt(math.sqrt(2) * m.scale * g)})" if m.scale else ""),
        f"      {int(CONFIDENCE * 100)}% of {spec.noised} within +-{fmt(m.error)} of the bounded exact value",
    ]
    return lines


def output_line(plan: Plan, index: int) -> str:
    o = plan.outputs[index]
    hidden = "  (for HAVING/ORDER BY, not shown)" if o.hidden else ""
    # An output is a group key, an expression over other outputs, or an aggregate (its spec says).
    if o.kind == OutputKind.KEY:
        return f"  {o.name} = group key {plan.group_keys[o.key_index].label}{hidden}"
    if o.kind == OutputKind.EXPR:
        return f"  {o.name} = {o.expression.sql(dialect='duckdb')}{hidden}"
    return f"  {o.name} = {AGGREGATES[o.kind].explain(plan.measurement, o, hidden)}"


def explain_text(plan: Plan) -> str:
    t = plan.table
    unit = "each row is a person" if t.row_level else f"privacy unit {t.privacy_unit}"
    lines = [f"dpsql plan for: {' '.join(plan.sql.split())}",
             f"table {t.name}: {unit}; L = {plan.max_groups} partition(s) per unit, "
             f"C = {plan.max_rows} row(s) per unit per partition"]
    if t.about:
        lines.append(f"rows: {t.about}")
    if plan.group_keys:
        def describe(k):
            if not k.public:
                return f"{k.label} (private: groups found in the data, released by DP partition selection)"
            if k.filters:
                where = " AND ".join(f.sql(dialect="duckdb") for f in k.filters)
                return f"{describe(dataclasses.replace(k, filters=()))}, only those where {where}"
            if k.column:
                return f"{k.label} ({len(k.columns[0].keys)} public keys)"
            if k.branches is not None:
                values = ", ".join(b.sql(dialect="duckdb") for b in k.branches)
                return f"{k.label} (<= {len(k.branches)} public keys: the values of its branches, {values})"
            derived = [c.derived.description for c in k.columns if c.derived is not None]
            if len(derived) == len(k.columns) == 1:
                return f"{k.label} (<= {len(k.columns[0].keys)} public keys: {derived[0]})"
            declared = [f"the public keys of {c.name}" for c in k.columns if c.derived is None]
            return f"{k.label} (its values over {' and '.join(declared + derived)})"
        keys = ", ".join(describe(k) for k in plan.group_keys)
        if plan.selection is None:
            lines.append(f"groups: {keys}: <= {plan.partitions} partition(s), every one released")
        else:
            s = plan.selection
            lines.append(f"groups: {keys}")
            lines.append(f"partition selection: a group is released iff its noisy unit count {s.measurement} >= "
                         f"tau = {s.threshold} (epsilon_sel {s.epsilon:.4g}, delta {s.delta:g}: a group held by "
                         f"one unit appears with probability <= delta / L)")
    lines.append(f"budget: epsilon {plan.epsilon:.6g}, delta {plan.delta:g}")
    lines.append("measurements:")
    for m in plan.measurements:
        lines += measurement_lines(m)
    lines.append("outputs (post-processing, no extra budget):")
    lines += [output_line(plan, i) for i in range(len(plan.outputs))]
    n = len(plan.measurements)
    lines.append("composition:")
    lines.append(f"  sequential over {n} measurement(s): epsilon "
                 + " + ".join(f"{m.epsilon:.4g}" for m in plan.measurements) + f" = {plan.epsilon:.6g}")
    if plan.group_keys:
        count = plan.partitions if plan.partitions is not None else "the selected"
        lines.append(f"  parallel over {count} partition(s), each unit in <= {plan.max_groups}: "
                     f"charged once (sensitivity carries the factor L = {plan.max_groups})")
    if plan.selection is not None:
        lines.append(f"  delta {plan.delta:g} spent by partition selection")
    if plan.having is not None or plan.order or plan.limit is not None:
        lines.append("  HAVING / ORDER BY / LIMIT run on released values only")
    if plan.rewritten_sql:
        lines.append("rewritten SQL:")
        pretty = sqlglot.transpile(plan.rewritten_sql, read="duckdb", write="duckdb", pretty=True)[0]
        lines += ["  " + line for line in pretty.splitlines()]
    return "\n".join(lines)
