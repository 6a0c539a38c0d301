"""The budget ledger (docs/architecture.md, threat model 6): persistent, charged before release, exact,
composed, replayed, and failing closed; with reliability tests across processes and SIGKILL."""
from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from decimal import Decimal

import duckdb
import pytest
import yaml
from click.testing import CliRunner

import dpsql
from dpsql import testing
from dpsql.cli import commands as cli
from dpsql.accounting import ledger as ledgers
from dpsql.accounting import store
from dpsql.api import replay
from dpsql.accounting.budget import Cost
from dpsql.policy import load_policy
from dpsql.policy.model import ACCOUNTANTS
from dpsql.errors import BudgetExceeded, ExecutionError
from dpsql.accounting.ledger import LedgerError
from tests.support.paths import ROOT
from tests.support.checks import one_by_default

POLICY = {
    "version": 1,
    "budget": {"epsilon": 1.0, "delta": 1e-6},
    "default_epsilon": 0.1,
    "tables": {
        "people": {
            "privacy_unit": "person_id",
            "max_groups_per_unit": 2,
            "max_rows_per_unit": 1,
            "columns": {
                "income": {"type": "float", "lower": 0, "upper": 1000},
                "sex": {"keys": ["F", "M"]},
                "state": {"keys": ["CA", "NY", "TX"]},
            },
        },
    },
}
COUNT = "SELECT COUNT(*) AS n FROM people"
BY_STATE = "SELECT state, COUNT(*) AS n, SUM(income) AS total FROM people GROUP BY state"

# The heaviest races run by default under pld (the slowest composition, the likeliest to hold the write
# lock too long); basic's and zcdp's share the same locking path and run with -m slow.
RACED = one_by_default(ACCOUNTANTS, "pld")


def make_db(path, rows=2000):
    con = duckdb.connect(str(path))
    con.execute(f"""CREATE TABLE people AS SELECT range AS person_id,
                    CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
                    ['CA', 'NY', 'TX'][1 + range % 3] AS state, ((range * 37) % 1000)::DOUBLE AS income
                    FROM range({rows})""")
    con.close()
    return str(path)


def policy_with(**budget):
    policy = json.loads(json.dumps(POLICY))
    policy["budget"].update(budget)
    return policy


@pytest.fixture
def files(tmp_path):
    """A DuckDB file, its policy file and a ledger path (not yet created)."""
    db = make_db(tmp_path / "people.duckdb")
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    return db, str(policy), str(tmp_path / "budget.sqlite")


def raw_rows(path):
    with sqlite3.connect(path) as con:
        return con.execute("SELECT id, status, epsilon, delta, sql FROM charges ORDER BY id").fetchall()


# --- where the ledger lives ----------------------------------------------------------------------

def test_budget_persists_across_connections_and_is_exact(files):
    db_path, policy, ledger = files
    tight = policy_with(epsilon=0.3)
    first = dpsql.connect(db_path, policy=tight, ledger=ledger)
    first.sql(COUNT, epsilon=0.1)
    first.close()
    second = dpsql.connect(db_path, policy=tight, ledger=ledger)
    second.sql(BY_STATE, epsilon=0.2)           # 0.1 + 0.2 fits 0.3 exactly (floats would refuse)
    assert second.budget.spent_epsilon == 0.3 and second.budget.remaining_epsilon == 0
    with pytest.raises(BudgetExceeded) as info:
        second.sql("SELECT sex, COUNT(*) FROM people GROUP BY sex", epsilon=0.1)
    err = info.value
    assert err.requested == (Decimal("0.1"), Decimal(0)) and err.remaining == (Decimal(0), Decimal("0.000001"))
    assert err.difference[0] == Decimal("0.1"), "exact: requested - remaining"
    assert [r[1:3] for r in raw_rows(ledger)] == [("released", "0.1"), ("released", "0.2")], "refusal wrote nothing"


def test_default_ledger_is_beside_the_database_file(files):
    db_path, policy, _ = files
    db = dpsql.connect(db_path, policy=policy)
    assert not os.path.exists(db_path + ".dpsql-ledger.sqlite"), "connecting creates no file"
    db.sql(COUNT)
    assert db.budget.ledger == os.path.abspath(db_path + ".dpsql-ledger.sqlite")
    db.close()
    again = dpsql.connect(db_path, policy=policy)
    assert again.budget.spent_epsilon == 0.1 and again.budget.queries == 1


