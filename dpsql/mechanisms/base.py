"""The Mechanism protocol, the registry, and the one rule that picks a query's mechanism.

A mechanism is a privacy map (OpenDP's shape): it states its native measure (pure DP, zCDP,
approximate DP) and maps a release (a sensitivity as L0 and Linf, a noise scale: releases.py) to a
loss in each measure; calibration inverts the map (the smallest safe scale for a budget share); its
noise has its own variance, error bound and partition-selection threshold; the engine's noise
function dispatches on its ``code`` and draws with its own arguments. Nothing outside this package
names a mechanism: plans, lowering, explain and the engine ask the registry.

Adding one: implement this protocol in a module of this package, register it in ``MECHANISMS``
(and, if an accountant composes it best, in ``BEST_FOR``); see docs/architecture.md, "How to add a
mechanism".

>>> choose(None, None, "zcdp", 1e-6).name, choose(None, None, "zcdp", 0.0).name
('discrete Gaussian', 'discrete Laplace')
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol, Sequence

import numpy as np

from dpsql.mechanisms.exponential import Exponential, top_k
from dpsql.mechanisms.gaussian import DiscreteGaussian
from dpsql.mechanisms.laplace import DiscreteLaplace
from dpsql.mechanisms.losses import APPROXIMATE, PURE, ZCDP, Loss
from dpsql.mechanisms.quantile_rules import BY_NAME as QUANTILE_RULES
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import APPROX, Release, Sensitivity

__all__ = ["Mechanism", "MECHANISMS", "PRIVACY_MAPS", "mechanism", "named", "choose", "NoiseBuffer",
           "PURE", "ZCDP", "APPROXIMATE", "PLD_DISCRETIZATION", "DISCRETE_LAPLACE", "DISCRETE_GAUSSIAN",
           "EXPONENTIAL", "PURE_NOISE", "measures", "releases_of", "SELECTION", "choice_arguments", "choose_top"]

# dp-accounting's default discretization of privacy losses (its estimates are pessimistic).
PLD_DISCRETIZATION = 1e-4


class Mechanism(Protocol):
    """What the plan, the lowering, explain, the engine and an accountant ask of a noise mechanism."""

    name: str      # how releases, explain and the ledger name it
    option: str    # how a query, the API, the CLI and the policy ask for it
    measure: str   # PURE, ZCDP or APPROXIMATE: the measure its loss is native in
    code: int      # the engine's noise function dispatches on it
    scale_name: str   # what explain calls its scale (a Laplace scale, a Gaussian sigma)

    def split(self, epsilon: float, delta: float, sensitivities: Sequence[Sensitivity],
              selecting: bool) -> tuple[list[Loss], float]:
        """A query's (epsilon, delta) as one loss per measurement, and partition selection's delta:
        composed, they meet (epsilon, delta)."""
        ...

    def calibrate(self, sensitivity: Sensitivity, loss: Loss) -> Fraction:
        """The smallest scale (grid steps) whose release is within ``loss``; ValueError if none is."""
        ...

    def covers(self, release: Release, loss: Loss) -> bool:
        """Whether the release is within ``loss`` (checked on every Measurement)."""
        ...

    def variance(self, release: Release) -> float:
        """The variance of its noise, in grid steps squared."""
        ...

    def error_bound(self, release: Release, confidence: float) -> float:
        """The smallest a with P(|released - exact| <= a) >= confidence, in grid steps."""
        ...

    def selection_threshold(self, release: Release, max_groups: int, delta: float) -> int:
        """tau: a group held by one unit passes noisy count >= tau with probability <= delta / L."""
        ...

    def arguments(self, release: Release) -> tuple[int, int, int]:
        """The three integers the engine's noise function receives after the mechanism's code."""
        ...

    def sample(self, source: RandomSource, arguments: tuple[int, int, int], size: int) -> np.ndarray:
        """``size`` independent draws, int64, in the mechanism's own units."""
        ...

    def add(self, exact: np.ndarray, draws: np.ndarray, arguments: tuple[int, int, int]) -> np.ndarray:
        """The released integers: exact totals (int64, saturated at +-2**62) with ``draws`` added."""
        ...

    def epsilon(self, release: Release, delta: Fraction) -> Fraction | float:
        """The smallest epsilon for which the release is (epsilon, delta)-DP (inf: none)."""
        ...

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]:
        """(rho, delta): the release is delta-approximately rho-zCDP (Bun-Steinke 2016, Def. 8.1)."""
        ...

    def pld(self, release: Release, discretization: float = PLD_DISCRETIZATION):
        """The release's privacy-loss distribution (dp-accounting's PrivacyLossDistribution, pessimistic)."""
        ...


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
DISCRETE_GAUSSIAN = DiscreteGaussian()
APPROXIMATE_GUARANTEE = Approximate()
EXPONENTIAL = Exponential()   # a choice, not additive noise: a privacy map, not in MECHANISMS
SELECTION = EXPONENTIAL       # what a noisy top-k chooses its groups by (plan/top_k.py)
MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (DISCRETE_LAPLACE, DISCRETE_GAUSSIAN)}
# Every name a Release may carry: the noise mechanisms, and the (epsilon, delta) statement.
PRIVACY_MAPS = {**MECHANISMS, APPROXIMATE_GUARANTEE.name: APPROXIMATE_GUARANTEE, EXPONENTIAL.name: EXPONENTIAL}
OPTIONS = {m.option: m for m in MECHANISMS.values()}
CODES = {m.code: m for m in MECHANISMS.values()}
# What each accountant composes best, when the query's delta allows it. Basic composition adds each
# query's (epsilon, delta): pure Laplace spends no delta and its epsilon is exact. zCDP and PLD
# compose the Gaussian's own curve, which grows as the square root of the number of queries where
# Laplace's grows linearly: at a total (1, 1e-6) over 100 counts, dp-accounting's composition gives
# a standard deviation of 42.3 (Gaussian, PLD) and 45.3 (Gaussian, zCDP) against 58.7 (Laplace, PLD)
# and 141 (Laplace, basic); Laplace wins below about 10 queries (benchmarks/README.md).
# The noise of a release that must be pure epsilon-DP whatever the policy's default (automatic bounds'
# histogram: api/auto_bounds.py), so it needs no delta.
PURE_NOISE: Mechanism = DISCRETE_LAPLACE
BEST_FOR: dict[str, Mechanism] = {"basic": DISCRETE_LAPLACE, "zcdp": DISCRETE_GAUSSIAN, "pld": DISCRETE_GAUSSIAN}


