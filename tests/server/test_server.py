"""dpsql serve: the HTTP API (README, "The HTTP API") on a real uvicorn server on the loopback address.

Each refusal is a clear HTTP error with a dpsql code, spends nothing and leaves the server serving;
an analyst sees only their own budget and history; the trusted knobs do not exist over the wire.
"""
from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time

import duckdb
import pyarrow as pa
import pytest

from dpsql import testing
from dpsql.server.limits import Limits
import dpsql
from tests.support.fixture import POLICY
from tests.support.server import ProcessServer, ThreadServer, call, owner

COUNT = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the module: the owner's connection, alice's and bob's tokens, the URL."""
    db, *_ = owner(tmp_path_factory.mktemp("served"))
    alice, bob = testing.ledger(db).add_analyst("alice", 10), testing.ledger(db).add_analyst("bob", 1)
    with ThreadServer(db, Limits(head_timeout=1.0, body_timeout=1.0)) as server:
        yield db, alice, bob, server.url
    db.close()


def spent(db, analyst="alice") -> float:
    return db.analyst(analyst).budget.spent_epsilon


def read_until_closed(s: socket.socket) -> bytes:
    """What the server sent on a raw socket until it closed the connection."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def assert_refused(response, status: int, code: str):
    got_status, body = response
    assert (got_status, body["error"]["code"]) == (status, code), body
    return body["error"]


# --- the endpoints ---------------------------------------------------------------------------------

def test_query_answers_with_rows_plan_and_budget(served):
    db, alice, _, url = served
    before = spent(db)
    status, body = call(url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.25, "ci": 0.9}, token=alice)
    assert status == 200
    assert body["columns"] == ["sex", "n", "n_ci_low", "n_ci_high"]
    assert body["types"] == ["string", "int64", "int64", "int64"]
    assert [row[0] for row in body["rows"]] == ["F", "M"] and body["replayed"] is False
    plan = body["plan"]
    assert plan["epsilon"] == 0.25 and plan["public_only"] is False and plan["text"].startswith("dpsql plan for:")
    n = next(o for o in plan["outputs"] if o["name"] == "n")
    assert n["kind"] == "count" and n["expected_error"] > 0 and n["confidence"] == 0.95
    assert body["budget"]["analyst"] == "alice"
    assert body["budget"]["spent"]["epsilon"] == pytest.approx(before + 0.25)
    assert spent(db) == pytest.approx(before + 0.25)


def test_an_identical_query_is_replayed_free_and_history_replays_it(served):
    db, alice, _, url = served
    sql = "SELECT state, COUNT(*) AS n FROM people GROUP BY state"
    first = call(url, "POST", "/v1/query", {"sql": sql, "epsilon": 0.125}, token=alice)[1]
    before = spent(db)
    again = call(url, "POST", "/v1/query", {"sql": sql, "epsilon": 0.125}, token=alice)[1]
    assert again["replayed"] is True and again["rows"] == first["rows"] and spent(db) == before
    history = call(url, "GET", "/v1/history", token=alice)[1]["queries"]
    entry = [q for q in history if q["sql"] == sql][-1]
    assert entry["status"] == "released" and entry["replayable"] is True and entry["epsilon"] == 0.125
    status, stored = call(url, "GET", f"/v1/history/{entry['id']}", token=alice)
    assert status == 200 and stored["replayed"] is True and stored["rows"] == first["rows"]
    assert spent(db) == before


def test_explain_spends_nothing_and_reports_the_cost(served):
    db, alice, _, url = served
    before = spent(db)
    status, body = call(url, "POST", "/v1/explain", {"sql": "SELECT SUM(income) AS s FROM people", "epsilon": 0.5},
                        token=alice)
    assert status == 200 and body["plan"]["epsilon"] == 0.5
    assert body["plan"]["outputs"][0]["expected_error"] > 0
    assert spent(db) == before


def test_explain_shows_the_analysts_own_remaining_budget_and_whether_it_fits(served):
    """bob (1 of the total's 1000): his own remaining budget in the plan's text and as data, and the
    accountant's own check; never the total's (other analysts' business): checked when it runs."""
    db, _, bob, url = served
    left = db.analyst("bob").budget.remaining_epsilon
    status, body = call(url, "POST", "/v1/explain", {"sql": COUNT, "epsilon": 0.5}, token=bob)
    before = body["plan"]["budget_before"]
    assert status == 200 and before["readable"] is True and before["own"] is True and before["fits"] is True
    assert before["remaining"]["epsilon"] == pytest.approx(left) and before["total"]["epsilon"] == 1
    text = body["plan"]["text"]
    assert f"remaining before this query: your epsilon {left:.6g}, delta 0 (basic" in text, text
    assert "this query would fit: yes (your own budget; the total shared by every analyst" in text
    status, body = call(url, "POST", "/v1/explain", {"sql": COUNT, "epsilon": left + 0.5}, token=bob)
    assert body["plan"]["budget_before"]["fits"] is False and "would fit: no" in body["plan"]["text"]
    assert spent(db, "bob") == pytest.approx(1 - left)
    refused = call(url, "POST", "/v1/query", {"sql": COUNT, "epsilon": left + 0.5, "fresh": True}, token=bob)
    assert_refused(refused, 402, "DP402")


def test_public_tables_are_answered_exactly_at_zero(served):
    db, alice, _, url = served
    before = spent(db)
    status, body = call(url, "POST", "/v1/query", {"sql": "SELECT clinic, doctors FROM clinics ORDER BY clinic"},
                        token=alice)
    assert status == 200 and body["rows"] == [["a", 3], ["b", 5], ["c", 2]]
    assert body["plan"]["public_only"] is True and body["plan"]["epsilon"] == 0
    assert spent(db) == before


def test_arrow_stream_carries_the_answer_plan_and_budget(served):
    _, alice, _, url = served
    status, data = call(url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.125, "fresh": True}, token=alice,
                        headers={"Accept": "application/vnd.apache.arrow.stream"})
    assert status == 200
    table = pa.ipc.open_stream(data).read_all()
    assert table.column_names == ["sex", "n"] and table.schema.field("n").type == pa.int64()
    assert json.loads(table.schema.metadata[b"dpsql.plan"])["epsilon"] == 0.125
    assert json.loads(table.schema.metadata[b"dpsql.budget"])["analyst"] == "alice"


def test_schema_shows_the_analyst_visible_policy(served):
    _, alice, _, url = served
    status, body = call(url, "GET", "/v1/schema", token=alice)
    assert status == 200
    visits = body["tables"]["visits"]
    assert (visits["max_groups_per_unit"], visits["max_rows_per_unit"]) == (2, 3)
    assert visits["columns"]["clinic"]["keys"] == ["a", "b", "c"]
    assert visits["columns"]["cost"]["lower"] == 0 and visits["columns"]["cost"]["upper"] == 50
    assert visits["columns"]["person_id"]["identifier"] is True
    assert body["tables"]["people"]["columns"]["ssn"]["identifier"] is True
    assert body["tables"]["clinics"]["public"] is True
    text = json.dumps(body)
    assert "ledger" not in text and "duckdb" not in text and "bob" not in text


def test_budget_is_the_analysts_own(served):
    db, _, bob, url = served
    status, body = call(url, "GET", "/v1/budget", token=bob)
    assert status == 200 and body["analyst"] == "bob" and body["total"]["epsilon"] == 1
    assert set(body) == {"analyst", "total", "spent", "remaining", "queries", "accountant", "at_delta", "terms"}
    assert (body["accountant"], body["at_delta"], body["terms"]) == ("basic", False, {})


def test_console_page_and_security_headers(served):
    url = served[3]
    status, page = call(url, "GET", "/")
    assert status == 200 and b"<" in page
    status, body = call(url, "GET", "/static/no-such-file.js")
    assert status == 404 and body["error"]["code"] == "DP420"
    with_headers = __import__("urllib.request").request.urlopen(url + "/")
    assert with_headers.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in with_headers.headers["Content-Security-Policy"]


# --- authentication ----------------------------------------------------------------------------------

def test_missing_unknown_and_revoked_tokens_get_401_DP407(served, tmp_path):
    db, alice, _, url = served
    assert_refused(call(url, "GET", "/v1/budget"), 401, "DP407")
    assert_refused(call(url, "GET", "/v1/budget", headers={"Authorization": "Basic abc"}), 401, "DP407")
    unknown = assert_refused(call(url, "POST", "/v1/query", {"sql": COUNT}, token="dpsql_guess"), 401, "DP407")
    carol = testing.ledger(db).add_analyst("carol", 1)
    assert call(url, "GET", "/v1/budget", token=carol)[0] == 200
    testing.ledger(db).revoke_analyst("carol")
    revoked = assert_refused(call(url, "POST", "/v1/query", {"sql": COUNT}, token=carol), 401, "DP407")
    assert revoked == unknown, "a revoked token must look exactly like an unknown one"
    assert spent(db, "carol") == 0


def test_one_analysts_token_cannot_read_anothers_history(served):
    db, alice, bob, url = served
    call(url, "POST", "/v1/query", {"sql": "SELECT COUNT(*) AS n FROM people", "epsilon": 0.125, "fresh": True},
         token=alice)
    alices = call(url, "GET", "/v1/history", token=alice)[1]["queries"]
    bobs = call(url, "GET", "/v1/history", token=bob)[1]["queries"]
    assert len(alices) > len(bobs) and not {q["sql"] for q in bobs} & {"SELECT COUNT(*) AS n FROM people"}
    # Alice's last number is past Bob's history: the same 404 as a number nobody has (no existence oracle).
    theirs = assert_refused(call(url, "GET", f"/v1/history/{alices[-1]['id']}", token=bob), 404, "DP420")
    missing = assert_refused(call(url, "GET", "/v1/history/999999", token=bob), 404, "DP420")
    assert theirs["message"].replace(str(alices[-1]["id"]), "N") == missing["message"].replace("999999", "N")
    assert_refused(call(url, "GET", f"/v1/history/{2 ** 70}", token=bob), 404, "DP420")
    assert_refused(call(url, "GET", "/v1/history/0", token=bob), 404, "DP420")


def id_values(doc) -> set:
    """The values of every key named id or ..._id in a JSON document."""
    if isinstance(doc, list):
        return set().union(*map(id_values, doc)) if doc else set()
    if isinstance(doc, dict):
        own = {v for k, v in doc.items() if k == "id" or k.endswith("_id")}
        return own.union(*map(id_values, doc.values())) if doc else own
    return set()


def test_each_analyst_numbers_their_own_history_1_2_3_and_replays_by_that_number(served):
    """Ledger-wide ids would tell an analyst how many queries the others ran between two of theirs."""
    db, alice, _, url = served
    book = testing.ledger(db)
    tokens = {"gina": book.add_analyst("gina", 5), "hal": book.add_analyst("hal", 5)}
    answers: dict[str, list] = {"gina": [], "hal": []}
    for i in range(3):   # interleaved, with alice between: their ledger ids are far from 1, 2, 3
        call(url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.01, "fresh": True}, token=alice)
        for name, token in tokens.items():
            sql = f"SELECT COUNT(*) AS n_{i} FROM people WHERE age > {i}"   # each a new measurement
            answers[name].append(call(url, "POST", "/v1/query", {"sql": sql, "epsilon": 0.25}, token=token)[1])
    for name, token in tokens.items():
        history = call(url, "GET", "/v1/history", token=token)[1]["queries"]
        assert [q["id"] for q in history] == [1, 2, 3]
        assert [q["sql"] for q in history] == [f"SELECT COUNT(*) AS n_{i} FROM people WHERE age > {i}"
                                               for i in range(3)]
        ledger_ids = [c.id for c in db.analyst(name).budget.history]
        assert ledger_ids != [1, 2, 3]
        for number, fresh in zip((1, 2, 3), answers[name]):
            status, again = call(url, "GET", f"/v1/history/{number}", token=token)
            assert status == 200 and again["rows"] == fresh["rows"] and again["columns"] == fresh["columns"]
            assert again["plan"]["sql"] == history[number - 1]["sql"]
        budget = call(url, "GET", "/v1/budget", token=token)[1]
        assert budget["queries"] == 3 and fresh["budget"]["queries"] == 3
        # No response the analyst got carries an id but these numbers.
        assert id_values([history, budget, answers[name]]) <= {1, 2, 3}
        assert_refused(call(url, "GET", "/v1/history/4", token=token), 404, "DP420")


