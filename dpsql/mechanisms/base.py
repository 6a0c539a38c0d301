"""The Mechanism protocol: how a noisy measurement is calibrated, what it costs, how far its noise
strays, how partition selection thresholds it, and how it draws. Measurements name their mechanism
(``Measurement.mechanism``); ``mechanism(name)`` finds it. Discrete Laplace is the first.

Adding one (discrete Gaussian under zCDP, the exponential mechanism): implement this protocol in a
module of this package, register it in ``MECHANISMS``, and let the plan choose it (see
docs/architecture.md, "How to add a mechanism").

>>> m = mechanism("discrete Laplace")
>>> m.calibrate(3, 0.5), m.covers(3, 6.0, 0.5), m.error_bound(6.0, 0.95)
(6.0, True, 18)
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol

import numpy as np

from dpsql.mechanisms import discrete_laplace as laplace
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import APPROX, Release

# The measures a mechanism's privacy map states its loss in (OpenDP's shape): pure epsilon-DP,
# zero-concentrated DP (rho), approximate (epsilon, delta)-DP.
PURE, ZCDP, APPROXIMATE = "pure", "zCDP", "approximate"
# dp-accounting's default discretization of privacy losses (its estimates are pessimistic).
PLD_DISCRETIZATION = 1e-4


class Mechanism(Protocol):
    """What the plan, the lowering, explain and the engine ask of a noise mechanism."""

    name: str

    def calibrate(self, sensitivity: int, epsilon: float) -> float:
        """The noise scale (in grid steps) that makes a measurement of this sensitivity epsilon-DP."""
        ...

    def covers(self, sensitivity: int, scale: float, epsilon: float) -> bool:
        """Whether noise of ``scale`` makes a measurement of ``sensitivity`` epsilon-DP (exactly)."""
        ...

    def error_bound(self, scale: float, confidence: float) -> float:
        """The smallest a with P(|noise| <= a) >= confidence, in grid steps."""
        ...

    def selection_threshold(self, scale: float, max_groups: int, delta: float) -> int:
        """tau: a group held by one unit passes noisy count >= tau with probability <= delta / L."""
        ...

    def sample(self, source: RandomSource, scale: float, size: int) -> np.ndarray:
        """``size`` independent draws of the noise, as int64 grid steps."""
        ...

    # --- the privacy map: what a release of this mechanism costs (an accountant composes these) ---
    measure: str   # PURE, ZCDP or APPROXIMATE: the measure its loss is native in

    def epsilon(self, release: Release, delta: Fraction) -> Fraction | float:
        """The smallest epsilon for which the release is (epsilon, delta)-DP (inf: none)."""
        ...

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]:
        """(rho, delta): the release is delta-approximately rho-zCDP (Bun-Steinke 2016, Def. 8.1)."""
        ...

    def pld(self, release: Release, discretization: float = PLD_DISCRETIZATION):
        """The release's privacy-loss distribution (dp-accounting's PrivacyLossDistribution, pessimistic)."""
        ...


class DiscreteLaplace:
    """Discrete Laplace noise on an integer grid (Canonne-Kamath-Steinke 2020), scale t: pure
    epsilon-DP for sensitivity Delta when t >= Delta / epsilon (Dwork-McSherry-Nissim-Smith 2006)."""

    name = "discrete Laplace"

    def calibrate(self, sensitivity: int, epsilon: float) -> float:
        # Exact: the dyadic rational just above sensitivity / epsilon, computed in fractions.
        return float(laplace.dyadic_scale(Fraction(sensitivity) / Fraction(epsilon)))

    def covers(self, sensitivity: int, scale: float, epsilon: float) -> bool:
        return epsilon > 0 and sensitivity >= 0 and Fraction(scale) * Fraction(epsilon) >= sensitivity

    def error_bound(self, scale: float, confidence: float) -> float:
        return laplace.discrete_laplace_bound(scale, confidence)

    def selection_threshold(self, scale: float, max_groups: int, delta: float) -> int:
        return laplace.selection_threshold(scale, max_groups, delta)

    def sample(self, source: RandomSource, scale: float, size: int) -> np.ndarray:
        return laplace.discrete_laplace(source, scale, size)

    measure = PURE

    def epsilon(self, release: Release, delta: Fraction = Fraction(0)) -> Fraction | float:
        # Pure DP: L1 sensitivity / scale (Dwork-McSherry-Nissim-Smith 2006), whatever delta.
        if not release.scale:
            return math.inf if release.sensitivity.l1 else Fraction(0)
        return release.sensitivity.l1 / release.scale

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]:
        # epsilon-DP implies epsilon^2 / 2-zCDP (Bun-Steinke 2016, Prop. 3.3).
        eps = self.epsilon(release)
        return eps * eps / 2, Fraction(0)

    def pld(self, release: Release, discretization: float = PLD_DISCRETIZATION):
        # A vector of independent discrete Laplace draws moved by an L1 total of Delta is dominated by
        # one draw moved by Delta; dp-accounting's parameter is 1/t, rounded up (less noise: pessimistic).
        from dp_accounting.pld import privacy_loss_distribution as pld
        l1 = release.sensitivity.l1
        if l1.denominator != 1:
            raise ValueError(f"discrete Laplace needs an integer L1 sensitivity, got {l1}")
        parameter = 1 / release.scale
        as_float = float(parameter)
        if Fraction(as_float) < parameter:
            as_float = math.nextafter(as_float, math.inf)
        return pld.from_discrete_laplace_mechanism(as_float, sensitivity=int(l1),
                                                   value_discretization_interval=discretization)


class Approximate:
    """An (epsilon, delta) guarantee that is no noise draw of its own: partition selection's delta, a
    charge recorded before releases were. It is the release's own statement, composed as it is."""

    name = APPROX
    measure = APPROXIMATE

    def epsilon(self, release: Release, delta: Fraction = Fraction(0)) -> Fraction | float:
        return release.epsilon if delta >= release.delta else math.inf

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]:
        # (epsilon, delta)-DP implies delta-approximate epsilon^2 / 2-zCDP (Bun-Steinke 2016, Section 8: approximate zCDP).
        return release.epsilon * release.epsilon / 2, release.delta

    def pld(self, release: Release, discretization: float = PLD_DISCRETIZATION):
        from dp_accounting.pld import common, privacy_loss_distribution as pld
        params = common.DifferentialPrivacyParameters(float(release.epsilon), float(release.delta))
        return pld.from_privacy_parameters(params, value_discretization_interval=discretization)


DISCRETE_LAPLACE = DiscreteLaplace()
APPROXIMATE_GUARANTEE = Approximate()
MECHANISMS: dict[str, Mechanism] = {DISCRETE_LAPLACE.name: DISCRETE_LAPLACE}
# Every name a Release may carry: the noise mechanisms, and the (epsilon, delta) statement.
PRIVACY_MAPS = {**MECHANISMS, APPROXIMATE_GUARANTEE.name: APPROXIMATE_GUARANTEE}


def mechanism(name: str) -> Mechanism:
    """The registered mechanism of that name."""
    return MECHANISMS[name]
