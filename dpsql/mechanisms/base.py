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

from fractions import Fraction
from typing import Protocol

import numpy as np

from dpsql.mechanisms import discrete_laplace as laplace
from dpsql.mechanisms.randomness import RandomSource


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


DISCRETE_LAPLACE = DiscreteLaplace()
MECHANISMS: dict[str, Mechanism] = {DISCRETE_LAPLACE.name: DISCRETE_LAPLACE}


def mechanism(name: str) -> Mechanism:
    """The registered mechanism of that name."""
    return MECHANISMS[name]