def test_a_stored_answer_names_its_intervals_level_as_the_fresh_one_did(served):
    db, alice, _, url = served
    # Not a count per sex released before (that one would replay free, its answer not kept again).
    sql = "SELECT sex, COUNT(*) AS n_at_90 FROM people WHERE age > 1 GROUP BY sex"
    fresh = call(url, "POST", "/v1/query", {"sql": sql, "epsilon": 0.125, "ci": 0.9}, token=alice)[1]
    number = call(url, "GET", "/v1/history", token=alice)[1]["queries"][-1]["id"]
    stored = call(url, "GET", f"/v1/history/{number}", token=alice)[1]
    assert fresh["plan"]["ci"] == stored["plan"]["ci"] == 0.9 and stored["rows"] == fresh["rows"]
    assert stored["columns"] == fresh["columns"]
    # An identical query replayed through /v1/query: the same table, without dpsql's stored metadata.
    again = db.analyst("alice").sql(sql, 0.125, ci=0.9)
    assert again.replayed and again.arrow().schema.metadata is None


# --- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, code", [
    (b"{not json", "DP408"), (b"[1, 2]", "DP408"), (b'"SELECT 1"', "DP408"), (b"\xff\xfe", "DP408"),
    (b"[" * 100_000, "DP408"), (b'{"epsilon": 1}', "DP408"), (b'{"sql": 7}', "DP408"),
    (b'{"sql": "SELECT COUNT(*) FROM people", "fresh": "yes"}', "DP408"),
    (b'{"sql": "SELECT COUNT(*) FROM people", "epsilon": true}', "DP408"),
    (b'{"sql": "SELECT COUNT(*) FROM people", "epsilon": NaN}', "DP401"),
    (b'{"sql": "SELECT COUNT(*) FROM people", "epsilon": -1}', "DP401"),
])
def test_malformed_bodies_are_400_with_a_code_and_spend_nothing(served, raw, code):
    db, alice, _, url = served
    before = spent(db)
    assert_refused(call(url, "POST", "/v1/query", raw=raw, token=alice,
                        headers={"Content-Type": "application/json"}), 400, code)
    assert spent(db) == before


