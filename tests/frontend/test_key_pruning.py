"""Public keys pruned by the WHERE's conditions on public tables (issue 24, item 2;
frontend/key_pruning.py): TPC-H Q5 releases the 5 nations of ASIA, read from the public tables alone,
the same key set on neighbouring databases; only many-to-one steps (onto a lookup's unique key) and
inner joins prune."""
import duckdb
import pytest

import dpsql
from dpsql.testing import engine_reads, run
from tests.support.paths import ROOT
from tests.support.tpch import whole

TPCH = ROOT / "benchmarks" / "tpch"
Q5 = (TPCH / "queries" / "q05.sql").read_text()
ASIA = "SELECT n_name FROM nation JOIN region ON n_regionkey = r_regionkey WHERE r_name = 'ASIA' ORDER BY 1"


def connect(con):
    return dpsql.connect(con, policy=str(TPCH / "policy.yaml"), ledger=":memory:")


def test_q5_releases_the_nations_of_asia_only():
    db = connect(whole())
    asia = [r[0] for r in whole().execute(ASIA).fetchall()]
    plan = db.explain(Q5)
    assert len(asia) == 5 and list(plan.group_keys[0].columns[0].keys) == asia
    assert "n_name (5 public keys of the public tables' rows where r_name = 'ASIA')" in \
        str(plan).split("rewritten SQL:")[0]
    assert plan.partitions == 5
    assert sorted(r[0] for r in run(db, Q5).rows) == asia


def test_a_private_row_never_changes_the_released_keys():
    """A neighbour with one more customer, with orders and line items in a nation outside ASIA (and one
    inside): the same keys, the same groups released."""
    def neighbour():
        con = whole()
        con.execute("INSERT INTO customer SELECT 999, 'C999', '', '', 2, 1.00, 'BUILDING', ''")
        con.execute("INSERT INTO orders SELECT 999, 999, 'F', 5.00, DATE '1994-06-01', '1-URGENT', '', 0, ''")
        con.execute("INSERT INTO lineitem SELECT 999, 1 + range % 10, 1 + range % 4, 1, 1, 100, 0, 0, 'N', 'O', "
                    "DATE '1994-07-01', DATE '1994-07-01', DATE '1994-07-01', 'NONE', 'AIR', '' FROM range(30)")
        return con
    keys = [[r[0] for r in run(connect(con), Q5, noise="zero").rows] for con in (whole(), neighbour())]
    assert keys[0] == keys[1] and len(keys[0]) == 5


def test_the_read_touches_public_tables_only():
    db = connect(whole())
    with engine_reads(db) as seen:
        db.explain(Q5)
    reads = [s for s in seen if "DISTINCT" in s]
    assert len(reads) == 1 and all(t not in reads[0].lower() for t in ('"customer"', '"orders"', '"lineitem"'))


@pytest.mark.parametrize("sql", [
    # region is reached from nation, not nation from region (one region has many nations): not pruned
    "SELECT r_name, COUNT(*) AS n FROM customer, nation, region WHERE c_nationkey = n_nationkey "
    "AND n_regionkey = r_regionkey AND n_name = 'NATION3' GROUP BY r_name",
    # a LEFT JOIN's columns may be NULL where nothing matched: not pruned
    "SELECT n_name, COUNT(*) AS n FROM customer LEFT JOIN nation ON c_nationkey = n_nationkey "
    "WHERE n_regionkey = 2 GROUP BY n_name",
])
def test_only_inner_many_to_one_steps_prune(sql):
    keys = connect(whole()).explain(sql).group_keys[0].columns[0]
    assert keys.where is None and len(keys.keys) in (5, 25)


def test_past_the_literal_limit_the_columns_own_keys_serve():
    """A pruned read is never kept and gives at most KEY_LITERALS_MAX (256) keys; more, and the column's
    own keys (a superset, read once per reader) serve: no key table per WHERE an analyst writes."""
    con = duckdb.connect()
    con.execute("CREATE TABLE p AS SELECT range AS k, range * 10 AS g FROM range(300)")
    con.execute("CREATE TABLE t AS SELECT range AS id, range % 300 AS k FROM range(600)")
    db = dpsql.connect(con, policy={"budget": {"epsilon": 10}, "tables": {
        "t": {"privacy_unit": "id", "columns": {"id": {"identifier": True}, "k": {}}}, "p": {"public": True}}},
        ledger=":memory:")
    sql = "SELECT g, COUNT(*) AS n FROM t JOIN p ON t.k = p.k WHERE p.k > {} GROUP BY g"
    few, many = (db.explain(sql.format(n)).group_keys[0].columns[0] for n in (100, 5))
    assert (len(few.keys), few.where) == (199, "p_k > 100")
    assert (len(many.keys), many.where) == (300, None)
    with engine_reads(db) as seen:
        db.explain(sql.format(100).replace("AS n", "AS n2"))
    assert sum("DISTINCT" in s for s in seen) == 1   # read again: not kept
