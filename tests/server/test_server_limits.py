"""dpsql serve bounds free work (issue 20, finding 4): one analyst sending the slowest queries the limits
allow does not starve another, free requests are counted against a rate per analyst, and an analyst
has a few requests in flight at most. The in-process limits are tests/api/test_work_limits.py."""
from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import duckdb
import pytest
import yaml

import dpsql
from dpsql import testing
from dpsql.accounting.ledger import Ledger
from dpsql.policy import load_policy
from dpsql.server.limits import Limits
from tests.support.fixture import POLICY, make_database
from tests.support.server import ProcessServer, ThreadServer, call

POLICY_WITH_NUMS = {**POLICY, "tables": {**POLICY["tables"], "nums": {"public": True}}}
# Public tables only, so free: 2,000 numbers joined three times is 8e9 rows, a minute of DuckDB.
SLOW = "SELECT COUNT(*) AS n FROM nums a, nums b, nums c WHERE (a.x + b.x * c.x) % 7 = 3"
# As many outputs as the limits allow: the most planning one request can ask for.
WIDE = "SELECT " + ", ".join(f"SUM(age + {i}) AS s{i}" for i in range(256)) + " FROM people"
COUNT = "SELECT COUNT(*) AS n FROM people"
# 2 s: B's own planning and run must fit in one turn while A's planning threads hold the interpreter; at
# 1 s, B's COUNT reached the deadline itself on a loaded machine (load 10: DP425 before its charge).
DEADLINE = 2.0
# What B may wait: one turn of A's on the engine (a turn ends by its deadline), then B's own planning,
# charge and run (tens of milliseconds alone; A's planning threads share the interpreter with it),
# with 3 s to spare for a loaded machine. Without deadlines B would wait a minute (SLOW); with a
# plain lock, as long as A keeps sending.
BOUND = DEADLINE + 3.0


def nums_database(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute("CREATE TABLE nums AS SELECT range AS x FROM range(2000)")
    return con


def owner(tmp_path):
    return dpsql.connect(nums_database(make_database()), policy=POLICY_WITH_NUMS, ledger=str(tmp_path / "ledger"))


def code_of(answer) -> str:
    status, body = answer
    return "ok" if status == 200 else body["error"]["code"]


def test_one_analyst_at_the_limits_does_not_starve_another(tmp_path):
    db = owner(tmp_path)
    a, b = testing.ledger(db).add_analyst("a", 100), testing.ledger(db).add_analyst("b", 100)
    limits = Limits(deadline=DEADLINE, free_per_minute=1e6, free_burst=10 ** 6)
    stop, seen = threading.Event(), []

    def saturate(url: str, body: dict, path: str) -> None:   # one of A's requests in flight, back to back
        while not stop.is_set():
            seen.append(code_of(call(url, "POST", path, body, token=a)))
    with ThreadServer(db, limits) as server:
        threads = [threading.Thread(target=saturate, args=(server.url, {"sql": SLOW}, "/v1/query")),
                   threading.Thread(target=saturate, args=(server.url, {"sql": SLOW}, "/v1/query")),
                   threading.Thread(target=saturate, args=(server.url, {"sql": WIDE}, "/v1/explain"))]
        for t in threads:
            t.start()
        time.sleep(DEADLINE * 1.5)   # A holds the engine, with more waiting
        waits = []
        for _ in range(3):
            started = time.monotonic()
            answer = call(server.url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.1, "fresh": True}, token=b)
            waits.append(time.monotonic() - started)
            assert code_of(answer) == "ok", answer
        stop.set()
        for t in threads:
            t.join(60)
    assert max(waits) < BOUND, waits
    assert seen.count("DP425") >= 2 and "ok" in seen, seen   # A's slow queries stopped, A's explains answered
    assert testing.ledger(db).budget(analyst="a").spent_epsilon == 0
    db.close()


