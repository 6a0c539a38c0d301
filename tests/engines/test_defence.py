"""Defence in depth: with the validator bypassed, the locked-down connection still refuses every
file, network and extension attack. (current_setting, duckdb_settings, setseed and CREATE TEMP
MACRO still work on a locked DuckDB connection: for those the validator is the only wall, and the
grammar/reject corpus covers them.)"""
import duckdb
import pytest

import dpsql
from dpsql import testing
from tests.support.fixture import POLICY

ATTACKS = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_parquet('/tmp/x.parquet')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM '/etc/passwd'",
    "COPY (SELECT 1) TO '/tmp/dpsql-attack.csv'",
    "ATTACH '/tmp/dpsql-attack.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "SET disabled_optimizers = ''",
]


@pytest.fixture
def locked(tmp_path):
    path = tmp_path / "people.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people AS SELECT range AS id, range % 2 = 0 AS flag FROM range(10)")
    con.close()
    db = dpsql.connect(path, policy={"budget": {"epsilon": 1}, "tables": {"people": {"privacy_unit": "id"}}},
                       ledger=":memory:")
    return testing.duckdb_connection(db)


@pytest.mark.parametrize("attack", ATTACKS)
def test_file_and_setting_attacks_fail_on_the_execution_connection(locked, attack):
    with pytest.raises(duckdb.Error):
        locked.execute(attack).fetchall()


@pytest.mark.parametrize("statement", ["CREATE TABLE t (x INTEGER)", "INSERT INTO people VALUES (99, true)",
                                       "DELETE FROM people", "DROP TABLE people"])
def test_a_database_file_is_read_only(locked, statement):
    with pytest.raises(duckdb.Error):
        locked.execute(statement)


def test_a_handed_over_connection_is_locked_too():
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT 1 AS id")
    dpsql.connect(con, policy={"budget": {"epsilon": 1}, "tables": {"people": {"privacy_unit": "id"}}},
                  ledger=":memory:")
    for attack in ATTACKS:
        with pytest.raises(duckdb.Error):
            con.execute(attack).fetchall()


@pytest.mark.parametrize("sql", [
    "SELECT current_setting('threads')",
    "SELECT * FROM duckdb_settings()",
    "SELECT setseed(0.5)",
    "CREATE TEMP MACRO dpsql_noise(x) AS x",
    "SELECT COUNT(*) FROM people WHERE current_setting('threads') = '2'",
])
def test_what_the_engine_allows_the_validator_refuses(sql):
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT 1 AS id")
    db = dpsql.connect(con, policy=POLICY | {"tables": {"people": {"privacy_unit": "id"}}}, ledger=":memory:")
    with pytest.raises(dpsql.DpsqlError):
        db.sql(sql)
