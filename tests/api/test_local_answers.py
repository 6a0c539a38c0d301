"""Counts over a randomized column of a local-model table (frontend/local.py, plan/local.py): answered by
the debiased estimator from the reports, with its variance and interval, at central epsilon 0, recorded
at 0; every other query over the table goes through central DP; no value, NULL or row count of the
table makes the answer fail, and nothing but the column's reports moves it."""
import duckdb
import numpy as np
import pytest

import dpsql
from dpsql import testing
from dpsql.mechanisms.randomized_response import estimate
from dpsql.plan.local import LocalPlan
from dpsql.plan.model import Plan

REGIONS = ["N", "S", "E", "W"]
POLICY = {"budget": {"epsilon": 5}, "tables": {"survey": {
    "privacy_unit": "id", "local_model": True, "columns": {
        "id": {"identifier": True},
        "region": {"randomized": {"epsilon": 1.0, "domain": REGIONS}},
        "smoker": {"randomized": {"epsilon": 2.0, "domain": [False, True]}},
        "age": {"lower": 0, "upper": 100},
        "site": {"keys": [1, 2]}}}}}
COUNT = "SELECT region, COUNT(*) AS n FROM survey GROUP BY region"


def connect(rows: list[tuple]) -> dpsql.PrivateConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE survey (id INTEGER, region VARCHAR, smoker BOOLEAN, age INTEGER)")
    if rows:
        con.executemany("INSERT INTO survey VALUES (?, ?, ?, ?)", rows)
    con.execute("ALTER TABLE survey ADD COLUMN site INTEGER DEFAULT 1")
    return dpsql.connect(con, policy=POLICY, ledger=":memory:")


def reports(n: int = 200) -> list[tuple]:
    return [(i, REGIONS[(i % 7) % 4], i % 3 == 0, i % 90) for i in range(n)]


def observed(rows, regions=REGIONS) -> list[int]:
    return [sum(1 for r in rows if r[1] == g) for g in regions]


def test_a_count_per_category_is_the_debiased_estimate_with_its_variance_and_interval_at_central_epsilon_0():
    rows = reports()
    db = connect(rows)
    res = db.sql(COUNT, ci=0.9)
    assert isinstance(res.plan, LocalPlan) and res.plan.epsilon == 0 and res.plan.delta == 0
    assert res.columns == ["region", "n", "n_variance", "n_ci_low", "n_ci_high"]
    table = res.arrow().to_pydict()
    assert table["region"] == REGIONS   # every category, in the domain's order
    found = estimate(observed(rows), 1.0)
    assert np.allclose(table["n"], np.maximum(found.counts, 0)) and np.allclose(table["n_variance"], found.variance)
    low, high = found.interval(0.9)
    assert np.allclose(table["n_ci_low"], np.maximum(low, 0)) and np.allclose(table["n_ci_high"], np.maximum(high, 0))
    assert (db.budget.spent_epsilon, db.budget.spent_delta) == (0, 0)
    history = db.budget.history
    assert len(history) == 1 and history[0].epsilon == 0 and "local model: epsilon 1 per respondent" in history[0].plan


def test_explain_says_which_model_applies_and_the_epsilon_per_respondent():
    text = str(connect(reports()).explain("SELECT COUNT(*) AS k, smoker FROM survey AS s GROUP BY s.smoker"))
    assert "local model: epsilon 2 per respondent (Warner randomized response of survey.smoker)" in text
    assert "budget: epsilon 0, delta 0 of the central budget" in text and "k_variance" in text


def test_raw_counts_keep_the_unbiased_estimate_and_the_default_clamps_it():
    rows = [(i, "N", False, 1) for i in range(50)]   # no report says S, E or W: negative estimates
    db = connect(rows)
    raw = db.sql(COUNT, nonnegative=False).arrow().column("n").to_pylist()
    assert np.allclose(raw, estimate([50, 0, 0, 0], 1.0).counts) and min(raw) < 0
    assert min(db.sql(COUNT).arrow().column("n").to_pylist()) == 0


@pytest.mark.parametrize("sql", [
    "SELECT region, COUNT(*) AS n FROM survey WHERE age > 30 GROUP BY region",
    "SELECT region, COUNT(*) AS n FROM survey GROUP BY region ORDER BY n DESC",
    "SELECT region, COUNT(*) AS n, AVG(age) AS a FROM survey GROUP BY region",
    "SELECT region, COUNT(age) AS n FROM survey GROUP BY region",
    "SELECT region, smoker, COUNT(*) AS n FROM survey GROUP BY region, smoker",
    "SELECT COUNT(*) AS n FROM survey",
    "SELECT site, COUNT(*) AS n FROM survey GROUP BY site",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5) region, COUNT(*) AS n FROM survey GROUP BY region",
])
def test_anything_else_over_the_table_is_central_dp_and_spends(sql):
    db = connect(reports())
    res = db.sql(sql, epsilon=0.5)
    assert isinstance(res.plan, Plan) and db.budget.spent_epsilon == pytest.approx(0.5)


@pytest.mark.parametrize("rows", [
    [],
    [(1, None, None, None), (2, "north", True, 3), (3, "", False, 4)],
    [(i, "W", True, 1) for i in range(5)] + [(9, "S\x00", None, 2)],
])
def test_no_value_null_or_row_count_makes_it_fail_and_outside_values_are_no_reports(rows):
    res = connect(rows).sql(COUNT, nonnegative=False)
    table = res.arrow().to_pydict()
    assert table["region"] == REGIONS
    assert np.allclose(table["n"], estimate(observed(rows), 1.0).counts)


def test_nothing_but_the_reports_moves_the_answer():
    """Other columns changed on every row, and the rows shuffled: the same answer, cell for cell."""
    rows = reports()
    moved = [(1000 - i, region, not smoker, (age * 7) % 100) for i, region, smoker, age in reversed(rows)]
    assert connect(rows).sql(COUNT).fetchall() == connect(moved).sql(COUNT).fetchall()


def test_an_analyst_spends_nothing_and_sees_the_local_model_in_the_table():
    db = connect(reports())
    testing.ledger(db).add_analyst("ann", epsilon=1)
    view = db.analyst("ann")
    res = view.sql(COUNT)
    assert view.budget.spent_epsilon == 0 and "local model: debiased from reports randomized at epsilon 1" in str(res)
