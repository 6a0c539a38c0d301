"""Multi-stage queries (issue 24, frontend/stages.py): a scalar subquery over private data is released
first, as a query of its own, and the query reads its noisy value as a constant; one charge for both,
one reservation (all or nothing), one replay."""
import math

import pytest
import sqlglot

import dpsql
from dpsql import testing
from dpsql.engines.duckdb import DuckDBEngine
from dpsql.frontend.stages import literal, split
from dpsql.policy import load_policy

QUERY = "SELECT sex, COUNT(*) AS n FROM people WHERE income > (SELECT AVG(income) FROM people) GROUP BY sex"


def test_the_budget_is_split_between_the_stages_and_charged_once(db):
    before = len(db.budget.history)
    res = db.sql(QUERY, epsilon=1.0)
    (stage,) = res.plan.stages
    assert stage.plan.epsilon == 0.5 and res.plan.own_budget == (0.5, 0.0) and res.plan.epsilon == 1.0
    assert db.budget.spent_epsilon == pytest.approx(1.0)
    assert len(db.budget.history) == before + 1
    # What the ledger composes: both stages' releases (AVG's two measurements, then the COUNT).
    assert res.plan.releases() == tuple(m.release for m in (*stage.plan.measurements, *res.plan.measurements))
    assert [m.loss.epsilon for m in (*stage.plan.measurements, *res.plan.measurements)] == [0.25, 0.25, 0.5]


def test_explain_shows_each_stage_with_its_cost_and_the_noisy_threshold(db):
    text = str(db.explain(QUERY, epsilon=2.0))
    assert "stage 1 of 2: SELECT AVG(income) FROM people: epsilon 1," in text
    assert "stage 2 of 2:" in text and "epsilon 1, delta 0" in text
    assert "noisy threshold" in text and "95% of answers within" in text
    assert db.budget.spent_epsilon == 0


def test_both_stages_run_once_and_an_identical_query_replays_both(db):
    runs = []
    with testing.before_run(db, lambda: runs.append(1)):
        first = db.sql(QUERY)
        assert len(runs) == 2          # stage 1, then stage 2 with its value
        again = db.sql(QUERY)
    assert len(runs) == 2 and again.replayed and again.fetchall() == first.fetchall()
    assert db.budget.spent_epsilon == pytest.approx(1.0)


def test_a_stage_that_fails_to_bind_spends_nothing(db, monkeypatch):
    binds = []
    real = DuckDBEngine.bind

    def bind(engine, sql, params=None, lowered=None):
        binds.append(sql)
        if len(binds) == 2:   # the last stage is bound first, then stage 1
            raise dpsql.DpsqlError("DP311", "DuckDB cannot run this query")
        return real(engine, sql, params, lowered)
    monkeypatch.setattr(DuckDBEngine, "bind", bind)
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(QUERY)
    assert info.value.code == "DP311" and db.budget.spent_epsilon == 0 and not db.budget.history


def test_the_last_stage_reads_the_released_value(db):
    """With the noise off, the threshold is the stage's exact bounded AVG, and the query counts the rows
    above it, as DuckDB does with that value written in."""
    exact = testing.run(db, "SELECT AVG(income) FROM people").rows[0][0]
    by_hand = testing.run(db, f"SELECT sex, COUNT(*) AS n FROM people WHERE income > {exact!r} GROUP BY sex").rows
    assert testing.run(db, QUERY).rows == by_hand
    # Zero noise releases the bounds' midpoint: the threshold moves, and so do the counts.
    assert testing.run(db, QUERY, noise="zero", earlier="identity").rows == [("F", 0), ("M", 0)]
    above_midpoint = testing.run(db, "SELECT sex, COUNT(*) AS n FROM people WHERE income > 500.0 GROUP BY sex").rows
    assert testing.run(db, QUERY, earlier="zero").rows == above_midpoint != by_hand


def test_the_connection_runs_the_last_stage_with_the_released_value(db):
    """At a large epsilon (noise far below the gaps between incomes, seeded), the threshold stage 2
    reads is the released AVG: its rows are those above the exact one."""
    exact = testing.run(db, "SELECT AVG(income) FROM people").rows[0][0]
    by_hand = testing.run(db, f"SELECT sex, COUNT(*) AS n FROM people WHERE income > {exact!r} GROUP BY sex").rows
    assert db.sql(QUERY, epsilon=500).fetchall() == by_hand


def test_the_outer_options_set_the_whole_budget(db):
    res = db.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 3) COUNT(*) AS n FROM people "
                 "WHERE age > (SELECT AVG(age) FROM people)")
    assert res.plan.epsilon == 3 and res.plan.stages[0].plan.epsilon == 1.5
    assert db.budget.spent_epsilon == pytest.approx(3)


@pytest.mark.parametrize("value, text", [
    (4.5, "CAST(4.5 AS DOUBLE)"), (None, "CAST(NULL AS DOUBLE)"), (math.inf, "CAST(NULL AS DOUBLE)"),
    (math.nan, "CAST(NULL AS DOUBLE)"), (7, "7"), ("F", "'F'"), (True, "TRUE")])
def test_a_released_value_is_written_as_a_literal_of_its_type(value, text):
    assert literal(value).sql(dialect="duckdb") == text


def test_a_subquery_over_public_tables_only_is_not_a_stage(policy):
    statement = sqlglot.parse_one("SELECT COUNT(*) FROM people WHERE age > (SELECT MAX(doctors) FROM clinics)")
    assert split(statement, "", load_policy(policy)) is None
    inside = sqlglot.parse_one("SELECT COUNT(*) FROM people WHERE age > (SELECT MAX(age) FROM people)")
    assert split(inside, "", load_policy(policy)).inner == ("SELECT MAX(age) FROM people",)


def test_an_analyst_is_charged_once_for_both_stages_and_refused_whole(db):
    """The one reservation is all or nothing: a query of stages that does not fit the analyst's budget
    spends nothing, and one that fits is charged its whole epsilon once."""
    testing.ledger(db).add_analyst("ann", epsilon=1.5)
    ann = db.analyst("ann")
    ann.sql(QUERY, epsilon=1.0)
    assert ann.budget.spent_epsilon == pytest.approx(1.0) and len(ann.budget.history) == 1
    with pytest.raises(dpsql.DpsqlError) as info:
        ann.sql(QUERY, epsilon=1.0, fresh=True)   # stage 1 alone (0.5) would fit: the query does not
    assert info.value.code == "DP402" and ann.budget.spent_epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("sql, words", [
    ("SELECT ssn, COUNT(*) AS n FROM people WHERE income > (SELECT AVG(income) FROM people) GROUP BY sex", "ssn"),
    ("SELECT sex, COUNT(*) AS n FROM people WHERE income > (SELECT AVG(income) FROM people WHERE age > 30)\n"
     "GROUP BY sex ORDER BY  nope", "nope"),
    ("SELECT sex, COUNT(*) FROM people WHERE income > (SELECT AVG(ssn) FROM people) GROUP BY sex", "ssn"),
])
def test_a_refusal_in_a_stage_points_into_the_query_as_written(db, sql, words):
    """Each stage is planned from text regenerated from the query (the subquery's value a NULL); its
    refusal still points at the words of the query the analyst wrote, not at that text."""
    with pytest.raises(dpsql.DpsqlError) as refused:
        db.sql(sql)
    err = refused.value
    assert err.sql == sql and sql[err.start:err.end + 1].lower() == words
    assert db.budget.spent_epsilon == 0
