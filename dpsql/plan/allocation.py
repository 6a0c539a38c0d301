"""Budget allocation within a query: the checked (epsilon, delta) and its equal split over the
measurements (sequential composition), rounded so the shares never add up to more than epsilon."""
from __future__ import annotations

import math
from dpsql.errors import InvalidParameter
from dpsql.mechanisms.losses import share

__all__ = ["share", "check_budget_parameters"]


def check_budget_parameters(epsilon: float, delta: float) -> tuple[float, float]:
    """epsilon in (0, inf), delta in [0, 1): anything else is refused before planning (DP401)."""
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidParameter("DP401", f"{name} must be a finite number, got {value!r}")
    if epsilon <= 0:
        raise InvalidParameter("DP401", f"epsilon must be > 0, got {epsilon!r}")
    if not 0 <= delta < 1:
        raise InvalidParameter("DP401", f"delta must be in [0, 1), got {delta!r}")
    return float(epsilon), float(delta)
