"""Goodness of fit of noise draws against the exact discrete Laplace and discrete Gaussian pmfs
(tests/mechanisms/test_statistics.py, test_gaussian.py, tests/lower/test_quantile.py)."""
import math

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


def gaussian_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    """The discrete Gaussian's pmf, computed here on its own (not dpsql's): exp(-y^2 / 2 sigma^2) over
    the normaliser summed with math.fsum to where the terms are below e^-800 (relative error ~1e-16)."""
    reach = int(40 * sigma) + 10
    z = math.fsum(math.exp(-y * y / (2 * sigma * sigma)) for y in range(-reach, reach + 1))
    return np.array([math.exp(-int(y) ** 2 / (2 * sigma * sigma)) / z for y in support])


def gaussian_chi_squared_p(draws: np.ndarray, sigma: float) -> float:
    """Chi-squared goodness of fit against the exact discrete Gaussian pmf, tails pooled (expected >= 5)."""
    reach = int(12 * sigma) + 2
    inner_support = np.arange(-reach, reach + 1)
    pmf = gaussian_pmf(sigma, inner_support)
    keep = pmf * len(draws) >= 5
    lo, hi = int(inner_support[keep][0]), int(inner_support[keep][-1])
    inner = gaussian_pmf(sigma, np.arange(lo, hi + 1))
    tail = max(0.0, (1 - inner.sum()) / 2)
    counts = np.bincount(np.clip(draws, lo - 1, hi + 1) - (lo - 1), minlength=hi - lo + 3)
    expected = np.concatenate([[tail], inner, [tail]]) * len(draws)
    mask = expected >= 5
    observed = np.concatenate([[counts[~mask].sum()], counts[mask]])
    pooled = np.concatenate([[expected[~mask].sum()], expected[mask]])
    if pooled[0] < 5:   # nothing pooled worth a bin: fold it into the largest
        observed, pooled = observed[1:], pooled[1:]
    return float(stats.chisquare(observed, pooled * observed.sum() / pooled.sum()).pvalue)
