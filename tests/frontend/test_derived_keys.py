"""Date bounds in the policy, and public group keys derived from bounds (issue 12, item 4).

``lower``/``upper`` of a DATE or TIMESTAMP column may be dates (YAML dates or ISO strings). They make
nothing summable; with them ``YEAR(d)``, ``EXTRACT(YEAR FROM d)`` and ``date_trunc('year'|'quarter'|
'month', d)`` have public keys: every period the bounds touch. ``FLOOR(x / w)`` and ``x // w`` of a
bounded number column likewise: every bin the bounds touch. The groups come from the policy alone,
never from the data; rows outside them are dropped, as rows with an undeclared key are; more than
10,000 groups are not derived (DP304 without delta).
"""
import copy
import datetime

import duckdb
import pytest
import yaml

import dpsql
from dpsql import testing
from dpsql.accounting.identity import canonical, policy_document, policy_identity
from dpsql.frontend.derived import MAX_DERIVED_KEYS
from dpsql.policy import load_policy
from tests.support import sql_tree
from tests.support.checks import refusal
from tests.support.fixture import POLICY, make_database

SHOP = {
    "budget": {"epsilon": 1e6, "delta": 0.5},
    "tables": {"orders": {
        "privacy_unit": "customer", "max_groups_per_unit": 50, "max_rows_per_unit": 10,
        "columns": {
            "day": {"lower": "1992-01-01", "upper": "1998-12-31"},
            "placed": {"lower": "2020-01-01 00:00:00", "upper": "2020-03-31 23:59:59"},
            "price": {"lower": 0, "upper": 1000},
            "qty": {"lower": -25, "upper": 25},
            "status": {"keys": ["F", "O"]},
            "note": {},
        }}},
}


def shop_database(rows: int = 600, extra: str = "") -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"""
        CREATE TABLE orders AS SELECT range % 40 AS customer,
            DATE '1992-01-01' + (range * 7 % 2557)::INTEGER AS day,
            TIMESTAMP '2020-01-01 00:00:00' + to_seconds(range * 12345 % 7776000) AS placed,
            (range * 13 % 1000)::DOUBLE AS price, (range % 51 - 25)::INTEGER AS qty,
            ['F', 'O'][1 + range % 2] AS status, 'n' || range AS note
        FROM range({rows})""")
    if extra:
        con.execute(f"INSERT INTO orders {extra}")
    return con


def connect(con=None, policy=SHOP) -> dpsql.PrivateConnection:
    return dpsql.connect(con if con is not None else shop_database(), ledger=":memory:", policy=copy.deepcopy(policy))


def exact(db, sql, **kw):
    return testing.run(db, sql, noise="identity", **kw).rows


def plain(con, sql):
    return con.execute(sql).fetchall()


# --- date bounds in the policy -------------------------------------------------------------------

def test_date_bounds_are_yaml_dates_or_iso_strings():
    from_yaml = yaml.safe_load("{lower: 1992-01-01, upper: 1998-12-31}")
    for spec in (from_yaml, {"lower": "1992-01-01", "upper": "1998-12-31"}):
        policy = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"d": spec}}}})
        column = policy.tables["t"].columns["d"]
        assert column.dates == (datetime.date(1992, 1, 1), datetime.date(1998, 12, 31))
        assert not column.bounded and column.lower is None   # no number bounds: nothing summable
    timestamps = load_policy(SHOP).tables["orders"].columns["placed"].dates
    assert timestamps == (datetime.datetime(2020, 1, 1), datetime.datetime(2020, 3, 31, 23, 59, 59))


@pytest.mark.parametrize("spec, message", [
    ({"lower": "1992-01-01", "upper": 5}, "upper: must be a date (1992-01-01) like the other bound"),
    ({"lower": "1999-01-01", "upper": "1998-12-31"}, "lower: must be <= upper"),
    ({"lower": "1992-13-01", "upper": "1998-12-31"}, "lower: must be a date (1992-01-01)"),
    ({"lower": "x", "upper": "y"}, "lower: must be a number, or a date (1992-01-01)"),
    ({"lower": "1992-01-01"}, "lower and upper must be given together"),
    ({"lower": "1992-01-01", "upper": "1998-12-31", "identifier": True}, "cannot have keys, bounds"),
])
def test_bad_date_bounds_are_refused_with_their_path(spec, message):
    with pytest.raises(dpsql.DpsqlError) as info:
        load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"d": spec}}}})
    assert info.value.code == "DP501" and "tables.t.columns.d" in info.value.message
    assert message in info.value.message


