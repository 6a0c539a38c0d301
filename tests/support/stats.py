"""Goodness of fit of noise draws against the exact discrete Laplace pmf (tests/mechanisms/test_statistics.py,
tests/lower/test_quantile.py)."""
import numpy as np
from scipy import stats

from dpsql.mechanisms import discrete_laplace as noise


def chi_squared_p(draws: np.ndarray, scale: float) -> float:
    """Chi-squared goodness of fit against the exact discrete Laplace pmf, tails pooled (expected >= 5)."""
    support = np.arange(-200 * max(scale, 1), 200 * max(scale, 1) + 1).astype(np.int64)
    pmf = noise.discrete_laplace_pmf(scale, support)
    keep = pmf * len(draws) >= 5
    lo, hi = support[keep][0], support[keep][-1]
    observed = [np.sum(draws < lo)] + [np.sum(draws == x) for x in range(lo, hi + 1)] + [np.sum(draws > hi)]
    inner = noise.discrete_laplace_pmf(scale, np.arange(lo, hi + 1))
    tail = (1 - inner.sum()) / 2
    expected = np.concatenate([[tail], inner, [tail]]) * len(draws)
    observed, expected = np.array(observed), expected
    mask = expected > 0
    return stats.chisquare(observed[mask], expected[mask] * observed.sum() / expected[mask].sum()).pvalue
