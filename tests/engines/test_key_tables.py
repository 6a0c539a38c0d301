"""Long public key sets live in TEMP tables, not in the SQL: same answers, a short query, any size."""
import datetime

import duckdb
import pytest

import dpsql
from dpsql.engines.duckdb_schema import KEY_LITERALS_MAX
from tests.support import sql_tree
from tests.support.fixture import make_database

EXACT = 1e9   # noise far below 1: counts come back exact


def connect(columns: dict, con=None):
    policy = {"version": 1, "budget": {"epsilon": 1e12, "delta": 1e-6},
              "tables": {"people": {"privacy_unit": "row", "columns": {"ssn": {"identifier": True}, **columns}}}}
    return dpsql.connect(con or make_database(), policy=policy, ledger=":memory:")


ZIPS = [f"{i:05d}" for i in range(300)]     # the data has 00000..00049


def test_a_long_key_set_is_joined_from_a_table_and_every_key_is_released():
    assert len(ZIPS) > KEY_LITERALS_MAX
    db = connect({"zip": {"keys": [z for z in ZIPS if z != "00007"]}})
    res = db.sql("SELECT zip, COUNT(*) AS n FROM people GROUP BY zip", epsilon=EXACT, nonnegative=False)
    rows = res.fetchall()
    assert [r[0] for r in rows] == [z for z in ZIPS if z != "00007"], "every declared key, in order; 00007 dropped"
    exact = dict(make_database().execute("SELECT zip, COUNT(*) FROM people GROUP BY zip").fetchall())
    assert {z: n for z, n in rows} == {z: exact.get(z, 0) for z in ZIPS if z != "00007"}
    assert "00299" not in sql_tree.string_literals(sql_tree.tree(res.plan)) and len(res.plan.rewritten_sql) < 3000


def test_dates_and_expressions_over_a_long_key_set():
    days = [datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(700)]
    db = connect({"joined": {"keys": [d.isoformat() for d in days]}})
    rows = db.sql("SELECT joined, COUNT(*) FROM people GROUP BY joined", epsilon=EXACT).fetchall()
    assert [r[0] for r in rows] == days
    exact = dict(make_database().execute("SELECT joined, COUNT(*) FROM people GROUP BY joined").fetchall())
    assert all(n == exact[d] for d, n in rows)
    years = db.sql("SELECT YEAR(joined) AS y, COUNT(*) FROM people GROUP BY YEAR(joined)", epsilon=EXACT).fetchall()
    assert years == make_database().execute(
        "SELECT YEAR(joined), COUNT(*) FROM people GROUP BY 1 ORDER BY 1").fetchall()


def test_count_distinct_and_mixed_short_and_long_keys():
    db = connect({"zip": {"keys": ZIPS}, "sex": {"keys": ["F", "M"]}})
    (distinct,), = db.sql("SELECT COUNT(DISTINCT zip) FROM people", epsilon=EXACT).fetchall()
    assert distinct == 50
    rows = db.sql("SELECT sex, zip, COUNT(*) FROM people GROUP BY sex, zip", epsilon=EXACT).fetchall()
    assert len(rows) == 2 * len(ZIPS)


def test_a_read_only_database_file_gets_its_key_tables(tmp_path):
    path = tmp_path / "people.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people AS SELECT * FROM (VALUES ('a', '00001'), ('b', '00002')) t(ssn, zip)")
    con.close()
    policy = {"version": 1, "budget": {"epsilon": 1e12},
              "tables": {"people": {"privacy_unit": "row",
                                    "columns": {"ssn": {"identifier": True}, "zip": {"keys": ZIPS}}}}}
    db = dpsql.connect(str(path), policy=policy, ledger=str(tmp_path / "ledger.sqlite"))
    rows = db.sql("SELECT zip, COUNT(*) FROM people GROUP BY zip", epsilon=EXACT).fetchall()
    assert len(rows) == len(ZIPS) and rows[1] == ("00001", 1)


def test_the_key_tables_are_not_readable_by_a_query():
    db = connect({"zip": {"keys": ZIPS}})
    name = db.policy.tables["people"].columns["zip"].key_table
    assert name and name.startswith("__dpsql_keys_")
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(f'SELECT COUNT(*) FROM "{name}"')
    assert info.value.code.startswith("DP2")
