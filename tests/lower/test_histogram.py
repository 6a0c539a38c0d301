"""MIN, MAX and the quantile rules end to end (lower/histogram.py): the exponential mechanism's law
through the real rewritten SQL and its choice function, one call per group, accuracy, what explain
and the ledger say, PTR's released "no answer", and the refusals.

Statistical checks run on one DuckDB thread with a seeded generator (the trusted test seam), so they
see the same draws on every run.
"""
import math
from fractions import Fraction

import duckdb
import numpy as np
import pytest
from scipy import stats

import dpsql
from dpsql import testing
from dpsql.plan.sensitivity import TREE_LEAVES
from tests.support import sql_tree
from tests.support.checks import refusal
from tests.support.quantile_laws import exponential_law
from tests.support.sources import SEEDED_ALPHA


def connect(rows: str, keys=None, unit: str = "row", L: int = 1, C: int = 1, upper: float = 8.0, seed: int = 1,
            accountant: str = "basic", total_delta: float = 0.5):
    """Table t (u, g, v) from a SELECT, v in [0, upper], g with public ``keys`` if given."""
    con = duckdb.connect(config={"threads": 1})
    con.execute(f"CREATE TABLE t AS {rows}")
    columns = {"v": {"lower": 0, "upper": upper}, "g": {"keys": keys} if keys is not None else {}}
    policy = {"budget": {"epsilon": 1e6, "delta": total_delta, "accountant": accountant}, "tables": {"t": {
        "privacy_unit": unit, "max_groups_per_unit": L, "max_rows_per_unit": C, "columns": columns}}}
    return dpsql.connect(con, ledger=":memory:", policy=policy, rng=np.random.default_rng(seed))


GROUPS = 3000
SAME = f"SELECT g, unnest([1.0, 1.0, 2.0, 5.0]) AS v FROM range({GROUPS}) r(g)"


def test_the_exponential_median_follows_its_exact_law_through_the_engine():
    """3,000 groups holding {1, 1, 2, 5} on [0, 8]: one query draws one median per group. At epsilon 1
    (one value per person: range 1 rank, temperature 1), the released cells against the exact law of
    the 65,536 cells, pooled into six intervals (two of them halves of one run of empty cells, so
    uniformity inside a run is tested too): chi-squared, p > 0.001."""
    db = connect(SAME, keys=list(range(GROUPS)))
    res = db.sql("SELECT g, MEDIAN(v, mechanism => 'exponential') AS m FROM t GROUP BY g", epsilon=1.0)
    (m,) = res.plan.measurements
    assert (m.mechanism, m.scale, m.sensitivity.per_partition) == ("exponential", 1, 1)
    width = 8.0 / TREE_LEAVES
    cells = np.floor(np.array(res.df()["m"]) / width).astype(np.int64)
    law = exponential_law([8192, 8192, 16384, 40960], TREE_LEAVES, Fraction(1, 2), 1)
    edges = [0, 1, 2, 3.5, 5, 6.5, 8]
    bins = [int(e / width) for e in edges]
    expected = np.array([law[a:b].sum() for a, b in zip(bins, bins[1:])]) * GROUPS
    observed = np.histogram(cells, bins=bins)[0]
    assert stats.chisquare(observed, expected).pvalue > SEEDED_ALPHA


def test_min_max_and_median_by_the_exponential_mechanism_are_within_their_rank_error():
    """20,000 rows uniform on [0, 100): each released value's rank among the data lies within the
    error explain states (95%: s ln(K / 0.05) ranks; here within it for all three, fixed seed)."""
    rows = "SELECT range AS u, 0 AS g, (range * 7919 % 20000) / 200.0 AS v FROM range(20000)"
    db = connect(rows, upper=100.0, seed=3)
    res = db.sql("SELECT MIN(v) AS lo, MAX(v) AS hi, MEDIAN(v, mechanism => 'exponential') AS m FROM t", epsilon=1.0)
    values = np.sort(testing.duckdb_connection(db).execute("SELECT v FROM t").fetchnumpy()["v"])
    for name, q, m in zip(("lo", "hi", "m"), (0, 1, 0.5), res.plan.measurements):
        released = res.df()[name][0]
        rank = np.searchsorted(values, released)
        assert abs(rank - q * len(values)) <= m.error + 1, (name, released, rank, m.error)


def test_the_choice_function_is_called_once_per_group_from_a_materialized_stage(db):
    """Each rule's choice function is called in exactly one place, a MATERIALIZED CTE, so the cell a
    group releases is one draw however often post-processing reads it."""
    plan = db.explain("SELECT clinic, MIN(cost) AS lo, MEDIAN(cost, mechanism => 'smooth') AS m FROM visits "
                      "GROUP BY clinic", delta=1e-6)
    tree, choice = sql_tree.tree(plan), f"{testing.noise_function(db)}_choice"
    for m in plan.measurements:
        cell = sql_tree.stages(tree)[f"__{m.name}_cell"]
        assert cell.args.get("materialized") and len(sql_tree.calls(cell, choice)) == 1
    assert len(sql_tree.calls(tree, choice)) == len(plan.measurements)