@pytest.mark.parametrize("column, spec, message", [
    ("note", {"lower": "1992-01-01", "upper": "1998-12-31"}, "date bounds need a DATE or TIMESTAMP column"),
    ("day", {"lower": "1992-01-01 10:00:00", "upper": "1998-12-31"}, "its bounds are days"),
    ("day", {"lower": 0, "upper": 10}, "a DATE or TIMESTAMP column takes dates"),
])
def test_date_bounds_must_fit_the_column(column, spec, message):
    policy = copy.deepcopy(SHOP)
    policy["tables"]["orders"]["columns"][column] = spec
    with pytest.raises(dpsql.DpsqlError) as info:
        connect(policy=policy)
    assert info.value.code == "DP502" and message in info.value.message


def test_date_bounds_make_nothing_summable():
    assert refusal(connect(), "SELECT SUM(day) FROM orders").code == "DP302"


def test_the_ledger_identity_of_policies_without_date_bounds_is_unchanged():
    """Date bounds stand where number bounds would, tagged: other policies keep their document byte for
    byte (tests/policy/test_policy_tables.py pins two identities computed before date bounds existed)."""
    doc = policy_document(load_policy(SHOP))
    assert doc["tables"]["orders"]["columns"]["day"]["lower"] == datetime.date(1992, 1, 1)
    assert '"lower":"date:1992-01-01"' in canonical(doc)
    assert '"upper":"datetime:2020-03-31T23:59:59"' in canonical(doc)
    unbounded = copy.deepcopy(SHOP)
    unbounded["tables"]["orders"]["columns"]["day"] = {}
    assert policy_identity(load_policy(unbounded)) != policy_identity(load_policy(SHOP))
    assert '"date:' not in canonical(policy_document(load_policy(POLICY)))


# --- keys derived from date bounds ---------------------------------------------------------------

@pytest.mark.parametrize("key, groups", [
    ("YEAR(day)", list(range(1992, 1999))),
    ("EXTRACT(YEAR FROM day)", list(range(1992, 1999))),
    ("date_trunc('year', day)", [datetime.datetime(y, 1, 1) for y in range(1992, 1999)]),
    ("date_trunc('quarter', day)", [datetime.datetime(y, m, 1) for y in range(1992, 1999) for m in (1, 4, 7, 10)]),
    ("date_trunc('month', day)", [datetime.datetime(y, m, 1) for y in range(1992, 1999) for m in range(1, 13)]),
    ("date_trunc('month', placed)", [datetime.datetime(2020, m, 1) for m in (1, 2, 3)]),
    ("YEAR(day) - 1990", list(range(2, 9))),
])
def test_calendar_keys_are_the_periods_of_the_bounds(key, groups):
    """Every period the bounds touch is released, with DuckDB's own count (noise off)."""
    con = shop_database()
    db = connect(con)
    sql = f"SELECT {key} AS k, COUNT(*) AS n FROM orders GROUP BY k ORDER BY k"
    rows = exact(db, sql)
    assert [k for k, _ in rows] == groups
    expected = dict(plain(con, sql))
    assert [n for _, n in rows] == [expected.get(k, 0) for k in groups]


def test_explain_says_where_the_keys_come_from():
    plan = connect().explain("SELECT EXTRACT(YEAR FROM day) AS y, SUM(price) FROM orders GROUP BY y")
    text = str(plan)
    assert "years 1992..1998 from the bounds of day (1992-01-01..1998-12-31)" in text
    assert "<= 7 partition(s), every one released" in text
    in_bounds = "\"day\" BETWEEN CAST('1992-01-01' AS DATE) AND CAST('1998-12-31' AS DATE)"
    assert sql_tree.contains(sql_tree.tree(plan), in_bounds), "rows outside the bounds are dropped"


def test_the_groups_come_from_the_policy_never_from_the_data():
    """An empty table, or one with rows in two years only, releases the same seven years."""
    sql = "SELECT YEAR(day) AS y, COUNT(*) AS n FROM orders GROUP BY y ORDER BY y"
    empty = exact(connect(shop_database(rows=0)), sql)
    few = exact(connect(shop_database(rows=2)), sql)
    assert [y for y, _ in empty] == [y for y, _ in few] == list(range(1992, 1999))
    assert all(n == 0 for _, n in empty)


