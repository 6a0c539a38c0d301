"""What every accountant is: how a ledger composes its charges into what the history spent, and whether one more
charge fits a total (epsilon, delta). The policy chooses one (``budget: {accountant: ...}``; accounting/accountants.py lists them):

- ``basic`` (accounting/basic.py): epsilons add, deltas add (Dwork-Roth 2014, Thm 3.16); what every
  ledger made before accountants means.
- ``zcdp`` (accounting/zcdp.py): each release as delta-approximate rho-zCDP; rhos add, deltas add, and
  the total converts to (epsilon, delta) (accounting/conversions.py).
- ``pld`` (accounting/pld.py): the privacy-loss distribution of every release, composed by Google's
  dp-accounting (pessimistic estimates), read at the total's delta.

An accountant never names a mechanism: it asks each release's privacy map (mechanisms/base.py
``PRIVACY_MAPS``). A charge reaches it as ``Charged``: the (epsilon, delta) the query was charged at
(its own standalone guarantee) and what it released (mechanisms/releases.py). A charge recorded
without releases (a format 2 ledger's, or one whose caller named none) composes as that (epsilon,
delta) guarantee (``Release.approximate``): never as anything cheaper than what it was promised at.

The state an accountant keeps is immutable (``compose`` returns a new one), so a ledger can keep it
between charges and try a charge on it without changing it.

>>> from decimal import Decimal
>>> Charged(Decimal("0.5"), Decimal(0), None).made()
(Release(mechanism='approximate', sensitivity=None, scale=None, epsilon=Fraction(1, 2), delta=Fraction(0, 1)),)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Protocol, Sequence, cast

from dpsql.accounting.budget import Cost
from dpsql.mechanisms.base import PRIVACY_MAPS
from dpsql.mechanisms.releases import Release


class PrivacyMap(Protocol):
    """What an accountant asks of a release's mechanism (mechanisms/base.py ``Mechanism``'s privacy map)."""

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]: ...

    def pld(self, release: Release) -> Any: ...


def privacy_map(release: Release) -> PrivacyMap:
    """The privacy map of the mechanism that made ``release`` (the ledger refuses unknown ones)."""
    return cast(PrivacyMap, PRIVACY_MAPS[release.mechanism])


@dataclass(frozen=True)
class Charged:
    """One charge as an accountant composes it: its (epsilon, delta) and its releases (None: unknown)."""
    epsilon: Decimal
    delta: Decimal
    releases: tuple[Release, ...] | None

    def made(self) -> tuple[Release, ...]:
        """What the charge released; a charge recorded without its releases, as its (epsilon, delta)."""
        if self.releases is not None:
            return self.releases
        return (Release.approximate(self.epsilon, self.delta),) if self.epsilon or self.delta else ()


@dataclass(frozen=True)
class Report:
    """What a history spent against a total, as (epsilon, delta) and in the accountant's own terms.

    ``at_delta``: zcdp and pld state the history as an epsilon at the total's delta (spent and
    remaining epsilons at that delta); basic's figures are sums and differences of both."""
    spent: tuple[float, float]
    remaining: tuple[float, float]
    terms: dict[str, float] = field(default_factory=dict)
    at_delta: bool = False


class Accountant(Protocol):
    """Composes a history of charges; says whether it fits a total; reports it."""

    name: str

    def empty(self) -> Any:
        """The state of a history without charges."""
        ...

    def compose(self, state: Any, charges: Sequence[Charged]) -> Any:
        """The state after ``charges`` too (``state`` is not changed)."""
        ...

    def fits(self, state: Any, total: Cost) -> bool:
        """Whether the history in ``state`` is (total.epsilon, total.delta)-DP by this accountant."""
        ...

    def report(self, state: Any, total: Cost) -> Report:
        ...


def at_total_delta(epsilon: float, total: Cost, anything: bool) -> Report:
    """The (epsilon, delta) view of an accountant that states a history as an epsilon at the total's
    delta: spent (epsilon, total delta), remaining (total epsilon - epsilon, total delta)."""
    if not anything:
        return Report((0.0, 0.0), (float(total.epsilon), float(total.delta)), at_delta=True)
    # The difference of two decimals (a float's repr is its shortest decimal): 1 - 0.1 shows as 0.9.
    left = float(total.epsilon - Decimal(repr(epsilon))) if math.isfinite(epsilon) else -math.inf
    return Report((epsilon, float(total.delta)), (left, float(total.delta)), at_delta=True)
