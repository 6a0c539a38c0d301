"""Public tables join only as lookups (issue 20, finding 3): reached from the private tables by
equalities whose columns are unique in the public table as compared, so no person's rows are
multiplied before contribution bounding. Anything else is refused (DP207) before anything runs.

``SELECT MEDIAN(c_acctbal) FROM customer, nation n0, ..., nation n4 WHERE c_acctbal > 9999`` ran out
of memory on the neighbour holding the one customer above 9999 (8 bytes x 25**5 per matching row)."""
import duckdb
import pytest
from sqlglot import exp

import dpsql
from dpsql import testing
from dpsql.engines import duckdb_schema
from tests.support import sql_tree

POLICY = {"budget": {"epsilon": 1000}, "tables": {
    "customer": {"privacy_unit": "c_custkey", "columns": {
        "c_nationkey": {}, "c_partkey": {}, "c_suppkey": {}, "c_big": {}, "c_acctbal": {"lower": -1000, "upper": 10000}}},
    "orders": {"privacy_unit": {"via": "o_custkey", "references": "customer.c_custkey"}, "max_rows_per_unit": 10,
               "columns": {"o_suppkey": {}, "o_flag": {"keys": ["a", "b"]}}},
    "nation": {"public": True},
    "region": {"public": True},
    "supplier": {"public": True},
    "partsupp": {"public": True},
    "bigkeys": {"public": True},
}}


def database(primary: bool = False) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("""CREATE TABLE customer AS SELECT range AS c_custkey, range % 5 AS c_nationkey, range % 4 AS c_partkey,
                   range % 3 AS c_suppkey, (range * 1.5)::DOUBLE AS c_big, (range * 100)::DOUBLE AS c_acctbal
                   FROM range(12)""")
    con.execute("""CREATE TABLE orders AS SELECT range AS o_orderkey, range % 12 AS o_custkey, range % 3 AS o_suppkey,
                   ['a', 'b'][1 + range % 2] AS o_flag FROM range(40)""")
    con.execute(f"CREATE TABLE nation (n_nationkey BIGINT{' PRIMARY KEY' if primary else ''}, n_name VARCHAR, "
                "n_regionkey BIGINT)")
    con.execute("INSERT INTO nation SELECT range, 'N' || range, range % 2 FROM range(5)")
    con.execute("CREATE TABLE region AS SELECT range AS r_regionkey, 'R' || range AS r_name FROM range(2)")
    con.execute("CREATE TABLE supplier AS SELECT range AS s_suppkey, range % 5 AS s_nationkey FROM range(3)")
    con.execute("CREATE TABLE partsupp AS SELECT p.range AS ps_partkey, s.range AS ps_suppkey, "
                "(p.range * 10 + s.range)::DOUBLE AS ps_cost FROM range(4) p, range(3) s")
    # unique as BIGINTs, one value as DOUBLEs (the type customer.c_big compares them in)
    con.execute("CREATE TABLE bigkeys AS SELECT (2 ** 60)::BIGINT + range AS b_key FROM range(2)")
    return con


@pytest.fixture(scope="module")
def db():
    return dpsql.connect(database(), policy=POLICY, ledger=":memory:")


ANSWERED = [
    "SELECT n_name, COUNT(*) FROM customer JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name",
    "SELECT r_name, COUNT(*) FROM customer, nation, region WHERE c_nationkey = n_nationkey "
    "AND n_regionkey = r_regionkey GROUP BY r_name",
    # nation reached through supplier (TPC-H Q5's shape: supplier joined on two columns, one unique)
    "SELECT n_name, COUNT(*) FROM orders, customer, supplier, nation WHERE o_custkey = c_custkey "
    "AND o_suppkey = s_suppkey AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey GROUP BY n_name",
    # a pair unique together (TPC-H Q9's partsupp)
    "SELECT SUM(ps_cost, contribution_bounds_per_row => (0, 100)) FROM customer JOIN partsupp "
    "ON c_partkey = ps_partkey AND c_suppkey = ps_suppkey",
    # an equality that every branch of an OR states joins the tables (TPC-H Q19's shape)
    "SELECT COUNT(*) FROM customer, nation WHERE (c_nationkey = n_nationkey AND n_name = 'N1') "
    "OR (c_nationkey = n_nationkey AND c_acctbal > 500)",
    "SELECT COUNT(*) FROM customer LEFT JOIN nation ON c_nationkey = n_nationkey AND n_name = 'N1'",
    "SELECT COUNT(*) FROM nation JOIN customer ON n_nationkey = c_nationkey",
    "SELECT COUNT(*) FROM customer JOIN nation n1 ON c_nationkey = n1.n_nationkey "
    "JOIN nation n2 ON n1.n_nationkey = n2.n_nationkey",
]


