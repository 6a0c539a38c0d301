"""The exponential mechanism's quantile (mechanisms/quantile_choice.py): its candidates are Smith's
utility on every cell, its draws follow the exact law, and that law's likelihood ratio on
neighbouring histograms is at most e^epsilon (computed, not sampled) for every q and C."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsql.mechanisms.losses import Loss
from dpsql.mechanisms.quantile_choice import ExponentialQuantile, candidates, choose_cell
from dpsql.mechanisms.quantile_ranks import Histogram, fraction_of
from dpsql.mechanisms.releases import Release, Sensitivity
from tests.support.quantile_laws import dataset, exponential_law, histogram, neighbours, utilities
from tests.support.sources import SEEDED_ALPHA, seeded

RULE = ExponentialQuantile()
QS = [0.0, 0.1, 0.5, 0.9, 1.0]


@pytest.mark.parametrize("q", QS)
def test_the_candidates_are_the_runs_of_cells_with_smiths_utility(q):
    """Expanded cell by cell, the candidates cover the grid once, in order, and each cell's utility (in
    1/den ranks) is minus its rank distance to q n, computed here from the definition."""
    rng = np.random.default_rng(11)
    num, den = fraction_of(q)
    for _ in range(60):
        values = dataset(rng, 40)
        starts, widths, us = candidates(Histogram.of(*histogram(values), 40), num, den)
        assert starts == list(np.cumsum([0] + widths[:-1])) and sum(widths) == 40
        expanded = np.repeat(np.array(us, dtype=float), widths) / den
        assert np.array_equal(expanded, utilities(values, 40, Fraction(num, den))), (values, q)


@pytest.mark.parametrize("q, C", [(q, C) for q in QS for C in (1, 3)])
def test_neighbours_likelihood_ratio_is_at_most_e_epsilon(q, C):
    """For random histograms and their neighbours (up to C values added anywhere, at either end or at
    the median, or removed), the exact laws at the calibrated temperature differ by a factor of at most
    e^epsilon in every cell: the range bound of the module's proof (C at q in {0, 1}, 2 C max(q, 1-q)
    else). The worst ratio comes close to the bound (it is no loose one)."""
    rng, grid, epsilon = np.random.default_rng(int(q * 10) + C), 32, 1.0
    num, den = fraction_of(q)
    sensitivity = RULE.sensitivity(Sensitivity(1, Fraction(C)), num, den)
    temperature = RULE.calibrate(sensitivity, Loss.pure(epsilon))
    worst = 0.0
    for _ in range(80):
        values = dataset(rng, grid)
        p = exponential_law(values, grid, Fraction(num, den), temperature)
        for other in neighbours(rng, values, grid, C):
            p_other = exponential_law(other, grid, Fraction(num, den), temperature)
            worst = max(worst, float(np.abs(np.log(p) - np.log(p_other)).max()))
    assert worst <= epsilon * (1 + 1e-9)
    assert worst > 0.5 * epsilon


def test_a_draw_follows_the_exact_law_and_is_uniform_inside_its_run():
    """20,000 seeded draws for the median of {1, 1, 2, 5} on 8 cells at temperature 1: chi-squared
    against the exact law cell by cell (cells of one run share its weight: uniform inside it)."""
    values, grid, source = [1, 1, 2, 5], 8, seeded(3)
    h = Histogram.of(*histogram(values), grid)
    draws = [choose_cell(source, h, 1, 2, Fraction(1)) for _ in range(20_000)]
    law = exponential_law(values, grid, Fraction(1, 2), 1)
    observed = np.bincount(draws, minlength=grid)
    assert stats.chisquare(observed, law * len(draws)).pvalue > SEEDED_ALPHA


def test_the_error_bound_holds_for_the_chosen_ranks():
    """With probability 95% the chosen cell's ranks lie within s ln(K / 0.05) of q n: on a law computed
    exactly, the mass beyond that distance is below 5%."""
    grid, s = 4096, Fraction(3)
    values = np.random.default_rng(5).integers(0, grid, 400).tolist()
    law = exponential_law(values, grid, Fraction(1, 2), s)
    distance = -utilities(values, grid, Fraction(1, 2))
    bound = RULE.error_bound(Release(RULE.name, Sensitivity(1, Fraction(1)), s), 0.95, grid)
    assert law[distance > bound].sum() <= 0.05 and math.isclose(bound, 3 * math.log(grid / 0.05))
