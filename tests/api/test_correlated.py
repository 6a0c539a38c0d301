"""A subquery over private data correlated on a public table's key (issue 24, TPC-H Q17;
frontend/correlated.py): released first grouped by that key, then read by the query as a public lookup
of one released value per key; one charge, one reservation, one replay."""
import duckdb
import numpy as np
import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

import dpsql
from dpsql import testing
from dpsql.engines.duckdb import DuckDBEngine
from dpsql.frontend.correlated import TABLE
from dpsql.frontend.stages import split
from tests.support.paths import ROOT
from tests.support.tpch import whole

QUERY = ("SELECT region, COUNT(*) AS n FROM visits v JOIN clinics c ON v.clinic = c.clinic "
         "WHERE v.cost > (SELECT AVG(cost) FROM visits w WHERE w.clinic = c.clinic) GROUP BY region")
STAGE_ONE = "SELECT c.clinic, AVG(cost) FROM visits w, clinics c WHERE w.clinic = c.clinic GROUP BY c.clinic"
HELD = f"SELECT COUNT(*) FROM duckdb_tables() WHERE starts_with(table_name, '{TABLE}')"


def held(db) -> bool:
    return testing.duckdb_connection(db).execute(HELD).fetchall()[0][0] > 0


def test_stage_one_is_the_subquery_grouped_by_the_public_key(db):
    """The outer table joined in, grouped by its key, and the outer WHERE's conditions on that table
    alone copied (they prune its public keys); stage 2 joins the table of released values on the key."""
    statement = sqlglot.parse_one("SELECT COUNT(*) FROM visits v, clinics c WHERE v.clinic = c.clinic AND "
                                  "c.region = 'north' AND v.cost < (SELECT 0.5 * AVG(cost) FROM visits "
                                  "WHERE clinic = c.clinic)", dialect="duckdb")
    staged = split(statement, "", db.policy)   # bound to the catalog: the public table's columns known
    (inner,) = staged.inner
    one = sqlglot.parse_one(inner, dialect="duckdb")
    assert [g.sql() for g in one.args["group"].expressions] == ['"c"."clinic"']
    assert {t.alias_or_name for t in one.find_all(exp.Table)} == {"visits", "c"}
    assert [(e.this.table, e.this.name, e.expression.name) for e in one.args["where"].find_all(exp.EQ)] == \
        [("visits", "clinic", "clinic"), ("c", "region", "north")]
    assert staged.values.released and staged.values.public and list(staged.values.columns) == ["__dpsql_k0",
                                                                                                  "__dpsql_v"]
    assert staged.values.name in {t.name for t in staged.outer.find_all(exp.Table)}
    assert not staged.outer.find(exp.Subquery)


def test_the_budget_is_split_and_charged_once_and_the_table_dropped(db):
    res = db.sql(QUERY, epsilon=1.0)
    (stage,) = res.plan.stages
    assert stage.values is not None and stage.plan.epsilon == 0.5 and res.plan.own_budget == (0.5, 0.0)
    assert db.budget.spent_epsilon == pytest.approx(1.0) and len(db.budget.history) == 1
    assert res.plan.releases() == tuple(m.release for m in (*stage.plan.measurements, *res.plan.measurements))
    assert [r[0] for r in res.fetchall()] == ["north", "south"]
    assert not held(db)   # the released values lived for the run only


def test_explain_shows_the_noise_per_key_and_reads_nothing(db):
    text = str(db.explain(QUERY, epsilon=2.0))
    assert "its released values, one per key (each with the noise below), are a public lookup table" in text
    assert "groups: c_clinic (3 public keys): <= 3 partition(s), every one released" in text
    assert "read by key from the table of released values" in text
    assert "epsilon 0.5, noise scale 300" in text   # AVG's sum at a quarter of the budget, per key
    assert db.budget.spent_epsilon == 0 and not held(db)


def test_both_stages_run_once_and_an_identical_query_replays_both(db):
    runs = []
    with testing.before_run(db, lambda: runs.append(1)):
        first = db.sql(QUERY)
        assert len(runs) == 2
        again = db.sql(QUERY)
    assert len(runs) == 2 and again.replayed and again.fetchall() == first.fetchall()
    assert db.budget.spent_epsilon == pytest.approx(1.0)


def _by_hand(db, values) -> list:
    """The query with each clinic's value written in by hand, answered through the seam."""
    case = " ".join(f"WHEN '{k}' THEN {v!r}" for k, v in values)
    return testing.run(db, "SELECT region, COUNT(*) AS n FROM visits v JOIN clinics c ON v.clinic = c.clinic "
                           f"WHERE v.cost > CASE c.clinic {case} END GROUP BY region").rows


def test_the_last_stage_reads_each_keys_released_value(db):
    """With the noise off, each row is compared with its own clinic's bounded AVG, as DuckDB does with
    those values written in; with zero noise, with the bounds' midpoint (25) for every clinic."""
    exact = testing.run(db, STAGE_ONE).rows
    assert len({v for _, v in exact}) == 3
    assert testing.run(db, QUERY).rows == _by_hand(db, exact)
    assert testing.run(db, QUERY, earlier="zero").rows == _by_hand(db, [(k, 25.0) for k, _ in exact]) \
        != _by_hand(db, exact)


