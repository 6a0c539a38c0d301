"""Joins (issue 12): private tables joined along their declared links and with public tables, every
joined row attributed to one person, contribution bounding applied after the joins.

The schema is TPC-H's shape in miniature: customer (the unit), orders -> customer, lineitem ->
orders, and a public nation table.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpsql
from dpsql.testing import run
from tests.support import sql_tree
from tests.support.tpch import POLICY, SMALL, database

QUERIES = [
    "SELECT COUNT(*) AS n FROM orders JOIN customer ON o_custkey = c_custkey",
    "SELECT n_name, COUNT(*) AS n, SUM(l_qty) AS q FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
    "JOIN customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name",
    "SELECT c_seg, SUM(l_qty) AS q, AVG(o_total) AS t FROM lineitem l, orders o, customer c "
    "WHERE l.l_orderkey = o.o_orderkey AND o.o_custkey = c.c_custkey AND o_status = 'F' GROUP BY c_seg",
    "SELECT l_flag, SUM(l_qty) AS q, COUNT(*) AS n FROM lineitem GROUP BY l_flag",
    "SELECT COUNT(*) AS n, SUM(o_total) AS t FROM customer LEFT JOIN orders ON c_custkey = o_custkey",
    "SELECT n_name, COUNT(DISTINCT c_custkey) AS people FROM customer JOIN nation ON c_nationkey = n_nationkey "
    "GROUP BY n_name",
    "SELECT o_status, SUM(l_qty) AS q FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY o_status",
    "SELECT seg, SUM(q) AS q FROM (SELECT c_seg AS seg, l_qty AS q FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
    "JOIN customer ON o_custkey = c_custkey WHERE l_flag = 'A') AS shipped GROUP BY seg",
    "SELECT COUNT(*) AS n, COUNT(o_total) AS orders FROM customer LEFT JOIN orders ON c_custkey = o_custkey "
    "AND o_status = 'F' AND o_total > 20",
    # semi- and anti-joins tied to the person (frontend/semijoins.py)
    "SELECT c_seg, COUNT(*) AS n FROM customer WHERE EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey "
    "AND o_total > 30) GROUP BY c_seg",
    "SELECT o_status, COUNT(*) AS n FROM orders WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem WHERE l_qty > 20) "
    "GROUP BY o_status",
    "SELECT COUNT(*) AS n FROM lineitem l1 WHERE NOT EXISTS (SELECT * FROM lineitem l2 "
    "WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_qty > l1.l_qty)",
    "SELECT COUNT(*) AS n FROM customer WHERE c_nationkey NOT IN (SELECT n_nationkey FROM nation WHERE n_name LIKE 'N1%')",
]

# Per-person subqueries (frontend/per_person.py): one row per customer, aggregated with DP outside.
PER_PERSON = (
    "(SELECT c_custkey, COUNT(o_orderkey) AS n, SUM(o_total) AS t FROM customer LEFT JOIN orders "
    "ON c_custkey = o_custkey AND o_status = 'F' GROUP BY c_custkey) AS per")
PROPERTY_ONLY = [   # DuckDB itself does not read contribution bounds: checked by the properties only
    "SELECT COUNT(*) AS people, SUM(n, contribution_bounds_per_row => (0, 10)) AS orders, "
    f"AVG(t, contribution_bounds_per_row => (0, 500)) AS spend FROM {PER_PERSON}",
    f"SELECT n, COUNT(*) AS people FROM {PER_PERSON} GROUP BY n ORDER BY people DESC, n DESC",
]


def connect(con) -> dpsql.PrivateConnection:
    return dpsql.connect(con, policy=POLICY, ledger=":memory:")


@pytest.fixture(scope="module")
def db():
    return connect(database(**SMALL))


@pytest.mark.parametrize("sql", QUERIES)
def test_a_join_along_links_answers_what_duckdb_answers_when_bounding_changes_nothing(sql):
    """With noise off and bounds that clip nothing, the answer is plain DuckDB's."""
    customers = [(c, c % 4, "ab"[c % 2], 5.0) for c in range(6)]
    orders = [(o, o % 6, float(o), "FO"[o % 2]) for o in range(6)]    # one order per customer
    lineitems = [(i, i % 6, float(1 + i % 3), "AR"[i % 2]) for i in range(12)]   # two lines per order
    con = database(customers, orders, lineitems)
    got = run(connect(con), sql, epsilon=1.0).rows
    plain = con.execute(sql).fetchall()
    if "GROUP BY" in sql:   # every public key is released, empty groups as 0
        got = [r for r in got if r[1]]
    assert sorted(map(_rounded, got)) == sorted(map(_rounded, plain))


