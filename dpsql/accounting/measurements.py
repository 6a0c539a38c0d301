"""Measurement identities: what one released noisy measurement measured, so a later query that needs the
same measurement reads the released value instead of paying for a new draw (issue 26, item 2).

The privacy argument. A released noisy measurement (every group's value, or every group partition
selection released) was paid for when it was drawn. Anything computed from released values alone is
post-processing and costs nothing more. So a query whose measurements were all released before, to the
same analyst, may be answered from those values at epsilon 0, provided each value is *exactly* what the
new query would otherwise draw afresh: the same exact quantity under the same noise distribution. The
identity is therefore conservative: a SHA-256 over everything that could change the exact value or the
noise law, and anything not known to be irrelevant is in it:

- the policy in force (its identity: every table's bounds, keys, units, L and C, the budget) and the
  data version (engines/versions.py: a changed table changes it, so nothing replays across data);
- the measurement's lowered SQL alone, as the engine would run it (``lower/rewrite.py`` ``stage=
  "released"``, the noise function and generated names fixed): the relation (joins, per-person
  tables), WHERE, the grouping and its key domain (public keys, derived keys, pruned keys), the
  argument, clamps and grid, C and L, the contribution bounding, partition selection's count and
  threshold, the mechanism's code and its noise arguments (scale);
- the measurement's own fields (kind, bounds, granularity, sensitivity, loss, scale, mechanism).

Only the query's post-processing is left out: output names, expressions over released aggregates,
ROUND, HAVING, ORDER BY, LIMIT, the confidence level, clamping at 0. Two queries that differ there share
measurements. Plans with parts that are not one noisy value per group (a quantile tree or rule, a noisy
top-k, earlier stages, the clipping report, a public lookup or last stage) have no measurement
identities: they replay only as a byte-identical query does (api/replay.py).

Partial reuse: a query that needs some new measurements pays only for those when that is exact:
pure-DP measurements of public groups (no partition selection, no delta), each charged its own loss,
rounded up. Otherwise (partition selection, approximate or zCDP losses) it is all or nothing: every
measurement replayed, or all drawn and charged in full.
"""
from __future__ import annotations

import dataclasses
import decimal
import enum
import hashlib
from decimal import Decimal
from fractions import Fraction
from typing import Any

from sqlglot import exp

from dpsql.accounting.budget import Cost
from dpsql.accounting.identity import canonical
from dpsql.lower.noise import scalar_measurements
from dpsql.lower.rewrite import rewrite
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement

FORMAT = "dpsql-measurement/1"   # a new format of the identity makes every earlier one a miss
NOISE = "noise"                  # the noise function as the identity's SQL names it (each connection has its own)
VALUE = "__value"                # a kept measurement's column: its keys first, then this


def replayable(plan: Plan) -> bool:
    """Whether every release of ``plan`` is one noisy value per group, kept by identity."""
    return (bool(plan.measurements) and not plan.stages and plan.then is None and plan.lookup is None
            and plan.top_k is None and plan.clipping is None
            and len(scalar_measurements(plan)) == len(plan.measurements))


def partial(plan: Plan) -> bool:
    """Whether a query of ``plan`` may pay for only the measurements it lacks: each one's pure loss is
    its exact share of the charge, and public groups are drawn whatever was released before."""
    return plan.selection is None and plan.delta == 0 and all(_pure(m) for m in plan.measurements)


def identities(plan: Plan, policy: str, data_version: str) -> tuple[str, ...]:
    """One identity per measurement of a ``replayable`` plan, in its order (see the module docstring)."""
    return tuple(_identity(plan, m, policy, data_version) for m in plan.measurements)


def alone(plan: Plan, kept: tuple[Measurement, ...]) -> Plan:
    """``plan`` reduced to the measurements ``kept`` (and partition selection's count, which chooses
    their groups): no outputs, nothing after them. What ``stage="released"`` draws for them."""
    if plan.selection is not None and all(m.name != plan.selection.measurement for m in kept):
        kept = (*kept, plan.measurement(plan.selection.measurement))
    return dataclasses.replace(plan, measurements=kept, outputs=(), having=None, order=(), limit=None,
                               offset=None, rewritten_sql="", budget_note=None)


def price(plan: Plan, drawn: tuple[int, ...]) -> tuple[Cost, tuple]:
    """The charge of drawing only the measurements at ``drawn`` (a ``partial`` plan): the sum of their
    pure losses, rounded up to a decimal, and their releases."""
    chosen = [plan.measurements[i] for i in drawn]
    epsilon = _up(sum((m.loss.epsilon for m in chosen), Fraction(0)))
    return Cost(epsilon, Decimal(0)), tuple(r for m in chosen for r in m.releases)


def _pure(m: Measurement) -> bool:
    """A loss that is an epsilon alone (no delta, no rho): what adds up exactly in the charge."""
    return m.loss.delta == 0 and m.loss.rho == 0 and m.loss.epsilon > 0


def _up(x: Fraction) -> Decimal:
    """``x`` as a decimal never below it (17 significant digits, rounded up)."""
    context = decimal.Context(prec=17, rounding=decimal.ROUND_CEILING)
    return context.divide(Decimal(x.numerator), Decimal(x.denominator))


def _identity(plan: Plan, m: Measurement, policy: str, data_version: str) -> str:
    """SHA-256 of one measurement: its lowered SQL alone under fixed names, its fields, the policy and data."""
    own = dataclasses.replace(m, name="m")
    selection = plan.selection
    if selection is not None and selection.measurement != m.name:
        count = dataclasses.replace(plan.measurement(selection.measurement), name="s")
        reduced = dataclasses.replace(alone(plan, (own, count)), selection=dataclasses.replace(selection,
                                                                                               measurement="s"))
    else:
        renamed = selection if selection is None else dataclasses.replace(selection, measurement="m")
        reduced = dataclasses.replace(alone(plan, (own,)), selection=renamed)
    sql = rewrite(reduced, NOISE, stage="released").rewritten_sql
    doc = [FORMAT, policy, data_version, sql, _fields(own), _fields(selection), plan.max_groups, plan.max_rows]
    return hashlib.sha256(canonical(doc).encode()).hexdigest()


def _fields(value: Any) -> Any:
    """A dataclass's fields as plain data for ``canonical``: SQL nodes as text, numbers exact."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__] + [[f.name, _fields(getattr(value, f.name))] for f in dataclasses.fields(value)]
    if isinstance(value, exp.Expression):
        return value.sql(dialect="duckdb")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_fields(v) for v in value]
    if isinstance(value, (Fraction, float)):
        return repr(value)
    return value
