"""The clipping report as a Result shows it (plan/clipping.py releases it): per released group, the
noisy count of people whose contribution bounding cut, the noisy count of people, and their ratio,
each with an interval. Post-processing of the two released counts and the plan: free.

The ratio's interval holds whenever both counts' intervals do: each count's is taken at level
1 - (1 - CONFIDENCE) / 2, so by a union bound both hold together with probability >= CONFIDENCE.

>>> counts = pa.table({"__dpsql_clipped": [30, -2], "__dpsql_people": [100, 50]})
>>> t = report(pa.table({"g": ["a", "b"]}), counts, ["g"], (10.0, 10.0))
>>> t.column("fraction").to_pylist(), t.column("fraction_ci_low").to_pylist()
([0.3, 0.0], [0.18181818181818182, 0.0])
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from dpsql.api.display import CLIPPING_FIELDS
from dpsql.lower.names import CLIPPING_COLUMNS
from dpsql.mechanisms.base import mechanism
from dpsql.plan.kinds import OutputKind
from dpsql.plan.model import Plan
from dpsql.plan.text import CONFIDENCE

# Each count's interval level, so that both hold together at CONFIDENCE (a union bound).
EACH = 1 - (1 - CONFIDENCE) / 2


@dataclass(frozen=True)
class Shape:
    """What a Result needs to show the report: its key columns and each count's half-width at EACH."""
    keys: tuple[str, ...]
    errors: tuple[float, float]

    def as_dict(self) -> dict:
        return {"keys": list(self.keys), "errors": list(self.errors)}


def shape(plan) -> Shape | None:
    """The report's shape from a Plan, or from a remote plan's description of it (client/remote.py)."""
    if not isinstance(plan, Plan):
        doc = getattr(plan, "clipping", None)
        return None if doc is None else Shape(tuple(doc["keys"]), (float(doc["errors"][0]), float(doc["errors"][1])))
    if plan.clipping is None:
        return None
    ms = (plan.measurement(plan.clipping.clipped), plan.measurement(plan.clipping.people))
    errors = tuple(mechanism(m.mechanism).error_bound(m.release, EACH) * m.granularity for m in ms)
    keys = tuple(o.name for o in plan.visible_outputs if o.kind == OutputKind.KEY)
    return Shape(keys, (errors[0], errors[1]))


def split(table: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """(the answer's own columns, the report's two counts) of a released table; no report: None."""
    if tuple(table.column_names[-2:]) != CLIPPING_COLUMNS:
        return table, None
    n = table.num_columns - 2
    return table.select(list(range(n))), table.select([n, n + 1])


def _ratio(numerator: float, denominator: float) -> float:
    return min(max(numerator / denominator, 0.0), 1.0)


def report(answer: pa.Table, counts: pa.Table, keys: list[str] | tuple[str, ...],
           errors: tuple[float, float]) -> pa.Table:
    """Per released row: its keys, the noisy count of cut people and of people (at least 0), and the
    fraction (NULL where the people's count is not positive), each with its interval."""
    clipped, people = (counts.column(name).to_pylist() for name in CLIPPING_COLUMNS)
    ec, ep = errors
    columns: dict[str, list] = {k: answer.column(k).to_pylist() for k in keys if k in answer.column_names}
    rows = list(zip(clipped, people))
    columns["clipped"] = [max(c, 0) for c, _ in rows]
    columns["clipped_ci_low"] = [max(c - ec, 0.0) for c, _ in rows]
    columns["clipped_ci_high"] = [max(c + ec, 0.0) for c, _ in rows]
    columns["people"] = [max(p, 0) for _, p in rows]
    columns["fraction"] = [_ratio(c, p) if p > 0 else None for c, p in rows]
    columns["fraction_ci_low"] = [_ratio(c - ec, max(p + ep, 1.0)) for c, p in rows]
    columns["fraction_ci_high"] = [_ratio(c + ec, p - ep) if p - ep > 0 else 1.0 for c, p in rows]
    assert tuple(columns)[-len(CLIPPING_FIELDS):] == CLIPPING_FIELDS
    return pa.table(columns)