def _rounded(row):
    return tuple(round(v, 6) if isinstance(v, float) else v for v in row)


def test_a_table_that_reaches_its_unit_through_links_is_joined_to_it_by_dpsql(db):
    """lineitem alone: dpsql adds the join to orders to find each line's customer; the orphan line
    (its order does not exist) belongs to nobody and is dropped."""
    plan = db.explain("SELECT COUNT(*) FROM lineitem")
    assert ("LEFT", "__path1") in sql_tree.joins(sql_tree.tree(plan), "orders")
    assert "privacy unit c_custkey" in str(plan)
    con = database(**SMALL)   # each customer's lines, at most C = 4 of them
    capped = con.execute("SELECT SUM(LEAST(n, 4)) FROM (SELECT o_custkey, COUNT(*) AS n FROM lineitem "
                         "JOIN orders ON l_orderkey = o_orderkey GROUP BY o_custkey)").fetchall()
    assert run(db, "SELECT COUNT(*) AS n FROM lineitem", epsilon=1.0).rows == capped


def test_contribution_bounds_apply_to_the_joined_rows_per_person():
    """One customer with 30 line items in one group: C = 4 of them count (lineitem's C)."""
    con = database([(1, 0, "a", 1.0)], [(10, 1, 1.0, "F")], [(i, 10, 1.0, "A") for i in range(30)])
    assert run(connect(con), "SELECT COUNT(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey").rows == [(4,)]


def test_groups_of_a_public_tables_column_are_all_its_values(db):
    """n_name's keys are nation's distinct names: N4 has no customer and is still released."""
    rows = run(db, QUERIES[5], epsilon=1.0).rows
    assert [r[0] for r in rows] == ["N0", "N1", "N2", "N3", "N4"]
    assert rows[-1][1] == 0


REFUSED = [
    ("SELECT COUNT(*) FROM orders o1 JOIN orders o2 ON o1.o_custkey = o2.o_custkey", "DP206", "o1.o_custkey = o2.o_custkey"),
    ("SELECT COUNT(*) FROM customer, orders", "DP206", "orders"),
    ("SELECT COUNT(*) FROM customer JOIN orders ON c_acctbal = o_total", "DP206", "orders"),
    ("SELECT COUNT(*) FROM customer c JOIN orders o1 ON o1.o_custkey = c.c_custkey "
     "JOIN orders o2 ON o2.o_custkey = c.c_custkey", "DP206", "orders o2"),
    ("SELECT COUNT(*) FROM customer JOIN nation ON c_custkey = n_nationkey", "DP203", "c_custkey = n_nationkey"),
    ("SELECT COUNT(*) FROM customer RIGHT JOIN orders ON c_custkey = o_custkey", "DP204", None),
    ("SELECT COUNT(*) FROM customer JOIN orders USING (c_custkey)", "DP204", None),
    ("SELECT COUNT(*) FROM customer LEFT JOIN orders ON c_custkey = o_custkey AND o_total > c_acctbal", "DP204",
     "o_total > c_acctbal"),
    ("SELECT COUNT(*) FROM customer LEFT JOIN orders ON c_custkey = o_custkey AND o_orderkey > 5", "DP203", "o_orderkey"),
    ("SELECT COUNT(*) FROM customer JOIN nation ON c_seg = n_nationkey", "DP306", "c_seg = n_nationkey"),
    ("SELECT COUNT(*) FROM customer JOIN (SELECT * FROM orders) o ON c_custkey = o_custkey", "DP204", None),
    ("SELECT o_custkey, COUNT(*) FROM orders JOIN customer ON o_custkey = c_custkey GROUP BY o_custkey", "DP203", None),
    ("SELECT COUNT(*) FROM orders JOIN customer ON o_custkey = c_custkey WHERE c_custkey = 3", "DP203", None),
    ("SELECT COUNT(*) FROM orders JOIN customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey "
     "WHERE nope = 1", "DP202", "nope"),
    ("SELECT COUNT(*) FROM customer WHERE EXISTS (SELECT * FROM orders WHERE o_total > 30)", "DP206",
     "EXISTS (SELECT * FROM orders WHERE o_total > 30)"),
    ("SELECT COUNT(*) FROM customer WHERE EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey AND o_orderkey = 3)",
     "DP203", "o_orderkey"),
    ("SELECT COUNT(*) FROM orders WHERE o_orderkey NOT IN (SELECT l_orderkey FROM lineitem)", "DP204", None),
    ("SELECT COUNT(*) FROM customer WHERE EXISTS (SELECT o_custkey FROM orders WHERE o_custkey = c_custkey "
     "GROUP BY o_custkey)", "DP204", None),
    ("SELECT COUNT(*) FROM customer WHERE EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey "
     "AND o_status = c_nationkey)", "DP306", "o_status = c_nationkey"),
    ("SELECT COUNT(*) FROM customer WHERE c_custkey IN (SELECT n_nationkey FROM nation)", "DP203", None),
    ("SELECT COUNT(*) FROM (SELECT o_total FROM orders JOIN customer ON o_custkey = c_custkey) s "
     "JOIN nation ON s.o_total = n_nationkey", "DP102", "customer ON o_custkey = c_custkey"),
]


