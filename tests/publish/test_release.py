"""A release (issue 26, item 3): its files and manifest, a dry run that spends and writes nothing, a re-run
that spends nothing and writes the same bytes, refusals that spend nothing, a statistic that fails after
its charge, and a release killed half-way that resumes paying again only for what was not released."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

import dpsql
from dpsql import testing
from dpsql.errors import BudgetExceeded, DpsqlError
from tests.support.checks import edited
from tests.support.paths import ROOT


def files_of(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_release_writes_each_statistic_and_its_manifest(tmp_path, people, spec):
    db = dpsql.connect(people[0], policy=people[1])
    release = dpsql.publish(spec, db, tmp_path / "out")
    assert release.complete and release.replayed == [] and release.spent == (2.0, 0.0)
    assert sorted(files_of(tmp_path / "out")) == ["by_sex.parquet", "income.parquet", "manifest.json", "report.html",
                                                  "report.md", "total.parquet"]
    doc = json.loads((tmp_path / "out" / "manifest.json").read_text())
    history = {c.id: c for c in db.budget.history}
    assert doc["status"] == "complete" and doc["policy"] == db.ledger.identity
    assert doc["dpsql_version"] == dpsql.__version__ and doc["budget"] == {"epsilon": 2.0, "delta": 1e-6}
    assert doc["data_version"].startswith("hmac-sha256:") and db.data_version not in json.dumps(doc)
    assert sorted(doc["charges"]) == sorted(history) and doc["spent"]["epsilon"] == pytest.approx(2.0)
    by_sex, income, total = doc["statistics"]
    assert [by_sex["epsilon"], income["epsilon"], total["epsilon"]] == pytest.approx([1.0, 0.5, 0.5])
    assert by_sex["share"] == pytest.approx(0.5) and by_sex["rows"] == 2 and by_sex["file"] == "by_sex.parquet"
    assert history[by_sex["charge"]].time == by_sex["charged_at"] and history[by_sex["charge"]].status == "released"
    assert "COUNT(*)" in by_sex["plan"]["summary"] and "rewritten SQL" not in by_sex["plan"]["text"]
    n = next(o for o in by_sex["outputs"] if o["name"] == "n")
    assert n["expected_error"] == pytest.approx(db.plan(spec["statistics"][0]["sql"], 1.0, ci=0.95).measurements[0].error)
    assert n["ci"] == ["n_ci_low", "n_ci_high"] and n["confidence"] == 0.95
    table = pq.read_table(tmp_path / "out" / "by_sex.parquet")
    assert table.column_names == by_sex["columns"] == ["sex", "n", "n_ci_low", "n_ci_high"]
    assert table.equals(dpsql.connect(people[0], policy=people[1]).sql(spec["statistics"][0]["sql"], 1.0,
                                                                        ci=0.95).arrow())   # its replay


def test_a_dry_run_spends_nothing_and_writes_nothing(tmp_path, people, spec):
    db = dpsql.connect(people[0], policy=people[1])
    release = dpsql.publish(spec, db, tmp_path / "out", dry_run=True)
    assert release.manifest is None and release.preview.fits and release.written == {}
    assert [float(x) for x in release.preview.charge] == [2.0, 0.0]
    assert [p.epsilon for p in release.preview.planned] == pytest.approx([1.0, 0.5, 0.5])
    assert db.budget.queries == 0 and not (tmp_path / "out").exists()
    assert not os.path.exists(db.ledger.path) and not os.path.exists(f"{db.ledger.path}.publish-key")
    too_much = edited(spec, "budget.epsilon", 20.0)   # the policy's total is 10
    assert not dpsql.publish(too_much, db, tmp_path / "out", dry_run=True).preview.fits


def test_a_rerun_spends_nothing_and_writes_the_same_bytes(tmp_path, people, spec):
    for fmt in ("parquet", "csv"):
        out = tmp_path / fmt
        first = dpsql.publish(spec, people[0], out, policy=people[1], format=fmt)
        before = files_of(out)
        db = dpsql.connect(people[0], policy=people[1])
        spent = db.budget.spent_epsilon
        preview = dpsql.publish(spec, db, out, dry_run=True).preview
        assert all(p.replays for p in preview.planned) and [float(x) for x in preview.charge] == [0.0, 0.0]
        again = dpsql.publish(spec, db, out, format=fmt)
        assert again.spent == (0, 0) and sorted(again.replayed) == ["by_sex", "income", "total"]
        assert db.budget.spent_epsilon == spent and files_of(out) == before
        assert first.manifest == again.manifest


def test_the_duckdb_format_writes_one_table_per_statistic(tmp_path, people, spec):
    dpsql.publish(spec, people[0], tmp_path, policy=people[1], format="duckdb")
    con = duckdb.connect(str(tmp_path / "release.duckdb"), read_only=True)
    assert sorted(r[0] for r in con.sql("SHOW TABLES").fetchall()) == ["by_sex", "income", "total"]
    assert con.execute("SELECT COUNT(*) FROM by_sex").fetchall() == [(2,)]
    assert json.loads((tmp_path / "manifest.json").read_text())["statistics"][0]["file"] == "release.duckdb:by_sex"


def test_a_release_that_does_not_fit_or_is_refused_spends_nothing(tmp_path, people, spec):
    db = dpsql.connect(people[0], policy=people[1])
    with pytest.raises(BudgetExceeded):
        dpsql.publish(edited(spec, "budget.epsilon", 20.0), db, tmp_path / "a")
    with pytest.raises(DpsqlError) as refused:
        dpsql.publish(edited(spec, "statistics.1.sql", "SELECT ssn, COUNT(*) FROM people GROUP BY ssn"), db,
                      tmp_path / "b")
    assert refused.value.code == "DP203" and "'income'" in refused.value.message
    assert db.budget.queries == 0 and list((tmp_path / "a").iterdir()) == list((tmp_path / "b").iterdir()) == []


def test_a_statistic_that_fails_after_its_charge_leaves_the_release_incomplete(tmp_path, people, spec):
    db = dpsql.connect(people[0], policy=people[1])
    runs = []

    def second_fails() -> None:   # the second statistic's draw: each runs its draw, then its outputs
        runs.append(1)
        if len(runs) == 3:
            raise duckdb.OutOfMemoryException("out of memory")
    with testing.before_run(db, second_fails):
        release = dpsql.publish(spec, db, tmp_path)
    assert not release.complete and list(release.failed) == ["income"] and release.failed["income"].code == "DP900"
    doc = release.manifest
    assert doc["status"] == "incomplete" and doc["statistics"][1]["status"] == "failed"
    statuses = {c.id: c.status for c in db.budget.history}
    assert [statuses[s["charge"]] for s in doc["statistics"]] == ["released", "failed", "released"]
    assert doc["spent"]["epsilon"] == pytest.approx(2.0) and sorted(doc["charges"]) == sorted(statuses)
    assert "income.parquet" not in files_of(tmp_path) and "income" in (tmp_path / "report.html").read_text()
    assert db.budget.spent_epsilon == pytest.approx(2.0)   # the failed one stays spent
    resumed = dpsql.publish(spec, db, tmp_path)
    assert resumed.complete and sorted(resumed.replayed) == ["by_sex", "total"]
    assert resumed.spent == (0.5, 0.0) and db.budget.spent_epsilon == pytest.approx(2.5)


KILLED = """
import os, signal, sys
import dpsql
from dpsql import testing
db = dpsql.connect(sys.argv[1], policy=sys.argv[2])
runs = []
def kill_at_second():   # the second statistic's draw: each statistic runs its draw, then its outputs
    runs.append(1)
    if len(runs) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
