"""Policies that evolve (issue 14, item 3): the ledger binds to what a spend is about (each table's privacy
unit or link), not to the policy's text. Columns, tables, keys, bounds and the total budget may change
and the history stays; every change is recorded; a change of unit or link needs `dpsql ledger rebind`.
Ledgers written by the format 1 code are upgraded in place, atomically, losing nothing."""
from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

import dpsql
from dpsql.accounting import schema
from dpsql.api import replay
from dpsql.accounting.budget import Cost
from dpsql.accounting.ledger import Ledger, LedgerError
from dpsql.cli import commands as cli
from dpsql.errors import BudgetExceeded
from dpsql.policy import load_policy
from tests.support.paths import DATA, ROOT

V1_LEDGER, V1_POLICY = DATA / "ledger_v1.sqlite", DATA / "ledger_v1_policy.yaml"
V1_SPENT = Decimal("0.25") + Decimal("0.125") + Decimal("0.1") + Decimal("0.05")   # its 4 charges

BASE = {
    "budget": {"epsilon": 1.0, "delta": 1e-6},
    "tables": {
        "people": {"privacy_unit": "person_id", "max_groups_per_unit": 2,
                   "columns": {"income": {"type": "float", "lower": 0, "upper": 1000},
                               "state": {"keys": ["CA", "NY", "TX"]}}},
        "visits": {"privacy_unit": {"via": "person_id", "references": "people.person_id"}},
        "clinics": {"public": True},
    },
}


def edited(change) -> dict:
    policy = copy.deepcopy(BASE)
    change(policy)
    return policy


def spend(path, policy, eps=0.25):
    book = Ledger(str(path), load_policy(policy))
    book.reserve(Cost.of(eps, 0), sql="q", plan="p")
    book.close()


def recorded(path) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(path)) as con:
        return con.execute("SELECT kind, total_epsilon, changes FROM policies ORDER BY id").fetchall()


# --- what may change ------------------------------------------------------------------------------

SAFE_CHANGES = {
    "a column": lambda p: p["tables"]["people"]["columns"].update(age={"type": "int", "lower": 0, "upper": 120}),
    "a table": lambda p: p["tables"].update(regions={"public": True}),
    "keys": lambda p: p["tables"]["people"]["columns"]["state"].update(keys=["CA", "NY", "TX", "WA"]),
    "bounds": lambda p: p["tables"]["people"]["columns"]["income"].update(upper=5000),
    "L": lambda p: p["tables"]["people"].update(max_groups_per_unit=1),
    "the total budget": lambda p: p["budget"].update(epsilon=1.5),
    "a dropped table": lambda p: p["tables"].pop("visits"),
}


@pytest.mark.parametrize("what", SAFE_CHANGES)
def test_a_change_that_keeps_every_unit_keeps_the_history_and_is_recorded(tmp_path, what):
    path = tmp_path / "l.sqlite"
    spend(path, BASE)
    new = edited(SAFE_CHANGES[what])
    book = Ledger(str(path), load_policy(new))
    assert book.budget().spent_epsilon == 0.25 and book.budget().queries == 1, "nothing forgotten"
    book.reserve(Cost.of(0.25, 0), sql="q2", plan="p")
    assert book.budget().spent_epsilon == 0.5
    (created, changed) = book.policy_history()
    assert (created.kind, changed.kind) == ("created", "changed") and changed.time >= created.time
    assert changed.changes and all(c.startswith(("tables.", "budget.")) for c in changed.changes)
    assert changed.document == json.loads(json.dumps(changed.document)), "the whole new document is kept"
    book.close()
    Ledger(str(path), load_policy(new)).close()
    assert len(recorded(path)) == 2, "the same policy again records nothing"


def test_the_newest_total_is_in_force_and_lowering_it_loses_nothing(tmp_path):
    path = tmp_path / "l.sqlite"
    spend(path, BASE, eps=0.75)
    lower = Ledger(str(path), load_policy(edited(lambda p: p["budget"].update(epsilon=0.5))))
    assert lower.budget().total_epsilon == 0.5 and lower.budget().remaining_epsilon == -0.25
    with pytest.raises(BudgetExceeded) as info:
        lower.reserve(Cost.of(0.01, 0), sql="q", plan="p")
    assert info.value.remaining[0] == Decimal("-0.25")
    higher = Ledger(str(path), load_policy(edited(lambda p: p["budget"].update(epsilon=2.0))))
    higher.reserve(Cost.of(1.0, 0), sql="q", plan="p")
    assert higher.budget().spent_epsilon == 1.75 and higher.budget().total_epsilon == 2.0
    # The earlier connection charges against the total in force now, not the one it opened with.
    lower.reserve(Cost.of(0.25, 0), sql="q", plan="p")
    assert [r[:2] for r in recorded(path)] == [("created", "1"), ("changed", "0.5"), ("changed", "2")]


