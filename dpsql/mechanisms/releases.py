"""What one noisy release costs, in its mechanism's own terms: the unit an accountant composes.

A measurement's sensitivity is stated the way GoogleSQL and OpenDP state it: a person touches at most
``partitions`` partitions (L0) and moves each by at most ``per_partition`` noise units (L-infinity:
grid steps for sums, rows for counts). Each mechanism derives the norm it needs from it: the L1
bound ``l1`` for Laplace noise, the squared L2 bound ``l2_squared`` for Gaussian noise. Where a
measurement knows a tighter norm than L0 x Linf gives (a quantile tree: a person's C values touch up
to D*L*C node counts, each by at most C, but their L1 total is D*L*C, not D*L*C*C), it says so.

A ``Release`` is one measurement as released: its mechanism's name, its sensitivity and its noise
scale (a discrete Laplace scale t, a discrete Gaussian sigma), all exact. A guarantee that is not a
noise draw of its own (partition selection's delta, a charge recorded before releases were, or any
(epsilon, delta) statement) is a release of the mechanism ``APPROX`` with its epsilon and delta. The
ledger stores each charge's releases (``to_json``), so an accountant can recompose a whole history
in each mechanism's exact terms (mechanisms/base.py: ``Mechanism.epsilon``, ``rho``, ``pld``).

>>> s = Sensitivity(partitions=3, per_partition=Fraction(5))
>>> s.l1, s.l2_squared
(Fraction(15, 1), Fraction(75, 1))
>>> r = Release("discrete Laplace", s, Fraction(30))
>>> Release.from_json(r.to_json()) == r
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

APPROX = "approximate"   # the name of an (epsilon, delta) guarantee's pseudo-mechanism


def _fraction(value) -> Fraction:
    """An exact rational from an int, a Fraction, a float (its exact binary value) or a text."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    return Fraction(value)


@dataclass(frozen=True)
class Sensitivity:
    """How far one person moves a measurement: at most ``partitions`` partitions (L0), each by at
    most ``per_partition`` (L-infinity), in noise units; ``l1`` and ``l2_squared`` are the L1 norm and
    the squared L2 norm of the largest move, L0 * Linf and L0 * Linf**2 unless a tighter bound is known."""
    partitions: int
    per_partition: Fraction
    l1: Fraction = field(default=None)           # type: ignore[assignment]
    l2_squared: Fraction = field(default=None)   # type: ignore[assignment]

    def __post_init__(self):
        if not isinstance(self.partitions, int) or isinstance(self.partitions, bool) or self.partitions < 0:
            raise ValueError(f"partitions must be a whole number >= 0, got {self.partitions!r}")
        per = _fraction(self.per_partition)
        if per < 0:
            raise ValueError(f"per_partition must be >= 0, got {per}")
        object.__setattr__(self, "per_partition", per)
        l1 = self.partitions * per if self.l1 is None else _fraction(self.l1)
        l2 = self.partitions * per * per if self.l2_squared is None else _fraction(self.l2_squared)
        # A person can move one partition by Linf, and L0 of them by Linf each at the most.
        if self.partitions > 0 and not (per <= l1 <= self.partitions * per
                                        and per * per <= l2 <= self.partitions * per * per):
            raise ValueError(f"norms out of range for L0={self.partitions}, Linf={per}: l1={l1}, l2^2={l2}")
        object.__setattr__(self, "l1", l1)
        object.__setattr__(self, "l2_squared", l2)

    def to_json(self) -> dict:
        return {"partitions": self.partitions, "per_partition": str(self.per_partition), "l1": str(self.l1),
                "l2_squared": str(self.l2_squared)}

    @classmethod
    def from_json(cls, doc: dict) -> "Sensitivity":
        return cls(int(doc["partitions"]), Fraction(doc["per_partition"]), Fraction(doc["l1"]),
                   Fraction(doc["l2_squared"]))


@dataclass(frozen=True)
class Release:
    """One noisy release: ``mechanism`` (a name in mechanisms/base.py ``MECHANISMS``), its
    ``sensitivity`` and noise ``scale`` in noise units; for ``APPROX``, the (``epsilon``, ``delta``) it
    guarantees instead (no sensitivity, no scale)."""
    mechanism: str
    sensitivity: Sensitivity | None = None
    scale: Fraction | None = None
    epsilon: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)

    def __post_init__(self):
        if self.scale is not None:
            object.__setattr__(self, "scale", _fraction(self.scale))
        object.__setattr__(self, "epsilon", _fraction(self.epsilon))
        object.__setattr__(self, "delta", _fraction(self.delta))
        if self.mechanism == APPROX:
            if self.sensitivity is not None or self.scale is not None:
                raise ValueError("an approximate guarantee has no sensitivity or scale")
            if self.epsilon < 0 or not 0 <= self.delta <= 1:
                raise ValueError(f"not a privacy guarantee: epsilon={self.epsilon}, delta={self.delta}")
        elif self.sensitivity is None or self.scale is None or self.scale < 0:
            raise ValueError(f"a {self.mechanism} release needs a sensitivity and a scale >= 0")

    @classmethod
    def approximate(cls, epsilon, delta) -> "Release":
        """An (epsilon, delta) guarantee as a release (partition selection's delta, an old charge)."""
        return cls(APPROX, epsilon=_fraction(epsilon), delta=_fraction(delta))

    def to_json(self) -> dict:
        doc: dict = {"mechanism": self.mechanism}
        if self.mechanism == APPROX:
            doc.update(epsilon=str(self.epsilon), delta=str(self.delta))
        else:
            doc.update(sensitivity=self.sensitivity.to_json(), scale=str(self.scale))
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "Release":
        if doc["mechanism"] == APPROX:
            return cls.approximate(Fraction(doc["epsilon"]), Fraction(doc["delta"]))
        return cls(doc["mechanism"], Sensitivity.from_json(doc["sensitivity"]), Fraction(doc["scale"]))