@pytest.mark.parametrize("knob", ["rng", "ledger", "data_version", "analyst", "noise"])
def test_trusted_knobs_do_not_exist_over_the_wire(served, knob):
    db, alice, _, url = served
    before = spent(db)
    error = assert_refused(call(url, "POST", "/v1/query", {"sql": COUNT, knob: 1}, token=alice), 400, "DP408")
    assert knob in error["message"]
    assert spent(db) == before


def test_a_body_that_is_not_json_is_refused(served):
    _, alice, _, url = served
    assert_refused(call(url, "POST", "/v1/query", raw=b"sql=SELECT", token=alice,
                        headers={"Content-Type": "application/x-www-form-urlencoded"}), 400, "DP408")


def test_huge_bodies_get_413(served):
    db, alice, _, url = served
    before = spent(db)
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:   # refused on its Content-Length
        s.sendall(b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n"
                  b"Authorization: Bearer " + alice.encode() + b"\r\n\r\n{")
        answer = read_until_closed(s)
    assert answer.startswith(b"HTTP/1.1 413") and b"DP422" in answer
    # Without a Content-Length (chunked), the limit holds while reading.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + alice.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        for _ in range(17):   # just past the 1 MiB limit, and no final chunk
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        answer = read_until_closed(s)   # (closed at the head deadline: 1 s here)
    assert answer.startswith(b"HTTP/1.1 413") and b"DP422" in answer
    assert spent(db) == before
    assert call(url, "GET", "/v1/budget", token=alice)[0] == 200