@pytest.mark.parametrize("sql,code,caret", REFUSED)
def test_joins_that_could_mix_or_multiply_people_are_refused_with_a_code_and_a_caret(db, sql, code, caret):
    with pytest.raises(dpsql.DpsqlError) as info:
        db.explain(sql)
    err = info.value
    assert err.code == code, str(err)
    if caret is not None:
        assert sql[err.start:err.end + 1] == caret, (sql[err.start:err.end + 1], str(err))


def test_a_refused_join_spends_nothing(db):
    before = db.budget.spent_epsilon
    with pytest.raises(dpsql.DpsqlError):
        db.sql("SELECT COUNT(*) FROM customer, orders", epsilon=1.0)
    assert db.budget.spent_epsilon == before


# --- sensitivity on neighbouring databases ---------------------------------------------------------

CUSTOMERS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]), st.floats(-50, 200)), min_size=1,
                     max_size=6)


@st.composite
def databases(draw):
    customers = [(c, *row) for c, row in enumerate(draw(CUSTOMERS))]
    n_orders = draw(st.integers(0, 12))
    orders = [(o, draw(st.integers(0, len(customers))), draw(st.floats(-20, 300)), draw(st.sampled_from("FO")))
              for o in range(n_orders)]
    n_lines = draw(st.integers(0, 30))
    lineitems = [(i, draw(st.integers(0, n_orders)), draw(st.one_of(st.none(), st.floats(-5, 80))),
                  draw(st.sampled_from("AR"))) for i in range(n_lines)]
    return customers, orders, lineitems


def without(customer, customers, orders, lineitems):
    """The neighbour: one customer and every row that reaches them removed."""
    gone = {o[0] for o in orders if o[1] == customer}
    return ([c for c in customers if c[0] != customer], [o for o in orders if o[1] != customer],
            [li for li in lineitems if li[1] not in gone])


def heavy(customers, orders, lineitems):
    """The heavy neighbour: one more customer with many orders and line items, all in one group."""
    c = len(customers) + 100
    new_orders = [(1000 + k, c, 300.0, "F") for k in range(8)]
    new_lines = [(5000 + k, 1000 + k % 8, 80.0, "A") for k in range(60)]
    return customers + [(c, 0, "a", 200.0)], orders + new_orders, lineitems + new_lines