def test_analysts_and_their_budgets_survive_a_policy_change(tmp_path):
    path = tmp_path / "l.sqlite"
    book = Ledger(str(path), load_policy(BASE))
    token = book.add_analyst("alice", epsilon=0.5)
    book.close()
    again = Ledger(str(path), load_policy(edited(SAFE_CHANGES["bounds"])))
    assert again.authenticate(token) == "alice" and again.budget("alice").total_epsilon == 0.5


# --- what needs the owner's explicit rebind ----------------------------------------------------------

REBINDING = {
    "a root's unit": (lambda p: p["tables"]["people"].update(privacy_unit="household_id"),
                      "tables.people.privacy_unit"),
    "a link": (lambda p: p["tables"]["visits"].update(privacy_unit={"via": "patient", "references": "people.person_id"}),
               "tables.visits.privacy_unit.via"),
    "public to private": (lambda p: p["tables"].update(clinics={"privacy_unit": "clinic_id"}), "tables.clinics"),
    "private to public": (lambda p: p["tables"].update(visits={"public": True}), "tables.visits"),
}


@pytest.mark.parametrize("what", REBINDING)
def test_a_change_of_unit_or_link_is_refused_naming_it_and_writes_nothing(tmp_path, what):
    path = tmp_path / "l.sqlite"
    spend(path, BASE)
    before = path.read_bytes()
    change, named = REBINDING[what]
    with pytest.raises(LedgerError) as info:
        Ledger(str(path), load_policy(edited(change)))
    err = info.value
    assert err.code == "DP404" and named in err.differences and named in err.message
    assert "dpsql ledger rebind" in err.hint and "nothing was spent" in err.message
    assert path.read_bytes() == before


def test_a_dropped_table_cannot_come_back_bound_differently(tmp_path):
    path = tmp_path / "l.sqlite"
    spend(path, BASE)
    Ledger(str(path), load_policy(edited(SAFE_CHANGES["a dropped table"]))).close()
    back = edited(REBINDING["a link"][0])
    with pytest.raises(LedgerError) as info:
        Ledger(str(path), load_policy(back))
    assert info.value.differences == ("tables.visits.privacy_unit.via",)


def test_rebind_is_explicit_recorded_and_stops_connections_on_the_old_units(tmp_path):
    path = tmp_path / "l.sqlite"
    spend(path, BASE)
    old = Ledger(str(path), load_policy(BASE))                       # opened before the rebind
    new_policy = edited(REBINDING["a root's unit"][0])
    assert Ledger(str(path)).rebind(load_policy(new_policy)) == ("tables.people.privacy_unit",)
    assert [r[0] for r in recorded(path)] == ["created", "rebound"]
    with pytest.raises(LedgerError) as info:
        old.reserve(Cost.of(0.1, 0), sql="q", plan="p")
    assert info.value.code == "DP404"
    with pytest.raises(LedgerError):
        Ledger(str(path), load_policy(BASE))                         # back to the old unit: another rebind
    book = Ledger(str(path), load_policy(new_policy))
    book.reserve(Cost.of(0.25, 0), sql="q", plan="p")
    assert book.budget().spent_epsilon == 0.5, "past spends count against the new unit"


