"""The parts a Plan (plan/model.py) is made of: Measurements, the noisy quantities, each spending a
share of epsilon; Outputs, keys or post-processing of measurements (free); the GROUP BY keys and
their public key columns; DP partition selection. Frozen; the aggregates' specs and the explain
lines read them, and the Plan holds them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dpsql.errors import InternalError
from dpsql.frontend.derived import DerivedKeys
from dpsql.mechanisms.base import mechanism, measures, releases_of
from dpsql.mechanisms.losses import ZCDP, Loss
from dpsql.mechanisms.releases import Release, Sensitivity
from dpsql.plan.kinds import Bounding, OutputKind, Quantity
from dpsql.plan.quantities import QUANTITIES
from dpsql.plan.text import CONFIDENCE


@dataclass(frozen=True)
class Measurement:
    """One noisy quantity: an exact integer aggregate plus its mechanism's noise on a grid.

    ``sensitivity`` (L0 partitions, Linf per partition) and ``scale`` (a discrete Laplace scale, a
    discrete Gaussian sigma) are in grid steps; multiply by ``granularity`` for output units. ``loss``
    is the share of the query's budget it was calibrated to, in its mechanism's measure.
    """
    name: str
    kind: Quantity
    column: str | None
    lower: float | None           # clamp bounds of what is summed: a row's value ("rows"),
    upper: float | None           # a unit's total or mean in one partition ("unit_total", "unit_mean")
    granularity: float
    sensitivity: Sensitivity
    loss: Loss
    scale: Fraction               # the smallest safe scale on the mechanism's grid for that loss
    mechanism: str                # a name in mechanisms/base.py MECHANISMS, or a quantile rule's
    bounding: Bounding = Bounding.ROWS
    row_lower: float | None = None  # optional per-row clamp before a per-unit aggregate
    row_upper: float | None = None
    argument: exp.Expression | None = None   # what is counted or summed per row (columns clamped)
    offset: float | None = None              # centred: sums (x - offset) ** moment
    moment: int = 1
    quantile: float | None = None            # a quantile rule's q (mechanisms/quantile_rules.py)

    def __post_init__(self):
        try:   # the enums, from their values too
            object.__setattr__(self, "kind", Quantity(self.kind))
            object.__setattr__(self, "bounding", Bounding(self.bounding))
        except ValueError:
            raise InternalError("DP999", f"unknown measurement kind {self.kind!r}: this is probably a bug") from None
        object.__setattr__(self, "scale", Fraction(self.scale))
        # The privacy argument, checked on every plan: the mechanism's own map says this release is
        # within the loss it was given.
        if not measures(self.mechanism) or not mechanism(self.mechanism).covers(self.release, self.loss):
            raise InternalError("DP999", f"measurement {self.name} is under-noised: this is probably a bug")

    @property
    def release(self) -> Release:
        """What it releases, in its mechanism's own terms (what the ledger stores)."""
        return Release(self.mechanism, self.sensitivity, self.scale)

    @property
    def releases(self) -> tuple[Release, ...]:
        """What it releases in registered privacy maps (what the ledger stores): its release, or a
        quantile rule's parts."""
        return releases_of(self.release, self.loss)

    @property
    def epsilon(self) -> float:
        """The epsilon of its loss (pure or approximate); NaN for a zCDP loss, which has none alone."""
        return math.nan if self.loss.measure == ZCDP else float(self.loss.epsilon)

    @property
    def error(self) -> float:
        """Half-width of the interval that holds the noise with probability CONFIDENCE, in output units."""
        return mechanism(self.mechanism).error_bound(self.release, CONFIDENCE) * self.granularity

    @property
    def std_dev(self) -> float:
        """The standard deviation of its noise, in output units (the mechanism's variance)."""
        return math.sqrt(mechanism(self.mechanism).variance(self.release)) * self.granularity

    @property
    def label(self) -> str:
        """How explain and the ledger name it (plan/quantities.py)."""
        return QUANTITIES[self.kind].label(self)


@dataclass(frozen=True)
class Output:
    """One released column: a group key, or post-processing of measurements."""
    name: str                     # the name the user sees
    kind: OutputKind
    column: str | None
    measurements: tuple[str, ...] = ()
    key_index: int | None = None  # kind "key": which GROUP BY item
    expression: exp.Expression | None = None  # kind "expr": over output slots o0, o1, ... and literals
    lower: float | None = None    # AVG is clamped back into these bounds
    upper: float | None = None
    hidden: bool = False          # needed by HAVING/ORDER BY but not selected
    per_row: tuple[float, float] | None = None    # GoogleSQL contribution_bounds_per_row
    per_group: tuple[float, float] | None = None  # GoogleSQL contribution_bounds_per_group
    argument: exp.Expression | None = None        # the aggregate's argument (unqualified)
    quantile: float | None = None                 # kind "quantile", "min", "max": q in [0, 1]
    mechanism: str | None = None                  # a quantile's ``mechanism =>`` (quantile_rules.OPTIONS)


@dataclass(frozen=True)
class KeyColumn:
    """A column with public keys that a GROUP BY item reads: declared ones, or (``derived``) values
    standing for the groups its bounds give (frontend/derived.py)."""
    name: str
    sql_type: str
    keys: tuple
    derived: DerivedKeys | None = None
    where: str | None = None   # public keys read only where the query's public conjuncts hold (explain)


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY item: a public-key column, or an expression whose groups are its values over the
    declared keys of the columns it reads (computed from those keys alone, never from the data)."""
    expression: exp.Expression
    columns: tuple[KeyColumn, ...]
    branches: tuple[exp.Expression, ...] | None = None   # a CASE of literals: its groups are these values
    filters: tuple[exp.Expression, ...] = ()   # WHERE conjuncts over its declared-key columns only: prune its groups

    @property
    def column(self) -> str | None:
        return self.expression.name if isinstance(self.expression, exp.Column) else None

    @property
    def label(self) -> str:
        return self.column or self.expression.sql(dialect="duckdb")

    @property
    def public(self) -> bool:
        return self.branches is not None or all(c.keys is not None for c in self.columns)

    @property
    def domain_bound(self) -> int | None:
        """At most this many groups: one per combination of the columns' keys (None if private)."""
        if self.branches is not None:
            return len(self.branches)
        return math.prod(len(c.keys) for c in self.columns) if self.public else None


def joint_of(keys, joint):
    """The joint key set (policy/model.py JointKeys) whose columns the GROUP BY items are, or None."""
    if joint is not None and keys and sorted(k.column or "" for k in keys) == sorted(joint.columns):
        return joint
    return None


def partition_bound(keys, joint) -> int | None:
    """At most this many partitions: the product of the GROUP BY items' domains, or, where the items are
    the columns of a joint key set, its count of tuples."""
    if joint_of(keys, joint) is not None:
        return joint.count
    bounds = [k.domain_bound for k in keys]
    return None if None in bounds else math.prod(bounds)


@dataclass(frozen=True)
class Selection:
    """DP partition selection: a group is released iff its noisy unit count is >= threshold; a group
    held by one unit passes with probability <= delta / L (the threshold's delta, accounted)."""
    measurement: str
    threshold: int
    loss: Loss          # the noisy unit count's own loss
    delta: float