def mechanism(name: str) -> Mechanism:
    """The registered mechanism of that name (as releases and measurements carry it): a noise
    mechanism, or a quantile rule (mechanisms/quantile_rules.py), which answers the same questions
    of explain and calibration."""
    return MECHANISMS[name] if name in MECHANISMS else QUANTILE_RULES[name]   # type: ignore[return-value]


def measures(name: str) -> bool:
    """Whether a measurement may name it: a noise mechanism or a quantile rule."""
    return name in MECHANISMS or name in QUANTILE_RULES


def releases_of(release: Release, loss: Loss) -> tuple[Release, ...]:
    """What one measurement releases in registered privacy maps: itself, or a quantile rule's parts
    (PTR: its test's and its answer's noise and its delta)."""
    chosen = QUANTILE_RULES.get(release.mechanism)
    return (release,) if chosen is None else chosen.releases(release, loss)


def named(option: str) -> Mechanism:
    """The mechanism a query, the API or the policy asks for by its option name (KeyError if none).

    >>> named("Laplace").name
    'discrete Laplace'
    """
    return OPTIONS[option.lower()]


def choose(asked: str | None, default: str | None, accountant: str | None, delta: float) -> Mechanism:
    """The one rule: the query's option (OPTIONS or the caller's argument), else the policy's default,
    else what the ledger's accountant composes best for this query's delta (a Gaussian needs a delta:
    with none, Laplace). A name that is not registered raises KeyError (checked where it is read)."""
    if asked is not None:
        return named(asked)
    if default is not None:
        return named(default)
    best = BEST_FOR.get(accountant or "basic", DISCRETE_LAPLACE)
    return best if delta > 0 or best.measure == PURE else DISCRETE_LAPLACE


