"""Noisy top-k through the engine (plan/top_k.py, lower/top_k.py; issue 23).

* **The law**: the groups the engine chooses, over many runs of the real rewritten SQL with a seeded
  source, follow the exact law of peeling at the plan's temperature (chi-squared, p > 0.001:
  deterministic given the seed), and that law moves by at most e^epsilon between neighbouring
  databases. Every run releases k distinct groups in the order chosen (the law's outcomes).
* **The ledger**: a charge stores the choice's release, and every accountant composes it.

Elsewhere: the utilities' sensitivity on random neighbours (tests/properties/test_sensitivity.py: a
spread within the range each choice is charged for, one way where monotone) and on the leak test's
adversarial ones (its property 2), identical zero-noise releases there (property 3), and plain
DuckDB's ORDER BY ... LIMIT with the noise off (tests/properties/test_differential.py).
"""
import itertools
import math

import duckdb
import numpy as np
import pytest
from scipy import stats

import dpsql
from dpsql import testing
from dpsql.mechanisms.base import SELECTION
from tests.support.sources import SEEDED_ALPHA

# --------------------------------------------------------------------------------------------
# The law of the choice, through the engine
# --------------------------------------------------------------------------------------------
COUNTS = {"a": 10, "b": 8, "c": 5, "d": 0}   # rows per key; "d" holds none: a candidate all the same


def counted(counts: dict, seed: int) -> dpsql.PrivateConnection:
    con = duckdb.connect(config={"threads": 1})
    con.execute("CREATE TABLE t (g VARCHAR)")
    rows = [(g,) for g, n in counts.items() for _ in range(n)]
    con.executemany("INSERT INTO t VALUES (?)", rows)
    policy = {"budget": {"epsilon": 1e9}, "tables": {"t": {"privacy_unit": "row", "columns": {"g": {"keys": list(COUNTS)}}}}}
    return dpsql.connect(con, ledger=":memory:", policy=policy, rng=np.random.default_rng(seed))


def peeling_law(counts: dict, k: int, scale: float) -> dict[tuple, float]:
    """P(the groups chosen in this order) of k peels at temperature s: w_i = exp(u_i / s), each peel
    w_i over what is left."""
    weights = {g: math.exp(n / scale) for g, n in counts.items()}
    law = {}
    for order in itertools.permutations(counts, k):
        p, left = 1.0, sum(weights.values())
        for g in order:
            p *= weights[g] / left
            left -= weights[g]
        law[order] = p
    return law


def runs(db, sql: str, n: int) -> list[tuple]:
    """The groups chosen in ``n`` runs of the query's real rewritten SQL (its real choice function,
    the connection's seeded source), in the order released; nothing charged."""
    text = db.plan(sql).rewritten_sql
    return [tuple(testing.fetch(db, testing.bind(db, text)).column(0).to_pylist()) for _ in range(n)]


@pytest.mark.parametrize("sql, k, epsilon", [
    ("SELECT MODE(g) FROM t", 1, 0.5),
    ("SELECT g FROM t GROUP BY g ORDER BY COUNT(*) DESC LIMIT 2", 2, 1.0),
    ("SELECT g FROM t GROUP BY g ORDER BY COUNT(*) LIMIT 2", 2, 1.0),
])
def test_the_engine_chooses_by_the_exact_law(sql, k, epsilon):
    """The ordered choices of 600 runs against peeling's law at the plan's temperature (chi-squared,
    outcomes of expected count < 5 pooled); the law itself within e^epsilon on the neighbour with
    one row more in any group."""
    sql = sql.replace("SELECT ", f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = {epsilon}, top_k = 'exponential') ", 1)
    db = counted(COUNTS, seed=7)
    top = db.plan(sql).top_k
    assert top.k == k and SELECTION.epsilon(top.release) <= epsilon
    utility = COUNTS if top.descending else {g: -n for g, n in COUNTS.items()}
    law = peeling_law(utility, k, float(top.scale))
    seen = runs(db, sql, 600)
    observed = {order: seen.count(order) for order in law}
    assert sum(observed.values()) == len(seen)
    big = [o for o in law if law[o] * len(seen) >= 5]
    small = [o for o in law if o not in big]
    got = [observed[o] for o in big] + [sum(observed[o] for o in small)]
    want = [law[o] * len(seen) for o in big] + [sum(law[o] for o in small) * len(seen)]
    assert stats.chisquare(got, want).pvalue > SEEDED_ALPHA, (got, want)
    for g in COUNTS:   # the neighbour: one row more in g
        other = peeling_law({h: u + (1 if h == g else 0) * (1 if top.descending else -1) for h, u in utility.items()},
                            k, float(top.scale))
        assert max(abs(math.log(law[o] / other[o])) for o in law) <= epsilon + 1e-9


@pytest.mark.parametrize("accountant", ["basic", "zcdp", "pld"])
def test_the_ledger_composes_the_choice_under_every_accountant(accountant):
    """A top-k's charge stores the choice's release beside the values' (Plan.releases), and every
    accountant composes it through the exponential map: two queries at epsilon 0.5 fill a total of 1."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT ['a', 'b', 'c'][1 + range % 3] AS g FROM range(30)")
    policy = {"budget": {"epsilon": 1.0, "delta": 1e-6, "accountant": accountant},
              "tables": {"t": {"privacy_unit": "row", "columns": {"g": {"keys": ["a", "b", "c"]}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy, rng=np.random.default_rng(3))
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 1"
    first = db.sql(sql, epsilon=0.5, fresh=True)
    assert SELECTION.name in [r.mechanism for r in first.plan.releases()] and len(first.fetchall()) == 1
    assert 0 < db.budget.spent_epsilon <= 0.5 + 1e-9
    db.sql(sql, epsilon=0.5, fresh=True)
    assert db.budget.spent_epsilon <= 1.0 + 1e-9
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(sql, epsilon=0.5, fresh=True) if accountant == "basic" else db.sql(sql, epsilon=1.0, fresh=True)
    assert info.value.code == "DP402"
