"""Join and correlation conditions between columns of different types (issue 20, finding 1): every one
is written by the comparison builder (dpsql/sql/compare.py), so no row can make it fail.

D holds ordinary orders; D' adds one customer whose order carries the extreme values (DATE
9999-12-31 against a TIMESTAMP_NS, a DATE of the year 294248 against a TIMESTAMP, a BIGINT of 1e18
against a DECIMAL(38,20)). Each query answers on both, with the same zero-noise release."""
import duckdb
import pytest

import dpsql
from dpsql import testing
from tests.support import sql_tree

POLICY = {"budget": {"epsilon": 1000}, "tables": {
    "customer": {"privacy_unit": "c_custkey", "columns": {"c_seg": {"keys": ["a", "b"]}}},
    "orders": {"privacy_unit": {"via": "o_custkey", "references": "customer.c_custkey"}, "max_rows_per_unit": 100,
               "columns": {"o_date": {}, "o_big": {}, "o_small": {}}},
    "lineitem": {"privacy_unit": {"via": "l_orderkey", "references": "orders.o_orderkey"}, "max_rows_per_unit": 100,
                 "columns": {"l_ts": {}, "l_qty": {"lower": 0, "upper": 10}}},
    "refunds": {"privacy_unit": {"via": "r_orderkey", "references": "orders.o_orderkey"}, "max_rows_per_unit": 100,
                "columns": {}},
    "holidays": {"public": True},
    "rates": {"public": True},
    "nation": {"public": True},
}}


def database(extreme: bool) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE customer AS SELECT range AS c_custkey, ['a', 'b'][1 + range % 2] AS c_seg FROM range(5)")
    con.execute("""CREATE TABLE orders AS SELECT range AS o_orderkey, range % 5 AS o_custkey,
                   DATE '2020-01-01' + range::INTEGER AS o_date, range * 10 AS o_big, (range % 4)::TINYINT AS o_small
                   FROM range(20)""")
    con.execute("""CREATE TABLE lineitem AS SELECT (range % 20)::BIGINT AS l_orderkey,
                   TIMESTAMP '2020-01-01' + INTERVAL (range % 30) DAY AS l_ts, (range % 7)::DOUBLE AS l_qty FROM range(60)""")
    con.execute("CREATE TABLE refunds AS SELECT (range % 20)::DOUBLE AS r_orderkey FROM range(10)")
    con.execute("CREATE TABLE holidays (h_day TIMESTAMP_NS, h_name VARCHAR)")
    con.execute("INSERT INTO holidays VALUES ('2020-01-03', 'x'), ('2020-01-05', 'y')")
    con.execute("CREATE TABLE rates (r_key DECIMAL(38,20), r_rate DOUBLE)")
    con.execute("INSERT INTO rates VALUES (10, 1.5), (30, 2.5), (999999999999999999, 3.5)")
    con.execute("CREATE TABLE nation AS SELECT range::BIGINT AS n_nationkey, 'N' || range AS n_name FROM range(5)")
    if extreme:
        con.execute("INSERT INTO customer VALUES (99, 'a')")
        con.execute("INSERT INTO orders VALUES (99, 99, DATE '9999-12-31', 1000000000000000000, 3), "
                    "(98, 99, '294248-01-01'::DATE, 9223372036854775807, -128)")
        con.execute("INSERT INTO lineitem VALUES (99, TIMESTAMP '2020-01-03', 1), (98, '294247-01-10'::TIMESTAMP, 2)")
    return con


def connect(extreme: bool) -> dpsql.PrivateConnection:
    return dpsql.connect(database(extreme), policy=POLICY, ledger=":memory:")


@pytest.fixture(scope="module")
def sides():
    return connect(False), connect(True)


FINDING_1 = [
    "SELECT COUNT(*) FROM orders JOIN holidays ON o_date = h_day",
    "SELECT COUNT(*) FROM orders, holidays WHERE o_date = h_day",
    "SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM holidays WHERE h_day = o_date)",
    "SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM holidays WHERE h_day < o_date)",
    "SELECT COUNT(*) FROM orders WHERE o_date IN (SELECT h_day FROM holidays)",
    "SELECT COUNT(*) FROM orders WHERE o_date NOT IN (SELECT h_day FROM holidays)",
    "SELECT COUNT(*) FROM orders JOIN rates ON o_big = r_key",
    "SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM rates WHERE r_key > o_big)",
    "SELECT COUNT(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey AND l_ts = o_date",
    "SELECT COUNT(*) FROM lineitem l, orders o WHERE l.l_orderkey = o.o_orderkey AND l.l_ts > o.o_date",
    "SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_ts < o_date)",
    "SELECT n_name, COUNT(*) FROM orders JOIN nation ON o_small = n_nationkey GROUP BY n_name",
]