with testing.before_run(db, kill_at_second):
    dpsql.publish(eval(sys.argv[3]), db, sys.argv[4])
"""


def test_a_release_killed_half_way_resumes_paying_only_for_what_was_not_released(tmp_path, people, spec):
    """SIGKILL after the first statistic was released: the batch had reserved all three, the ledger keeps
    the first released and the two others reserved (spent). The re-run replays the first and charges the
    two others again (their noise may have been drawn: see publish/release.py); a third run is free."""
    out = tmp_path / "out"
    child = subprocess.run([sys.executable, "-c", KILLED, people[0], people[1], repr(spec), str(out)],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=300)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    db = dpsql.connect(people[0], policy=people[1])
    assert [c.status for c in db.budget.history] == ["released", "reserved", "reserved"]
    assert not (out / "manifest.json").exists() and (out / ".dpsql-pending.json").exists()
    preview = dpsql.publish(spec, db, out, dry_run=True).preview   # from the run's pending note
    assert [p.replays for p in preview.planned] == [True, False, False]
    assert [float(x) for x in preview.charge] == [1.0, 0.0]
    resumed = dpsql.publish(spec, db, out)
    assert resumed.complete and resumed.replayed == ["by_sex"] and resumed.spent == (1.0, 0.0)
    assert db.budget.spent_epsilon == pytest.approx(3.0)
    written = files_of(out)
    assert ".dpsql-pending.json" not in written
    third = dpsql.publish(spec, db, out)
    assert third.spent == (0, 0) and files_of(out) == written and db.budget.spent_epsilon == pytest.approx(3.0)


def test_neighbouring_databases_give_the_same_manifest_but_for_the_values(tmp_path, people, spec):
    """D and D' (one person fewer): a release's manifest differs only where a value of the data goes in,
    each keyed (the data version, the replay keys) or the ledger's own record (times, ids); plans, costs,
    outputs, expected errors, rows and columns are the same, so nothing else about the data is told."""
    other = tmp_path / "neighbour.duckdb"
    con = duckdb.connect(str(other))
    con.execute(f"ATTACH '{people[0]}' AS d (READ_ONLY)")
    con.execute("CREATE TABLE people AS SELECT * FROM d.people WHERE person_id <> 1")
    con.close()
    docs = [dpsql.publish(spec, db, tmp_path / name, policy=people[1]).manifest
            for db, name in ((people[0], "d"), (str(other), "d2"))]
    varying = {"data_version", "times", "replay", "charged_at", "charges", "charge"}

    def fixed(doc):
        return json.loads(json.dumps(doc), object_hook=lambda o: {k: v for k, v in o.items() if k not in varying})
    assert fixed(docs[0]) == fixed(docs[1])
    assert docs[0]["data_version"] != docs[1]["data_version"]


def test_a_statistic_over_public_tables_only_takes_no_share(tmp_path):
    """It is answered exactly at epsilon 0: the budget is split over the others alone, and it has no charge."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS id, range % 3 AS g FROM range(100)")
    con.execute("CREATE TABLE states AS SELECT range AS k, 's' || range AS name FROM range(3)")
    db = dpsql.connect(con, ledger=":memory:", policy={"budget": {"epsilon": 5}, "tables": {
        "t": {"privacy_unit": "id", "columns": {"g": {"keys": [0, 1, 2]}}}, "states": {"public": True}}})
    spec = {"budget": {"epsilon": 1}, "statistics": [{"name": "states", "sql": "SELECT k, name FROM states"},
                                                     {"name": "g", "sql": "SELECT g, COUNT(*) AS n FROM t GROUP BY g"}]}
    release = dpsql.publish(spec, db, tmp_path)
    states, g = release.manifest["statistics"]
    assert (states["epsilon"], states["charge"], states["rows"]) == (0.0, None, 3)
    assert g["epsilon"] == 1.0 and release.spent == (1.0, 0.0) and db.budget.spent_epsilon == 1.0
    assert dpsql.publish(spec, db, tmp_path).spent == (0.0, 0.0)


def test_a_release_without_intervals(tmp_path, people, spec):
    """``ci: null``: the tables hold the estimates alone; the manifest still gives each expected error."""
    doc = dpsql.publish({**spec, "ci": None}, people[0], tmp_path, policy=people[1]).manifest
    by_sex = doc["statistics"][0]
    assert doc["ci"] is None and by_sex["columns"] == ["sex", "n"] and pq.read_table(tmp_path / "by_sex.parquet").num_columns == 2
    assert [o["ci"] for o in by_sex["outputs"]] == [None, None] and by_sex["outputs"][1]["expected_error"] > 0
    assert "<svg" in (tmp_path / "report.html").read_text()   # the estimates alone, charted


def test_the_directory_holds_one_release(tmp_path, people, spec):
    """A statistic dropped from the spec (or written in another format now) loses its file; files the
    manifest did not write stay."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.csv").write_text("mine")
    dpsql.publish(spec, people[0], out, policy=people[1])
    smaller = {**spec, "statistics": spec["statistics"][:2]}
    dpsql.publish(smaller, people[0], out, policy=people[1], format="csv")
    assert sorted(files_of(out)) == ["by_sex.csv", "income.csv", "manifest.json", "notes.csv", "report.html",
                                     "report.md"]