def test_ten_thousand_nested_parentheses_are_refused_and_the_server_goes_on(served):
    db, alice, _, url = served
    before = spent(db)
    sql = "SELECT COUNT(*) FROM people WHERE " + "(" * 10_000 + "age > 1" + ")" * 10_000
    error = assert_refused(call(url, "POST", "/v1/query", {"sql": sql}, token=alice), 400, "DP100")
    assert "nested too deeply" in error["message"]
    assert spent(db) == before
    assert call(url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.125}, token=alice)[0] == 200


def test_refusals_carry_the_position_and_caret(served):
    _, alice, _, url = served
    error = assert_refused(call(url, "POST", "/v1/query", {"sql": "SELECT ssn FROM people"}, token=alice),
                           400, "DP203")
    assert (error["line"], error["column"], error["type"]) == (1, 8, "PrivacyViolation")
    assert error["excerpt"].endswith("|        ^^^")


def test_over_budget_is_402_with_the_figures(served):
    db, _, bob, url = served
    error = assert_refused(call(url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 5}, token=bob), 402, "DP402")
    assert error["requested"]["epsilon"] == 5 and error["remaining"]["epsilon"] <= 1
    assert spent(db, "bob") <= 1


def test_the_shared_total_running_out_is_402_without_its_figures(tmp_path):
    """What is left of the total tells one analyst how much the others spent: not shown to them."""
    db, *_ = owner(tmp_path, {**POLICY, "budget": {"epsilon": 1.0, "delta": 1e-6}})
    erin, fay = testing.ledger(db).add_analyst("erin", 0.9), testing.ledger(db).add_analyst("fay", 0.9)
    with ThreadServer(db) as server:
        assert call(server.url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.7}, token=erin)[0] == 200
        error = assert_refused(call(server.url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.5}, token=fay),
                               402, "DP402")
    db.close()
    assert "the total (shared by every analyst)" in error["message"] and "not shown" in error["message"]
    assert "remaining" not in error and error["requested"]["epsilon"] == 0.5
    assert not re.search(r"0\.3\b|0\.2\b", json.dumps(error)), error   # neither 1 - 0.7 nor 0.5 - 0.3
    assert error["hint"] and "raise the total" in error["hint"]


