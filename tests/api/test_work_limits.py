"""Free work is bounded (issue 20, finding 4): the work one query may ask for has limits with codes
(DP314, DP315), every request can have a deadline that interrupts the engine (DP425 nothing spent,
DP901 spent), the engine's turns are shared fairly between analysts, and a zero-cost record in the
ledger is bounded. Planning's linearity is shown by benchmarks/planning.py, not timed here; the
server's side (rates, one analyst saturating while another is answered) is tests/server/test_server_limits.py."""
from __future__ import annotations

import hashlib
import threading
import time

import duckdb
import pytest

import dpsql
from dpsql import testing
from dpsql.accounting.ledger import RECORDED_CHARS
from dpsql.api.replay import normalise_sql
from dpsql.engines.turns import Turns
from dpsql.limits import WorkLimits
from tests.support.fixture import POLICY, make_database

# A public table of 2,000 numbers: three of it joined is 8e9 rows, minutes of work for DuckDB.
SLOW = "SELECT COUNT(*) AS n FROM nums a, nums b, nums c WHERE (a.x + b.x * c.x) % 7 = 3"
COUNT = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


def connect(tmp_path=None, **limits):
    con = make_database()
    con.execute("CREATE TABLE nums AS SELECT range AS x FROM range(2000)")
    policy = {**POLICY, "tables": {**POLICY["tables"], "nums": {"public": True}}}
    ledger = ":memory:" if tmp_path is None else str(tmp_path / "ledger.sqlite")
    return dpsql.connect(con, policy=policy, ledger=ledger, limits=WorkLimits(**limits))


