"""Random sources and tests of frequencies for the sampler tests (tests/mechanisms/): a seeded
generator (the trusted in-process seam), a source replaying scripted answers, and the alpha and
binomial p-value the seeded frequency tests use."""
import numpy as np
from scipy import stats

from dpsql.mechanisms.randomness import GeneratorRandomSource

SEEDED_ALPHA = 1e-3   # seeded chi-squared tests require p > 0.001 (deterministic given the seed)


def seeded(seed: int) -> GeneratorRandomSource:
    return GeneratorRandomSource(np.random.default_rng(seed))


def binomial_pvalue(successes: int, trials: int, p: float) -> float:
    return stats.binomtest(int(successes), trials, p).pvalue


class ScriptedSource:
    """A RandomSource replaying fixed answers, recording every bound it was asked for."""

    def __init__(self, answers):
        self.answers, self.bounds = list(answers), []

    def below(self, n):
        self.bounds.append(np.asarray(n).tolist())
        answer = np.asarray(self.answers.pop(0), dtype=np.asarray(n).dtype)
        assert answer.shape == np.shape(n) and (answer < n).all()
        return answer
