"""The accountants a policy may choose (``budget: {accountant: basic | zcdp | pld}``), by name; what
each is and does: accounting/composition.py.

zcdp and pld are never looser than basic: each keeps basic's sum beside its own composition, and a
history fits when either bound fits. Both are valid statements about the same history (it is (sum
epsilon, sum delta)-DP and (epsilon', delta')-DP at once), so either one that fits the total proves it
fits. Few charges convert worse through zCDP than they add (one epsilon 0.1 charge is 0.005-zCDP,
epsilon 0.53 at delta 1e-6); many charges add worse than they compose.

>>> from decimal import Decimal
>>> from dpsql.accounting.budget import Cost
>>> c = Charged(Decimal("0.5"), Decimal(0), None)
>>> a = ACCOUNTANTS["basic"]
>>> a.fits(a.compose(a.empty(), [c, c]), Cost.of(1, 0)), a.fits(a.compose(a.empty(), [c, c, c]), Cost.of(1, 0))
(True, False)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from dpsql.accounting.basic import BASIC
from dpsql.accounting.budget import Cost
from dpsql.accounting.composition import Accountant, Charged, Report, at_total_delta
from dpsql.accounting.pld import PLD
from dpsql.accounting.zcdp import ZCDP
from dpsql.policy.model import ACCOUNTANTS as NAMES


@dataclass(frozen=True)
class Both:
    """A history as basic sums it and as a tighter accountant composes it."""
    basic: Cost
    tight: Any


class AtLeastBasic:
    """``tight``'s composition, or basic's sum where that is the smaller bound (see above)."""

    def __init__(self, tight: Accountant):
        self.tight, self.name = tight, tight.name

    def empty(self) -> Both:
        return Both(BASIC.empty(), self.tight.empty())

    def compose(self, state: Both, charges: Sequence[Charged]) -> Both:
        return Both(BASIC.compose(state.basic, charges), self.tight.compose(state.tight, charges))

    def fits(self, state: Both, total: Cost) -> bool:
        return BASIC.fits(state.basic, total) or self.tight.fits(state.tight, total)

    def report(self, state: Both, total: Cost) -> Report:
        """The tight accountant's report; its epsilon at the total's delta replaced by basic's sum when
        that is smaller and basic's delta is within the total's."""
        tight = self.tight.report(state.tight, total)
        summed = float(state.basic.epsilon)
        if state.basic.delta > total.delta or summed >= tight.spent[0]:
            return tight
        shown = at_total_delta(summed, total, bool(state.basic.epsilon or state.basic.delta))
        return Report(shown.spent, shown.remaining, tight.terms, at_delta=True)


_ALL: tuple[Accountant, ...] = (BASIC, AtLeastBasic(ZCDP), AtLeastBasic(PLD))
# By the names the policy accepts (policy/model.py, below this layer), in its order.
ACCOUNTANTS: dict[str, Accountant] = {a.name: a for a in sorted(_ALL, key=lambda a: NAMES.index(a.name))}

__all__ = ["ACCOUNTANTS", "Accountant", "Charged", "Report"]