def test_the_connection_runs_the_last_stage_with_the_released_values():
    """One visit per person (bounding changes nothing) and a large epsilon (seeded noise far below the
    0.1 or more between each clinic's average and any cost): the connection's answer is DuckDB's."""
    con = duckdb.connect()
    con.execute("CREATE TABLE clinics AS SELECT * FROM (VALUES ('a', 'north'), ('b', 'south'), ('c', 'north')) "
                "AS t(clinic, region)")
    con.execute("CREATE TABLE visits AS SELECT range AS person_id, ['a', 'b', 'c'][range % 3 + 1] AS clinic, "
                "CAST((range * 7) % 50 AS DOUBLE) + 0.5 AS cost FROM range(300)")
    policy = {"budget": {"epsilon": 1000}, "tables": {"clinics": {"public": True}, "visits": {
        "privacy_unit": "person_id", "columns": {"clinic": {}, "cost": {"lower": 0, "upper": 50}}}}}
    db = dpsql.connect(con, policy=policy, ledger=":memory:", rng=np.random.default_rng(20261127))
    averages = con.execute("SELECT AVG(cost) FROM visits GROUP BY clinic").fetchall()
    assert min(abs(a - (k + 0.5)) for (a,) in averages for k in range(50)) > 0.1
    assert db.sql(QUERY, epsilon=900).fetchall() == con.execute(QUERY + " ORDER BY region").fetchall()


def test_released_keys_that_repeat_are_a_bug_and_stay_spent(db, monkeypatch):
    real = DuckDBEngine.run

    def run(engine, bound, *args, **kwargs):
        table = real(engine, bound, *args, **kwargs)
        return pa.concat_tables([table, table]) if "__dpsql_k0" in table.column_names else table
    monkeypatch.setattr(DuckDBEngine, "run", run)
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(QUERY)
    assert info.value.code == "DP999" and db.budget.spent_epsilon == pytest.approx(1.0) and not held(db)


def test_a_stage_that_fails_to_bind_spends_nothing(db, monkeypatch):
    binds = []
    real = DuckDBEngine.bind

    def bind(engine, sql, params=None, lowered=None):
        binds.append(sql)
        if len(binds) == 2:
            raise dpsql.DpsqlError("DP311", "DuckDB cannot run this query")
        return real(engine, sql, params, lowered)
    monkeypatch.setattr(DuckDBEngine, "bind", bind)
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(QUERY)
    assert info.value.code == "DP311" and db.budget.spent_epsilon == 0 and not held(db)


def test_tpch_q17_as_written_on_a_synthetic_database():
    """Q17 (its part conditions on the columns this database has): stage 1 releases the 5 green parts'
    averages only (the outer conditions on part prune its keys), and the noiseless answer is DuckDB's."""
    q17 = (ROOT / "benchmarks" / "tpch" / "queries" / "q17.sql").read_text()
    q17 = q17.replace("p_brand = 'Brand#23'", "p_name = 'green tin'").replace("and p_container = 'MED BOX'", "")
    db = dpsql.connect(whole(), policy=str(ROOT / "benchmarks" / "tpch" / "policy.yaml"), ledger=":memory:")
    plan = db.explain(q17)
    assert plan.stages[0].plan.partitions == 5
    (exact,) = whole().execute(q17).fetchall()
    assert testing.run(db, q17).rows == [pytest.approx(exact)]
    assert testing.run(db, q17.replace("0.2 * avg", "0.5 * avg")).rows == \
        [pytest.approx(whole().execute(q17.replace("0.2 * avg", "0.5 * avg")).fetchall()[0])]


def test_a_condition_on_public_columns_and_a_released_value_prunes_no_key(db):
    """A conjunct over the public table and the released value is no public condition: the table is
    filled only when stage 1 has run, so the keys of stage 2 are read without it (every region)."""
    sql = ("SELECT region, COUNT(*) AS n FROM visits v JOIN clinics c ON v.clinic = c.clinic "
           "WHERE c.doctors * 200 > (SELECT COUNT(*) FROM visits w WHERE w.clinic = c.clinic) GROUP BY region")
    plan = db.explain(sql)
    assert plan.partitions == 2 and "public keys of the public tables' rows where" not in str(plan)
    counts = testing.run(db, "SELECT c.clinic, COUNT(*) FROM visits w, clinics c WHERE w.clinic = c.clinic "
                             "GROUP BY c.clinic").rows
    case = " ".join(f"WHEN '{k}' THEN {v!r}" for k, v in counts)
    assert testing.run(db, sql).rows == testing.run(
        db, "SELECT region, COUNT(*) AS n FROM visits v JOIN clinics c ON v.clinic = c.clinic "
            f"WHERE c.doctors * 200 > CASE c.clinic {case} END GROUP BY region").rows


def test_two_connections_on_one_duckdb_connection_hold_tables_of_their_own(raw, policy, db):
    """Each connection names its table of released values with a token of its own (as its noise
    function): two of them sharing one DuckDB connection never fill or drop each other's."""
    other = dpsql.connect(raw, ledger=":memory:", policy=policy)
    mine, theirs = (c.explain(QUERY).stages[0].values.name for c in (db, other))
    assert mine != theirs and mine.startswith(TABLE) and theirs.startswith(TABLE)
    assert db.explain(QUERY).stages[0].values.name == mine   # stable for a connection: plans and replays
