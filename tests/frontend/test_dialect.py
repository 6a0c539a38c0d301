"""GoogleSQL differential-privacy syntax: BigQuery DP queries run on DuckDB unchanged, and their
options are enforced by the rewrite, within the policy's total budget."""

import pytest
import sqlglot
from sqlglot import exp

from dpsql.frontend.dialect import DP_AGGREGATES, Dpsql
from dpsql.errors import InvalidParameter
from tests.support.checks import refusal
from tests.support.paths import ACCEPT

# The BigQuery example of the accept corpus, run unchanged.
BIGQUERY = next(ACCEPT.glob("036_*.sql")).read_text()


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


def test_max_groups_contributed_may_lower_the_policy_L_but_never_raise_it(db):
    # visits: L = 2 in the policy. A query's option is an upper bound the owner's L already caps.
    lower = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 1) clinic, COUNT(*) FROM visits GROUP BY clinic"
    assert db.explain(lower).max_groups == 1
    same = lower.replace("= 1", "= 2")
    assert db.explain(same).max_groups == 2
    err = refusal(db, lower.replace("= 1", "= 10"))
    assert err.code == "DP308" and "above the policy's bound" in err.message and "<= 2" in err.hint


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


@pytest.mark.parametrize("name", DP_AGGREGATES)
def test_named_bounds_reach_the_meta_of_every_dp_aggregate(name):
    args = "x, 0.5" if name in ("QUANTILE_CONT", "PERCENTILE_CONT") else "x"
    node = sqlglot.parse_one(f"SELECT {name}({args}, contribution_bounds_per_row => (0, 10)) FROM t",
                             read=Dpsql).expressions[0]
    assert isinstance(node, exp.AggFunc), repr(node)
    ((bound, value),) = node.meta["named_args"]
    assert (bound, value.sql()) == ("contribution_bounds_per_row", "(0, 10)")


ROUND_TRIPS = [
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-07, max_groups_contributed = 1, "
    "privacy_unit_column = person_id) clinic, AVG(cost, contribution_bounds_per_group => (0, 40)) AS average_cost, "
    "COUNT(*, contribution_bounds_per_group => (0, 5)) AS visits FROM visits GROUP BY clinic",
    "SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM people",
    "SELECT QUANTILE_CONT(age, 0.5, contribution_bounds_per_row => (0, 10)), "
    "MEDIAN(income, contribution_bounds_per_row => (-1.5, 2)) FROM people",
    "SELECT STDDEV_POP(age, contribution_bounds_per_row => (0, 10)) / 2 AS s FROM people WHERE age > 3",
    "WITH a AS (SELECT age FROM people) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5) "
    "SUM(age, contribution_bounds_per_row => (0, 1)) FROM a",
    "SELECT COUNT(*) FROM (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-06) age FROM people) AS p",
]


@pytest.mark.parametrize("sql", ROUND_TRIPS)
def test_the_dp_clause_and_bounds_round_trip_through_the_generator(sql):
    tree = sqlglot.parse_one(sql, read=Dpsql)
    assert tree.sql(dialect=Dpsql) == sql
    again = sqlglot.parse_one(tree.sql(dialect=Dpsql, pretty=True), read=Dpsql)
    assert again == tree and again.sql(dialect=Dpsql) == sql


def test_the_generator_keeps_comments_after_the_bounds():
    sql = "SELECT SUM(age, contribution_bounds_per_row => (0, 1)) /* why */ FROM people"
    assert sqlglot.parse_one(sql, read=Dpsql).sql(dialect=Dpsql) == sql


def test_the_rewrite_never_prints_bounds_for_duckdb():
    # The rewritten SQL is printed as plain DuckDB: the bounds are the plan's, not DuckDB arguments.
    tree = sqlglot.parse_one(ROUND_TRIPS[0], read=Dpsql)
    assert "=>" not in tree.sql(dialect="duckdb") and "DIFFERENTIAL_PRIVACY" not in tree.sql(dialect="duckdb")


# Malformed options and bounds: grammar/reject/*dp308*, *dp309*, *dp310*.
