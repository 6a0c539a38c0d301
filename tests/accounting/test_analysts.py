"""Analysts (issue 13, item 2): each has a token shown once and a budget inside the ledger's total; both
budgets are enforced in one transaction, every add, top-up and revoke is recorded, an analyst sees
only their own history and answers, and many threads and processes never overspend either budget."""
from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from decimal import Decimal

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner

from dpsql.accounting import store
from dpsql.accounting.analysts import AnalystError
from dpsql.accounting.budget import Cost
from dpsql.accounting.ledger import Ledger, LedgerError
from dpsql.cli import commands as cli
from dpsql.errors import AuthError, BudgetExceeded, InvalidParameter
from dpsql.policy import load_policy
from dpsql.policy.model import ACCOUNTANTS
from tests.support.paths import ROOT
from tests.support.checks import one_by_default

POLICY = {"budget": {"epsilon": 1.0, "delta": 1e-6},
          "tables": {"people": {"privacy_unit": "person_id", "columns": {"sex": {"keys": ["F", "M"]}}}}}


def ledger_at(path, epsilon=1.0, accountant="basic") -> Ledger:
    return Ledger(str(path), load_policy({**POLICY, "budget": {"epsilon": epsilon, "delta": 1e-6,
                                                                "accountant": accountant}}))


def charge(book, eps, analyst, key=None):
    return book.reserve(Cost.of(eps, 0), sql=f"q{key}", plan="p", replay_key=key, analyst=analyst)


# --- tokens ---------------------------------------------------------------------------------------

def test_a_token_is_shown_once_and_only_its_hash_is_stored(tmp_path):
    book = ledger_at(tmp_path / "l.sqlite")
    token = book.add_analyst("alice", epsilon=0.5)
    assert token.startswith("dpsql_") and len(token) > 40
    assert book.authenticate(token) == "alice"
    book.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert token.encode() not in raw and token[6:].encode() not in raw, "the token is never stored in clear"
    with contextlib.closing(sqlite3.connect(tmp_path / "l.sqlite")) as con:
        (stored,) = con.execute("SELECT token_hash FROM analysts").fetchone()
    assert len(stored) == 64 and stored != token
    assert ledger_at(tmp_path / "l.sqlite").add_analyst("bob", 0.5) != token, "every token is fresh"


def test_unknown_and_revoked_tokens_get_the_same_refusal_that_never_shows_the_token(tmp_path):
    book = ledger_at(tmp_path / "l.sqlite")
    token = book.add_analyst("alice", epsilon=0.5)
    book.revoke_analyst("alice")
    refusals = []
    for bad in (token, token[:-1] + ("A" if token[-1] != "A" else "B"), "dpsql_nope", "", "x" * 10_000, None, 42):
        with pytest.raises(AuthError) as info:
            book.authenticate(bad)
        err = info.value
        assert err.code == "DP407"
        if isinstance(bad, str) and bad:
            assert bad not in err.format() and bad[:12] not in err.format()
        refusals.append((err.message, err.hint))
    assert len(set(refusals)) == 1, "revoked and unknown are indistinguishable"


def test_no_ledger_file_means_no_analyst(tmp_path):
    book = ledger_at(tmp_path / "l.sqlite")
    with pytest.raises(AuthError):
        book.authenticate("dpsql_anything")
    with pytest.raises(AuthError):
        book.budget("alice")
    assert book.analysts() == [] and not (tmp_path / "l.sqlite").exists(), "reading creates nothing"


# --- adding, topping up, revoking -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["", " alice", "al ice", "-x", "a" * 65, "bob;drop", None, 7, "é"])
def test_bad_names_are_refused(tmp_path, name):
    with pytest.raises(AnalystError) as info:
        ledger_at(tmp_path / "l.sqlite").add_analyst(name, epsilon=0.1)
    assert info.value.code == "DP409" and "name" in info.value.message
    assert not (tmp_path / "l.sqlite").exists(), "nothing recorded"


@pytest.mark.parametrize("epsilon, delta", [(float("nan"), 0), (float("inf"), 0), (-0.1, 0), (0.1, -1e-9),
                                            (0.1, float("nan")), (True, 0), ("0.5", 0), (0.1, 1.0)])
def test_budgets_that_are_not_finite_non_negative_numbers_are_refused(tmp_path, epsilon, delta):
    with pytest.raises(InvalidParameter) as info:
        ledger_at(tmp_path / "l.sqlite").add_analyst("alice", epsilon, delta)
    assert info.value.code == "DP401"