@pytest.mark.parametrize("sql", ANSWERED)
def test_a_public_table_joined_on_its_key_is_a_lookup_and_answers_what_duckdb_does(db, sql):
    """Each customer row meets at most one row of each public table: with bounds that clip nothing,
    dpsql's answer is plain DuckDB's."""
    got = testing.run(db, sql).rows
    plain = database().execute(sql.replace(", contribution_bounds_per_row => (0, 100)", "")).fetchall()
    if "GROUP BY" in sql:
        got = [r for r in got if r[1]]
    assert sorted(got) == sorted(plain)


REFUSED = [
    ("SELECT COUNT(*) FROM customer, nation", "nation"),
    ("SELECT MEDIAN(c_acctbal) FROM customer, nation n0, nation n1, nation n2, nation n3, nation n4 "
     "WHERE c_acctbal > 9999", "nation n0"),
    ("SELECT COUNT(*) FROM customer, nation WHERE c_nationkey < n_nationkey", "nation"),
    ("SELECT COUNT(*) FROM customer, nation n1, nation n2 WHERE n1.n_nationkey = n2.n_nationkey", "nation n1"),
    # reached, but on columns that repeat in the public table (checked in the data)
    ("SELECT COUNT(*) FROM customer JOIN nation ON c_nationkey = n_regionkey", "nation"),
    ("SELECT COUNT(*) FROM customer JOIN nation n1 ON c_nationkey = n1.n_nationkey "
     "JOIN nation n2 ON n1.n_regionkey = n2.n_regionkey", "nation n2"),
    ("SELECT COUNT(*) FROM customer JOIN partsupp ON c_suppkey = ps_suppkey", "partsupp"),
    ("SELECT COUNT(*) FROM orders, supplier WHERE o_suppkey = s_suppkey OR o_flag = 'a'", "supplier"),
    # unique as BIGINTs, not as the DOUBLEs customer.c_big compares them in
    ("SELECT COUNT(*) FROM customer JOIN bigkeys ON c_big = b_key", "bigkeys"),
]


@pytest.mark.parametrize("sql,caret", REFUSED)
def test_a_public_table_joined_other_than_as_a_lookup_is_refused_before_anything_runs(db, sql, caret):
    before = db.budget.spent_epsilon
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(sql)
    err = info.value
    assert err.code == "DP207" and err.rule == "public_tables_as_lookups", err.format()
    assert sql[err.start:err.end + 1] == caret, err.format()
    assert db.budget.spent_epsilon == before


def test_the_lookup_is_checked_in_the_compared_form(db):
    lowered = sql_tree.tree(testing.lower(db, "SELECT COUNT(*) FROM customer JOIN nation ON c_big = n_nationkey"))
    (condition,) = [j.args["on"] for j in lowered.find_all(exp.Join) if j.this.name == "nation"]
    assert condition == sql_tree.tree('"customer"."c_big" = CAST("nation"."n_nationkey" AS DOUBLE)')


@pytest.fixture
def scans(monkeypatch):
    calls = []
    real = duckdb_schema.repeats
    monkeypatch.setattr(duckdb_schema, "repeats", lambda con, table, keys: calls.append((table, tuple(keys)))
                        or real(con, table, keys))
    return calls


def test_a_declared_key_is_not_scanned(scans):
    db = dpsql.connect(database(primary=True), policy=POLICY, ledger=":memory:")
    scans.clear()   # the links' keys, at connect
    testing.run(db, ANSWERED[0])
    assert scans == []
    testing.run(db, "SELECT COUNT(*) FROM customer JOIN nation ON c_big = n_nationkey")   # DOUBLE: not exact
    assert scans == [("nation", ('CAST("n_nationkey" AS DOUBLE)',))]


def test_each_analyst_checks_a_lookup_once(scans):
    """Public data only, but the check's cost must not tell one analyst what another asked: it is
    kept per analyst, as plans are."""
    db = dpsql.connect(database(), policy=POLICY, ledger=":memory:")
    testing.ledger(db).add_analyst("a", epsilon=10)
    testing.ledger(db).add_analyst("b", epsilon=10)
    a, b = db.analyst("a"), db.analyst("b")
    scans.clear()   # the links' keys, at connect
    a.explain(ANSWERED[0])
    a.explain(ANSWERED[0] + " ORDER BY 1")
    assert len(scans) == 1
    b.explain(ANSWERED[0])
    assert len(scans) == 2, "b's first lookup is checked, not found in a's"


def test_a_per_person_subquery_carries_its_lookups(db):
    """The subquery's relation is read through a table of one row per person: its lookups are still
    checked (a non-unique one would multiply the rows each person's aggregates read)."""
    inner = "SELECT c_custkey, COUNT(*) AS n FROM customer JOIN nation ON c_nationkey = {} GROUP BY c_custkey"
    with pytest.raises(dpsql.DpsqlError) as info:
        db.explain(f"SELECT COUNT(*) FROM ({inner.format('n_regionkey')}) s")
    assert info.value.code == "DP207"
    assert testing.run(db, f"SELECT COUNT(*) FROM ({inner.format('n_nationkey')}) s").rows == [(12,)]
