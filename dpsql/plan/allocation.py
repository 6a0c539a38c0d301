"""Budget allocation within a query: the checked (epsilon, delta), its equal split over the
measurements (sequential composition), rounded so the shares never add up to more than epsilon, and
a noisy top-k's share (plan/top_k.py)."""
from __future__ import annotations

import math
from dpsql.errors import InvalidParameter
from dpsql.mechanisms.losses import share

__all__ = ["share", "check_budget_parameters", "top_k_split"]


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


def top_k_split(epsilon: float, others: bool) -> tuple[float, float]:
    """(the top-k choice's epsilon, the rest for the measurements), never adding up to more.

    Half each when the query measures anything besides (the chosen groups' values, partition
    selection's count): a user sees both a wrong group and a wrong value, and each error falls with
    its share, so half keeps either within a factor of two of what the whole budget would give it
    (benchmarks/topk.py measures both). All of it when nothing else is measured (MODE: one key).

    >>> top_k_split(1.0, True), top_k_split(1.0, False)
    ((0.5, 0.5), (1.0, 0.0))
    """
    if not others:
        return epsilon, 0.0
    half = share(epsilon, 2)
    return half, half