def test_duplicates_and_budgets_above_the_total_are_refused_and_record_nothing(tmp_path):
    book = ledger_at(tmp_path / "l.sqlite", epsilon=1.0)
    book.add_analyst("alice", epsilon=0.75)
    with pytest.raises(AnalystError) as info:
        book.add_analyst("alice", epsilon=0.1)
    assert info.value.code == "DP409" and "already exists" in info.value.message
    with pytest.raises(AnalystError) as info:
        book.add_analyst("bob", epsilon=1.5)
    assert "more than the total" in info.value.message
    with pytest.raises(AnalystError):
        book.add_analyst("carol", epsilon=0.5, delta=1e-5)       # delta above the total's 1e-6
    with pytest.raises(AnalystError):
        book.top_up("alice", epsilon=0.5)                         # 0.75 + 0.5 > 1
    assert [(a.name, a.total_epsilon) for a in book.analysts()] == [("alice", 0.75)]
    assert book.top_up("alice", epsilon=0.25).total_epsilon == 1.0, "exact: 0.75 + 0.25 fits 1"
    # Analysts' budgets may add up to more than the total: the total is enforced on every charge.
    book.add_analyst("bob", epsilon=1.0)


def test_add_top_up_and_revoke_are_recorded_append_only(tmp_path):
    path = tmp_path / "l.sqlite"
    book = ledger_at(path)
    book.add_analyst("alice", epsilon=0.25, delta=1e-7)
    book.top_up("alice", epsilon=0.125)
    revoked = book.revoke_analyst("alice")
    assert revoked.revoked and revoked.total_epsilon == 0.375 and revoked.total_delta == 1e-7
    with pytest.raises(AnalystError):
        book.top_up("alice", epsilon=0.1)
    with pytest.raises(AnalystError):
        book.revoke_analyst("alice")
    with pytest.raises(AuthError):
        book.top_up("nobody", epsilon=0.1)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        events = con.execute("SELECT analyst, kind, epsilon, delta, time FROM analyst_events ORDER BY id").fetchall()
        assert [e[:4] for e in events] == [("alice", "add", "0.25", "1E-7"), ("alice", "top-up", "0.125", "0"),
                                           ("alice", "revoke", "0", "0")]
        assert all(e[4] for e in events), "each with its time"
        for statement in ("DELETE FROM analyst_events", "UPDATE analyst_events SET epsilon = '9'",
                          "DELETE FROM analysts", "UPDATE analysts SET token_hash = 'x'"):
            with pytest.raises(sqlite3.IntegrityError):
                con.execute(statement)


# --- spending -------------------------------------------------------------------------------------

def test_an_analyst_spends_within_their_own_budget_and_the_refusal_says_which(tmp_path):
    book = ledger_at(tmp_path / "l.sqlite", epsilon=1.0)
    book.add_analyst("alice", epsilon=0.3)
    for _ in range(3):
        charge(book, 0.1, "alice")                               # 3 x 0.1 fits 0.3 exactly
    with pytest.raises(BudgetExceeded) as info:
        charge(book, 0.1, "alice")
    err = info.value
    assert err.code == "DP402" and "analyst 'alice'" in err.message and err.budget == "analyst 'alice'"
    assert err.requested == (Decimal("0.1"), 0) and err.remaining == (0, 0) and err.difference[0] == Decimal("0.1")
    assert "top-up" in err.hint
    mine = book.budget("alice")
    assert (mine.analyst, mine.total_epsilon, mine.spent_epsilon, mine.remaining_epsilon) == ("alice", 0.3, 0.3, 0)
    whole = book.budget()
    assert whole.total_epsilon == 1.0 and whole.spent_epsilon == 0.3 and whole.analyst is None


def test_the_total_binds_when_analysts_together_would_overspend_it(tmp_path):
    book = ledger_at(tmp_path / "l.sqlite", epsilon=0.5)
    book.add_analyst("alice", epsilon=0.5)
    book.add_analyst("bob", epsilon=0.5)
    charge(book, 0.25, "alice")
    charge(book, 0.125, None)                                   # the owner spends from the total only
    with pytest.raises(BudgetExceeded) as info:
        charge(book, 0.25, "bob")                               # bob's own 0.5 fits; the total does not
    # What is left of the total would tell bob how much the others spent: refused without it.
    assert "the total" in info.value.message and info.value.remaining is None
    assert "0.125" not in info.value.message and "0.125" not in info.value.hint
    charge(book, 0.125, "bob")
    assert book.budget().spent_epsilon == 0.5 and book.budget("bob").spent_epsilon == 0.125


