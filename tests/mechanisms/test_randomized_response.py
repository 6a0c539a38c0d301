"""Randomized response (mechanisms/randomized_response.py): the sampler against its exact law, the
epsilon per respondent from the law on every pair of neighbouring answers, the estimator unbiased with
the variance it states, and bad parameters refused."""
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsql.errors import DpsqlError
from dpsql.mechanisms.randomized_response import DENOMINATOR, RandomizedResponse, estimate
from tests.support.sources import SEEDED_ALPHA, ScriptedSource, seeded


def exp_decimal(epsilon: float) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(epsilon).exp()


def ratio_decimal(ratio: Fraction) -> Decimal:
    """The ratio to 80 digits (products elsewhere round to 28, far below the slack of 2**-61 they test)."""
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(ratio.numerator) / Decimal(ratio.denominator)


@pytest.mark.parametrize("k, epsilon, answer", [(2, 0.5, 1), (3, 1.0, 0), (5, 2.0, 3), (8, 0.25, 7)])
def test_the_reports_follow_the_exact_law(k, epsilon, answer):
    """200,000 seeded reports of one answer against P(report | answer) (chi-squared, p > 0.001)."""
    rr = RandomizedResponse(epsilon, k)
    draws = rr.sample(seeded(k * 100 + answer), np.full(200_000, answer))
    observed = np.bincount(draws, minlength=k)
    expected = np.array([float(p) for p in rr.law(answer)]) * draws.size
    assert stats.chisquare(observed, expected).pvalue > SEEDED_ALPHA


def test_the_keep_decision_is_one_integer_below_2_62_and_the_replacement_skips_the_answer():
    rr = RandomizedResponse(1.0, 4)
    cut = rr.keep_numerator
    # Four answers of category 2: the first two draws keep (just below the cut), the last two move,
    # to the 0th and the 2nd of the other categories (0, 1, 3): 0 and 3.
    source = ScriptedSource([[0, cut - 1, cut, DENOMINATOR - 1], [0, 2]])
    assert rr.sample(source, np.array([2, 2, 2, 2])).tolist() == [2, 2, 0, 3]
    assert source.bounds == [[DENOMINATOR] * 4, [3, 3]]


@pytest.mark.parametrize("k", [2, 3, 7, 256])
@pytest.mark.parametrize("epsilon", [1e-9, 0.1, 1.0, np.log(3), 5.0, 30.0, 1000.0])
def test_every_output_is_at_most_e_epsilon_times_likelier_under_one_answer_than_another(k, epsilon):
    """From the exact law: for every report y and answers x, x', P(y | x) / P(y | x') <= e^eps, and the
    rounding of p_keep gives away almost nothing: below e^eps by at most the relative change two steps of
    2**-62 in p make, 2**-61 (1/p + 1/(1 - p)) (1e-18 at eps 1, 2e-6 at eps 30), up to eps 40."""
    rr = RandomizedResponse(epsilon, k)
    laws = [rr.law(x) for x in (range(k) if k < 10 else (0, 1, k - 1))]
    worst = max(a[y] / b[y] for a in laws for b in laws for y in range(k))
    assert worst == rr.p_keep / rr.q
    assert ratio_decimal(worst) <= exp_decimal(epsilon)
    if epsilon <= 40:
        slack = Fraction(1, 2**61) * (1 / rr.p_keep + 1 / (1 - rr.p_keep))
        assert ratio_decimal(worst) >= exp_decimal(epsilon) * (1 - ratio_decimal(slack))
    assert sum(rr.law(0)) == 1


def simulate(truth: list[int], epsilon: float, trials: int, seed: int) -> np.ndarray:
    """The reports' counts of ``trials`` independent randomizations of one table with these true counts."""
    rr = RandomizedResponse(epsilon, len(truth))
    answers = np.repeat(np.arange(len(truth)), truth)
    source = seeded(seed)
    return np.array([np.bincount(rr.sample(source, answers), minlength=len(truth)) for _ in range(trials)])


def exact_variance(truth: list[int], epsilon: float) -> np.ndarray:
    """Var of (o_c - n q) / (p - q) from the law alone: o_c is Binomial(n_c, p) + Binomial(n - n_c, q)."""
    rr = RandomizedResponse(epsilon, len(truth))
    p, q, n = float(rr.p_keep), float(rr.q), sum(truth)
    t = np.array(truth, dtype=float)
    return (t * p * (1 - p) + (n - t) * q * (1 - q)) / (p - q) ** 2


@pytest.mark.parametrize("truth, epsilon", [([700, 300], 0.5), ([500, 300, 150, 50], 1.0)])
def test_the_estimator_is_unbiased_with_the_variance_it_states(truth, epsilon):
    """2,000 seeded randomizations: the mean estimate within 4 standard errors of the truth; the
    spread of the estimates within 10% of the exact variance (its sampling error is 3.2%); the stated
    variance, averaged, within 5% of it."""
    trials = 2_000
    found = [estimate(row, epsilon) for row in simulate(truth, epsilon, trials, seed=len(truth))]
    counts = np.array([e.counts for e in found])
    variance = exact_variance(truth, epsilon)
    assert all(e.n == sum(truth) for e in found)
    assert np.all(np.abs(counts.mean(axis=0) - truth) < 4 * np.sqrt(variance / trials))
    assert np.allclose(counts.var(axis=0, ddof=1), variance, rtol=0.10)
    assert np.allclose(np.mean([e.variance for e in found], axis=0), variance, rtol=0.05)


def test_the_interval_covers_the_truth_at_its_level():
    """95% intervals of 2,000 seeded randomizations cover each true count 93% to 97% of the time."""
    truth, epsilon = [400, 350, 250], 1.0
    found = [estimate(row, epsilon).interval(0.95) for row in simulate(truth, epsilon, 2_000, seed=7)]
    covered = np.mean([(low <= truth) & (np.array(truth) <= high) for low, high in found], axis=0)
    assert np.all((0.93 <= covered) & (covered <= 0.97)), covered


@pytest.mark.parametrize("epsilon", [0, -1, float("nan"), float("inf"), True, "1", 1e-300])
def test_a_bad_epsilon_is_refused(epsilon):
    with pytest.raises(DpsqlError) as info:
        RandomizedResponse(epsilon, 2)
    assert info.value.code == "DP401" and "epsilon" in info.value.message


@pytest.mark.parametrize("k", [0, 1, 257, 2.0])
def test_a_domain_of_fewer_than_two_or_more_than_256_categories_is_refused(k):
    with pytest.raises(DpsqlError) as info:
        RandomizedResponse(1.0, k)
    assert info.value.code == "DP401" and "categories" in info.value.message
