"""The clipping report (issue 25, item 2): how many people of each released group contribution
bounding cut (more than C rows, more than L groups, a value or a per-group total clamped), released
as a noisy count on request (``report_clipping``), beside a noisy count of the group's people, so
the answer says whether its bounds changed it materially instead of leaving the user to guess.

Its budget is part of the query's, never added to it: ``clipping_epsilon`` if given, else
CLIPPING_SHARE of the query's epsilon (and as much of its delta, for a mechanism that spends delta);
the query's own measurements share the rest. Sequential composition: the charge stays the query's
(epsilon, delta). The count's sensitivity is proven in plan/sensitivity.py ``clipped_sensitivity``.

>>> from dpsql.mechanisms.base import mechanism
>>> report_budgets(None, 1.0, 0.0, mechanism("discrete Laplace"))   # the rest rounded down: never above 1
((0.8999999999999999, 0.0), (0.1, 0.0))
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpsql.errors import InvalidParameter
from dpsql.mechanisms.losses import PURE, share
from dpsql.plan.text import fmt

# The report's default share of the query's epsilon: enough for a count of people whose noise is
# about ten times the query's own per-measurement noise at worst, little taken from the answer.
CLIPPING_SHARE = Fraction(1, 10)


@dataclass(frozen=True)
class ClippingReport:
    """What the report releases: the noisy count of cut people (measurement ``clipped``) and of the
    group's people (``people``: the query's own unit count when it has one, else the report's)."""
    clipped: str
    people: str
    epsilon: float
    delta: float
    shared: bool              # ``people`` is the query's own measurement (no budget of the report's)
    asked: bool               # clipping_epsilon was given (else the default share)

    def lines(self, query_epsilon: float) -> list[str]:
        source = "clipping_epsilon" if self.asked else f"the default {fmt(float(CLIPPING_SHARE) * 100)}%"
        people = (f"{self.people}, the query's own count of people" if self.shared
                  else f"{self.people}, the report's own count of people")
        return [f"clipping report (report_clipping): epsilon {self.epsilon:.6g} of the query's "
                f"{query_epsilon:.6g} ({source}), delta {self.delta:g}; the query's measurements share the rest",
                f"  per released group: {self.clipped}, the people whose rows bounding cut (more than C rows, more "
                f"than L groups, a value or a total clamped), and {people}; their ratio is the share of the "
                "group's people bounding changed (post-processing); result.clipping holds both with intervals"]


def report_budgets(asked: float | None, epsilon: float, delta: float, chosen, refuse=None
                   ) -> tuple[tuple[float, float], tuple[float, float]]:
    """((epsilon, delta) of the query's measurements, (epsilon, delta) of the report): together at
    most the query's (basic composition). A pure mechanism's report spends no delta. ``refuse``: the
    scope's, to place DP331 on the query's OPTIONS (a function of the query and the call alone)."""
    if asked is not None and not 0 < asked < epsilon:
        raise (refuse or _plain)("DP331", f"clipping_epsilon must lie strictly between 0 and the query's epsilon "
                               f"{epsilon:g}, got {asked:g}",
                               hint=f"pass a smaller clipping_epsilon (such as {epsilon * 0.1:.3g}), or leave it "
                                    "out for 10% of the query's epsilon")
    report = share(asked if asked is not None else epsilon * CLIPPING_SHARE, 1)
    rest = share(Fraction(epsilon) - Fraction(report), 1)
    if chosen.measure == PURE or delta == 0:
        return (rest, delta), (report, 0.0)
    report_delta = share(Fraction(delta) * Fraction(report) / Fraction(epsilon), 1)
    return (rest, share(Fraction(delta) - Fraction(report_delta), 1)), (report, report_delta)


def _plain(code: str, message: str, hint: str = "") -> InvalidParameter:
    return InvalidParameter(code, message, hint=hint)
