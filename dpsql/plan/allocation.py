"""Budget allocation within a query: the checked (epsilon, delta), its equal split over the
measurements (sequential composition), rounded so the shares never add up to more than epsilon, and
a noisy top-k's share (plan/top_k.py)."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

from dpsql.errors import InvalidParameter
from dpsql.mechanisms.losses import PURE, Loss, share
from dpsql.mechanisms.releases import Sensitivity

__all__ = ["share", "check_budget_parameters", "split", "top_k_split"]


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


def split(chosen, epsilon: float, delta: float, sensitivities: Sequence[Sensitivity], rules: Sequence,
          selecting: bool) -> tuple[list[Loss], float]:
    """One loss per measurement, and partition selection's delta: the noise mechanism's split
    (``Mechanism.split``), except for quantile rules that spend delta (``rules[i].needs_delta``: PTR,
    smooth sensitivity). Those take an equal epsilon share each and, between them, half the delta (all
    of it when nothing else spends any); the noise mechanism splits what is left over the rest. The
    two parts add up by basic composition to at most (epsilon, delta)."""
    apart = [i for i, r in enumerate(rules) if r is not None and r.needs_delta]
    if not apart:
        return chosen.split(epsilon, delta, sensitivities, selecting)
    if not delta > 0:
        raise InvalidParameter("DP401", f"mechanism {rules[apart[0]].option!r} needs delta > 0: its guarantee is "
                               "(epsilon, delta)", hint="pass a delta (such as 1e-6), or ask for mechanism => "
                                                        "'exponential'")
    others = [i for i in range(len(sensitivities)) if i not in apart]
    each = share(epsilon, len(sensitivities))
    to_rules = delta / 2 if others and (selecting or chosen.measure != PURE) else delta
    per_rule = share(to_rules, len(apart))
    losses: list = [None] * len(sensitivities)
    for i in apart:
        losses[i] = rules[i].loss(Loss.pure(each), per_rule)
    if not others:
        return losses, 0.0
    rest = share(Fraction(epsilon) - len(apart) * Fraction(each), 1)
    left = share(Fraction(delta) - len(apart) * Fraction(per_rule), 1)
    shares, selection_delta = chosen.split(rest, left if left > 0 else 0.0, [sensitivities[i] for i in others],
                                           selecting)
    for i, loss in zip(others, shares):
        losses[i] = loss
    return losses, selection_delta


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
