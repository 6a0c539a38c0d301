"""Budget accounting: exact privacy costs, how they compose, and the totals a ledger reports.

Amounts are exact decimals of what the user typed (``repr`` of the float), so that charging 0.1
then 0.2 against a budget of 0.3 fits, as a person would expect; floats would refuse it.

A ``Composition`` maps a Plan to its ``Cost`` and composes a history of costs into the total spent.
``BASIC`` is basic sequential composition (Dwork-Roth 2014, Thm 3.16): epsilons add, deltas add.
Within one query the plan already splits epsilon over its measurements (sequential) and charges a
GROUP BY once over its disjoint partitions (parallel, with the factor L in the sensitivity), so a
query's cost is ``(plan.epsilon, plan.delta)``.

Adding zCDP for Gaussian noise later (Bun-Steinke 2016) means a second Composition: its Cost
carries rho (Gaussian: rho = sensitivity^2 / (2 sigma^2); a pure epsilon-DP measurement enters as
rho = epsilon^2 / 2), rhos add, and the total converts to (epsilon, delta) with
epsilon = rho + 2 sqrt(rho ln(1/delta)) before it is compared with the budget. Every ledger row
records the composition that charged it (column ``composition``), so old rows stay readable.

>>> check_fits(Cost.of(0.1, 0), Cost.of(0.2, 0), Cost.of(0.3, 0))   # 0.1 + 0.2 fits 0.3 exactly
>>> Cost.of(0.1, 0) + Cost.of(0.2, 0) == Cost.of(0.3, 0)
True
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable

from dpsql.errors import BudgetExceeded, InternalError

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


class BasicComposition:
    """Basic composition: a query costs (plan.epsilon, plan.delta); costs add."""
    name = "basic"

    def cost(self, plan) -> Cost:
        return Cost.of(plan.epsilon, plan.delta)

    def compose(self, costs: Iterable[Cost]) -> Cost:
        return self.compose_amounts((c.epsilon, c.delta) for c in costs)

    def compose_amounts(self, amounts: Iterable[tuple[Decimal, Decimal]]) -> Cost:
        """The total of (epsilon, delta) pairs already checked finite and >= 0: summed in one exact
        context (a ledger sums every charge at every charge; a Cost per row was 10x slower)."""
        epsilon, delta = Decimal(0), Decimal(0)
        with decimal.localcontext(_EXACT):
            for e, d in amounts:
                epsilon += e
                delta += d
        return Cost(epsilon, delta)


BASIC = BasicComposition()
COMPOSITIONS = {BASIC.name: BASIC}


def check_fits(spent: Cost, want: Cost, total: Cost, *, budget: str | None = None, hint: str = "") -> None:
    """Raise BudgetExceeded (exact requested, remaining and difference; which ``budget``) unless
    spent + want fits."""
    if not (spent + want).fits_within(total):
        remaining = total - spent
        raise BudgetExceeded(want.as_tuple(), remaining, budget=budget, hint=hint)


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
    composition: str = BASIC.name
    analyst: str | None = None   # who charged it; None: the owner

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Budget:
    """Total, spent and remaining privacy budget, with the per-query history of the ledger."""
    total_epsilon: float
    total_delta: float
    spent_epsilon: float
    spent_delta: float
    queries: int = 0
    history: tuple[Charge, ...] = ()
    ledger: str | None = None
    analyst: str | None = None   # an analyst's own budget and history; None: the whole ledger

    @property
    def remaining_epsilon(self) -> float:
        return float(_EXACT.subtract(exact(self.total_epsilon), exact(self.spent_epsilon)))

    @property
    def remaining_delta(self) -> float:
        return float(_EXACT.subtract(exact(self.total_delta), exact(self.spent_delta)))

    def as_dict(self) -> dict:
        """Plain data for JSON: total, spent, remaining, history."""
        return {
            "ledger": self.ledger,
            "analyst": self.analyst,
            "total": {"epsilon": self.total_epsilon, "delta": self.total_delta},
            "spent": {"epsilon": self.spent_epsilon, "delta": self.spent_delta},
            "remaining": {"epsilon": self.remaining_epsilon, "delta": self.remaining_delta},
            "queries": self.queries,
            "history": [c.as_dict() for c in self.history],
        }
