"""L, the partitions one person may reach: which partitions count toward it, and when no choice is needed.

Declared keys are the released groups. A row whose key is not declared is never released, and it
must never take one of its person's L places from a declared partition: the filter to declared keys
runs on the partitions (after the per-person sums, before the choice of L), not on every row.
"""
import duckdb
import pytest
from sqlglot import exp

import dpsql
from dpsql import testing
from tests.support import sql_tree

UNITS = 40


def database() -> duckdb.DuckDBPyConnection:
    """Every person has one row under the declared key 'A' and rows under undeclared X, Y, Z."""
    con = duckdb.connect()
    con.execute("CREATE TABLE events (pid INTEGER, k VARCHAR, v DOUBLE)")
    con.execute(f"""INSERT INTO events
        SELECT pid, k, 1.0 FROM range({UNITS}) t(pid), (VALUES ('A'), ('X'), ('Y'), ('Z'), ('Z')) s(k)""")
    return con


def connect(L: int) -> dpsql.PrivateConnection:
    policy = {"version": 1, "budget": {"epsilon": 1e9, "delta": 1e-6},
              "tables": {"events": {"privacy_unit": "pid", "max_groups_per_unit": L, "max_rows_per_unit": 5,
                                    "columns": {"pid": {"identifier": True}, "k": {"keys": ["A", "B", "C"]},
                                                "v": {"type": "float", "lower": 0, "upper": 1}}}}}
    return dpsql.connect(database(), policy=policy, ledger=":memory:")


@pytest.mark.parametrize("sampling", ["hash", "keyed"])
def test_undeclared_partitions_never_take_a_persons_place(sampling):
    db = connect(L=1)   # 3 declared keys > L: a choice is made per person
    for _ in range(3):
        rows = testing.run(db, "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM events GROUP BY k",
                           sampling=sampling).rows
        assert sorted(rows) == [("A", UNITS, UNITS), ("B", 0, 0), ("C", 0, 0)]


def test_the_filter_to_declared_keys_runs_on_partitions_not_rows():
    plan = testing.lower(connect(L=1), "SELECT k, COUNT(*) FROM events GROUP BY k")
    assert "X" not in sql_tree.string_literals(sql_tree.tree(plan))
    assert not sql_tree.has(sql_tree.before(plan, "__units"), exp.In), "no row filter on the declared keys"
    assert sql_tree.has(sql_tree.stage(plan, "__units"), exp.In), "declared keys checked per partition, in its rank"
    before_the_window = sql_tree.stage(plan, "__bounded").args["where"]
    assert sql_tree.has(before_the_window, exp.LT, lambda lt: lt.this.name == "__r"), \
        "undeclared partitions dropped before the window"


def test_without_a_choice_undeclared_partitions_are_dropped_at_release():
    db = connect(L=3)   # 3 declared keys <= L: no choice, no window
    plan = testing.lower(db, "SELECT k, COUNT(*) FROM events GROUP BY k")
    assert not sql_tree.has(sql_tree.tree(plan), exp.RowNumber)
    rows = testing.run(db, "SELECT k, COUNT(*) AS n FROM events GROUP BY k").rows
    assert sorted(rows) == [("A", UNITS), ("B", 0), ("C", 0)]


def test_a_per_person_relation_needs_no_choice_of_partitions(db):
    sql = """SELECT n, COUNT(*) AS people FROM (SELECT person_id, COUNT(*) AS n FROM visits GROUP BY person_id) AS per
             GROUP BY n"""
    plan = testing.lower(db, sql, delta=1e-6)
    assert not sql_tree.has(sql_tree.tree(plan), exp.RowNumber), "one row per person: one partition each, L = 1 holds"
    exact = dict(testing.duckdb_connection(db).execute(
        "SELECT n, COUNT(*) FROM (SELECT person_id, COUNT(*) AS n FROM visits GROUP BY person_id) GROUP BY n").fetchall())
    released = dict(testing.run(db, sql, epsilon=1e9, delta=1e-6).rows)
    assert released and all(released[n] == exact[n] for n in released)


def test_a_quantile_tree_never_counts_an_undeclared_partition():
    """A tree counts every partition it is given before its groups meet the declared keys, so rows of
    undeclared keys stay out at the rows: a person's X, Y, Z would come on top of their L places."""
    plan = testing.lower(connect(L=3), "SELECT k, MEDIAN(v) FROM events GROUP BY k")
    rows = sql_tree.before(plan, "__units")
    assert sql_tree.has(rows, exp.In) and "A" in sql_tree.string_literals(rows)
    released = testing.run(connect(L=3), "SELECT k, COUNT(*) AS n, MEDIAN(v) FROM events GROUP BY k").rows
    assert sorted(r[:2] for r in released) == [("A", UNITS), ("B", 0), ("C", 0)]


def test_the_keyed_hash_takes_a_fresh_salt_from_the_connections_source_on_every_run(monkeypatch):
    """A unit's partitions are ranked by HASH(unit, key, salt) (lower/bounding.py); the salt is a query
    parameter the executor binds fresh on every run, drawn from the connection's one random source (a
    seeded one here, through the trusted API), never written in the SQL; a plan without a choice of
    partitions (row level, or at most L keys) binds none."""
    import numpy as np
    from dpsql.lower.names import SALT
    policy = {"version": 1, "budget": {"epsilon": 1e9, "delta": 1e-6},
              "tables": {"events": {"privacy_unit": "pid", "max_groups_per_unit": 1, "max_rows_per_unit": 5,
                                    "columns": {"pid": {"identifier": True}, "k": {"keys": ["A", "B", "C"]}}}}}
    db = dpsql.connect(database(), policy=policy, ledger=":memory:", rng=np.random.default_rng(7))
    engine = testing.executor(db).engine
    bound = []
    real = engine.bind
    monkeypatch.setattr(engine, "bind", lambda sql, params=None, lowered=None: bound.append(params) or
                        real(sql, params, lowered))
    sql = "SELECT k, COUNT(*) AS n FROM events GROUP BY k"
    plan = db.explain(sql)
    assert plan.salted and list(sql_tree.tree(plan).find_all(exp.Placeholder)) == [exp.Placeholder(this=SALT)]
    for _ in range(3):
        db.sql(sql, epsilon=1.0, fresh=True)
    # Each query binds twice with a salt (the check before the charge, then the measurements' draw,
    # api/executor.py measured) and its outputs, over released values, without one.
    salts = [p[SALT] for p in bound if p is not None]
    assert len(salts) == 6 and len(set(salts)) == 6 and all(0 <= s < 2 ** 62 for s in salts)
    again = dpsql.connect(database(), policy=policy, ledger=":memory:", rng=np.random.default_rng(7))
    other = testing.executor(again).engine
    real_other = other.bind
    monkeypatch.setattr(other, "bind", lambda sql, params=None, lowered=None: bound.append(params) or
                        real_other(sql, params, lowered))
    mark = len(bound)
    again.sql(sql, epsilon=1.0)
    assert bound[mark][SALT] == salts[0], "the seeded source gives the same first salt: it is the one drawn from"
    bound.clear()
    db.sql("SELECT COUNT(*) AS n FROM events", epsilon=1.0)   # one partition <= L: no choice to make
    assert bound and all(p is None for p in bound) and not db.explain("SELECT COUNT(*) AS n FROM events").salted