def wait_until(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def refused(call, *args, **kwargs) -> dpsql.DpsqlError:
    with pytest.raises(dpsql.DpsqlError) as info:
        call(*args, **kwargs)
    return info.value


def test_an_expression_ordered_by_twice_is_two_outputs(db):
    """Outputs are found by position, not equality: two equal hidden outputs once shared one slot, so
    the second ORDER BY term named a column that did not exist (DP311)."""
    sql = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY COUNT(*) + 1, COUNT(*) + 1"
    assert testing.run(db, sql).rows == testing.run(db, "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex").rows


# --- limits on the query -------------------------------------------------------------------------------

def test_sql_longer_than_the_limit_is_refused_before_parsing():
    db = connect(max_sql=100)
    long = "SELECT COUNT(*) AS n FROM people WHERE age IN (" + ", ".join(["1"] * 40) + ")"
    err = refused(db.sql, long)
    assert err.code == "DP314" and f"{len(long)} characters" in err.message and err.rule == "bounded_work"
    assert db.budget.spent_epsilon == 0 and not db.budget.history
    assert refused(db.sql, "SELECT COUNT(*) AS n FROM people WHERE " + "(" * 200).code == "DP314", \
        "refused for its length, never parsed"


@pytest.mark.parametrize("sql, caret", [
    ("SELECT COUNT(*) AS a, SUM(age) AS b, AVG(age) AS c FROM people", "AVG(age) AS c"),
    ("SELECT COUNT(*) AS a FROM people GROUP BY sex ORDER BY a", "a"),
    ("SELECT COUNT(*) AS n FROM people GROUP BY sex HAVING SUM(age) > 2", "SUM(age)"),
    ("SELECT clinic, region, doctors FROM clinics", "doctors"),
    ("SELECT COUNT(*) FROM (SELECT clinic, region FROM clinics) AS c", "region"),
])
def test_more_outputs_than_the_limit_are_refused_at_the_first_past_it(sql, caret):
    db = connect(max_outputs=2)
    err = refused(db.explain, sql)
    assert err.code == "DP314" and (err.start, err.end + 1) == (sql.rindex(caret), sql.rindex(caret) + len(caret)), \
        err.format()


def test_more_table_references_than_the_limit_are_refused():
    db = connect(max_tables=2)
    sql = "WITH c AS (SELECT * FROM clinics) SELECT COUNT(*) AS n FROM c, clinics"
    err = refused(db.sql, sql)
    assert err.code == "DP314" and sql[err.start:err.end + 1] == "clinics", err.format()
    assert db.sql("SELECT COUNT(*) AS n FROM clinics a, clinics b").fetchall() == [(9,)]


def test_more_groups_than_the_limit_are_refused_at_plan_time():
    db = connect(max_rows=5)
    err = refused(db.explain, "SELECT sex, state, COUNT(*) AS n FROM people GROUP BY sex, state")
    assert err.code == "DP315" and "6 groups" in err.message
    assert len(db.sql(COUNT).fetchall()) == 2


def test_a_public_answer_past_the_row_limit_is_stopped_and_the_engine_goes_on():
    db = connect(max_rows=2)
    err = refused(db.sql, "SELECT clinic FROM clinics ORDER BY clinic")
    assert err.code == "DP315" and db.budget.spent_epsilon == 0
    assert db.sql("SELECT clinic FROM clinics ORDER BY clinic LIMIT 2").fetchall() == [("a",), ("b",)]
    assert len(db.sql(COUNT).fetchall()) == 2


def test_the_findings_three_thousand_outputs_are_refused_before_planning(db):
    """Finding 4: 3,000 outputs were planned (55 s of CPU); now refused before planning."""
    many = "SELECT " + ", ".join(f"SUM(age + {i}) AS s{i}" for i in range(3000)) + " FROM people"
    started = time.process_time()
    assert refused(db.explain, many).code == "DP314"
    assert time.process_time() - started < 5   # (parsing 80 KB: about 1 s; the limit: 64 KiB of text)


# --- deadlines -----------------------------------------------------------------------------------------

def test_a_public_query_past_its_deadline_is_interrupted_and_spends_nothing():
    db = connect()
    started = time.monotonic()
    err = refused(db.sql, SLOW, deadline=0.5)
    took = time.monotonic() - started
    assert err.code == "DP425" and "nothing was spent" in err.hint
    assert took < 0.5 + 5, took   # interrupted at the deadline (slack for a loaded machine), not minutes later
    assert db.budget.spent_epsilon == 0 and db.budget.history[-1].status == "failed"
    assert len(db.sql(COUNT).fetchall()) == 2, "the engine serves the next query"


def test_a_connection_wide_deadline_applies_to_every_call():
    db = connect(deadline=0.5)
    assert refused(db.sql, SLOW).code == "DP425"
    assert db.sql(SLOW.replace(", nums c", "").replace("c.x", "1"), deadline=60).fetchall() == [(571429,)]


def test_a_private_query_stopped_after_its_charge_stays_spent(db):
    with testing.before_run(db, lambda: time.sleep(0.3)):
        err = refused(db.sql, COUNT, epsilon=0.25, deadline=0.2)
    assert err.code == "DP901" and "stays spent" in err.message and err.kind == "failed"
    assert db.budget.spent_epsilon == 0.25 and db.budget.history[-1].status == "failed"


def test_waiting_for_the_engine_does_not_count_against_a_deadline():
    """b's query waits for a's turn (round robin: one turn, ended by a's deadline), then holds the
    engine for its own whole deadline: a request that waited is still answered."""
    db = connect()
    testing.ledger(db).add_analyst("a", 10)
    testing.ledger(db).add_analyst("b", 10)
    codes = []
    slow = threading.Thread(target=lambda: codes.append(refused(db.analyst("a").sql, SLOW, deadline=1).code))
    slow.start()
    time.sleep(0.5)   # a holds the engine now
    started = time.monotonic()
    assert len(db.analyst("b").sql(COUNT, epsilon=0.5, deadline=1).fetchall()) == 2
    assert 0.2 < time.monotonic() - started < 1 + 5   # after a's turn (slack for a loaded machine)
    slow.join(30)
    assert codes == ["DP425"]


def test_deadlines_must_be_positive_seconds(db):
    for bad in (0, -1, "1", True, float("inf"), float("nan")):
        assert refused(db.sql, COUNT, deadline=bad).code == "DP401"
    with pytest.raises(dpsql.DpsqlError):
        WorkLimits(max_outputs=0)


def test_an_interrupt_between_two_queries_does_not_stop_the_next():
    """What the engine relies on if its timer fires just as a query ends."""
    con = duckdb.connect()
    con.interrupt()
    assert con.execute("SELECT 42").fetchall() == [(42,)]


# --- fair turns ----------------------------------------------------------------------------------------

def test_turns_go_to_the_analyst_served_least_recently():
    """a holds the engine with a second and a third request waiting; b's request, arriving last, goes
    next (a plain lock or a queue would let a's two go first)."""
    turns, order = Turns(), []
    assert turns.acquire("a")

    def ask(who: str, label: str):
        assert turns.acquire(who, timeout=30)
        order.append(label)
        turns.release()
    for started, (who, label) in enumerate((("a", "a2"), ("a", "a3"), ("b", "b1")), start=1):
        threading.Thread(target=ask, args=(who, label)).start()
        wait_until(lambda n=started: turns.waiting() == n)   # in this order
    turns.release()
    wait_until(lambda: len(order) == 3)
    assert order == ["b1", "a2", "a3"]


def test_a_waiter_past_its_timeout_gives_up_and_the_next_still_gets_the_turn():
    turns = Turns()
    assert turns.acquire("a")
    got = []
    late = threading.Thread(target=lambda: got.append(turns.acquire("b", timeout=0.05)))
    late.start()
    late.join(10)
    assert got == [False] and turns.waiting() == 0
    patient = threading.Thread(target=lambda: got.append(turns.acquire("c", timeout=10)) or turns.release())
    patient.start()
    time.sleep(0.1)
    turns.release()
    patient.join(10)
    assert got == [False, True]


# --- the ledger -----------------------------------------------------------------------------------------

def test_a_zero_cost_record_is_bounded(tmp_path):
    """Finding 4: ten 900 KB public-only queries grew the ledger by 15 MB; a record now keeps at most
    RECORDED_CHARS characters of the query and the SHA-256 of the whole."""
    db = connect(tmp_path)
    values = ", ".join(f"'{i:0500d}'" for i in range(125))
    sql = f"SELECT COUNT(*) AS n FROM clinics WHERE clinic IN ({values})"
    assert 60_000 < len(sql) < db.limits.max_sql
    before = (tmp_path / "ledger.sqlite").stat().st_size if (tmp_path / "ledger.sqlite").exists() else 0
    for _ in range(10):
        assert db.sql(sql).fetchall() == [(0,)]
    record, kept = db.budget.history[-1].sql, normalise_sql(sql)[0]
    assert len(record) < RECORDED_CHARS + 100 and record.startswith(kept[:RECORDED_CHARS])
    assert f"{len(kept)} characters, SHA-256 {hashlib.sha256(kept.encode()).hexdigest()}" in record
    testing.ledger(db).close()   # a checkpoint: the whole ledger in its file
    assert (tmp_path / "ledger.sqlite").stat().st_size - before < 200_000   # 600 KB of SQL before