def test_unknown_paths_and_methods(served):
    _, alice, _, url = served
    assert_refused(call(url, "GET", "/v1/nothing", token=alice), 404, "DP420")
    assert_refused(call(url, "GET", "/v1/query", token=alice), 405, "DP408")


# --- slow clients, concurrency ---------------------------------------------------------------------

def test_a_client_sending_half_a_request_is_cut_off_without_blocking_others(served):
    _, alice, _, url = served
    port = int(url.rsplit(":", 1)[1])
    slow = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(20)]
    for s in slow:
        s.sendall(b"POST /v1/query HTTP/1.1\r\nHost: x\r\n")   # and never the rest of the head
    started = time.monotonic()
    assert call(url, "GET", "/v1/budget", token=alice, timeout=5)[0] == 200   # served meanwhile
    assert time.monotonic() - started < 5
    for s in slow:
        assert s.recv(1024) == b""   # closed by the server after head_timeout (1 s here)
        s.close()
    assert time.monotonic() - started < 9


def test_a_client_sending_half_a_body_gets_408(served):
    db, alice, _, url = served
    before = spent(db)
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
                  b"Authorization: Bearer " + alice.encode() + b"\r\n\r\n{\"sql\": ")
        answer = read_until_closed(s)
    assert answer.startswith(b"HTTP/1.1 408") and b"DP423" in answer
    assert spent(db) == before


def test_queries_run_off_the_event_loop_and_in_flight_requests_are_bounded(tmp_path):
    db, *_ = owner(tmp_path)
    alice = testing.ledger(db).add_analyst("alice", 10)
    gate, entered = threading.Event(), threading.Semaphore(0)

    def hold():   # each query waits inside the engine until the gate opens
        entered.release()
        assert gate.wait(30)
    results = []

    def ask(i):
        results.append(call(server.url, "POST", "/v1/query",
                            {"sql": f"SELECT COUNT(*) AS n FROM people WHERE age > {i}", "epsilon": 0.125},
                            token=alice)[0])   # two measurements (one renamed would replay the other's, free)
    with testing.before_run(db, hold), ThreadServer(db, Limits(max_in_flight=2)) as server:
        queries = [threading.Thread(target=ask, args=(i,)) for i in (1, 2)]
        queries[0].start()
        assert entered.acquire(timeout=30)   # query 1 is running in a worker thread
        started = time.monotonic()
        assert call(server.url, "GET", "/v1/budget", token=alice)[0] == 200   # the event loop is free
        assert time.monotonic() - started < 5
        queries[1].start()   # waits for the engine's turn (query 1 holds it): in flight all the same
        in_flight = server.server.config.app.state.server.in_flight
        deadline = time.monotonic() + 30
        while in_flight.count < 2:
            assert time.monotonic() < deadline, "query 2 never arrived"
            time.sleep(0.01)
        assert_refused(call(server.url, "GET", "/v1/budget", token=alice), 429, "DP421")   # two in flight: the limit
        gate.set()
        assert entered.acquire(timeout=30)   # query 2 ran once query 1 was done
        for t in queries:
            t.join(30)
        assert call(server.url, "GET", "/v1/budget", token=alice)[0] == 200
    assert results == [200, 200]
    assert db.analyst("alice").budget.spent_epsilon == 0.25
    db.close()