def test_a_connection_object_needs_an_explicit_ledger():
    con = duckdb.connect()
    con.execute("CREATE TABLE people (person_id INT, sex VARCHAR, state VARCHAR, income DOUBLE)")
    with pytest.raises(LedgerError) as info:
        dpsql.connect(con, policy=POLICY)
    assert info.value.code == "DP403"
    assert 'ledger=":memory:"' in info.value.format() and "ledger=" in info.value.hint
    assert dpsql.connect(con, policy=POLICY, ledger=":memory:").budget.spent_epsilon == 0


def test_the_cli_keeps_one_budget_across_calls(files):
    """Each CLI call used to get a fresh budget; now they share the ledger beside --db."""
    db_path, policy, _ = files
    tight = os.path.join(os.path.dirname(db_path), "tight.yaml")
    with open(tight, "w") as f:
        yaml.safe_dump(policy_with(epsilon=0.25), f)
    runner = CliRunner()
    args = ["--db", db_path, "--policy", tight]
    assert runner.invoke(cli.main, ["query", COUNT, *args, "--epsilon", "0.125"]).exit_code == 0
    assert runner.invoke(cli.main, ["query", BY_STATE, *args, "--epsilon", "0.125"]).exit_code == 0
    third = runner.invoke(cli.main, ["query", "SELECT sex, COUNT(*) FROM people GROUP BY sex", *args,
                                     "--epsilon", "0.125"])
    assert third.exit_code == 2 and "error[DP402]" in third.stderr and third.stdout == ""
    shown = json.loads(runner.invoke(cli.main, ["budget", "--policy", tight, "--db", db_path,
                                                "--format", "json"]).stdout)
    assert shown["spent"] == {"epsilon": 0.25, "delta": 0.0} and shown["remaining"]["epsilon"] == 0
    assert [h["status"] for h in shown["history"]] == ["released", "released"]


# --- charge before release -----------------------------------------------------------------------

class FailingSource:
    """A noise source that fails: the query fails inside DuckDB, after the charge."""

    def below(self, n):
        raise RuntimeError("noise source failed")


def test_the_spend_is_on_disk_before_duckdb_runs(files):
    db_path, policy, ledger = files
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    seen = []
    # dpsql binds the relation before charging and runs it after: look when it runs, through a
    # separate SQLite connection (committed data only).
    with testing.before_run(db, lambda: seen.append(raw_rows(ledger))):
        db.sql(COUNT, epsilon=0.25)
    # Two runs: the measurements drawn, then the outputs computed from them (api/executor.py measured);
    # the charge is on disk, reserved, before either.
    assert len(seen) == 2
    for before in seen:
        assert [(status, eps) for _, status, eps, _, _ in before] == [("reserved", "0.25")]
    assert [r[1] for r in raw_rows(ledger)] == ["released"]


def test_a_query_that_fails_after_the_charge_stays_charged(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT range AS person_id, 'F' AS sex, 'CA' AS state, 1.0 AS income "
                "FROM range(10)")
    ledger = str(tmp_path / "l.sqlite")
    db = dpsql.connect(con, policy=POLICY, ledger=ledger, rng=FailingSource())
    with pytest.raises(ExecutionError):
        db.sql(COUNT, epsilon=0.25)
    assert [r[1:3] for r in raw_rows(ledger)] == [("failed", "0.25")]
    assert db.budget.spent_epsilon == 0.25


def test_refused_queries_write_nothing(files):
    db_path, policy, ledger = files
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    with pytest.raises(dpsql.DpsqlError):
        db.sql("SELECT ssn FROM people")
    with pytest.raises(BudgetExceeded):
        db.sql(COUNT, epsilon=2.0)
    assert not os.path.exists(ledger) or raw_rows(ledger) == []


