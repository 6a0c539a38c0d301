"""The PLD accountant: the privacy-loss distribution of every release (its privacy map's ``pld``:
dp-accounting's, with pessimistic estimates), composed by Google's dp-accounting package, not by us
(Koskela-Jalko-Honkela 2020, Doroshenko-Ghazi-Kamath-Kumar-Manurangsi 2022: composition of PLDs is
the convolution of their privacy losses). A history fits a total (E, D) when its composed
distribution's hockey-stick divergence at E is at most D. Identical releases of one batch are
composed by ``self_compose`` (powers by FFT); the ledger keeps the composed distribution between
charges, so a charge composes one new release with it, not the whole history again.

>>> from decimal import Decimal
>>> from dpsql.accounting.budget import Cost
>>> from dpsql.accounting.composition import Charged
>>> state = PLD.compose(PLD.empty(), [Charged(Decimal("0.01"), Decimal(0), None)] * 500)
>>> state.charges, PLD.fits(state, Cost.of(1, 1e-6)), round(PLD.report(state, Cost.of(1, 1e-6)).spent[0], 3)
(500, True, 0.937)
"""
from __future__ import annotations

import collections
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Sequence

from dpsql.accounting.budget import Cost
from dpsql.accounting.composition import Charged, Report, at_total_delta, privacy_map
from dpsql.accounting.conversions import float_down
from dpsql.mechanisms.releases import Release


@dataclass(frozen=True)
class PState:
    """The composed privacy-loss distribution of a history (None: nothing released yet)."""
    distribution: Any
    charges: int = 0


@lru_cache(maxsize=256)
def _distribution(release: Release):
    return privacy_map(release).pld(release)


class PldAccountant:
    name = "pld"

    def empty(self) -> PState:
        return PState(None)

    def compose(self, state: PState, charges: Sequence[Charged]) -> PState:
        composed = state.distribution
        counts = collections.Counter(r for c in charges for r in c.made())
        for release, times in counts.items():
            one = _distribution(release)
            many = one if times == 1 else one.self_compose(times)
            composed = many if composed is None else composed.compose(many)
        return PState(composed, state.charges + len(charges))

    def delta(self, state: PState, total: Cost) -> float:
        """The history's delta at the total's epsilon."""
        if state.distribution is None:
            return 0.0
        return float(state.distribution.get_delta_for_epsilon(float_down(total.epsilon)))

    def fits(self, state: PState, total: Cost) -> bool:
        return Decimal(self.delta(state, total)) <= total.delta

    def report(self, state: PState, total: Cost) -> Report:
        if state.distribution is None:
            spent = 0.0
        else:
            spent = float(state.distribution.get_epsilon_for_delta(float_down(total.delta)))
        report = at_total_delta(spent, total, state.distribution is not None)
        terms = {"delta_at_total_epsilon": self.delta(state, total)}
        return Report(report.spent, report.remaining, terms, at_delta=True)


PLD = PldAccountant()