def test_rows_outside_the_derived_groups_are_dropped_like_undeclared_keys():
    outside = "VALUES (1, DATE '1991-12-31', TIMESTAMP '2019-12-31 23:00:00', 1, 0, 'F', 'x'), " \
              "(2, DATE '1999-01-01', TIMESTAMP '2020-04-01 00:00:00', 1, 0, 'F', 'x'), " \
              "(3, 'infinity', 'infinity', 1, 0, 'F', 'x'), (4, NULL, NULL, 1, 0, 'F', 'x')"
    sql = "SELECT YEAR(day) AS y, COUNT(*) AS n FROM orders GROUP BY y ORDER BY y"
    assert exact(connect(shop_database(extra=outside)), sql) == exact(connect(), sql)
    months = "SELECT date_trunc('month', placed) AS m, COUNT(*) AS n FROM orders GROUP BY m ORDER BY m"
    assert exact(connect(shop_database(extra=outside)), months) == exact(connect(), months)


def test_the_periods_a_bound_touches_count_whole():
    """Bounds inside a year still give the whole year: its rows before the lower bound are in it."""
    policy = copy.deepcopy(SHOP)
    policy["tables"]["orders"]["columns"]["day"] = {"lower": "1992-06-15", "upper": "1993-02-01"}
    con = shop_database()
    rows = exact(connect(con, policy), "SELECT YEAR(day) AS y, COUNT(*) AS n FROM orders GROUP BY y")
    assert rows == plain(con, "SELECT YEAR(day), COUNT(*) FROM orders WHERE YEAR(day) IN (1992, 1993) "
                              "GROUP BY 1 ORDER BY 1")


def test_the_bounds_limit_the_partitions_a_person_reaches():
    """L = min(max_groups_per_unit, groups): 7 years, whatever L the policy allows (50)."""
    plan = connect().explain("SELECT YEAR(day) AS y, COUNT(*) FROM orders GROUP BY y")
    assert plan.max_groups == 7 and plan.partitions == 7


def test_a_column_used_outside_a_period_is_not_derived():
    db = connect()
    for sql in ("SELECT YEAR(day) + MONTH(day) AS k, COUNT(*) FROM orders GROUP BY k",
                "SELECT day, COUNT(*) FROM orders GROUP BY day",
                "SELECT MONTH(day) AS m, COUNT(*) FROM orders GROUP BY m"):
        assert refusal(db, sql).code == "DP304"
        assert "private" in str(db.explain(sql, delta=1e-6))   # partition selection with delta, as before


# --- keys derived from number bounds -------------------------------------------------------------

@pytest.mark.parametrize("key, groups", [
    ("FLOOR(price / 100) * 100", [float(b) for b in range(0, 1001, 100)]),
    ("FLOOR(price / 250)", [0.0, 1.0, 2.0, 3.0, 4.0]),
    ("qty // 10", [-2, -1, 0, 1, 2]),                    # DuckDB's // rounds toward zero: -25..25
    ("FLOOR(qty / 10)", [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]),
    ("(qty // 10) * 10 + 5", [-15, -5, 5, 15, 25]),
])
def test_integer_bins_are_the_bins_of_the_bounds(key, groups):
    con = shop_database()
    db = connect(con)
    sql = f"SELECT {key} AS k, COUNT(*) AS n, SUM(price) AS s FROM orders GROUP BY k ORDER BY k"
    rows = exact(db, sql)
    assert [k for k, _, _ in rows] == groups
    expected = {k: n for k, n, _ in plain(con, sql)}
    assert [n for _, n, _ in rows] == [expected.get(k, 0) for k in groups]


def test_fixture_decades():
    """The example of the issue: FLOOR(age / 10) * 10 over age's bounds 0..100."""
    db = dpsql.connect(make_database(), ledger=":memory:", policy=copy.deepcopy(POLICY))
    plan = db.explain("SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM people GROUP BY decade")
    assert plan.partitions == 11 and "11 bins FLOOR(age / 10) = 0..10 from the bounds of age (0..100)" in str(plan)


def test_more_than_ten_thousand_groups_are_not_derived():
    policy = copy.deepcopy(SHOP)
    policy["tables"]["orders"]["columns"]["price"] = {"lower": 0, "upper": 1e6}
    db = connect(policy=policy)
    sql = "SELECT FLOOR(price / 10) AS b, COUNT(*) FROM orders GROUP BY b"
    err = refusal(db, sql)
    assert err.code == "DP304" and f"more than the {MAX_DERIVED_KEYS}" in err.message and "100001 groups" in err.message
    assert "wider bins" in err.hint and sql[err.start:err.end + 1] == "b"
    assert db.explain("SELECT FLOOR(price / 1000) AS b, COUNT(*) FROM orders GROUP BY b").partitions == 1001
    assert "private" in str(db.explain(sql, delta=1e-6))   # with delta: DP partition selection