def test_the_ledger_is_append_only(tmp_path):
    path = str(tmp_path / "l.sqlite")
    book = ledgers.Ledger(path, load_policy(POLICY))
    book.reserve(Cost.of(0.5, 0), sql="q", plan="p")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:   # the file refuses any writer
        for statement in ("DELETE FROM charges", "UPDATE charges SET epsilon = '0'", "UPDATE meta SET value = 'x'",
                          "DELETE FROM meta"):
            with pytest.raises(sqlite3.IntegrityError):
                other.execute(statement)
    assert book.budget().spent_epsilon == 0.5


def test_the_sums_kept_between_charges_follow_every_writer_and_start_over_on_a_rewritten_file(tmp_path):
    path = str(tmp_path / "l.sqlite")
    a, b = ledgers.Ledger(path, load_policy(policy_with(epsilon=0.5))), ledgers.Ledger(path, load_policy(policy_with(epsilon=0.5)))
    a.reserve(Cost.of(0.25, 0), sql="q", plan="p")
    b.reserve(Cost.of(0.125, 0), sql="q", plan="p")            # b's sums start from the file: 0.25 + 0.125
    with pytest.raises(BudgetExceeded):
        a.reserve(Cost.of(0.25, 0), sql="q", plan="p")         # a reads b's charge before checking
    a.reserve(Cost.of(0.125, 0), sql="q", plan="p")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:   # what no dpsql would do
        other.execute("DROP TRIGGER charges_are_kept")
        other.execute("DELETE FROM charges WHERE id = 1")
    b.reserve(Cost.of(0.25, 0), sql="q", plan="p")             # fewer charges than b summed: summed again
    assert b.budget().spent_epsilon == 0.5


# --- composition ---------------------------------------------------------------------------------

def test_group_by_is_charged_once_and_aggregates_compose_sequentially(files):
    db_path, policy, ledger = files
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    res = db.sql(BY_STATE, epsilon=0.3)
    assert len(res.fetchall()) == 3
    assert db.budget.spent_epsilon == 0.3, "parallel over 3 partitions: epsilon once, not 3 times"
    assert sum(Decimal(repr(m.epsilon)) for m in res.plan.measurements) == pytest.approx(Decimal("0.3"))
    assert all(m.sensitivity.l1 == 2 for m in res.plan.measurements if m.kind != "sum"), "L = 2 in the sensitivity"
    (charge,) = db.budget.history
    assert "sequential over 2 measurement(s)" in charge.plan
    assert "parallel over 3 partition(s), each unit in <= 2" in charge.plan
    assert "parallel over 3 partition(s), each unit in <= 2" in str(res.plan)
    db.sql(COUNT, epsilon=0.2)
    assert db.budget.spent_epsilon == 0.5, "across queries epsilons add"


def test_private_group_keys_are_summarised_as_partition_selection(files, tmp_path):
    db_path, _, ledger = files
    private = json.loads(json.dumps(POLICY))
    del private["tables"]["people"]["columns"]["state"]["keys"]
    policy = tmp_path / "private.yaml"
    policy.write_text(yaml.safe_dump(private))
    db = dpsql.connect(db_path, policy=str(policy), ledger=ledger)
    res = db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=0.5, delta=1e-7)
    assert res.plan.partitions is None, "private keys: the number of groups is not known"
    (charge,) = db.budget.history
    assert "parallel over the groups released by partition selection, each unit in <= 2" in charge.plan
    shown = CliRunner().invoke(cli.main, ["budget", "--policy", str(policy), "--ledger", ledger])
    assert shown.exit_code == 0, shown.stderr
    assert "partition selection" in shown.stdout and "None" not in shown.stdout


def test_history_keeps_the_dp_options_and_the_bounds(files):
    db_path, policy, ledger = files
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.1, max_groups_contributed = 1) state, "
           "SUM(income, contribution_bounds_per_group => (0, 500)) AS total FROM people GROUP BY state")
    db.sql(sql)
    (charge,) = db.budget.history
    assert charge.sql == sql
    shown = CliRunner().invoke(cli.main, ["budget", "--policy", policy, "--ledger", ledger])
    assert "OPTIONS(epsilon = 0.1, max_groups_contributed = 1)" in shown.stdout
    assert "contribution_bounds_per_group => (0, 500)" in shown.stdout
    # Queries that differ only in their bounds or options are different queries.
    assert replay.normalise_sql(sql) != replay.normalise_sql(sql.replace("(0, 500)", "(0, 50)"))
    assert replay.normalise_sql(sql) != replay.normalise_sql(sql.replace("= 1)", "= 2)"))