def test_the_owner_charges_as_before(tmp_path):
    book = ledger_at(tmp_path / "l.sqlite", epsilon=0.5)
    charge(book, 0.5, None)
    with pytest.raises(BudgetExceeded) as info:
        charge(book, 0.1, None)
    assert info.value.budget is None and info.value.message.startswith("privacy budget exceeded")


def test_revoked_and_unknown_analysts_cannot_spend(tmp_path):
    path = tmp_path / "l.sqlite"
    book = ledger_at(path)
    book.add_analyst("alice", epsilon=0.5)
    t = charge(book, 0.1, "alice", key="k")
    book.release(t, pa.table({"n": [1]}))
    book.revoke_analyst("alice")
    for who in ("alice", "mallory"):
        for key in ("k", "other"):                             # not even a free replay
            with pytest.raises(AuthError):
                charge(book, 0.1, who, key=key)
    assert book.answer(t.id, "alice") is None
    assert book.budget("alice").spent_epsilon == 0.1 and book.budget().queries == 1


# --- history and replay between analysts ----------------------------------------------------------

def test_each_analyst_sees_and_replays_only_their_own_answers(tmp_path):
    """Replay is per analyst: B asking A's exact query pays for a fresh answer. Giving B A's answer
    would be free DP-wise (post-processing), but it would tell B what A asked and put a charge of A's
    in B's view; the total budget counts both draws."""
    book = ledger_at(tmp_path / "l.sqlite")
    book.add_analyst("alice", epsilon=0.5)
    book.add_analyst("bob", epsilon=0.5)
    a = charge(book, 0.1, "alice", key="same")
    book.release(a, pa.table({"n": [41]}))
    again = charge(book, 0.1, "alice", key="same")
    assert again.replayed and again.id == a.id and again.answer.column("n").to_pylist() == [41]
    b = charge(book, 0.1, "bob", key="same")
    assert not b.replayed and b.id != a.id, "bob pays for his own draw"
    book.release(b, pa.table({"n": [43]}))
    owner = charge(book, 0.1, None, key="same")
    assert not owner.replayed, "the owner's replays are the owner's own too"
    assert [c.id for c in book.budget("alice").history] == [a.id]
    assert [c.id for c in book.budget("bob").history] == [b.id]
    assert book.budget("alice").history[0].replays == 1 and book.budget("bob").history[0].replays == 0
    assert [c.analyst for c in book.budget().history] == ["alice", "bob", None], "the owner sees everything"
    assert book.budget().spent_epsilon == pytest.approx(0.3)
    # An answer by id: one's own, else None, whether the id exists or not (no existence oracle).
    assert book.answer(a.id, "alice").column("n").to_pylist() == [41]
    assert book.answer(a.id, "bob") is None and book.answer(b.id, "alice") is None
    assert book.answer(10_000, "alice") is None and book.answer(a.id, "mallory") is None
    assert book.answer(owner.id, None) is None, "reserved, not released: no answer"
    assert book.answer(a.id, None) is None and book.answer("1", "alice") is None


# --- failing closed -------------------------------------------------------------------------------

def test_a_locked_ledger_refuses_add_and_top_up_and_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "BUSY_TIMEOUT", 0.2)
    path = tmp_path / "l.sqlite"
    book = ledger_at(path)
    token = book.add_analyst("alice", epsilon=0.25)
    holder = sqlite3.connect(path, isolation_level=None, timeout=1)
    holder.execute("BEGIN IMMEDIATE")
    for attempt in (lambda: book.add_analyst("bob", 0.1), lambda: book.top_up("alice", 0.5),
                    lambda: book.revoke_analyst("alice")):
        started = time.monotonic()
        with pytest.raises(LedgerError) as info:
            attempt()
        assert info.value.code == "DP405" and "nothing was recorded" in info.value.message
        assert time.monotonic() - started < 3
    holder.execute("ROLLBACK")
    holder.close()
    assert [(a.name, a.total_epsilon, a.revoked) for a in book.analysts()] == [("alice", 0.25, False)]
    assert book.authenticate(token) == "alice"