@pytest.mark.parametrize("sql", FINDING_1)
def test_a_condition_between_two_types_answers_on_both_neighbours(sides, sql):
    """The extreme order fails every one of these unguarded; with the builder both sides answer, and
    with the noise at zero release the same rows."""
    releases = [testing.run(db, sql, noise="zero").rows for db in sides]
    assert releases[0] == releases[1]
    exact = [testing.run(db, sql, noise="identity").rows for db in sides]
    assert all(isinstance(v, int) for rows in exact for row in rows for v in row[-1:])


def test_the_fallible_side_is_cast_under_try_cast_and_the_join_stays_an_equality(sides):
    lowered = sql_tree.tree(testing.lower(sides[0], FINDING_1[0]))
    assert sql_tree.contains(lowered, 'TRY_CAST("orders"."o_date" AS TIMESTAMP_NS) = "holidays"."h_day"')
    lowered = sql_tree.tree(testing.lower(sides[0], FINDING_1[6]))
    assert sql_tree.contains(lowered, 'TRY_CAST("orders"."o_big" AS DECIMAL(38, 20)) = CAST("rates"."r_key" AS DECIMAL(38, 20))')


def test_the_answer_is_duckdbs_where_duckdb_has_one(sides):
    """On D (no extreme value) the builder's comparisons give plain DuckDB's counts."""
    con = database(False)
    for sql in FINDING_1[:-1]:
        assert testing.run(sides[0], sql).rows == con.execute(sql).fetchall(), sql


def test_the_links_dpsql_adds_are_written_by_the_builder():
    """refunds reach their person through a DOUBLE key against orders' BIGINT: the join dpsql adds
    compares in DOUBLE, the form orders.o_orderkey was checked unique in."""
    db = connect(False)
    lowered = sql_tree.tree(testing.lower(db, "SELECT COUNT(*) FROM refunds"))
    assert sql_tree.contains(lowered, '"refunds"."r_orderkey" = CAST("__path1"."o_orderkey" AS DOUBLE)')
    assert testing.run(db, "SELECT COUNT(*) FROM refunds").rows == [(10,)]


@pytest.mark.parametrize("sql,code,caret", [
    # siblings under orders.o_orderkey with keys of two types: equal as DOUBLEs, not as keys
    ("SELECT COUNT(*) FROM lineitem WHERE EXISTS (SELECT * FROM refunds WHERE r_orderkey = l_orderkey)", "DP206",
     "r_orderkey = l_orderkey"),
    ("SELECT COUNT(*) FROM orders JOIN holidays ON o_date = h_name", "DP306", "o_date = h_name"),
    ("SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM holidays WHERE h_name < o_big)", "DP306",
     "h_name < o_big"),
    ("SELECT COUNT(*) FROM orders JOIN nation ON orders.o_nope = n_nationkey", "DP202", "orders.o_nope = n_nationkey"),
])
def test_conditions_that_cannot_be_made_total_or_tie_two_persons_are_refused(sides, sql, code, caret):
    with pytest.raises(dpsql.DpsqlError) as info:
        sides[0].explain(sql)
    err = info.value
    assert err.code == code, err.format()
    assert sql[err.start:err.end + 1] == caret, err.format()


def test_a_link_between_a_time_zone_and_a_naive_timestamp_is_a_set_up_error():
    con = duckdb.connect()
    con.execute("CREATE TABLE a (k TIMESTAMPTZ)")
    con.execute("CREATE TABLE b (k TIMESTAMP)")
    policy = {"budget": {"epsilon": 1}, "tables": {"a": {"privacy_unit": "k"},
                                                   "b": {"privacy_unit": {"via": "k", "references": "a.k"}}}}
    with pytest.raises(dpsql.DpsqlError) as info:
        dpsql.connect(con, policy=policy, ledger=":memory:")
    assert info.value.code == "DP502" and "TIMESTAMP WITH TIME ZONE" in info.value.message