class NoiseBuffer:
    """Draws made in growing batches per (mechanism, arguments) and handed out once each.

    DuckDB calls the noise UDF once per vector of at most 2048 output groups; the samplers' rejection
    rounds cost about 0.65 s per million draws at that size, 0.25 s in one batch (discrete Laplace).
    Batches per key double from 2048 up to ``MAX_BATCH``, so a small query wastes little and a million
    groups are drawn in a few batches. No draw is ever handed out twice; ``clear`` (at the start of
    every query) drops what is left, so nothing carries from one query to the next.
    """
    MIN_BATCH = 2048
    MAX_BATCH = 1 << 20

    def __init__(self):
        self._left: dict[tuple, np.ndarray] = {}
        self._batch: dict[tuple, int] = {}

    def clear(self) -> None:
        self._left.clear()
        self._batch.clear()

    def take(self, source: RandomSource, code: int, arguments: tuple[int, int, int], size: int) -> np.ndarray:
        key = (code, *arguments)
        left = self._left.get(key, np.zeros(0, dtype=np.int64))
        if left.size < size:
            batch = min(self._batch.get(key, self.MIN_BATCH // 2) * 2, self.MAX_BATCH)
            self._batch[key] = batch
            fresh = CODES[code].sample(source, arguments, max(batch, size - left.size))
            left = np.concatenate([left, fresh])
        self._left[key] = left[size:]
        return left[:size]


def noise(buffer: NoiseBuffer, source: RandomSource, exact: np.ndarray, codes: np.ndarray,
          arguments: np.ndarray) -> np.ndarray:
    """The engine's noise function, vectorised over one chunk of groups: exact int64 totals released
    by the mechanism each row names (a chunk holds one measurement's rows: one code and arguments;
    rows of several are handled group by group all the same)."""
    out = np.empty(exact.size, dtype=np.int64)
    keys = np.column_stack([codes, arguments])
    if exact.size and (keys == keys[0]).all():
        groups = [(keys[0], np.arange(exact.size))]
    else:
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        groups = [(key, np.flatnonzero(inverse.reshape(-1) == i)) for i, key in enumerate(unique)]
    for key, rows in groups:
        code, args = int(key[0]), tuple(int(a) for a in key[1:])
        draws = buffer.take(source, code, args, rows.size)
        out[rows] = CODES[code].add(exact[rows], draws, args)
    return out


def choice_arguments(release: Release) -> tuple[int, int]:
    """(n, k): the temperature of a SELECTION release, n / 2**k exactly (its calibration's grid)."""
    t = release.scale
    if t <= 0 or t.denominator & (t.denominator - 1):
        raise ValueError(f"a choice's temperature must be a dyadic rational > 0, got {t}")
    return t.numerator, t.denominator.bit_length() - 1


def choose_top(source: RandomSource, ids: np.ndarray, utilities: np.ndarray, k: int, numerator: int,
               log2_denominator: int) -> np.ndarray:
    """The engine's top-k function: the ids of min(k, candidates) candidates, in the order chosen, by
    k peeled choices of SELECTION at temperature n / 2**k (exponential.py ``top_k``: exact, the law of
    one-shot Gumbel top-k). ``utilities``: the candidates' exact bounded totals, |u| < 2**52."""
    if ids.size == 0 or k <= 0:
        return np.zeros(0, dtype=np.int64)
    chosen = top_k(source, utilities, Fraction(2 ** log2_denominator, numerator), int(k))
    return ids[np.asarray(chosen, dtype=np.int64)]