def test_a_corrupt_ledger_refuses_analyst_commands_and_is_not_written(tmp_path):
    path = tmp_path / "l.sqlite"
    book = ledger_at(path)
    book.add_analyst("alice", epsilon=0.25)
    book.close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        con.execute("INSERT INTO analyst_events (time, analyst, kind, epsilon, delta) "
                    "VALUES ('t', 'alice', 'top-up', 'lots', '0')")
    before = path.read_bytes()
    book = ledger_at(path)
    for attempt in (lambda: book.top_up("alice", 0.1), lambda: book.budget("alice"), book.analysts,
                    lambda: charge(book, 0.1, "alice")):
        with pytest.raises(LedgerError) as info:
            attempt()
        assert info.value.code == "DP406" and "never recreates" in info.value.hint
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(LedgerError):
        ledger_at(garbage).add_analyst("bob", 0.1)
    book.close()
    assert path.read_bytes() == before


# --- concurrency: many threads in many processes ---------------------------------------------------

def _charge_many(path: str, jobs: list[str], threads: int) -> list[tuple[str, str]]:
    """One process: ``threads`` threads share one Ledger and charge 0.1 for each analyst in ``jobs``."""
    book = Ledger(path)
    start = threading.Barrier(threads)

    def one(names):
        start.wait()
        out = []
        for name in names:
            try:
                charge(book, 0.1, name)
                out.append((name, "ok"))
            except BudgetExceeded as err:
                out.append((name, "total" if "total" in err.message else "own"))
        return out
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(one, [jobs[i::threads] for i in range(threads)]))
    book.close()
    return [r for part in results for r in part]


PROCESSES = 4