def test_free_requests_are_counted_per_analyst_and_charged_answers_are_not(tmp_path):
    db = owner(tmp_path)
    a, b, c = (testing.ledger(db).add_analyst(name, 100) for name in "abc")
    with ThreadServer(db, Limits(free_per_minute=0.6, free_burst=3)) as server:
        explain = {"sql": COUNT}
        for _ in range(3):
            assert code_of(call(server.url, "POST", "/v1/explain", explain, token=a)) == "ok"
        answer = call(server.url, "POST", "/v1/query", {"sql": "SELECT clinic FROM clinics"}, token=a)
        assert answer[0] == 429 and code_of(answer) == "DP424"
        assert code_of(call(server.url, "GET", "/v1/budget", token=a)) == "DP424", "reads are free requests too"
        assert code_of(call(server.url, "POST", "/v1/explain", explain, token=b)) == "ok", "b has a rate of b's own"
        for _ in range(4):   # charged answers give their request back
            answer = call(server.url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.1, "fresh": True}, token=c)
            assert code_of(answer) == "ok", answer
        assert code_of(call(server.url, "POST", "/v1/explain", explain, token=c)) == "ok"
    db.close()


def test_the_rate_says_when_to_retry(tmp_path):
    db = owner(tmp_path)
    a = testing.ledger(db).add_analyst("a", 100)
    with ThreadServer(db, Limits(free_per_minute=6, free_burst=1)) as server:
        assert code_of(call(server.url, "GET", "/v1/budget", token=a)) == "ok"
        request = urllib.request.Request(server.url + "/v1/budget", headers={"Authorization": f"Bearer {a}"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request)
        assert info.value.code == 429 and 1 <= int(info.value.headers["Retry-After"]) <= 10
    db.close()


def test_one_analyst_has_a_few_requests_in_flight_at_most(tmp_path):
    db = owner(tmp_path)
    a, b = testing.ledger(db).add_analyst("a", 100), testing.ledger(db).add_analyst("b", 100)
    gate, entered = threading.Event(), threading.Semaphore(0)

    def hold():
        entered.release()
        gate.wait(30)
    answers = []
    with testing.before_run(db, hold), ThreadServer(db, Limits(per_analyst=1)) as server:
        first = threading.Thread(target=lambda: answers.append(
            call(server.url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.1}, token=a)))
        first.start()
        assert entered.acquire(timeout=30)
        refused = call(server.url, "GET", "/v1/budget", token=a)
        assert refused[0] == 429 and code_of(refused) == "DP421"
        assert code_of(call(server.url, "GET", "/v1/budget", token=b)) == "ok"
        gate.set()
        first.join(30)
    assert code_of(answers[0]) == "ok"
    db.close()


def test_dpsql_serve_interrupts_a_query_at_its_deadline(tmp_path):
    db_path, policy_path, ledger = tmp_path / "data.duckdb", tmp_path / "policy.yaml", tmp_path / "ledger.sqlite"
    con = nums_database(duckdb.connect(str(db_path)))
    con.execute("CREATE TABLE people AS SELECT range AS id, range % 90 AS age FROM range(100)")
    con.close()
    policy_path.write_text(yaml.safe_dump({"budget": {"epsilon": 10}, "tables": {
        "people": {"privacy_unit": "row", "columns": {"age": {"lower": 0, "upper": 100}}}, "nums": {"public": True}}}))
    book = Ledger(str(ledger), load_policy(str(policy_path)))
    token = book.add_analyst("a", 1)
    with ProcessServer(db_path, policy_path, ledger, "--deadline", "0.5") as server:
        started = time.monotonic()
        answer = call(server.url, "POST", "/v1/query", {"sql": SLOW}, token=token)
        assert answer[0] == 503 and code_of(answer) == "DP425", answer
        assert time.monotonic() - started < 0.5 + 5
        assert code_of(call(server.url, "POST", "/v1/query", {"sql": COUNT.replace("people", "nums")},
                            token=token)) == "ok"
    book.close()
