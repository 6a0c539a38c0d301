"""Budget accounting: basic sequential composition of (epsilon, delta), charged before release.

Amounts are kept as exact decimals of what the user typed (``repr`` of the float), so that charging
0.1 then 0.2 against a budget of 0.3 fits, as a person would expect; floats would refuse it.

>>> acc = Accountant(0.3, 0.0)
>>> acc.reserve(0.1, 0.0); acc.reserve(0.2, 0.0); acc.budget.remaining_epsilon
0.0
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from decimal import Decimal

from .errors import BudgetExceeded


def exact(x: float) -> Decimal:
    return Decimal(repr(float(x)))


@dataclass(frozen=True)
class Budget:
    """Total, spent and remaining privacy budget."""
    total_epsilon: float
    total_delta: float
    spent_epsilon: float
    spent_delta: float
    queries: int = 0

    @property
    def remaining_epsilon(self) -> float:
        return float(exact(self.total_epsilon) - exact(self.spent_epsilon))

    @property
    def remaining_delta(self) -> float:
        return float(exact(self.total_delta) - exact(self.spent_delta))


class Accountant:
    """In-memory accountant: refuses any charge that would pass the total (thread-safe)."""

    def __init__(self, total_epsilon: float, total_delta: float):
        self._total = (exact(total_epsilon), exact(total_delta))
        self._spent = (Decimal(0), Decimal(0))
        self._queries = 0
        self._lock = threading.Lock()

    def reserve(self, epsilon: float, delta: float) -> None:
        """Record the spend, or raise BudgetExceeded and record nothing."""
        want = (exact(epsilon), exact(delta))
        with self._lock:
            after = (self._spent[0] + want[0], self._spent[1] + want[1])
            if after[0] > self._total[0] or after[1] > self._total[1]:
                remaining = (float(self._total[0] - self._spent[0]), float(self._total[1] - self._spent[1]))
                raise BudgetExceeded((float(epsilon), float(delta)), remaining)
            self._spent = after
            self._queries += 1

    def charge(self, plan) -> None:
        self.reserve(plan.epsilon, plan.delta)

    @property
    def budget(self) -> Budget:
        with self._lock:
            return Budget(float(self._total[0]), float(self._total[1]), float(self._spent[0]),
                          float(self._spent[1]), self._queries)