# --- repeated queries ----------------------------------------------------------------------------

def test_an_identical_query_gets_the_same_answer_for_free(files):
    db_path, policy, ledger = files
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    first = db.sql(BY_STATE, epsilon=0.2)
    again = db.sql("select state,  count(*) as n, sum(INCOME) as total -- the same\n from PEOPLE group by STATE",
                   epsilon=0.2)
    assert again.replayed and not first.replayed
    assert again.fetchall() == first.fetchall() and again.columns == first.columns
    assert again.arrow().schema == first.arrow().schema
    assert db.budget.spent_epsilon == 0.2 and db.budget.history[0].replays == 1
    # A different epsilon or fresh=True: a new draw, paid for. A different output name is post-processing
    # of the same measurements (issue 26): replayed free, the same values under the new name.
    assert not db.sql(BY_STATE, epsilon=0.25).replayed
    renamed = db.sql(BY_STATE.replace("AS n", "AS N"), epsilon=0.2)
    assert renamed.replayed and renamed.columns == ["state", "N", "total"]
    assert renamed.fetchall() == first.fetchall()
    fresh = db.sql(BY_STATE, epsilon=0.2, fresh=True)
    assert not fresh.replayed and db.budget.spent_epsilon == pytest.approx(0.65)
    with pytest.raises(dpsql.DpsqlError):
        db.sql(BY_STATE, fresh="yes")


def test_replay_works_across_processes_on_the_same_file_and_not_after_it_changes(files):
    db_path, policy, ledger = files
    a = dpsql.connect(db_path, policy=policy, ledger=ledger)
    rows = a.sql(COUNT).fetchall()
    a.close()
    b = dpsql.connect(db_path, policy=policy, ledger=ledger)
    res = b.sql(COUNT)
    assert res.replayed and res.fetchall() == rows
    b.close()
    con = duckdb.connect(db_path)
    con.execute("INSERT INTO people VALUES (99999, 'F', 'CA', 1.0)")
    con.close()
    c = dpsql.connect(db_path, policy=policy, ledger=ledger)
    assert not c.sql(COUNT).replayed, "new data version: a new answer, paid for"
    assert c.budget.spent_epsilon == 0.2


def test_connection_objects_replay_only_within_a_connection_unless_the_data_is_named(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT range AS person_id, 'F' AS sex, 'CA' AS state, 1.0 AS income "
                "FROM range(10)")
    a = dpsql.connect(con.cursor(), policy=POLICY, ledger=ledger)
    b = dpsql.connect(con.cursor(), policy=POLICY, ledger=ledger)
    a.sql(COUNT)
    assert a.sql(COUNT).replayed and not b.sql(COUNT).replayed
    c = dpsql.connect(con.cursor(), policy=POLICY, ledger=ledger, data_version="snapshot-1")
    d = dpsql.connect(con.cursor(), policy=POLICY, ledger=ledger, data_version="snapshot-1")
    c.sql(COUNT)
    assert d.sql(COUNT).replayed


# --- failing closed ------------------------------------------------------------------------------

def test_a_ledger_spent_under_another_privacy_unit_is_refused(files):
    """What may change in a policy and what is recorded: tests/accounting/test_policy_evolution.py."""
    db_path, policy, ledger = files
    dpsql.connect(db_path, policy=policy, ledger=ledger).sql(COUNT)
    before = open(ledger, "rb").read()
    other = json.loads(json.dumps(POLICY))
    other["tables"]["people"]["privacy_unit"] = "state"
    with pytest.raises(LedgerError) as info:
        dpsql.connect(db_path, policy=other, ledger=ledger)
    err = info.value
    assert err.code == "DP404" and err.differences == ("tables.people.privacy_unit",)
    assert "tables.people.privacy_unit" in err.message and "dpsql ledger rebind" in err.hint
    same_but_defaults = {**POLICY, "default_epsilon": 0.5}
    dpsql.connect(db_path, policy=same_but_defaults, ledger=ledger)     # defaults are not the identity
    assert open(ledger, "rb").read() == before, "a refused ledger is not written to"


