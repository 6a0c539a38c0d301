"""A release planned before anything is spent: each statistic's plan, cost and expected errors, whether
it would replay free, and whether the whole release fits the budget left (what ``--dry-run`` prints).

Planning reads the SQL, the policy and public tables only (``db.plan``: free, as explain is); the fit
is the ledger's own check (``Ledger.preview``: the accountant composes the history with every release
the run would charge, as its one transaction will), read only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from dpsql.accounting.budget import Cost
from dpsql.api import replay
from dpsql.api.batch import named
from dpsql.api.connection import PrivateConnection
from dpsql.api.statements import Statement
from dpsql.errors import DpsqlError
from dpsql.plan.aggregates import released_directly
from dpsql.plan.model import Plan
from dpsql.plan.text import CONFIDENCE
from dpsql.publish.keys import keyed
from dpsql.publish.spec import ReleaseSpec, Statistic

REWRITTEN = "\nrewritten SQL:\n"   # where an explain text's rewritten SQL begins (left out: long)


@dataclass(frozen=True)
class Planned:
    """One statistic planned: its plan, its share, its outputs' expected errors (95%: explain's), its
    replay key keyed by the owner's secret (publish/keys.py) and whether an earlier run released it."""
    statistic: Statistic
    plan: object
    share: tuple[float, float]   # what it was planned at (the run asks the same)
    epsilon: float
    delta: float
    outputs: tuple[dict, ...]
    replay: str | None
    replays: bool = False

    @property
    def charged(self) -> bool:
        """Whether this statistic charges a budget at all (a public-only one is answered at 0)."""
        return isinstance(self.plan, Plan)

    def statement(self) -> Statement:
        """The batch's statement: at its planned share (a public-only one: none; it spends nothing)."""
        s = self.statistic
        return Statement(s.sql, s.name, *self.share) if self.charged else Statement(s.sql, s.name)

    def summary(self) -> dict:
        """The plan as the manifest keeps it: its explain text (without the rewritten SQL), one line."""
        text = str(self.plan).partition(REWRITTEN)[0]
        line = replay.plan_summary(self.plan) if self.charged else getattr(self.plan, "summary", "")
        return {"text": text, "summary": line}


def outputs(plan) -> tuple[dict, ...]:
    """Each output's name, kind and expected error at 95% (None where it is not one measurement)."""
    if not isinstance(plan, Plan):
        return ()
    found = []
    for o in plan.visible_outputs:
        single = released_directly(o)
        error = plan.measurement(o.measurements[0]).error if single else None
        found.append({"name": o.name, "kind": o.kind.value, "expected_error": error,
                      "confidence": CONFIDENCE if single else None})
    return tuple(found)


def replay_key(db: PrivateConnection, sql: str, plan) -> str | None:
    """The statistic's replay key as the accountant makes it today (api/accountant.py ``order``)."""
    if not isinstance(plan, Plan):
        return None
    text, names = replay.normalise_sql(sql)
    return replay.replay_key((text, names + (replay.plan_signature(plan),)), Cost.of(plan.epsilon, plan.delta),
                             db.ledger.identity, db.data_version)


def _plan(db: PrivateConnection, statistic: Statistic, share: tuple[float, float], ci: float | None):
    try:
        return db.plan(statistic.sql, share[0], share[1], ci=ci)
    except DpsqlError as err:
        raise named(err, statistic.name) from None


def plan_all(db: PrivateConnection, spec: ReleaseSpec, key: bytes | None, progress=None) -> list[Planned]:
    """Every statistic planned at its share (a refusal names it; nothing is spent). One over public tables
    only spends nothing: the budget is split again over the others, and they are planned at their new
    shares. Without the owner's key (a dry run before any release) no replay key is kept: nothing is
    claimed to replay."""
    shares = spec.shares()
    plans = [_plan(db, s, share, spec.ci) for s, share in zip(spec.statistics, shares)]
    exact = frozenset(s.name for s, p in zip(spec.statistics, plans) if not isinstance(p, Plan))
    found = []
    for statistic, plan, old, share in zip(spec.statistics, plans, shares, spec.shares(exact)):
        if isinstance(plan, Plan) and share != old:
            plan = _plan(db, statistic, share, spec.ci)
        raw = replay_key(db, statistic.sql, plan)
        found.append(Planned(statistic, plan, share, float(getattr(plan, "epsilon", 0.0)),
                             float(getattr(plan, "delta", 0.0)), outputs(plan),
                             None if raw is None or key is None else keyed(key, raw)))
        if progress is not None:
            progress(statistic.name)
    return found


@dataclass(frozen=True)
class Preview:
    """A release before it runs: its statistics planned, what it would charge and whether that fits."""
    spec: ReleaseSpec
    planned: tuple[Planned, ...]
    charge: tuple[Decimal, Decimal]
    fits: bool
    remaining: tuple[float, float] = field(default=(0.0, 0.0))


def preview(db: PrivateConnection, spec: ReleaseSpec, planned: list[Planned]) -> Preview:
    """What the run would charge (the statistics that would not replay) and whether the ledger's own
    check finds it fits the budget left now."""
    paying = [p for p in planned if p.charged and not p.replays]
    cost = Cost(Decimal(0), Decimal(0))
    for p in paying:
        cost = cost + Cost.of(p.plan.epsilon, p.plan.delta)   # type: ignore[attr-defined]
    releases = tuple(r for p in paying for r in p.plan.releases())   # type: ignore[attr-defined]
    budget, fits = db.ledger.preview(cost, releases)
    left = (float(budget.remaining_epsilon), float(budget.remaining_delta))
    return Preview(spec, tuple(planned), cost.as_tuple(), fits or not paying, left)


def describe(found: Preview) -> str:
    """The dry run's text: per statistic its cost and share, its outputs' expected errors, and whether
    it would replay free; then the release's charge against what is left."""
    spec = found.spec
    lines = [f"release {spec.title!r}: budget epsilon={spec.epsilon:g}, delta={spec.delta:g}"]
    for p in found.planned:
        cost = "replays free (released before)" if p.replays else \
            f"epsilon={p.epsilon:g} ({p.epsilon / spec.epsilon:.0%} of the release), delta={p.delta:g}" \
            if p.charged else "public tables only: answered exactly, free"
        lines.append(f"  {p.statistic.name}: {cost}")
        for o in p.outputs:
            error = "a group key: no noise" if o["kind"] == "key" else \
                "no single error bar (several measurements; the run gives its interval)" \
                if o["expected_error"] is None else f"expected error ±{o['expected_error']:.4g} ({o['confidence']:.0%})"
            lines.append(f"    {o['name']} ({o['kind']}): {error}")
    eps, delta = found.charge
    lines.append(f"the run would charge epsilon={float(eps):g}, delta={float(delta):g}; remaining before it: "
                 f"epsilon={found.remaining[0]:g}, delta={found.remaining[1]:g}; "
                 + ("it fits" if found.fits else "it does NOT fit: nothing would be spent"))
    return "\n".join(lines) + "\n"
