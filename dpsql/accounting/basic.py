"""The basic accountant: every charge costs the (epsilon, delta) it was charged at, and costs add
(sequential composition, Dwork-Roth 2014, Thm 3.16). Exact decimals of what was typed, so 0.1 + 0.2
fits 0.3. What every ledger made before accountants means, and the default.

It reads a charge's (epsilon, delta), not its releases: a query's own guarantee already covers what
it released (the plan splits its epsilon over its measurements), so the sum is the same bound the
ledger always kept.

>>> from decimal import Decimal
>>> from dpsql.accounting.composition import Charged
>>> state = BASIC.compose(BASIC.empty(), [Charged(Decimal("0.1"), Decimal(0), None)] * 3)
>>> state, BASIC.fits(state, Cost.of(0.3, 0)), BASIC.report(state, Cost.of(1, 1e-6)).remaining
(Cost(epsilon=Decimal('0.3'), delta=Decimal('0')), True, (0.7, 1e-06))
"""
from __future__ import annotations

from typing import Sequence

from dpsql.accounting.budget import ZERO, Cost, add_all
from dpsql.accounting.composition import Charged, Report


class BasicAccountant:
    name = "basic"

    def empty(self) -> Cost:
        return ZERO

    def compose(self, state: Cost, charges: Sequence[Charged]) -> Cost:
        return state + add_all((c.epsilon, c.delta) for c in charges)

    def fits(self, state: Cost, total: Cost) -> bool:
        return state.fits_within(total)

    def report(self, state: Cost, total: Cost) -> Report:
        left = total - state
        return Report((float(state.epsilon), float(state.delta)), (float(left[0]), float(left[1])))


BASIC = BasicAccountant()