def test_explain_says_what_min_and_max_are_and_the_ledger_stores_each_rules_releases(db):
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 3, delta = 1e-6) clinic, MIN(cost) AS lo, "
           "MEDIAN(cost, mechanism => 'ptr') AS p, QUANTILE_CONT(cost, 0.9, mechanism => 'smooth') AS s "
           "FROM visits GROUP BY clinic")
    text = str(db.explain(sql))
    assert "not the true smallest value, which one person may hold" in text
    assert "propose-test-release (Dwork-Lei 2009)" in text and "Nissim-Raskhodnikova-Smith 2007" in text
    assert "within a bound that depends on the data" in text
    res = db.sql(sql)
    names = [r.mechanism for r in res.plan.releases()]
    assert names == ["exponential", "discrete Laplace", "discrete Laplace", "approximate", "approximate"]
    epsilon, delta = db.budget.history[-1].epsilon, db.budget.history[-1].delta
    assert (epsilon, delta) == (3, 1e-6)
    assert sum(m.loss.epsilon for m in res.plan.measurements) <= 3
    assert sum(m.loss.delta for m in res.plan.measurements) <= Fraction(1e-6)


@pytest.mark.parametrize("accountant", ["zcdp", "pld"])
def test_each_accountant_composes_a_quantile_rules_releases(accountant):
    """The exponential mechanism's release and PTR's parts compose under zCDP and PLD: the history's
    epsilon at the total's delta is above 0 and no more than the query's."""
    db = connect(SAME.replace(str(GROUPS), "4"), keys=[0, 1, 2, 3], accountant=accountant, total_delta=1e-3)
    db.sql("SELECT g, MIN(v), MEDIAN(v, mechanism => 'ptr') FROM t GROUP BY g", epsilon=1.0, delta=1e-6)
    assert 0 < db.budget.spent_epsilon <= 1.0 + 1e-9


def test_ptr_releases_no_answer_on_sparse_data_and_the_median_on_dense_data():
    """Five spread values: the proposal (64 cells) fails, NULL with the warning; 20,000 values in a
    narrow band around 50 (ties of integers): it passes, within its noise of the median."""
    sparse = connect("SELECT range AS u, 0 AS g, range * 1.5 AS v FROM range(5)")
    res = sparse.sql("SELECT MEDIAN(v, mechanism => 'ptr') AS p FROM t", epsilon=1.0, delta=1e-6)
    assert res.fetchall() == [(None,)]
    assert any("no answer (NULL) for p in 1 of 1 row(s)" in w for w in res.warnings)
    dense = connect("SELECT range AS u, 0 AS g, 40 + range % 21 AS v FROM range(20000)", upper=100.0)
    res = dense.sql("SELECT MEDIAN(v, mechanism => 'ptr') AS p FROM t", epsilon=1.0, delta=1e-6)
    (m,) = res.plan.measurements
    assert abs(res.fetchall()[0][0] - 50.0) <= m.error * 100.0 / TREE_LEAVES + 1
    assert not any("no answer" in w for w in res.warnings)


def test_an_empty_public_group_gets_an_answer_from_every_rule():
    db = connect("SELECT range AS u, 0 AS g, 1.0 AS v FROM range(10)", keys=[0, 1])
    rows = db.sql("SELECT g, MIN(v), MEDIAN(v, mechanism => 'smooth') FROM t GROUP BY g", epsilon=1.0,
                  delta=1e-6).fetchall()
    assert [r[0] for r in rows] == [0, 1] and all(0 <= x <= 8 for r in rows for x in r[1:])


@pytest.mark.parametrize("sql, code", [
    ("SELECT MEDIAN(cost, mechanism => 'smooth') FROM visits", "DP401"),
    ("SELECT COUNT(*, mechanism => 'exponential') FROM visits", "DP308"),
    ("SELECT MEDIAN(cost, mechanism => 'gumbel') FROM visits", "DP308"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(mechanism = 'exponential') MIN(cost) FROM visits", "DP308"),
])
def test_refusals_name_the_mechanism_and_spend_nothing(db, sql, code):
    before = db.budget.spent_epsilon
    assert refusal(db, sql).code == code
    assert db.budget.spent_epsilon == before


def test_min_and_max_are_the_extremes_noiselessly():
    """The trusted seam's noiseless choice answers the extreme's own cell (its midpoint)."""
    db = connect("SELECT range AS u, 0 AS g, 2.0 + range / 10.0 AS v FROM range(40)")
    lo, hi = testing.run(db, "SELECT MIN(v), MAX(v) FROM t").rows[0]
    width = 8.0 / TREE_LEAVES
    assert math.isclose(lo, 2.0, abs_tol=width) and math.isclose(hi, 5.9, abs_tol=width)
