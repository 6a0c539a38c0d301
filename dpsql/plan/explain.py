"""The explain lines of a plan's parts: a measurement (bounds, sensitivity, mechanism, epsilon, noise),
a GROUP BY item, an output. ``str(plan)`` (plan/model.py) joins them with the composition and the
rewritten SQL.

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> from dpsql.frontend.validate import validate
>>> from dpsql.plan.build import build_plan
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {}}}})
>>> q = parse("SELECT COUNT(*) FROM t")
>>> plan = build_plan(q, validate(q, "SELECT COUNT(*) FROM t", p), epsilon=1, delta=0)
>>> measurement_lines(plan.measurements[0])[:2]
['  m0  COUNT(*)', '      sensitivity 1 (L1), 1 (L2): a unit moves <= 1 partition(s), each by <= 1']
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from dpsql.mechanisms.base import mechanism
from dpsql.plan.aggregates import AGGREGATES
from dpsql.plan.kinds import OutputKind
from dpsql.plan.outputs import has_ratio
from dpsql.plan.parts import GroupKey, Measurement, Output
from dpsql.plan.quantities import QUANTITIES
from dpsql.plan.text import CONFIDENCE, fmt


def measurement_lines(m: Measurement) -> list[str]:
    g, spec, s = m.granularity, QUANTITIES[m.kind], m.sensitivity
    l2 = math.sqrt(s.l2_squared)
    steps = f" ({s.per_partition} grid steps)" if g != 1 else ""
    noised = spec.noised(m) if callable(spec.noised) else spec.noised
    # A quantile rule's noise may have no variance in output units (ranks) or no error bound before
    # the data is read (smooth sensitivity): say so rather than print NaN.
    spread = f" (std dev {fmt(m.std_dev)})" if m.scale and not math.isnan(m.std_dev) else ""
    error = (f"within +-{fmt(m.error)} of the bounded exact value" if not math.isnan(m.error)
             else "within a bound that depends on the data (its smooth sensitivity)")
    return [
        f"  {m.name}  {m.label}", *spec.details(m),
        f"      sensitivity {fmt(float(s.l1) * g)} (L1), {fmt(l2 * g)} (L2): a unit moves <= {s.partitions} "
        f"partition(s), each by <= {fmt(float(s.per_partition) * g)}{steps}",
        f"      mechanism {m.mechanism}" + (" on the grid" if g != 1 else " (integer)"),
        f"      {m.loss}, noise {mechanism(m.mechanism).scale_name} {fmt(float(m.scale) * g)}{spread}",
        f"      {int(CONFIDENCE * 100)}% of {noised} {error}",
    ]


def key_description(k: GroupKey) -> str:
    """How explain names a GROUP BY item and the groups it has."""
    if not k.public:
        return f"{k.label} (private: groups found in the data, released by DP partition selection)"
    if k.filters:
        where = " AND ".join(f.sql(dialect="duckdb") for f in k.filters)
        return f"{key_description(dataclasses.replace(k, filters=()))}, only those where {where}"
    if k.column:
        where = k.columns[0].where
        pruned = f" of the public tables' rows where {where}" if where else ""
        return f"{k.label} ({len(k.columns[0].keys)} public keys{pruned})"
    if k.branches is not None:
        values = ", ".join(b.sql(dialect="duckdb") for b in k.branches)
        return f"{k.label} (<= {len(k.branches)} public keys: the values of its branches, {values})"
    derived = [c.derived.description for c in k.columns if c.derived is not None]
    if len(derived) == len(k.columns) == 1:
        return f"{k.label} (<= {len(k.columns[0].keys)} public keys: {derived[0]})"
    declared = [f"the public keys of {c.name}" for c in k.columns if c.derived is None]
    return f"{k.label} (its values over {' and '.join(declared + derived)})"


def output_line(o: Output, keys: tuple[GroupKey, ...], measurement: Callable[[str], Measurement]) -> str:
    """An output's line: a key, an expression over outputs, or what its aggregate's spec says."""
    hidden = "  (for HAVING/ORDER BY, not shown)" if o.hidden else ""
    # An output is a group key, an expression over other outputs, or an aggregate (its spec says).
    if o.kind == OutputKind.KEY:
        return f"  {o.name} = group key {keys[o.key_index].label}{hidden}"
    if o.kind == OutputKind.EXPR:
        ratio = "  (NULL where a divisor's released value is 0, or <= 0 if never negative in truth)" \
            if has_ratio(o.expression) else ""
        return f"  {o.name} = {o.expression.sql(dialect='duckdb')}{ratio}{hidden}"
    return f"  {o.name} = {AGGREGATES[o.kind].explain(measurement, o, hidden)}"
