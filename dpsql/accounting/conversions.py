"""Conversions between privacy measures, rounded so that the privacy they state is never overstated.

``zcdp_epsilon(rho, delta)``: rho-zCDP implies (epsilon, delta)-DP for every alpha > 1 with

    epsilon = alpha rho + (log(1/delta) + (alpha - 1) log(1 - 1/alpha) - log(alpha)) / (alpha - 1)

(Canonne-Kamath-Steinke 2020, "The Discrete Gaussian for Differential Privacy", Prop. 12 / Cor. 13;
the same bound as dp-accounting's RDP accountant, which cites it). Any alpha gives a valid epsilon, so
the search for the best alpha only decides how tight it is; the value at the alpha found is then
rounded up past any floating-point error. It is tighter than Bun-Steinke 2016 Prop. 1.3,
rho + 2 sqrt(rho log(1/delta)), everywhere (tests/test_accountants.py measures by how much).

>>> round(zcdp_epsilon(0.5, 1e-6), 4), round(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), 4)
(5.2215, 5.7565)
>>> rho_for(zcdp_epsilon(0.02, 1e-6), 1e-6) <= 0.02
True
"""
from __future__ import annotations

import math
from decimal import ROUND_CEILING, Context, Decimal
from fractions import Fraction

_UP = Context(prec=40, rounding=ROUND_CEILING)
# Relative error allowed for the few floating-point operations of one evaluation (each within an ulp).
_SLACK = 1e-12


def decimal_up(x: Fraction | float) -> Decimal:
    """A Decimal >= x (exact for floats; 40 digits rounded up for other fractions)."""
    if isinstance(x, float):
        return Decimal(x)                       # a float's Decimal is exact (and inf stays inf)
    return _UP.divide(Decimal(x.numerator), Decimal(x.denominator))


def add_up(a: Decimal, b: Decimal) -> Decimal:
    """a + b rounded up to 40 digits."""
    return _UP.add(a, b)


def float_up(x: Decimal) -> float:
    """The least float >= x (inf stays inf)."""
    f = float(x)
    return math.nextafter(f, math.inf) if math.isfinite(f) and Decimal(f) < x else f


def float_down(x: Decimal) -> float:
    """The greatest float <= x."""
    f = float(x)
    return math.nextafter(f, -math.inf) if math.isfinite(f) and Decimal(f) > x else f


def _offset(alpha: float, log_inv_delta: float) -> tuple[float, float]:
    """CKS 2020 Cor. 13's epsilon at ``alpha`` less its ``alpha rho`` term, and a bound on the
    floating-point error of its evaluation (each term within an ulp or so; the slack is far more)."""
    a1 = alpha - 1
    terms = (log_inv_delta / a1, math.log1p(-1 / alpha), -math.log(alpha) / a1)
    return math.fsum(terms), _SLACK * sum(abs(t) for t in terms) + 1e-300


def _best_alpha(score) -> float:
    """The alpha > 1 minimising ``score`` (unimodal in log(alpha - 1) for these bounds): a coarse scan,
    then golden-section refinement. Any alpha is a valid choice; this only makes it a good one."""
    grid = [10.0 ** (k / 8) for k in range(-80, 97)]
    best = min(range(len(grid)), key=lambda i: score(1 + grid[i]))
    lo, hi = math.log(grid[max(best - 1, 0)]), math.log(grid[min(best + 1, len(grid) - 1)])
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(50):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if score(1 + math.exp(a)) <= score(1 + math.exp(b)):
            hi = b
        else:
            lo = a
    refined = 1 + math.exp((lo + hi) / 2)
    return refined if score(refined) <= score(1 + grid[best]) else 1 + grid[best]


def zcdp_epsilon(rho: float, delta: float) -> float:
    """An epsilon with rho-zCDP => (epsilon, delta)-DP: CKS 2020 Cor. 13 at the best alpha found,
    rounded up."""
    if rho < 0 or not 0 <= delta <= 1:
        raise ValueError(f"not a zCDP conversion: rho={rho}, delta={delta}")
    if rho == 0:
        return 0.0
    if delta == 0 or math.isinf(rho):
        return math.inf
    log_inv = -math.log(delta)
    alpha = _best_alpha(lambda a: a * rho + _offset(a, log_inv)[0])
    offset, error = _offset(alpha, log_inv)
    main = alpha * rho
    # Below 0 when delta alone covers everything ((0, delta)-DP then holds): 0 is the epsilon to state.
    return max(0.0, main + offset + error + _SLACK * main)


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho this finds whose conversion at ``delta`` is at most ``epsilon``, rounded down: a
    zCDP budget in its own terms. rho fits iff alpha rho + offset(alpha) <= epsilon for some alpha,
    that is iff rho <= max over alpha of (epsilon - offset(alpha)) / alpha."""
    if epsilon <= 0 or delta <= 0:
        return 0.0
    log_inv = -math.log(delta)
    alpha = _best_alpha(lambda a: -(epsilon - _offset(a, log_inv)[0]) / a)
    offset, error = _offset(alpha, log_inv)
    rho = max(0.0, (epsilon - offset - error) / alpha * (1 - _SLACK))
    # zcdp_epsilon searches its own alpha and adds its own slack: step down until it agrees (steps
    # doubling from 1e-12, so a disagreement of any size ends in a few dozen steps, at 0 at worst).
    step = 1e-12
    while rho > 0 and zcdp_epsilon(rho, delta) > epsilon:
        rho, step = (rho * (1 - step) if step < 0.5 else 0.0), step * 2
    return rho