@pytest.fixture(scope="module")
def processes():
    """Worker processes (spawned fresh: no state shared with this one), started once for the module."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(PROCESSES, mp_context=spawn) as pool:
        yield pool


def _race(pool, tmp_path, total: float, budgets: dict[str, float], attempts: int,
          threads: int = 4, accountant: str = "basic") -> list[tuple[str, str]]:
    path = str(tmp_path / "l.sqlite")
    book = ledger_at(path, epsilon=total, accountant=accountant)
    for name, eps in budgets.items():
        book.add_analyst(name, epsilon=eps)
    book.close()
    jobs = [name for _ in range(attempts) for name in budgets]
    parts = pool.map(_charge_many, [path] * PROCESSES, [jobs[i::PROCESSES] for i in range(PROCESSES)],
                     [threads] * PROCESSES)
    return [r for part in parts for r in part]


# Under every accountant: the charges are (0.1, 0) guarantees, and a few such compose to no less than
# their sum at delta 1e-6 (9 of them to 0.899 under pld), so the same number fit under each.
@pytest.mark.parametrize("accountant", one_by_default(ACCOUNTANTS, "basic"))
def test_many_threads_in_many_processes_fill_each_analysts_budget_exactly(processes, tmp_path, accountant):
    outcomes = _race(processes, tmp_path, total=0.8, budgets={"alice": 0.3, "bob": 0.5}, attempts=10,
                     accountant=accountant)
    assert sorted(o for o in outcomes if o[1] == "ok") == [("alice", "ok")] * 3 + [("bob", "ok")] * 5
    assert {o for o in outcomes if o[1] != "ok"} == {("alice", "own"), ("bob", "own")}
    book = Ledger(str(tmp_path / "l.sqlite"))
    assert book.budget("alice").spent_epsilon == 0.3 and book.budget("bob").spent_epsilon == 0.5
    assert sum(Decimal(repr(c.epsilon)) for c in book.budget().history) == Decimal("0.8")
    assert book.budget().accountant == accountant and book.budget().spent_epsilon <= 0.8, "never over"


@pytest.mark.parametrize("accountant", one_by_default(ACCOUNTANTS, "basic"))
def test_many_threads_in_many_processes_never_overspend_the_total(processes, tmp_path, accountant):
    outcomes = _race(processes, tmp_path, total=0.6, budgets={"alice": 0.4, "bob": 0.4}, attempts=10,
                     accountant=accountant)
    won = [name for name, result in outcomes if result == "ok"]
    assert len(won) == 6 and won.count("alice") <= 4 and won.count("bob") <= 4
    book = Ledger(str(tmp_path / "l.sqlite"))
    spent = [Decimal(repr(c.epsilon)) for c in book.budget().history]
    assert sum(spent) == Decimal("0.6") and len(spent) == 6


@pytest.mark.slow
@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_five_analysts_race_in_32_threads_over_4_processes_and_the_sums_stay_exact(processes, tmp_path, accountant):
    budgets = {"a": 0.7, "b": 1.1, "c": 0.3, "d": 0.9, "e": 2.0}          # 7 + 11 + 3 + 9 + 20 = 50 queries
    outcomes = _race(processes, tmp_path, total=5.0, budgets=budgets, attempts=30, threads=8, accountant=accountant)
    won = [name for name, result in outcomes if result == "ok"]
    assert {n: won.count(n) for n in budgets} == {"a": 7, "b": 11, "c": 3, "d": 9, "e": 20}
    book = Ledger(str(tmp_path / "l.sqlite"))
    assert sum(Decimal(repr(c.epsilon)) for c in book.budget().history) == Decimal("5.0")
    for name, eps in budgets.items():
        assert book.budget(name).spent_epsilon == eps


# --- the owner's commands ---------------------------------------------------------------------------

def test_analyst_commands_add_list_top_up_revoke(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    ledger = str(tmp_path / "l.sqlite")
    runner = CliRunner()
    no_ledger = runner.invoke(cli.main, ["analyst", "add", "alice", "--epsilon", "0.5", "--ledger", ledger])
    assert no_ledger.exit_code == 3 and "error[DP406]" in no_ledger.stderr, "a new ledger needs --policy"
    added = runner.invoke(cli.main, ["analyst", "add", "alice", "--epsilon", "0.5", "--delta", "1e-7",
                                     "--ledger", ledger, "--policy", str(policy)])
    assert added.exit_code == 0, added.output
    (token,) = added.stdout.split()
    assert token.startswith("dpsql_") and "will not be shown again" in added.stderr and token not in added.stderr
    assert Ledger(ledger).authenticate(token) == "alice"
    # The ledger alone is enough from now on.
    again = runner.invoke(cli.main, ["analyst", "add", "alice", "--epsilon", "0.1", "--ledger", ledger])
    assert again.exit_code == 2 and "error[DP409]" in again.stderr and again.stdout == ""
    too_much = runner.invoke(cli.main, ["analyst", "add", "bob", "--epsilon", "5", "--ledger", ledger])
    assert too_much.exit_code == 2 and "more than the total" in too_much.stderr
    topped = runner.invoke(cli.main, ["analyst", "top-up", "alice", "--epsilon", "0.25", "--ledger", ledger])
    assert topped.exit_code == 0 and "epsilon 0.75" in topped.stdout
    listed = json.loads(runner.invoke(cli.main, ["analyst", "list", "--ledger", ledger, "--format", "json"]).stdout)
    assert [(a["name"], a["total"]["epsilon"], a["revoked"]) for a in listed] == [("alice", 0.75, False)]
    assert runner.invoke(cli.main, ["analyst", "revoke", "alice", "--ledger", ledger]).exit_code == 0
    table = runner.invoke(cli.main, ["analyst", "list", "--ledger", ledger]).stdout
    assert "alice" in table and "revoked" in table and token not in table
    assert runner.invoke(cli.main, ["analyst", "revoke", "alice", "--ledger", ledger]).exit_code == 2
    assert runner.invoke(cli.main, ["analyst", "list"]).exit_code == 1, "needs --ledger or --db"
    assert runner.invoke(cli.main, ["analyst", "add", "x", "--epsilon", "nan", "--ledger", ledger]).exit_code == 2


def test_analyst_add_in_a_real_process_prints_the_token_once(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    db = tmp_path / "people.duckdb"                     # --db names the ledger beside it
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "dpsql.cli.commands", "analyst", "add", "carol", "--epsilon", "0.5",
                          "--db", str(db), "--policy", str(policy)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    token = run.stdout.strip()
    assert Ledger(str(db) + ".dpsql-ledger.sqlite").authenticate(token) == "carol"
    listed = subprocess.run([sys.executable, "-m", "dpsql.cli.commands", "analyst", "list", "--db", str(db)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0 and "carol" in listed.stdout and token not in listed.stdout + listed.stderr


def test_totals_are_the_budgets_figures_without_the_history(tmp_path):
    """What the server reports with every answer reads the kept sums, not the history: same figures."""
    from dpsql.accounting.budget import Cost
    from dpsql.accounting.ledger import Ledger
    from dpsql.policy import load_policy
    book = Ledger(str(tmp_path / "l.sqlite"), load_policy({"budget": {"epsilon": 10}, "tables": {"t": {"privacy_unit": "row"}}}))
    book.add_analyst("al", 3)
    for _ in range(3):
        book.reserve(Cost.of(0.5, 0), sql="q", plan="", analyst="al")
    book.reserve(Cost.of(0.25, 0), sql="q", plan="")
    for who in (None, "al"):
        full, short = book.budget(who), book.totals(who)
        assert short.history == () and (short.total_epsilon, short.spent_epsilon, short.queries) == \
            (full.total_epsilon, full.spent_epsilon, full.queries)
