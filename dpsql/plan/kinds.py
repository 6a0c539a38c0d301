"""The closed sets the plan is made of: what a measurement counts or sums, how a unit's contribution
is bounded, and what an output releases. String-valued, so they compare, print and serialise
(explain text, replay keys) exactly as the strings they replace."""
from __future__ import annotations

from enum import Enum


class _Kind(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Quantity(_Kind):
    """What one Measurement adds noise to."""
    COUNT = "count"               # COUNT(*)
    COUNT_COL = "count_col"       # COUNT(x): rows with a value
    SUM = "sum"                   # SUM(x) (clamped, on a grid)
    COUNT_UNITS = "count_units"   # units with a value: AVG's denominator with per-group bounds
    UNITS = "units"               # COUNT(DISTINCT unit): also partition selection's count
    DISTINCT = "distinct"         # COUNT(DISTINCT x): C values per unit and partition (|keys| at most)
    QUANTILE = "quantile"         # the node counts of a quantile tree
    COUNT_IF = "count_if"         # COUNT_IF(cond): rows where a condition holds
    HISTOGRAM = "histogram"       # one quantile of a group's bounded histogram, by a quantile rule
    CLIPPED = "clipped"           # people whose contribution bounding changed (plan/clipping.py)


class Bounding(_Kind):
    """How a unit's contribution to one partition is bounded before the exact total."""
    ROWS = "rows"               # clamp each row, keep at most C rows' worth per unit
    UNIT_TOTAL = "unit_total"   # clamp the unit's total (GoogleSQL contribution_bounds_per_group)
    UNIT_MEAN = "unit_mean"     # clamp the unit's mean (per-group bounds on AVG)


class OutputKind(_Kind):
    """What one released column is: a group key, post-processing of outputs, or an aggregate."""
    KEY = "key"
    EXPR = "expr"
    COUNT = "count"
    COUNT_COL = "count_col"
    UNITS = "units"
    DISTINCT = "distinct"
    SUM = "sum"
    AVG = "avg"
    QUANTILE = "quantile"
    VAR_POP = "var_pop"
    VAR_SAMP = "var_samp"
    STDDEV_POP = "stddev_pop"
    STDDEV_SAMP = "stddev_samp"
    COUNT_IF = "count_if"
    MIN = "min"                   # the 0-quantile, by the exponential mechanism
    MAX = "max"                   # the 1-quantile

    @property
    def aggregate(self) -> bool:
        return self not in (OutputKind.KEY, OutputKind.EXPR)
