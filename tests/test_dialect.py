"""GoogleSQL differential-privacy syntax: BigQuery DP queries run on DuckDB unchanged, and their
options are enforced by the rewrite, within the policy's total budget."""
from pathlib import Path

import pytest

from dpsql.errors import InvalidParameter

from conftest import refusal

# The BigQuery example of the accept corpus, run unchanged.
BIGQUERY = next((Path(__file__).resolve().parents[1] / "grammar" / "accept").glob("036_*.sql")).read_text()


def test_a_bigquery_dp_query_runs_unchanged(db):
    res = db.sql(BIGQUERY)
    assert res.columns == ["clinic", "average_cost", "visits"]
    assert [r[0] for r in res.fetchall()] == ["a", "b", "c"]
    assert all(0 <= r[1] <= 40 for r in res.fetchall())
    assert db.budget.spent_epsilon == 1


def test_options_are_enforced_by_the_plan(db):
    plan = db.explain(BIGQUERY)
    assert plan.epsilon == 1 and plan.max_groups == 1
    sens = {m.label: m.sensitivity for m in plan.measurements}
    assert sens["COUNT(*)"] == 5, "per-group bound 5, in <= 1 partition"
    assert sens["COUNT(units with cost)"] == 1
    avg = next(m for m in plan.measurements if m.bounding == "unit_mean")
    assert avg.sensitivity * avg.granularity == 40
    assert "L = 1 partition(s) per unit" in str(plan)


def test_per_row_bounds_override_the_policy_clamp(db):
    plan = db.explain("SELECT clinic, SUM(cost, contribution_bounds_per_row => (0, 10)) FROM visits GROUP BY clinic")
    m = plan.measurements[0]
    assert (m.lower, m.upper) == (0, 10) and m.sensitivity * m.granularity == 2 * 3 * 10


def test_a_global_aggregate_needs_no_factor_L(db):
    # One partition: a unit cannot reach L = 2 of them, so L is 1 in the sensitivity.
    plan = db.explain("SELECT SUM(cost, contribution_bounds_per_row => (0, 10)) FROM visits")
    assert plan.max_groups == 1 and plan.measurements[0].sensitivity * plan.measurements[0].granularity == 3 * 10


def test_query_bounds_make_an_unbounded_column_summable(db):
    assert db.sql("SELECT SUM(age, contribution_bounds_per_row => (0, 1)) FROM people").fetchall()


def test_option_epsilon_overrides_the_default_and_conflicts_with_a_different_caller_value(db):
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.25) COUNT(*) FROM people"
    assert db.explain(sql).epsilon == 0.25
    assert db.explain(sql, epsilon=0.25).epsilon == 0.25
    with pytest.raises(InvalidParameter, match="epsilon is given twice"):
        db.explain(sql, epsilon=0.5)


def test_the_policy_total_still_caps_a_query_asking_for_more(db):
    err = refusal(db, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 5000) COUNT(*) FROM people")
    assert err.code == "DP402"


def test_the_clause_is_per_select_and_parses_with_a_where_and_subexpressions(db):
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5) state, COUNT(*) FROM people "
           "WHERE age IN (1, 2, 3) AND (income > 5) GROUP BY state")
    assert db.explain(sql).epsilon == 0.5


# Malformed options and bounds: grammar/reject/*dp308*, *dp309*, *dp310*.