def _corrupt_files(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(os.urandom(4096))
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    foreign_app = tmp_path / "foreign_app.sqlite"
    with sqlite3.connect(foreign_app) as con:
        con.execute("CREATE TABLE notes (x)")
    bad_amount = tmp_path / "bad_amount.sqlite"
    book = ledgers.Ledger(str(bad_amount), load_policy(POLICY))
    book.reserve(Cost.of(0.1, 0), sql="q", plan="p")
    book.close()
    with contextlib.closing(sqlite3.connect(bad_amount, isolation_level=None)) as con:
        con.execute("INSERT INTO charges (time, sql, plan, epsilon, delta, composition, status) "
                    "VALUES ('t', 'q', 'p', '-0.5', '0', 'basic', 'released')")
    truncated = tmp_path / "truncated.sqlite"
    book = ledgers.Ledger(str(truncated), load_policy(POLICY))
    for i in range(300):
        book.reserve(Cost.of(0.001, 0), sql="x" * 200, plan=str(i))
    book.close()
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    scribbled = tmp_path / "scribbled.sqlite"
    scribbled.write_bytes(data[:8192] + os.urandom(4096) + data[12288:])
    return [garbage, empty, foreign_app, bad_amount, truncated, scribbled]


def test_a_corrupt_ledger_fails_closed_and_is_never_recreated(files, tmp_path):
    db_path, policy, _ = files
    for path in _corrupt_files(tmp_path):
        before = path.read_bytes()
        with pytest.raises(LedgerError) as info:
            db = dpsql.connect(db_path, policy=policy, ledger=str(path))
            db.sql(COUNT)                    # a corruption only a full read finds is found here
        assert info.value.code == "DP406", (path.name, info.value)
        assert str(path) in info.value.message and "never recreates" in info.value.hint
        assert path.read_bytes() == before, f"{path.name} was modified"
        result = CliRunner().invoke(cli.main, ["budget", "--policy", policy, "--ledger", str(path)])
        assert result.exit_code == 3 and "error[DP406]" in result.stderr, path.name   # a set-up error


def test_a_locked_ledger_fails_closed_and_spends_nothing(files, monkeypatch):
    db_path, policy, ledger = files
    monkeypatch.setattr(store, "BUSY_TIMEOUT", 0.2)
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    db.sql(COUNT)
    holder = sqlite3.connect(ledger, isolation_level=None, timeout=1)
    holder.execute("BEGIN IMMEDIATE")               # another process mid-charge, for too long
    started = time.monotonic()
    with pytest.raises(LedgerError) as info:
        db.sql(BY_STATE)
    assert info.value.code == "DP405" and time.monotonic() - started < 3
    holder.execute("ROLLBACK")
    assert db.budget.spent_epsilon == 0.1 and db.budget.queries == 1
    db.sql(BY_STATE)                                # released: works again
    testing.ledger(db).close()
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")               # not even readable
    with pytest.raises(LedgerError) as info:
        dpsql.connect(db_path, policy=policy, ledger=ledger)
    assert info.value.code == "DP405"
    holder.close()


def test_an_unwritable_ledger_location_fails_closed(files, tmp_path):
    db_path, policy, _ = files
    db = dpsql.connect(db_path, policy=policy, ledger=str(tmp_path / "no" / "such" / "dir" / "l.sqlite"))
    with pytest.raises(LedgerError) as info:
        db.sql(COUNT)
    assert info.value.code == "DP406"
    with pytest.raises(LedgerError):
        dpsql.connect(db_path, policy=policy, ledger=str(tmp_path))       # a directory


# --- dpsql budget --------------------------------------------------------------------------------

def test_budget_command_table_and_json(files):
    db_path, policy, ledger = files
    runner = CliRunner()
    empty = runner.invoke(cli.main, ["budget", "--policy", policy, "--ledger", ledger])
    assert empty.exit_code == 0 and "no file yet" in empty.stdout and not os.path.exists(ledger)
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    db.sql(BY_STATE, epsilon=0.25)
    db.sql(BY_STATE, epsilon=0.25)
    table = runner.invoke(cli.main, ["budget", "--policy", policy, "--ledger", ledger])
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[3].split() == ["total", "1", "1e-06"]
    assert lines[4].split() == ["spent", "0.25", "0"]
    assert lines[5].split() == ["remaining", "0.75", "1e-06"]
    assert "repeats answered again at no cost: 1" in table.stdout
    assert "SELECT state, COUNT(*) AS n" in table.stdout and "released" in table.stdout
    doc = json.loads(runner.invoke(cli.main, ["budget", "--policy", policy, "--ledger", ledger,
                                              "--format", "json"]).stdout)
    assert doc["total"] == {"epsilon": 1.0, "delta": 1e-6} and doc["exists"] is True
    (entry,) = doc["history"]
    assert entry["epsilon"] == 0.25 and entry["status"] == "released" and entry["replays"] == 1
    assert set(entry) >= {"id", "time", "sql", "plan", "epsilon", "delta", "status"}
    assert runner.invoke(cli.main, ["budget", "--policy", policy]).exit_code == 1, "needs --ledger or --db"


def test_query_fresh_flag_and_replay_note(files):
    db_path, policy, _ = files
    runner = CliRunner()
    args = ["query", COUNT, "--db", db_path, "--policy", policy, "--format", "json"]
    first = runner.invoke(cli.main, args)
    second = runner.invoke(cli.main, args)
    assert first.stdout == second.stdout and "no budget spent" in second.stderr
    third = runner.invoke(cli.main, args + ["--fresh"])
    assert third.exit_code == 0 and "no budget spent" not in third.stderr
    assert dpsql.connect(db_path, policy=policy).budget.spent_epsilon == 0.2


# --- concurrency ---------------------------------------------------------------------------------

@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_threads_share_one_ledger_without_overspending(files, accountant):
    db_path, policy, ledger = files
    db = dpsql.connect(db_path, policy=policy_with(epsilon=0.5, accountant=accountant), ledger=ledger)
    outcomes = []

    def one():   # one PrivateConnection, many threads: DuckDB runs one query at a time
        try:
            db.sql(COUNT, epsilon=0.1, fresh=True)
            outcomes.append("ok")
        except BudgetExceeded:
            outcomes.append("refused")
    threads = [threading.Thread(target=one) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["ok"] * 5 + ["refused"] * 7
    assert sum(c.epsilon for c in db.budget.history) == 0.5 and db.budget.spent_epsilon <= 0.5


CHILD = textwrap.dedent("""
    import os, sys, time, dpsql
    db_path, policy, ledger, go, mode = sys.argv[1:6]
    db = dpsql.connect(db_path, policy=policy, ledger=ledger)
    print("ready", flush=True)
    if mode == "once":
        while not os.path.exists(go):
            time.sleep(0.002)
        try:
            db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=0.1, fresh=True).fetchall()
            print("answered", flush=True)
        except dpsql.BudgetExceeded as err:
            print("refused", err.code, flush=True)
    else:
        # Each query holds its charge unreleased for 50 ms before it runs (the trusted test seam), so
        # however long a charge takes to compose (pld: its history grows), kills land in that window too.
        from dpsql import testing
        with testing.before_run(db, lambda: time.sleep(0.05)):
            while True:
                rows = db.sql("SELECT state, COUNT(*) AS n, AVG(income) FROM people GROUP BY state",
                              epsilon=0.001, fresh=True).fetchall()
                print("released", rows[0][1], flush=True)
""")

# Children import this working tree's dpsql (the script's own directory is first on their path, so an
# installed copy, maybe older, would win otherwise).
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _spawn(tmp_path, db_path, policy, ledger, mode):
    script = tmp_path / "child.py"
    if not script.exists():   # written once: rewriting it could truncate it under a starting child
        script.write_text(CHILD)
    errors = open(tmp_path / f"child-{os.urandom(4).hex()}.err", "w")
    with errors:   # kept for diagnosis: a child that died on its own shows why here
        return subprocess.Popen([sys.executable, str(script), db_path, policy, ledger, str(tmp_path / "go"), mode],
                                stdout=subprocess.PIPE, stderr=errors, text=True, env=CHILD_ENV)


def _child_errors(tmp_path):
    return "\n".join(p.read_text()[-800:] for p in tmp_path.glob("child-*.err") if p.read_text().strip())


# Under every accountant: 3 releases of 0.1 compose to no less than their sum at delta 1e-6 (a 4th to
# 0.39999 under pld), and zcdp and pld fit what basic fits (accounting/accountants.py). The default run
# races 6 processes (3 answered, 3 refused: the same check), -m slow 16 (a process costs a second to start).
@pytest.mark.parametrize("accountant", RACED)
def test_6_processes_against_a_budget_that_fits_exactly_3_queries(tmp_path, accountant):
    _race(tmp_path, accountant, processes=6)


@pytest.mark.slow
@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_16_processes_against_a_budget_that_fits_exactly_3_queries(tmp_path, accountant):
    _race(tmp_path, accountant, processes=16)


def _race(tmp_path, accountant, processes):
    db_path = make_db(tmp_path / "people.duckdb")
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(policy_with(epsilon=0.3, accountant=accountant)))   # 3 x 0.1: exact, floats would fit only 2
    ledger = str(tmp_path / "budget.sqlite")                     # created by the racing processes
    children = [_spawn(tmp_path, db_path, str(policy), ledger, "once") for _ in range(processes)]
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready", _child_errors(tmp_path)
        (tmp_path / "go").touch()
        outcomes = [child.communicate(timeout=60)[0].strip() for child in children]
    finally:
        for child in children:
            child.kill()
    assert sorted(outcomes) == ["answered"] * 3 + ["refused DP402"] * (processes - 3), outcomes
    rows = raw_rows(ledger)
    assert [r[1:3] for r in rows] == [("released", "0.1")] * 3
    assert sum(Decimal(r[2]) for r in rows) == Decimal("0.3") <= Decimal("0.3")
    assert not [p for p in os.listdir(tmp_path) if ".new-" in p], "no half-built ledger left behind"


def _kill_at_random_points(tmp_path, kills, seed, accountant="basic"):
    db_path = make_db(tmp_path / "people.duckdb", rows=20_000)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(policy_with(epsilon=1000.0, accountant=accountant)))
    ledger = str(tmp_path / "budget.sqlite")
    rng = random.Random(seed)
    released = 0
    interrupted = 0
    for i in range(kills):
        child = _spawn(tmp_path, db_path, str(policy), ledger, "loop")
        assert child.stdout.readline().strip() == "ready"
        first = ""
        if i == kills - 1:
            # However loaded the machine, the last child answers at least once before it is killed.
            first = child.stdout.readline()
        # The first query takes ~0.4 s (creates the ledger), later ~0.04 s; under pld the first also
        # imports dp-accounting (~1.5 s more), so its kills spread wider to land among the charges.
        time.sleep(rng.uniform(0.0, 2.5 if accountant == "pld" else 0.8))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        released += sum(1 for line in (first + out).splitlines() if line.startswith("released"))
        # Every answer the killed process printed is recorded as spent; the ledger opens cleanly.
        book = ledgers.Ledger(ledger, load_policy(str(policy)))
        budget = book.budget()
        book.close()
        # (Summed here: zcdp and pld compose many 0.001 charges to less than their sum.)
        assert sum(Decimal(repr(c.epsilon)) for c in budget.history) >= Decimal("0.001") * released
        assert budget.accountant == accountant
        # The release is recorded before db.sql returns, so every printed answer is 'released'.
        assert sum(c.status == "released" for c in budget.history) >= released
        interrupted = sum(c.status == "reserved" for c in budget.history)
    return released, interrupted, budget


@pytest.mark.parametrize("accountant", RACED)
def test_sigkill_during_queries_never_loses_a_spend(tmp_path, accountant):
    released, interrupted, budget = _kill_at_random_points(tmp_path, kills=5, seed=4, accountant=accountant)
    assert released > 0 and budget.queries >= released


@pytest.mark.slow
@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_sigkill_during_queries_never_loses_a_spend_50_times(tmp_path, accountant):
    released, interrupted, budget = _kill_at_random_points(tmp_path, kills=50, seed=5, accountant=accountant)
    assert released > 0 and budget.queries >= released
    assert interrupted > 0, "some kills landed between the charge and the release"
