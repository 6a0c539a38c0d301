"""dpsql serve under load and under SIGKILL (issue 13, reliability): many concurrent clients never
overspend an analyst's budget, and a killed server loses no record of an answer it gave.

The load is benchmarks/server_load.py's (its numbers are in benchmarks/README.md); here a small
run by default, the full 50 clients x 20 queries with -m slow.
"""
from __future__ import annotations

import collections
import threading
import time
from decimal import Decimal

import pytest

import dpsql
from dpsql.accounting.ledger import Ledger
from dpsql.policy import load_policy
from tests.support.benchmarks import load as load_benchmark
from dpsql.policy.model import ACCOUNTANTS
from tests.support.fixture import POLICY
from tests.support.server import ProcessServer, database_files
from tests.support.checks import one_by_default

server_load = load_benchmark("server_load")
UNLIMITED = server_load.UNLIMITED   # one analyst's many clients at once
SQL = "SELECT state, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY state"


def with_accountant(accountant: str) -> dict:
    return {**POLICY, "budget": {**POLICY["budget"], "accountant": accountant}}


def exact_fill(tmp_path, clients: int, queries: int, fits: int, accountant: str = "basic") -> None:
    db_path, policy_path, ledger_path = database_files(tmp_path, with_accountant(accountant))
    book = Ledger(str(ledger_path), load_policy(str(policy_path)))
    token = book.add_analyst("load", float(Decimal(server_load.EPSILON) * fits))
    with ProcessServer(db_path, policy_path, ledger_path, *UNLIMITED) as server:
        result = server_load.run_load(server.url, token, clients, queries, SQL)
    outcomes = collections.Counter(o for o, _ in result["outcomes"])
    assert outcomes == {"answered": fits, "DP402": clients * queries - fits}
    state = book.budget(analyst="load")
    assert len(state.history) == fits and all(c.status == "released" for c in state.history)
    assert sum(Decimal(str(c.epsilon)) for c in state.history) == Decimal(server_load.EPSILON) * fits
    assert state.remaining_epsilon == 0 and state.accountant == accountant
    # The total saw the same charges (composed: never more than their sum under zcdp and pld).
    assert sum(c.epsilon for c in book.budget().history) == sum(c.epsilon for c in state.history)
    assert book.budget().spent_epsilon <= state.spent_epsilon
    book.close()


@pytest.mark.parametrize("accountant", one_by_default(ACCOUNTANTS, "basic"))
def test_concurrent_clients_get_exactly_what_the_budget_fits(tmp_path, accountant):
    exact_fill(tmp_path, clients=8, queries=4, fits=10, accountant=accountant)


@pytest.mark.slow
def test_fifty_clients_times_twenty_queries_fill_the_budget_exactly(tmp_path):
    exact_fill(tmp_path, clients=50, queries=20, fits=100)


def hammer(url: str, token: str, clients: int, stop: threading.Event, received: list) -> list[threading.Thread]:
    """Clients sending fresh queries until the server goes away; every answer they got is kept."""
    def client():
        remote = dpsql.remote(url, token, timeout=30)
        while not stop.is_set():
            try:
                received.append(tuple(remote.sql(SQL, epsilon=0.01, fresh=True).fetchall()))
            except (ConnectionError, dpsql.DpsqlError):
                return
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    return threads


def kill_under_load(tmp_path, answers: int, kills: int = 1, accountant: str = "basic") -> None:
    """Kill the server (SIGKILL) once clients received ``answers`` answers, ``kills`` times over the
    same ledger; after each: every answer received has its record, none is lost, it serves again."""
    db_path, policy_path, ledger_path = database_files(tmp_path, with_accountant(accountant))
    book = Ledger(str(ledger_path), load_policy(str(policy_path)))
    token = book.add_analyst("alice", 100)
    received: list = []
    server = ProcessServer(db_path, policy_path, ledger_path, *UNLIMITED).start()
    for _ in range(kills):
        before = book.budget(analyst="alice")
        stop, count = threading.Event(), len(received)
        threads = hammer(server.url, token, 6, stop, received)
        deadline = time.monotonic() + 120
        while len(received) < count + answers:   # then kill while other clients' queries are in flight
            assert time.monotonic() < deadline, "the server answered too slowly"
            time.sleep(0.01)
        server.kill()
        stop.set()
        for t in threads:
            t.join(60)
        state = book.budget(analyst="alice")
        # Every answer a client received was recorded: charged, and released with that very answer.
        stored = collections.Counter(
            tuple(tuple(row.values()) for row in book.answer(c.id, analyst="alice").to_pylist())
            for c in state.history if c.status == "released")
        assert not collections.Counter(received) - stored
        assert [c.id for c in state.history][:len(before.history)] == [c.id for c in before.history]
        # Every record counts (summed: zcdp and pld compose the same records to less).
        assert sum(Decimal(repr(c.epsilon)) for c in state.history) == Decimal("0.01") * len(state.history)
        assert 0 < state.spent_epsilon <= 0.01 * len(state.history) + 1e-12
        server = ProcessServer(db_path, policy_path, ledger_path, *UNLIMITED, port=server.port).start()   # serves again
        res = dpsql.remote(server.url, token).sql(SQL, epsilon=0.01, fresh=True)
        received.append(tuple(res.fetchall()))
        assert len(book.budget(analyst="alice").history) == len(state.history) + 1
    server.stop()
    book.close()


@pytest.mark.parametrize("accountant", one_by_default(ACCOUNTANTS, "basic"))
def test_a_server_killed_under_load_loses_no_record_and_serves_again(tmp_path, accountant):
    kill_under_load(tmp_path, answers=3, accountant=accountant)


@pytest.mark.slow
def test_a_server_killed_five_times_under_load(tmp_path):
    kill_under_load(tmp_path, answers=5, kills=5)