def test_rebind_and_history_commands(tmp_path):
    path = tmp_path / "l.sqlite"
    spend(path, BASE)
    new_policy = tmp_path / "new.yaml"
    new_policy.write_text(yaml.safe_dump(edited(REBINDING["a root's unit"][0])))
    runner = CliRunner()
    asked = runner.invoke(cli.main, ["ledger", "rebind", "--ledger", str(path), "--policy", str(new_policy)],
                          input="n\n")
    assert asked.exit_code == 1 and [r[0] for r in recorded(path)] == ["created"], "declined: nothing recorded"
    done = runner.invoke(cli.main, ["ledger", "rebind", "--ledger", str(path), "--policy", str(new_policy), "--yes"])
    assert done.exit_code == 0, done.output
    assert "rebound: tables.people.privacy_unit" in done.stdout
    shown = runner.invoke(cli.main, ["ledger", "history", "--ledger", str(path)])
    assert shown.exit_code == 0 and "rebound" in shown.stdout and "tables.people.privacy_unit" in shown.stdout
    doc = json.loads(runner.invoke(cli.main, ["ledger", "history", "--ledger", str(path), "--format", "json"]).stdout)
    assert [d["kind"] for d in doc] == ["created", "rebound"]
    assert doc[1]["document"]["tables"]["people"]["privacy_unit"] == "household_id"
    missing = runner.invoke(cli.main, ["ledger", "history", "--ledger", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 3 and "error[DP406]" in missing.stderr


# --- dpsql budget with the ledger alone ------------------------------------------------------------

def test_budget_needs_only_the_ledger(tmp_path):
    path = tmp_path / "l.sqlite"
    spend(path, BASE, eps=0.25)
    spend(path, edited(SAFE_CHANGES["the total budget"]), eps=0.5)
    runner = CliRunner()
    shown = runner.invoke(cli.main, ["budget", "--ledger", str(path), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    assert doc["total"]["epsilon"] == 1.5 and doc["spent"]["epsilon"] == 0.75 and len(doc["history"]) == 2
    table = runner.invoke(cli.main, ["budget", "--ledger", str(path)])
    assert table.exit_code == 0 and "0.75" in table.stdout
    # --policy only checks: a changed policy is not recorded by reading the budget.
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump(edited(SAFE_CHANGES["bounds"])))
    assert runner.invoke(cli.main, ["budget", "--ledger", str(path), "--policy", str(policy)]).exit_code == 0
    assert len(recorded(path)) == 2
    none = runner.invoke(cli.main, ["budget", "--ledger", str(tmp_path / "none.sqlite")])
    assert none.exit_code != 0 and "no budget ledger" in none.stderr


# --- replay across a policy change ----------------------------------------------------------------

def test_an_answer_is_replayed_only_under_the_policy_it_was_computed_under(tmp_path):
    db_path = str(tmp_path / "people.duckdb")
    con = duckdb.connect(db_path)
    con.execute("CREATE TABLE people AS SELECT range AS person_id, ['CA', 'NY', 'TX'][1 + range % 3] AS state, "
                "(range % 1000)::DOUBLE AS income FROM range(300)")
    con.close()
    people = {"budget": BASE["budget"], "tables": {"people": BASE["tables"]["people"]}}
    wider = copy.deepcopy(people)
    wider["tables"]["people"]["columns"]["income"]["upper"] = 5000
    ledger = str(tmp_path / "l.sqlite")
    query = "SELECT state, SUM(income) AS total FROM people GROUP BY state"
    first = dpsql.connect(db_path, policy=people, ledger=ledger)
    answer = first.sql(query, epsilon=0.1).fetchall()
    assert first.sql(query, epsilon=0.1).replayed
    plan_before = first.plan(query, 0.1)
    first.close()
    second = dpsql.connect(db_path, policy=wider, ledger=ledger)
    res = second.sql(query, epsilon=0.1)
    assert not res.replayed, "computed under other bounds: a new answer, paid for"
    # The plan signature in the replay key differs too (not only the policy's identity).
    assert replay.plan_signature(res.plan) != replay.plan_signature(plan_before)
    second.close()
    third = dpsql.connect(db_path, policy=people, ledger=ledger)      # back to the first policy
    back = third.sql(query, epsilon=0.1)
    assert back.replayed and back.fetchall() == answer
    assert third.budget.spent_epsilon == pytest.approx(0.2)


# --- format 1 ledgers ------------------------------------------------------------------------------

def _v1_copy(tmp_path) -> Path:
    path = tmp_path / "v1.sqlite"
    shutil.copy(V1_LEDGER, path)
    return path


def _format(path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as con:
        return con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0]


def test_a_format_1_ledger_is_upgraded_in_place_losing_nothing(tmp_path):
    path = _v1_copy(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as con:
        before = con.execute("SELECT * FROM charges ORDER BY id").fetchall()
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    assert meta["format"] == schema.FORMAT_1
    book = Ledger(str(path), load_policy(str(V1_POLICY)))
    state = book.budget()
    assert Decimal(repr(state.spent_epsilon)) == V1_SPENT and state.spent_delta == 1e-7
    assert [c.status for c in state.history] == ["released", "released", "reserved", "failed"]
    assert state.history[0].replays == 1 and all(c.analyst is None for c in state.history)
    assert book.answer(1).num_rows == 3, "a released answer reads back"
    book.close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        assert [r[:-2] for r in con.execute("SELECT * FROM charges ORDER BY id")] == before, "every row as it was"
        after = dict(con.execute("SELECT key, value FROM meta").fetchall())
        assert after == {**meta, "format": schema.FORMAT}, "meta keeps its rows; only the format moves on"
        (created,) = con.execute("SELECT time, kind, identity, total_epsilon FROM policies").fetchall()
        assert created == (meta["created"], "created", meta["policy_identity"], meta["total_epsilon"])
        assert con.execute("SELECT from_format, to_format FROM upgrades").fetchall() == [
            (schema.FORMAT_1, schema.FORMAT)]
        for statement in ("UPDATE charges SET analyst = 'x'", "UPDATE meta SET value = 'x'", "DELETE FROM policies",
                          "UPDATE policies SET total_epsilon = '9'", "DELETE FROM upgrades"):
            with pytest.raises(sqlite3.IntegrityError):
                con.execute(statement)
    assert Ledger(str(path)).budget().total_epsilon == 1.0, "and opens without a policy"


def test_a_format_1_ledger_opens_alone_and_with_a_changed_policy(tmp_path):
    alone = _v1_copy(tmp_path)
    result = CliRunner().invoke(cli.main, ["budget", "--ledger", str(alone), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["spent"]["delta"] == 1e-7
    changed = tmp_path / "changed" / "v1.sqlite"
    changed.parent.mkdir()
    shutil.copy(V1_LEDGER, changed)
    policy = yaml.safe_load(V1_POLICY.read_text())
    policy["budget"]["epsilon"] = 2.0
    book = Ledger(str(changed), load_policy(policy))
    assert book.budget().total_epsilon == 2.0 and [r.kind for r in book.policy_history()] == ["created", "changed"]


def test_budget_of_a_format_1_ledger_alone_in_a_real_process(tmp_path):
    path = _v1_copy(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "dpsql.cli.commands", "budget", "--ledger", str(path), "--format",
                          "json"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert Decimal(repr(doc["spent"]["epsilon"])) == V1_SPENT and len(doc["history"]) == 4
    assert _format(path) == schema.FORMAT


def test_a_format_1_ledger_of_another_unit_is_refused_before_the_upgrade(tmp_path):
    path = _v1_copy(tmp_path)
    before = path.read_bytes()
    policy = yaml.safe_load(V1_POLICY.read_text())
    policy["tables"]["people"]["privacy_unit"] = "state"
    with pytest.raises(LedgerError) as info:
        Ledger(str(path), load_policy(policy))
    assert info.value.code == "DP404" and path.read_bytes() == before and _format(path) == schema.FORMAT_1


def test_an_upgrade_that_fails_midway_changes_nothing(tmp_path, monkeypatch):
    path = _v1_copy(tmp_path)

    def broken(db, fmt):
        raise sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(schema, "set_format", broken)
    with pytest.raises(LedgerError) as info:
        Ledger(str(path), load_policy(str(V1_POLICY)))
    assert info.value.code == "DP406"
    with contextlib.closing(sqlite3.connect(path)) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = [r[1] for r in con.execute("PRAGMA table_info(charges)")]
    assert _format(path) == schema.FORMAT_1 and "analyst" not in columns and "policies" not in tables
    monkeypatch.undo()
    assert Decimal(repr(Ledger(str(path)).budget().spent_epsilon)) == V1_SPENT


def _open_and_spend(path: str) -> str:
    book = Ledger(path, load_policy(str(V1_POLICY)))
    book.reserve(Cost.of(0.001, 0), sql="q", plan="p")
    book.close()
    return "ok"


def test_concurrent_upgrades_by_several_processes_are_safe(tmp_path):
    path = str(_v1_copy(tmp_path))
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(4, mp_context=spawn) as pool:
        assert list(pool.map(_open_and_spend, [path] * 8)) == ["ok"] * 8
    with contextlib.closing(sqlite3.connect(path)) as con:
        assert con.execute("SELECT COUNT(*) FROM upgrades").fetchone() == (1,)
        assert con.execute("SELECT COUNT(*) FROM policies").fetchone() == (1,)
        assert con.execute("SELECT COUNT(*) FROM charges").fetchone() == (12,)
    assert Decimal(repr(Ledger(path).budget().spent_epsilon)) == V1_SPENT + Decimal("0.008")


def test_an_older_dpsql_refuses_an_upgraded_ledger_rather_than_ignore_it(tmp_path):
    """The format 1 reader checked meta.format; the upgrade moves it on, so an old reader fails closed."""
    path = _v1_copy(tmp_path)
    Ledger(str(path)).close()
    old_reader = ("import sqlite3, sys; con = sqlite3.connect(sys.argv[1]); "
                  "fmt = dict(con.execute('SELECT key, value FROM meta'))['format']; "
                  "sys.exit(0 if fmt == 'dpsql-ledger/1' else 7)")
    assert subprocess.run([sys.executable, "-c", old_reader, str(path)]).returncode == 7
