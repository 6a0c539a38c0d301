"""The quantile rules: mechanisms that answer a quantile from a group's exact bounded histogram inside
the engine (one call per released group), and the engine's choice function that dispatches to them.

A query asks for one per aggregate, ``MEDIAN(x, mechanism => 'exponential')``; ``'tree'`` (the
default of MEDIAN and QUANTILE_CONT) is the quantile tree of lower/quantile.py, noised by the query's
noise mechanism, not a rule. MIN and MAX are the 0 and 1 quantiles, by the exponential mechanism
unless they ask otherwise. Each rule states its releases in registered privacy maps (the
exponential mechanism's; PTR's two discrete Laplace noises and its delta; smooth sensitivity's
(epsilon, delta)), so the accountants compose them unchanged.

The engine's arguments of one call: [code, K, num, den, *the rule's own] (q = num / den).

>>> sorted(RULES), TREE, DEFAULT_EXTREMES
(['exponential', 'ptr', 'smooth'], 'tree', 'exponential')
"""
from __future__ import annotations

from typing import Protocol

from dpsql.mechanisms.losses import Loss
from dpsql.mechanisms.quantile_choice import ExponentialQuantile
from dpsql.mechanisms.quantile_ranks import Histogram, fraction_of
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import Release, Sensitivity
from dpsql.mechanisms.stable_quantile import ProposeTestRelease, SmoothSensitivity

TREE = "tree"                   # the option that asks for the quantile tree (no rule)
DEFAULT_EXTREMES = "exponential"   # what MIN and MAX use unless they name one


class QuantileRule(Protocol):
    """What planning, explain and the engine ask of a quantile rule (besides Mechanism's explain words)."""
    name: str          # how measurements, explain and the ledger name it
    option: str        # how a query asks for it
    code: int          # the choice function dispatches on it
    measure: str
    scale_name: str
    noised: str        # what its error bound is about (explain)
    needs_delta: bool  # its share of the budget is (epsilon, delta)
    about: str         # explain's line on how it answers

    def sensitivity(self, histogram: Sensitivity, num: int, den: int) -> Sensitivity:
        """Its release's sensitivity, from the histogram's (L partitions, C values each)."""
        ...

    def loss(self, loss: Loss, delta: float) -> Loss:
        """Its share in its own terms, given an epsilon share and a delta share."""
        ...

    def calibrate(self, sensitivity: Sensitivity, loss: Loss):
        ...

    def covers(self, release: Release, loss: Loss) -> bool:
        ...

    def releases(self, release: Release, loss: Loss) -> tuple[Release, ...]:
        """What it releases, in registered privacy maps (what the ledger stores)."""
        ...

    def variance(self, release: Release) -> float:
        ...

    def error_bound(self, release: Release, confidence: float) -> float:
        ...

    def arguments(self, release: Release, loss: Loss, num: int, den: int) -> list[int]:
        ...

    def answer(self, source: RandomSource, h: Histogram, num: int, den: int, arguments: list[int]) -> int | None:
        """The released cell, or None (PTR's "no answer")."""
        ...


RULES: dict[str, QuantileRule] = {r.option: r for r in (ExponentialQuantile(), ProposeTestRelease(),
                                                          SmoothSensitivity())}
BY_NAME: dict[str, QuantileRule] = {r.name: r for r in RULES.values()}
_CODES: dict[int, QuantileRule] = {r.code: r for r in RULES.values()}
OPTIONS = (TREE, *RULES)        # every value of a quantile's ``mechanism =>``


def rule(option: str) -> QuantileRule:
    """The rule a query names (KeyError for the tree or an unknown name: checked where it is read)."""
    return RULES[option.lower()]


def arguments(chosen: QuantileRule, release: Release, loss: Loss, q: float, grid: int) -> list[int]:
    """The engine's whole argument list of one rule's measurement."""
    num, den = fraction_of(q)
    return [chosen.code, grid, num, den, *chosen.arguments(release, loss, num, den)]


def answer(source: RandomSource, cells, counts, parameters) -> int | None:
    """The engine's choice function for one group: the cell its rule releases, or None."""
    code, grid, num, den, *own = (int(p) for p in parameters)
    return _CODES[code].answer(source, Histogram.of(cells, counts, grid), num, den, own)


def noiseless(cells, counts, parameters) -> int:
    """The test seam's choice: the quantile's own cell, x_(max(ceil(q n), 1)) (quantile_ranks.py)."""
    code, grid, num, den = (int(p) for p in parameters[:4])
    return Histogram.of(cells, counts, grid).exact(num, den)


__all__ = ["RULES", "BY_NAME", "OPTIONS", "TREE", "DEFAULT_EXTREMES", "QuantileRule", "rule", "arguments",
           "answer", "noiseless"]
