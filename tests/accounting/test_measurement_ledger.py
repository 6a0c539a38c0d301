"""The ledger's kept measurements (format 4, issue 26): a format 3 ledger upgraded in place, losing nothing;
kept measurements append-only and written with their charge's release or not at all."""
from __future__ import annotations

import contextlib
import shutil
import sqlite3

import duckdb
import numpy as np
import pytest
import yaml

import dpsql
from dpsql import testing
from dpsql.accounting import schema
from tests.support.paths import ROOT

DATA = ROOT / "tests" / "data"
V3_LEDGER, V3_POLICY = DATA / "ledger_v3.sqlite", DATA / "ledger_v3_policy.yaml"
COUNTS = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


def v3_database() -> duckdb.DuckDBPyConnection:
    """The database tests/data/ledger_v3.sqlite's charges were made on (data_version "v3-fixture")."""
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT range AS person_id, ['F','M'][1 + range % 2] AS sex, "
                "['CA','NY','TX'][1 + range % 3] AS state, (range * 37 % 1000)::DOUBLE AS income FROM range(300)")
    con.execute("CREATE TABLE clinics AS SELECT 'a' AS name")
    return con


def v3_copy(tmp_path):
    path = tmp_path / "v3.sqlite"
    shutil.copy(V3_LEDGER, path)
    return path


def connect(path, seed=1):
    return dpsql.connect(v3_database(), policy=yaml.safe_load(V3_POLICY.read_text()), ledger=str(path),
                         rng=np.random.default_rng(seed), data_version="v3-fixture")


def test_a_format_3_ledger_is_upgraded_to_4_in_place_losing_nothing(tmp_path):
    path = v3_copy(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as con:
        before = con.execute("SELECT * FROM charges ORDER BY id").fetchall()
        assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == schema.FORMAT_3
    db = connect(path)
    assert db.budget.spent_epsilon == 0.375
    # Its answers replay as before (byte-identical), free; an old charge kept no measurements, so a
    # renamed query pays once, and then its measurements replay.
    assert db.sql(COUNTS, epsilon=0.25).replayed
    assert not db.sql(COUNTS.replace("AS n", "AS m"), epsilon=0.25).replayed
    assert db.sql(COUNTS.replace("AS n", "AS k"), epsilon=0.25).replayed
    assert db.budget.spent_epsilon == 0.625
    testing.ledger(db).close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        assert [r[:10] for r in con.execute("SELECT * FROM charges WHERE id <= 2 ORDER BY id")] == \
            [r[:10] for r in before], "every row as it was (but the replay count)"
        assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == schema.FORMAT
        assert con.execute("SELECT from_format, to_format FROM upgrades").fetchall()[-1] == (schema.FORMAT_3,
                                                                                              schema.FORMAT)
        assert con.execute("SELECT charge FROM measurements").fetchall() == [(3,)], "the renamed query's one count (charge 4 replayed it at 0)"
        for statement in ("UPDATE measurements SET released = x''", "DELETE FROM measurements"):
            with pytest.raises(sqlite3.IntegrityError):
                con.execute(statement)


def test_a_new_ledger_and_an_upgraded_one_have_one_schema(tmp_path):
    made = tmp_path / "new.sqlite"
    connect(made).sql(COUNTS, epsilon=0.25)
    upgraded = v3_copy(tmp_path)
    connect(upgraded).sql(COUNTS, epsilon=0.25)

    def tables(path):
        with contextlib.closing(sqlite3.connect(path)) as con:
            return sorted(con.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
    assert tables(made) == tables(upgraded)


def test_kept_measurements_are_written_with_the_release_or_not_at_all(tmp_path):
    path = tmp_path / "l.sqlite"
    db = connect(path)
    db.sql(COUNTS, epsilon=0.25)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        # A write of the measurements that fails (here a trigger; a full disk alike) fails the release
        # with it: the charge stays reserved (spent, with a warning) and nothing is kept without it.
        con.execute("CREATE TRIGGER boom BEFORE INSERT ON measurements BEGIN SELECT RAISE(ABORT, 'boom'); END")
    with pytest.warns(RuntimeWarning, match="counts as spent"):
        db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=0.25)
    assert [(c.status, c.epsilon) for c in db.budget.history] == [("released", 0.25), ("reserved", 0.25)]
    with contextlib.closing(sqlite3.connect(path)) as con:
        assert con.execute("SELECT charge FROM measurements").fetchall() == [(1,)]
        assert con.execute("SELECT answer IS NULL FROM charges WHERE id = 2").fetchone() == (1,)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        con.execute("DROP TRIGGER boom")
    assert not db.sql("SELECT state, COUNT(*) AS m FROM people GROUP BY state", epsilon=0.25).replayed
