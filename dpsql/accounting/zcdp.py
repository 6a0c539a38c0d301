"""The zCDP accountant: every release as delta-approximate rho-zCDP (its privacy map's ``rho``: a pure
epsilon-DP release is epsilon^2/2-zCDP, Bun-Steinke 2016 Prop. 3.3; an (epsilon,
delta) guarantee is delta-approximately epsilon^2/2-zCDP), composed by adding rhos and adding deltas
(Bun-Steinke 2016, Lemma 2.3 and Section 8: approximate zCDP composes with deltas adding). A history
that is delta_a-approximately rho-zCDP is (epsilon, delta_a + delta')-DP for epsilon =
zcdp_epsilon(rho, delta') (accounting/conversions.py, CKS 2020 Cor. 13), so it fits a total (E, D)
when delta_a <= D and zcdp_epsilon(rho, D - delta_a) <= E.

Every rounding is upward: rho and delta are kept as 40-digit Decimals rounded up (exact fractions
of 10,000 charges would grow without bound), the conversion's target delta is rounded down.

>>> from decimal import Decimal
>>> from dpsql.accounting.budget import Cost
>>> from dpsql.accounting.composition import Charged
>>> state = ZCDP.compose(ZCDP.empty(), [Charged(Decimal("0.01"), Decimal(0), None)] * 400)
>>> state.rho == Decimal("0.02"), ZCDP.fits(state, Cost.of(1, 1e-6))
(True, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Sequence

from dpsql.accounting.budget import Cost
from dpsql.accounting.composition import Charged, Report, at_total_delta, privacy_map
from dpsql.accounting.conversions import add_up, decimal_up, float_down, float_up, rho_for, zcdp_epsilon
from dpsql.mechanisms.releases import Release


@dataclass(frozen=True)
class ZState:
    """A history that is ``delta``-approximately ``rho``-zCDP (both upper bounds)."""
    rho: Decimal
    delta: Decimal


@lru_cache(maxsize=4096)
def _rho(release: Release) -> tuple[Decimal, Decimal]:
    rho, delta = privacy_map(release).rho(release)
    return decimal_up(rho), decimal_up(delta)


class ZcdpAccountant:
    name = "zcdp"

    def empty(self) -> ZState:
        return ZState(Decimal(0), Decimal(0))

    def compose(self, state: ZState, charges: Sequence[Charged]) -> ZState:
        rho, delta = state.rho, state.delta
        for charge in charges:
            for release in charge.made():
                r, d = _rho(release)
                rho, delta = add_up(rho, r), add_up(delta, d)
        return ZState(rho, delta)

    def epsilon(self, state: ZState, total: Cost) -> float:
        """The history's epsilon at the total's delta (inf: none)."""
        if state.delta > total.delta:
            return float("inf")
        if state.rho == 0:
            return 0.0
        return zcdp_epsilon(float_up(state.rho), float_down(total.delta - state.delta))

    def fits(self, state: ZState, total: Cost) -> bool:
        return Decimal(self.epsilon(state, total)) <= total.epsilon

    def report(self, state: ZState, total: Cost) -> Report:
        spent = self.epsilon(state, total)
        report = at_total_delta(spent, total, bool(state.rho or state.delta))
        rho_total = rho_for(float(total.epsilon), float_down(total.delta - state.delta)) \
            if state.delta < total.delta else 0.0
        terms = {"rho": float_up(state.rho), "rho_total": rho_total,
                 "rho_remaining": rho_total - float_up(state.rho), "approximate_delta": float_up(state.delta)}
        return Report(report.spent, report.remaining, terms, at_delta=True)


ZCDP = ZcdpAccountant()
