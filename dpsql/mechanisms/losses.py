"""Privacy losses in their measures (OpenDP's ``loss_of``): pure epsilon-DP, rho-zCDP, approximate
(epsilon, delta)-DP; a query's budget share in its mechanism's own measure, and the conversions
between the measures that calibration and explain use.

zCDP converts to (epsilon, delta) by Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for
Differential Privacy"), Corollary 13: rho-zCDP implies (epsilon, delta)-DP for
delta = inf over alpha > 1 of exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha.
Every alpha gives a valid delta, so a numerical search that misses the optimum only overstates delta;
the floats are given a relative margin (``MARGIN``) on the side that overstates it.

>>> f"{zcdp_delta(0.025, 1.0):.8e}"    # the authors' cdp2adp.py: 1.3361319064e-06
'1.33613191e-06'
>>> Loss.zcdp(Fraction(1, 8)), Loss.pure(0.5)
(Loss(rho 0.125), Loss(epsilon 0.5))
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

# The measures a mechanism's privacy map states its loss in (OpenDP's shape).
PURE, ZCDP, APPROXIMATE = "pure", "zCDP", "approximate"
# Relative slack on every float that bounds a delta, on the side that overstates it: far above the
# rounding of a few dozen float operations (~1e-15), far below anything that matters.
MARGIN = 1e-9


@dataclass(frozen=True)
class Loss:
    """A privacy loss in one measure: ``epsilon`` (pure), ``rho`` (zCDP) or (``epsilon``, ``delta``)."""
    measure: str
    epsilon: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)
    rho: Fraction = Fraction(0)

    @classmethod
    def pure(cls, epsilon) -> "Loss":
        return cls(PURE, epsilon=Fraction(epsilon))

    @classmethod
    def zcdp(cls, rho) -> "Loss":
        return cls(ZCDP, rho=Fraction(rho))

    @classmethod
    def approximate(cls, epsilon, delta) -> "Loss":
        return cls(APPROXIMATE, epsilon=Fraction(epsilon), delta=Fraction(delta))

    def __repr__(self) -> str:
        return f"Loss({self})"

    def __str__(self) -> str:
        if self.measure == PURE:
            return f"epsilon {float(self.epsilon):.6g}"
        if self.measure == ZCDP:
            return f"rho {float(self.rho):.6g}"
        return f"epsilon {float(self.epsilon):.6g}, delta {float(self.delta):.6g}"


def share(epsilon: float, parts: int) -> float:
    """epsilon / parts, rounded down to a float: the shares never add up to more than epsilon.

    >>> share(0.3, 3) * 3 <= 0.3
    True
    """
    exact = Fraction(epsilon) / parts
    try:
        value = float(exact)
    except OverflowError:
        return 0.0
    return value if Fraction(value) <= exact else math.nextafter(value, 0.0)


def _best_alpha(rho: float, epsilon: float) -> float:
    """The alpha that minimises CKS Corollary 13's delta: the root of its log's derivative in alpha,
    (2 alpha - 1) rho - epsilon + log(1 - 1/alpha) (increasing in alpha), by bisection."""
    low, high = 1.0 + 1e-9, max(2.0, (epsilon + 1) / (2 * rho) + 2)
    for _ in range(200):
        alpha = (low + high) / 2
        if (2 * alpha - 1) * rho - epsilon + math.log1p(-1 / alpha) < 0:
            low = alpha
        else:
            high = alpha
    return high


def zcdp_delta(rho: float, epsilon: float) -> float:
    """An upper bound on the delta at which rho-zCDP is (epsilon, delta)-DP (CKS 2020, Corollary 13).

    >>> zcdp_delta(0.0, 1.0), round(zcdp_delta(1.0, 0.0), 6)
    (0.0, 0.730389)
    """
    rho, epsilon = float(rho), float(epsilon)
    if rho <= 0:
        return 0.0
    alpha = _best_alpha(rho, epsilon)
    try:
        log_delta = (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)
        return min(1.0, math.exp(log_delta) * (1 + MARGIN))
    except OverflowError:
        return 1.0


def narrow(holds, low: float, high: float, relative: float = 1e-14) -> tuple[float, float]:
    """(low, high) bisected to ``relative`` width for a predicate false at low and true at high,
    monotone between: the last low is where it fails, the last high where it holds.

    >>> narrow(lambda x: x * x >= 2, 1.0, 2.0)[1] >= 2 ** 0.5
    True
    """
    for _ in range(200):
        middle = (low + high) / 2
        if holds(middle):
            high = middle
        else:
            low = middle
        if high - low <= relative * high:
            break
    return low, high


def zcdp_epsilon(rho, delta) -> float:
    """The smallest epsilon (to float precision, rounded up) at which rho-zCDP is (epsilon, delta)-DP.

    >>> round(zcdp_epsilon(0.025, 1e-6), 9)     # the authors' cdp2adp.py: 1.014074255
    1.014074255
    """
    rho, delta = float(rho), float(delta)
    if rho <= 0:
        return 0.0
    if delta <= 0:
        return math.inf
    # Bun-Steinke 2016 Prop. 1.3's epsilon = rho + 2 sqrt(rho log(1/delta)) is valid: start above it.
    low, high = 0.0, rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12
    while zcdp_delta(rho, high) > delta:
        high *= 2
    return narrow(lambda e: zcdp_delta(rho, e) <= delta, low, high)[1]


def zcdp_rho(epsilon, delta) -> Fraction:
    """The largest rho (an exact rational, rounded down) whose zCDP implies (epsilon, delta)-DP.

    >>> round(float(zcdp_rho(1.0, 1e-6)), 9)     # the authors' cdp2adp.py: 0.024355970
    0.02435597
    """
    epsilon, delta = float(epsilon), float(delta)
    if delta <= 0 or epsilon <= 0:
        return Fraction(0)
    return Fraction(narrow(lambda r: zcdp_delta(r, epsilon) > delta, 0.0, epsilon + 1.0)[0])


def compose(losses: list[Loss], delta: float) -> tuple[float, float]:
    """The (epsilon, delta) of losses of one measure composed, the zCDP ones at ``delta``: pure ones
    add (Dwork et al. 2006); zCDP ones add in rho (Bun-Steinke 2016, Lemma 2.3), then convert; one
    approximate loss is itself (a query of one-dimensional Gaussian noise), several add (basic).

    >>> compose([Loss.pure(0.25), Loss.pure(0.5)], 0)
    (0.75, 0.0)
    """
    measures = {loss.measure for loss in losses}
    if measures == {ZCDP}:
        return zcdp_epsilon(sum(loss.rho for loss in losses), delta), float(delta)
    if ZCDP in measures and PURE not in measures:
        # zCDP shares beside a quantile rule's (epsilon, delta): the zCDP part converted at ``delta``,
        # the rest added to it (basic composition).
        rest = [loss for loss in losses if loss.measure != ZCDP]
        epsilon, spent = compose([loss for loss in losses if loss.measure == ZCDP], delta)
        return epsilon + float(sum(loss.epsilon for loss in rest)), spent + float(sum(loss.delta for loss in rest))
    if measures - {PURE, APPROXIMATE}:
        raise ValueError(f"cannot compose losses of measures {sorted(measures)} into one guarantee")
    return float(sum(loss.epsilon for loss in losses)), float(sum(loss.delta for loss in losses))
