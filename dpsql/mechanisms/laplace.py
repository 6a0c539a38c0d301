"""The discrete Laplace mechanism as a privacy map: each partition's total plus discrete Laplace noise of
scale t (mechanisms/discrete_laplace.py, Canonne-Kamath-Steinke 2020), pure epsilon-DP for an L1
sensitivity Delta when t >= Delta / epsilon (Dwork-McSherry-Nissim-Smith 2006): a person moving L0
partitions by Linf each moves the vector by L1 <= L0 * Linf (or the tighter bound the measurement knows).

>>> from dpsql.mechanisms.releases import Release, Sensitivity
>>> m = DiscreteLaplace()
>>> s = Sensitivity(1, Fraction(3))
>>> m.calibrate(s, Loss.pure(0.5)), m.error_bound(Release(m.name, s, Fraction(6)), 0.95)
(Fraction(6, 1), 18)
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import numpy as np

from dpsql.mechanisms import discrete_laplace as laplace
from dpsql.mechanisms.losses import PURE, Loss, share
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import Release, Sensitivity


class DiscreteLaplace:
    """Discrete Laplace noise on an integer grid, scale t in grid steps (a dyadic rational)."""

    name = "discrete Laplace"
    option = "laplace"
    measure = PURE
    scale_name = "scale"   # what explain calls its scale
    code = 1

    # --- calibration: the privacy map, inverted -------------------------------------------------------
    def split(self, epsilon: float, delta: float, sensitivities: Sequence[Sensitivity],
              selecting: bool) -> tuple[list[Loss], float]:
        """epsilon split equally (sequential composition; the shares never add up to more); the whole
        delta, if any, is partition selection's (the noise is pure)."""
        return [Loss.pure(share(epsilon, len(sensitivities)))] * len(sensitivities), delta if selecting else 0.0

    def calibrate(self, sensitivity: Sensitivity, loss: Loss) -> Fraction:
        """The dyadic rational just above L1 / epsilon (exact, in fractions)."""
        if loss.measure != PURE or loss.epsilon <= 0:
            raise ValueError(f"discrete Laplace is calibrated to a pure epsilon, not {loss}")
        return laplace.dyadic_scale(sensitivity.l1 / loss.epsilon)

    def covers(self, release: Release, loss: Loss) -> bool:
        return loss.measure == PURE and loss.epsilon > 0 and release.scale * loss.epsilon >= release.sensitivity.l1

    # --- the noise -----------------------------------------------------------------------------------
    def variance(self, release: Release) -> float:
        """2q / (1 - q)^2, q = exp(-1/t) (-expm1 keeps 1 - q exact at large t)."""
        if release.scale == 0:
            return 0.0
        t = float(release.scale)
        return 2 * math.exp(-1 / t) / math.expm1(-1 / t) ** 2

    def error_bound(self, release: Release, confidence: float) -> float:
        return laplace.discrete_laplace_bound(release.scale, confidence)

    def selection_threshold(self, release: Release, max_groups: int, delta: float) -> int:
        return laplace.selection_threshold(float(release.scale), max_groups, delta)

    # --- the engine ----------------------------------------------------------------------------------
    def arguments(self, release: Release) -> tuple[int, int, int]:
        """(scale numerator, log2 of its denominator, 0): t = n / 2**k exactly, n < 2**50."""
        t = laplace.dyadic_scale(release.scale)
        return t.numerator, t.denominator.bit_length() - 1, 0

    def sample(self, source: RandomSource, arguments: tuple[int, int, int], size: int) -> np.ndarray:
        return laplace.discrete_laplace(source, Fraction(arguments[0], 2 ** arguments[1]), size)

    def add(self, exact: np.ndarray, draws: np.ndarray, arguments: tuple[int, int, int]) -> np.ndarray:
        # exact is saturated at +-2**62; a draw beyond 2**62 has probability below exp(-2**12).
        if np.abs(draws).max(initial=0) > 2 ** 62:
            raise OverflowError("a discrete Laplace draw does not fit in int64")
        return exact + draws

    # --- the privacy map -----------------------------------------------------------------------------
    def epsilon(self, release: Release, delta: Fraction = Fraction(0)) -> Fraction | float:
        # Pure DP: L1 sensitivity / scale (Dwork-McSherry-Nissim-Smith 2006), whatever delta.
        if not release.scale:
            return math.inf if release.sensitivity.l1 else Fraction(0)
        return release.sensitivity.l1 / release.scale

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]:
        # epsilon-DP implies epsilon^2 / 2-zCDP (Bun-Steinke 2016, Prop. 3.3).
        eps = self.epsilon(release)
        return eps * eps / 2, Fraction(0)

    def pld(self, release: Release, discretization: float = 1e-4):
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
