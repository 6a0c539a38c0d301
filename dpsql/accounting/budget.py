"""Budget accounting: exact privacy costs, how they compose, and the totals a ledger reports.

Amounts are exact decimals of what the user typed (``repr`` of the float), so that charging 0.1
then 0.2 against a budget of 0.3 fits, as a person would expect; floats would refuse it.

How a history of charges composes is an accountant's (accounting/composition.py; the policy chooses
basic, zcdp or pld). Within one query the plan already splits epsilon over its measurements
(sequential) and charges a GROUP BY once over its disjoint partitions (parallel, with the factor L in
the sensitivity), so a query is charged at ``(plan.epsilon, plan.delta)``, its own standalone
guarantee, and records what it released (``Plan.releases()``) for the accountant. Every ledger row
records the accountant that charged it (column ``composition``).

>>> (Cost.of(0.1, 0) + Cost.of(0.2, 0)).fits_within(Cost.of(0.3, 0))   # 0.1 + 0.2 fits 0.3 exactly
True
>>> Cost.of(0.1, 0) + Cost.of(0.2, 0) == Cost.of(0.3, 0)
True
"""
from __future__ import annotations

import decimal
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Iterable

from dpsql.errors import InternalError

# Enough digits that adding any two finite doubles is exact; Inexact is trapped, never rounded.
_EXACT = decimal.Context(prec=2000, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                         traps=[decimal.Inexact, decimal.InvalidOperation, decimal.Overflow])


def exact(x) -> Decimal:
    """The exact decimal of a number as the user typed it: ``exact(0.1) == Decimal('0.1')``.

    >>> exact(0.1), exact(1e-6), exact(Decimal("0.25")), exact(100.0)
    (Decimal('0.1'), Decimal('0.000001'), Decimal('0.25'), Decimal('100'))
    """
    if isinstance(x, Decimal):
        return x
    value = Decimal(repr(float(x))) if x else Decimal(0)
    # Whole numbers without a trailing ".0", so messages read "epsilon=100", not "100.0".
    return value.quantize(Decimal(1), context=_EXACT) if value == value.to_integral_value() else value


@dataclass(frozen=True)
class Cost:
    """An exact (epsilon, delta) privacy cost; adds exactly and compares coordinate-wise."""
    epsilon: Decimal
    delta: Decimal

    @classmethod
    def of(cls, epsilon, delta) -> "Cost":
        return cls(exact(epsilon), exact(delta))

    def __post_init__(self):
        for name in ("epsilon", "delta"):
            value = getattr(self, name)
            if not isinstance(value, Decimal) or not value.is_finite() or value < 0:
                raise InternalError("DP999", f"cost {name}={value!r} is not a finite decimal >= 0: "
                                    "this is probably a bug")

    def __add__(self, other: "Cost") -> "Cost":
        with decimal.localcontext(_EXACT):
            return Cost(self.epsilon + other.epsilon, self.delta + other.delta)

    def __sub__(self, other: "Cost") -> tuple[Decimal, Decimal]:
        with decimal.localcontext(_EXACT):
            return (self.epsilon - other.epsilon, self.delta - other.delta)

    def fits_within(self, total: "Cost") -> bool:
        return self.epsilon <= total.epsilon and self.delta <= total.delta

    def as_tuple(self) -> tuple[Decimal, Decimal]:
        return (self.epsilon, self.delta)


ZERO = Cost(Decimal(0), Decimal(0))


def add_all(amounts: Iterable[tuple[Decimal, Decimal]]) -> Cost:
    """The exact total of (epsilon, delta) pairs already checked finite and >= 0, summed in one exact
    context (a ledger sums many at a time; a Cost per pair was 10x slower).

    >>> add_all([(Decimal("0.1"), Decimal(0)), (Decimal("0.2"), Decimal("1E-7"))])
    Cost(epsilon=Decimal('0.3'), delta=Decimal('1E-7'))
    """
    epsilon, delta = Decimal(0), Decimal(0)
    with decimal.localcontext(_EXACT):
        for e, d in amounts:
            epsilon += e
            delta += d
    return Cost(epsilon, delta)


@dataclass(frozen=True)
class Charge:
    """One ledger row: a query charged before it ran, and what became of it.

    ``status`` is ``reserved`` (charged, not yet released: running, or the process died),
    ``released`` (answered) or ``failed`` (the engine failed after the charge). All three count as
    spent. ``replays`` counts later identical queries answered from this one at no cost.
    """
    id: int
    time: str
    sql: str
    plan: str
    epsilon: float
    delta: float
    status: str
    replays: int = 0
    composition: str = "basic"   # the accountant in force when it was charged
    analyst: str | None = None   # who charged it; None: the owner

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Figures:
    """Total, spent and remaining as an accountant reported them (a Budget's, an Analyst's)."""
    total_epsilon: float
    total_delta: float
    spent_epsilon: float
    spent_delta: float
    accountant: str
    terms: dict
    remaining: tuple[float, float] | None   # None: total - spent, exactly (basic)

    @property
    def at_delta(self) -> bool:
        return self.remaining is not None

    @property
    def remaining_epsilon(self) -> float:
        if self.remaining is not None:
            return self.remaining[0]
        return float(_EXACT.subtract(exact(self.total_epsilon), exact(self.spent_epsilon)))

    @property
    def remaining_delta(self) -> float:
        if self.remaining is not None:
            return self.remaining[1]
        return float(_EXACT.subtract(exact(self.total_delta), exact(self.spent_delta)))

    def figures(self) -> dict:
        """As JSON-ready data: total, spent and remaining as (epsilon, delta), an epsilon that no bound
        holds (inf) as null, and the accountant with its own terms."""
        def pair(epsilon: float, delta: float) -> dict:
            return {"epsilon": epsilon if math.isfinite(epsilon) else None, "delta": delta}
        return {"total": pair(self.total_epsilon, self.total_delta),
                "spent": pair(self.spent_epsilon, self.spent_delta),
                "remaining": pair(self.remaining_epsilon, self.remaining_delta),
                "accountant": self.accountant, "at_delta": self.at_delta,
                "terms": {k: v if math.isfinite(v) else None for k, v in self.terms.items()}}


@dataclass(frozen=True)
class Budget(Figures):
    """Total, spent and remaining privacy budget, with the per-query history of the ledger.

    ``accountant`` composed it (accounting/composition.py). Under basic, spent and remaining are sums
    and differences of both coordinates. Under zcdp and pld (``at_delta``) the history is stated as an
    epsilon at the total's delta: spent (epsilon, total delta) and remaining (total epsilon - spent
    epsilon, total delta); ``terms`` holds the accountant's own figures (rho for zcdp, the delta at
    the total epsilon for pld). An epsilon is ``inf`` when no epsilon bounds the history at that delta.
    """
    total_epsilon: float
    total_delta: float
    spent_epsilon: float
    spent_delta: float
    queries: int = 0
    history: tuple[Charge, ...] = ()
    ledger: str | None = None
    analyst: str | None = None   # an analyst's own budget and history; None: the whole ledger
    accountant: str = "basic"
    terms: dict = field(default_factory=dict)
    remaining: tuple[float, float] | None = None   # None: total - spent, exactly (basic)

    def as_dict(self) -> dict:
        """Plain data for JSON: total, spent, remaining (an unbounded epsilon as null), the accountant
        and its own terms, history."""
        return {
            "ledger": self.ledger,
            "analyst": self.analyst,
            **self.figures(),
            "queries": self.queries,
            "history": [c.as_dict() for c in self.history],
        }