# --- what the server never shows ------------------------------------------------------------------

def test_engine_failures_show_no_details_and_are_logged_without_them(tmp_path, caplog):
    db, *_ = owner(tmp_path)
    alice = testing.ledger(db).add_analyst("alice", 10)

    def engine_fails():
        raise duckdb.ConversionException("Could not convert string 'SECRET-ROW-VALUE' to INT64")

    def bug():
        raise RuntimeError("SECRET-ROW-VALUE in a bug")
    with ThreadServer(db) as server:
        for hook, code in ((engine_fails, "DP900"), (bug, "DP999")):
            with testing.before_run(db, hook):
                status, body = call(server.url, "POST", "/v1/query", {"sql": COUNT, "epsilon": 0.125, "fresh": True},
                                    token=alice)
            assert (status, body["error"]["code"]) == (500, code)
            assert "SECRET" not in json.dumps(body) and "duckdb" not in json.dumps(body).lower()
    assert "SECRET" not in caplog.text and alice not in caplog.text
    assert "RuntimeError" in caplog.text   # the owner learns the type and the place
    db.close()


def test_cors_is_closed_by_default_and_open_only_to_named_origins(served, tmp_path):
    _, alice, _, url = served
    preflight = {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    request = __import__("urllib.request").request
    for method, headers in (("OPTIONS", preflight), ("GET", {"Origin": "http://evil.example"})):
        try:
            response = request.urlopen(request.Request(url + "/v1/budget", method=method, headers=headers))
        except request.HTTPError as e:   # type: ignore[attr-defined]
            response = e
        assert response.headers.get("Access-Control-Allow-Origin") is None
    db, *_ = owner(tmp_path)
    with ThreadServer(db, cors_origins=("http://ok.example",)) as server:
        response = request.urlopen(request.Request(server.url + "/v1/budget", method="OPTIONS",
                                                   headers={**preflight, "Origin": "http://ok.example"}))
        assert response.headers["Access-Control-Allow-Origin"] == "http://ok.example"
    db.close()


def listening_addresses(port: int) -> set[str]:
    """The local addresses a socket listens on at this port (Linux: /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:   # 0A: LISTEN
                    found.add(address)
    return found


def test_the_server_listens_on_loopback_and_its_log_holds_no_token_sql_or_result(tmp_path):
    db, db_path, policy_path, ledger = owner(tmp_path)
    token = testing.ledger(db).add_analyst("alice", 3)
    db.close()
    marker = "zz-marker-zz"
    with ProcessServer(db_path, policy_path, ledger, "--log-level", "debug") as server:
        assert listening_addresses(server.port) == {"0100007F"}   # 127.0.0.1 only, without --host
        remote = dpsql.remote(server.url, token)
        res = remote.sql("SELECT state, AVG(income) AS mean FROM people GROUP BY state", epsilon=1)
        values = [repr(v) for row in res.fetchall() for v in row[1:]]
        remote.sql(f"SELECT COUNT(*) AS n FROM people WHERE zip = '{marker}'", epsilon=1)
        for sql, epsilon in ((f"SELECT ssn FROM people WHERE zip = '{marker}'", 1),
                             (f"SELECT COUNT(*) FROM people WHERE zip = '{marker}x'", 5)):
            with pytest.raises(dpsql.DpsqlError):
                remote.sql(sql, epsilon=epsilon)
        with pytest.raises(dpsql.DpsqlError):
            dpsql.remote(server.url, f"dpsql_{marker}").sql("SELECT COUNT(*) FROM people")
        call(server.url, "POST", "/v1/query", raw=f"{{{marker}".encode(), token=token,
             headers={"Content-Type": "application/json"})
        log = server.log()
    assert '"POST /v1/query HTTP/1.1" 200' in log   # the access log is on
    assert token not in log and marker not in log
    assert not [v for v in values if v in log]
