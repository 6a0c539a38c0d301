"""``dpsql serve`` in front of a Spark engine (issue 27, item 4): the same tokens, budgets and ledger.

Marked ``spark`` (not in the default run): ``pytest -m spark tests/engines/test_spark_serve.py``.
"""
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner

import dpsql
from dpsql import testing
from dpsql.cli import main
from tests.support.fixture import POLICY, make_database
from tests.support.server import ThreadServer, call
from tests.support.spark import as_views

pytestmark = pytest.mark.spark

COUNT = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


@pytest.fixture(scope="module")
def served(spark, tmp_path_factory):
    """A server over a Spark connection (the fixture's rows as the session's views; no DuckDB file) and
    its ledger file, alice's and bob's tokens."""
    con = make_database()
    as_views(spark, con)
    ledger = str(tmp_path_factory.mktemp("spark_served") / "budget.sqlite")
    db = dpsql.connect(spark, ledger=ledger, policy=POLICY)
    alice, bob = testing.ledger(db).add_analyst("alice", 10), testing.ledger(db).add_analyst("bob", 10)
    with ThreadServer(db) as server:
        yield db, con, ledger, alice, bob, server.url
    db.close()


def test_a_tokens_query_over_http_is_answered_from_spark_and_charged_to_the_same_ledger(served):
    db, con, ledger, alice, _, url = served
    assert testing.engine(db).dialect == "spark"
    runs = []
    with testing.before_run(db, lambda: runs.append(1)):
        status, body = call(url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.25}, token=alice)
    assert status == 200, body
    assert [row[0] for row in body["rows"]] == ["F", "M"] and runs   # run by the Spark engine
    exact = dict(con.sql("SELECT sex, COUNT(*) FROM people GROUP BY sex").fetchall())
    assert all(abs(n - exact[sex]) < 100 for sex, n in body["rows"])   # scale 4: 100 is 25 scales
    assert body["budget"]["analyst"] == "alice" and body["budget"]["spent"]["epsilon"] == pytest.approx(0.25)
    # One ledger: a DuckDB connection over the same file sees alice's spend, and hers adds to it.
    duck = dpsql.connect(con, ledger=ledger, policy=POLICY, rng=np.random.default_rng(1))
    assert duck.analyst("alice").budget.spent_epsilon == pytest.approx(0.25)
    duck.sql("SELECT COUNT(*) FROM people", epsilon=0.5, analyst="alice")
    status, body = call(url, "GET", "/v1/budget", token=alice)
    assert status == 200 and body["spent"]["epsilon"] == pytest.approx(0.75)


def test_analysts_queries_at_once_are_each_answered_and_charged(served):
    """Several worker threads on one Spark engine: each query takes the engine's one turn."""
    db, _, _, alice, bob, url = served
    before = {who: db.analyst(who).budget.spent_epsilon for who in ("alice", "bob")}
    answers: list = []

    def ask(token: str, sql: str) -> None:
        answers.append(call(url, "POST", "/v1/query", {"sql": sql, "epsilon": 0.125, "fresh": True}, token=token))
    sqls = [COUNT, "SELECT state, COUNT(*) AS n FROM people GROUP BY state", "SELECT COUNT(*) AS n FROM visits"]
    threads = [threading.Thread(target=ask, args=(t, s)) for t in (alice, bob) for s in sqls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert [status for status, _ in answers] == [200] * 6, answers
    for who in ("alice", "bob"):
        assert db.analyst(who).budget.spent_epsilon == pytest.approx(before[who] + 3 * 0.125)


def test_a_read_of_public_data_waits_for_a_query_holding_the_engine(served):
    """One turn for the Spark engine and its driver DuckDB: planning's reads (the driver's connection)
    never run beside a query's turn, which holds the driver's tables."""
    db, *_ = served
    engine = testing.engine(db)
    done = threading.Event()

    def read() -> None:
        engine.pruned_count("SELECT * FROM clinics", reader="bob")
        done.set()
    with engine.turn("alice"):
        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.5)
        assert not done.is_set()   # bob's read waits for alice's turn
    assert done.wait(30)


def test_dpsql_serve_engine_spark_serves_a_spark_session(spark, tmp_path, monkeypatch):
    """``dpsql serve --engine spark`` hands ``connect`` a Spark session (here the test's own: the builder
    returns the active session), not a --db path."""
    import dpsql.server.run
    seen = {}
    monkeypatch.setattr(dpsql.server.run, "serve", lambda data, policy, ledger, **kw: seen.update(data=data))
    (tmp_path / "policy.yaml").write_text("version: 1\nbudget: {epsilon: 1}\ntables: {}\n")
    result = CliRunner().invoke(main, ["serve", "--engine", "spark", "--spark-master", "local[2]", "--policy",
                                       str(tmp_path / "policy.yaml"), "--ledger", str(tmp_path / "l.sqlite")])
    assert result.exit_code == 0, result.output
    assert seen["data"] is spark and "on Spark (local[2])" in result.output