def measurements(rows, sql):
    db = connect(database(*rows))
    exact = run(db, sql, epsilon=1.0, delta=1e-6, stage="measurements")
    names = [m.name for m in exact.plan.measurements if m.kind != "quantile"]
    keys = len(exact.plan.group_keys)
    return exact.plan, {tuple(r[:keys]): dict(zip(names, r[keys:])) for r in exact.rows}


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(databases(), st.sampled_from(QUERIES + PROPERTY_ONLY), st.integers(0, 5), st.booleans())
def test_no_person_moves_a_joined_measurement_by_more_than_its_sensitivity(data, sql, who, heavy_one):
    plan, before = measurements(data, sql)
    neighbour = heavy(*data) if heavy_one else without(who, *data)
    _, after = measurements(neighbour, sql)
    for m in plan.measurements:
        if m.kind == "quantile":
            continue
        moved = sum(abs((before.get(k, {}).get(m.name) or 0) - (after.get(k, {}).get(m.name) or 0))
                    for k in set(before) | set(after))
        assert moved <= m.sensitivity, (sql, m.name, moved, m.sensitivity)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(databases(), st.sampled_from(QUERIES + PROPERTY_ONLY + [q + " ORDER BY 2 DESC LIMIT 2" for q in QUERIES if "GROUP BY" in q]),
       st.integers(0, 5), st.booleans())
def test_with_the_noise_at_zero_neighbours_release_the_same_rows_in_the_same_order(data, sql, who, heavy_one):
    """Whatever one person's rows are, the released rows (how many, which keys, their order) and
    whether the query fails do not depend on them: only the noisy values may."""
    neighbour = heavy(*data) if heavy_one else without(who, *data)
    sides = [run(connect(database(*rows)), sql, epsilon=1.0, delta=1e-6, noise="zero").rows for rows in (data, neighbour)]
    assert sides[0] == sides[1], sql


def test_a_per_person_subquery_gives_one_row_per_person_and_its_values_are_theirs(db):
    """TPC-H Q13's shape: each customer's order count, then a DP count and a clamped sum over customers."""
    con = database(**SMALL)
    want = con.execute("SELECT COUNT(*), SUM(LEAST(GREATEST(n, 0), 10)) FROM (SELECT c_custkey, COUNT(o_orderkey) AS n "
                       "FROM customer LEFT JOIN orders ON c_custkey = o_custkey AND o_status = 'F' GROUP BY c_custkey)"
                       ).fetchall()
    got = run(db, PROPERTY_ONLY[0], epsilon=1.0).rows
    assert [r[:2] for r in got] == [(want[0][0], float(want[0][1]))]
    plan = db.explain(PROPERTY_ONLY[1], delta=1e-6)
    assert "table per: privacy unit c_custkey; L = 1" in str(plan) and plan.selection is not None


@pytest.mark.parametrize("sql,code", [
    ("SELECT COUNT(*) FROM (SELECT c_seg, COUNT(*) AS n FROM customer GROUP BY c_seg) s", "DP206"),
    ("SELECT COUNT(*) FROM (SELECT c_custkey, COUNT(*) AS n FROM customer GROUP BY c_custkey HAVING COUNT(*) > 1) s",
     "DP204"),
    ("SELECT COUNT(*) FROM (SELECT c_custkey, c_seg FROM customer GROUP BY c_custkey) s", "DP102"),
    ("SELECT COUNT(*) FROM (SELECT c_custkey, COUNT(*) AS n FROM customer WHERE c_custkey > 3 GROUP BY c_custkey) s",
     "DP203"),
    ("SELECT SUM(c_custkey) FROM (SELECT c_custkey, COUNT(*) AS n FROM customer GROUP BY c_custkey) s", "DP203"),
])
def test_a_subquery_grouped_by_anything_but_the_person_is_refused(db, sql, code):
    with pytest.raises(dpsql.DpsqlError) as info:
        db.explain(sql)
    assert info.value.code == code, str(info.value)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM (SELECT 1 AS x GROUP BY 1) s",
    "WITH t AS (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS() DISTINCT x.* AS NULL WHERE (NOT (x.* = x.*)) "
    "GROUP BY c_seg, 0 QUALIFY row_number() OVER () = 1) SELECT COUNT(*) FROM t",   # found by hypothesis
])
def test_a_grouped_subquery_that_is_not_per_person_is_refused_not_a_crash(db, sql):
    with pytest.raises(dpsql.DpsqlError):
        db.explain(sql)
