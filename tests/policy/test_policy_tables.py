"""Policies of many tables (issue 12, item 1): links towards one privacy unit, public tables, the
checks at load time, against the schema and against the data, and the ledger identity they get."""
import copy
import functools

import duckdb
import pytest
import yaml

import dpsql
from dpsql import testing
from dpsql.accounting.identity import canonical, policy_document, policy_identity
from dpsql.engines import duckdb_schema
from dpsql.errors import PolicyError
from dpsql.policy import Link, load_policy
from tests.support import sql_tree
from tests.support.fixture import POLICY

TPCH = {
    "budget": {"epsilon": 100, "delta": 1e-6},
    "tables": {
        "customer": {"privacy_unit": "c_custkey", "columns": {
            "c_acctbal": {"lower": -1000, "upper": 10000}, "c_mktsegment": {"keys": ["AUTO", "BUILDING"]}}},
        "orders": {"privacy_unit": {"via": "o_custkey", "references": "customer.c_custkey"},
                   "max_groups_per_unit": 2, "max_rows_per_unit": 3, "columns": {
                       "o_totalprice": {"lower": 0, "upper": 1000}, "o_status": {"keys": ["F", "O"]}}},
        "lineitem": {"privacy_unit": {"via": "l_orderkey", "references": "orders.o_orderkey"},
                     "max_groups_per_unit": 4, "max_rows_per_unit": 50, "columns": {
                         "l_quantity": {"lower": 0, "upper": 50}}},
        "nation": {"public": True},
    },
}


def tpch_database(con=None) -> duckdb.DuckDBPyConnection:
    """10 customers; customer k has k orders (so one person holds many); 2 line items an order."""
    con = con or duckdb.connect()
    con.execute("""CREATE TABLE customer AS SELECT range + 1 AS c_custkey, range % 3 AS c_nationkey,
                   (range * 100)::DOUBLE AS c_acctbal, ['AUTO', 'BUILDING'][1 + range % 2] AS c_mktsegment
                   FROM range(10)""")
    con.execute("""CREATE TABLE orders AS SELECT row_number() OVER () AS o_orderkey, c.range AS o_custkey,
                   10.0 * o.range AS o_totalprice, ['F', 'O'][1 + o.range % 2] AS o_status, 'c' || o.range AS o_comment
                   FROM range(1, 11) c, range(10) o WHERE o.range < c.range""")
    con.execute("""CREATE TABLE lineitem AS SELECT o_orderkey AS l_orderkey, i.range + 1 AS l_quantity
                   FROM orders, range(2) i""")
    con.execute("CREATE TABLE nation AS SELECT range AS n_nationkey, 'N' || range AS n_name FROM range(3)")
    return con


def connect(policy=TPCH, con=None, **kw):
    return dpsql.connect(con or tpch_database(), ledger=":memory:", policy=copy.deepcopy(policy), **kw)


def changed(path, value, policy=TPCH):
    """The policy with the entry at a dotted path replaced (or deleted when value is DELETE)."""
    policy = copy.deepcopy(policy)
    keys = path.split(".")
    node = functools.reduce(lambda parent, key: parent.setdefault(key, {}), keys[:-1], policy)
    node.pop(keys[-1]) if value is DELETE else node.update({keys[-1]: value})
    return policy


DELETE = object()


# --- the typed policy --------------------------------------------------------------------------------

def test_each_private_table_has_its_path_to_the_one_root():
    p = load_policy(TPCH)
    customer, orders, lineitem, nation = (p.tables[t] for t in ("customer", "orders", "lineitem", "nation"))
    assert customer.path == () and customer.link is None
    assert orders.path == (Link("orders", "o_custkey", "customer", "c_custkey"),)
    assert lineitem.path == (Link("lineitem", "l_orderkey", "orders", "o_orderkey"), orders.link)
    assert str(lineitem.link) == "lineitem.l_orderkey -> orders.o_orderkey"
    for t in (customer, orders, lineitem):
        assert (t.root, t.root_column, t.public) == ("customer", "c_custkey", False)
    assert (nation.root, nation.root_column, nation.public) == (None, None, True)
    assert p.roots == ("customer",) and p.public_tables == ("nation",)
    assert p.links == (orders.link, lineitem.link)
    assert (lineitem.max_groups_per_unit, lineitem.max_rows_per_unit) == (4, 50)


def test_the_unit_key_is_in_the_table_only_for_the_root_and_a_direct_link():
    p = load_policy(TPCH)
    assert [p.tables[t].unit_key for t in ("customer", "orders", "lineitem", "nation")] == \
        ["c_custkey", "o_custkey", None, None]
    assert load_policy(POLICY).tables["people"].unit_key is None          # row level: the row itself


def test_links_and_referenced_keys_identify_a_person():
    p = load_policy(TPCH)
    assert p.tables["orders"].is_identifier("o_custkey") and p.tables["orders"].is_identifier("o_orderkey")
    assert p.tables["lineitem"].is_identifier("l_orderkey")
    assert p.tables["orders"].privacy_unit == "o_custkey" and not p.tables["orders"].row_level


def test_a_public_table_has_public_keys_everywhere():
    p = load_policy(changed("tables.nation", {"public": True, "columns": {"n_weight": {"lower": 0, "upper": 5}}}))
    nation = p.tables["nation"]
    assert nation.public and nation.has_public_keys("n_name") and nation.columns["n_weight"].upper == 5
    assert p.tables["customer"].has_public_keys("c_mktsegment")
    assert not p.tables["customer"].has_public_keys("c_acctbal")


def test_yaml_spelling_of_the_design_loads(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("""
budget: {epsilon: 100, delta: 1.0e-6}
tables:
  customer: {privacy_unit: c_custkey, columns: {c_acctbal: {lower: -1000, upper: 10000},
                                                c_mktsegment: {keys: [AUTO, BUILDING]}}}
  orders:   {privacy_unit: {via: o_custkey, references: customer.c_custkey},
             max_groups_per_unit: 2, max_rows_per_unit: 3,
             columns: {o_totalprice: {lower: 0, upper: 1000}, o_status: {keys: [F, O]}}}
  lineitem: {privacy_unit: {via: l_orderkey, references: orders.o_orderkey},
             max_groups_per_unit: 4, max_rows_per_unit: 50, columns: {l_quantity: {lower: 0, upper: 50}}}
  nation:   {public: true}
""")
    assert load_policy(path) == load_policy(TPCH)
    assert load_policy(yaml.safe_load(path.read_text())) == load_policy(TPCH)


def test_names_are_case_insensitive():
    policy = changed("tables.orders.privacy_unit", {"via": "O_CustKey", "references": "Customer.C_CUSTKEY"})
    assert load_policy(policy).tables["orders"].link == Link("orders", "o_custkey", "customer", "c_custkey")


# --- refused at load time: DP501, naming the entry ----------------------------------------------------

CYCLE = {"budget": {"epsilon": 1}, "tables": {
    "root": {"privacy_unit": "id"},
    "a": {"privacy_unit": {"via": "x", "references": "b.y"}},
    "b": {"privacy_unit": {"via": "z", "references": "a.w"}}}}


@pytest.mark.parametrize("path, value, message", [
    ("tables.orders.privacy_unit.references", "custmer.c_custkey",
     "tables.orders.privacy_unit.references: table 'custmer' is not a table of the policy"),
    ("tables.orders.privacy_unit.references", "c_custkey", "tables.orders.privacy_unit.references: must be `table.column`"),
    ("tables.orders.privacy_unit.references", "a.b.c", "tables.orders.privacy_unit.references: must be `table.column`"),
    ("tables.orders.privacy_unit.references", 7, "tables.orders.privacy_unit.references: must be `table.column`"),
    ("tables.orders.privacy_unit.references", DELETE, "tables.orders.privacy_unit.references: is required"),
    ("tables.orders.privacy_unit.via", DELETE, "tables.orders.privacy_unit.via: is required"),
    ("tables.orders.privacy_unit.via", "row", "tables.orders.privacy_unit.via: must name a column"),
    ("tables.orders.privacy_unit.via", "", "tables.orders.privacy_unit.via: must name a column"),
    ("tables.orders.privacy_unit.on", "x", "tables.orders.privacy_unit.on: unknown entry"),
    ("tables.orders.privacy_unit", ["o_custkey"], "tables.orders.privacy_unit: must be a column name or `row`"),
    ("tables.orders.privacy_unit.references", "nation.n_nationkey",
     "tables.orders.privacy_unit.references: table 'nation' is public"),
    ("tables.orders.privacy_unit.references", "orders.o_orderkey", "tables.orders.privacy_unit: the links form a cycle "
     "(orders.o_custkey -> orders.o_orderkey)"),
    ("tables.customer.privacy_unit", "row", "tables.orders.privacy_unit.references: table 'customer' has privacy_unit `row`"),
    ("tables.nation.privacy_unit", "n_nationkey", "tables.nation.privacy_unit: a public table holds no person's data"),
    ("tables.nation.max_rows_per_unit", 2, "tables.nation.max_rows_per_unit: a public table holds no person's data"),
    ("tables.nation.columns", {"n_name": {"identifier": True}}, "tables.nation.columns.n_name.identifier: a public table"),
    ("tables.nation.public", "yes", "tables.nation.public: must be true or false"),
    ("tables.orders.columns.o_custkey", {"keys": [1, 2]}, "tables.orders.columns.o_custkey: links orders to its privacy unit"),
    ("tables.orders.columns.o_orderkey", {"lower": 0, "upper": 9}, "tables.orders.columns.o_orderkey: is referenced by "
     "tables.lineitem.privacy_unit (lineitem.l_orderkey -> orders.o_orderkey), so it identifies a person"),
    ("tables.Orders", {"privacy_unit": "row"}, "tables.Orders: declared twice"),
    ("tables.customer", {"public": True}, "tables.orders.privacy_unit.references: table 'customer' is public"),
    ("tables.lineitem.privacy_unit", DELETE, "tables.lineitem.privacy_unit: is required"),
])
def test_bad_links_are_refused_naming_the_entry(path, value, message):
    with pytest.raises(PolicyError) as info:
        load_policy(changed(path, value))
    assert info.value.code == "DP501"
    assert message in info.value.message


def test_a_cycle_of_links_is_refused():
    with pytest.raises(PolicyError, match=r"tables.a.privacy_unit: the links form a cycle \(a.x -> b.y, b.z -> a.w\)"):
        load_policy(CYCLE)


def test_a_policy_of_public_tables_only_is_refused():
    with pytest.raises(PolicyError, match="tables: at least one private table is required"):
        load_policy({"budget": {"epsilon": 1}, "tables": {"nation": {"public": True}}})


def test_several_independent_roots_stay_allowed():
    """Today's policies hold several tables each with its own unit (the fixture: people, visits); each
    linked table reaches exactly one of them, and a table's root names its unit."""
    p = load_policy(changed("tables.people", POLICY["tables"]["people"]))
    assert set(p.roots) == {"customer", "people"}
    assert p.tables["lineitem"].root == "customer" and p.tables["people"].root == "people"


# --- checked against the schema: DP502 ----------------------------------------------------------------

@pytest.mark.parametrize("path, value, message", [
    ("tables.orders.privacy_unit.via", "o_cust", "tables.orders.privacy_unit.via: column 'o_cust' does not exist"),
    ("tables.lineitem.privacy_unit.references", "orders.o_key",
     "tables.lineitem.privacy_unit.references: column 'o_key' does not exist in table 'orders'"),
    ("tables.lineitem.privacy_unit.references", "orders.o_comment",
     "tables.lineitem.privacy_unit: lineitem.l_orderkey -> orders.o_comment compares BIGINT with VARCHAR"),
    ("tables.region", {"public": True}, "table 'region' \\(tables.region\\) does not exist"),
])
def test_links_are_checked_against_the_schema(path, value, message):
    with pytest.raises(PolicyError, match=message) as info:
        connect(changed(path, value))
    assert info.value.code == "DP502"


def test_every_column_of_a_public_table_is_readable_with_its_type():
    nation = connect().policy.tables["nation"]
    assert {n: c.sql_type for n, c in nation.columns.items()} == {"n_nationkey": "BIGINT", "n_name": "VARCHAR"}


# --- referenced keys unique in the data: DP504, once per data version --------------------------------

@pytest.mark.parametrize("table, insert, link", [
    ("customer", "INSERT INTO customer VALUES (3, 0, 1.0, 'AUTO')", "orders.o_custkey -> customer.c_custkey"),
    ("orders", "INSERT INTO orders VALUES (1, 1, 5.0, 'F', 'c')", "lineitem.l_orderkey -> orders.o_orderkey"),
])
def test_a_referenced_key_that_repeats_is_a_set_up_error(table, insert, link):
    con = tpch_database()
    con.execute(insert)
    with pytest.raises(PolicyError) as info:
        connect(con=con)
    err = info.value
    assert err.code == "DP504" and link in err.message and f"not unique in table {table!r}" in err.message
    assert "unique key" in err.hint
    assert "(3," not in err.message and " 3 " not in err.message, "no value of the data in the message"


def test_nulls_in_a_referenced_key_are_not_repeats():
    con = tpch_database()
    con.execute("INSERT INTO customer VALUES (NULL, 0, 1.0, 'AUTO'), (NULL, 1, 2.0, 'AUTO')")
    assert connect(con=con).policy.tables["customer"].root == "customer"


def test_the_key_check_runs_once_per_data_version(tmp_path, monkeypatch):
    path = str(tmp_path / "tpch.duckdb")
    con = duckdb.connect(path)
    tpch_database(con)
    con.close()
    calls = []
    real = duckdb_schema.repeats_a_value
    monkeypatch.setattr(duckdb_schema, "repeats_a_value", lambda c, t, k: calls.append((t, k)) or real(c, t, k))
    testing.forget_key_checks()
    first = dpsql.connect(path, policy=TPCH, ledger=str(tmp_path / "l.sqlite"))
    first.sql("SELECT COUNT(*) FROM customer")
    first.sql("SELECT COUNT(*) FROM orders")
    first.close()
    assert sorted(calls) == [("customer", "c_custkey"), ("orders", "o_orderkey")]
    dpsql.connect(path, policy=TPCH, ledger=str(tmp_path / "l.sqlite")).close()
    assert len(calls) == 2, "the same data version is not checked again"
    con = duckdb.connect(path)
    con.execute("INSERT INTO orders VALUES (1, 1, 5.0, 'F', 'c')")
    con.close()
    with pytest.raises(PolicyError, match="DP504|not unique in table 'orders'"):
        dpsql.connect(path, policy=TPCH, ledger=str(tmp_path / "l.sqlite"))
    assert len(calls) == 4, "a new data version is checked again"


def test_a_named_data_version_of_a_connection_object_is_cached_too(monkeypatch):
    calls = []
    real = duckdb_schema.repeats_a_value
    monkeypatch.setattr(duckdb_schema, "repeats_a_value", lambda c, t, k: calls.append((t, k)) or real(c, t, k))
    testing.forget_key_checks()
    from dpsql.engines.duckdb import DuckDBEngine
    for _ in range(2):
        DuckDBEngine(tpch_database()).bind_policy(load_policy(TPCH), "__k", data_version="v1")
    DuckDBEngine(tpch_database()).bind_policy(load_policy(TPCH), "__k")
    assert len(calls) == 4, "v1 checked once; no version: checked every time"


def test_a_key_duckdb_enforces_unique_is_not_scanned():
    con = duckdb.connect()
    con.execute("CREATE TABLE c (k BIGINT PRIMARY KEY, u VARCHAR UNIQUE, x INT, y INT, UNIQUE (x, y))")
    assert [duckdb_schema.declared_unique(con, "c", k) for k in ("k", "u", "x", "y")] == [True, True, False, False]
    con.execute("INSERT INTO c VALUES (1, 'a', 1, 1), (2, 'b', 1, 2)")
    assert [duckdb_schema.repeats_a_value(con, "c", k) for k in ("k", "u", "x", "y")] == [False, False, True, False]


def test_a_key_two_links_reference_is_checked_once(monkeypatch):
    calls = []
    real = duckdb_schema.repeats_a_value
    monkeypatch.setattr(duckdb_schema, "repeats_a_value", lambda c, t, k: calls.append((t, k)) or real(c, t, k))
    policy = changed("tables.payments", {"privacy_unit": {"via": "p_custkey", "references": "customer.c_custkey"}})
    con = tpch_database()
    con.execute("CREATE TABLE payments AS SELECT o_custkey AS p_custkey FROM orders")
    connect(policy, con=con)
    assert sorted(calls) == [("customer", "c_custkey"), ("orders", "o_orderkey")]


# --- queries --------------------------------------------------------------------------------------------

def test_a_multi_table_policy_connects_and_the_root_answers_as_before():
    db = connect()
    alone = connect({"budget": TPCH["budget"], "tables": {"customer": TPCH["tables"]["customer"]}})
    sql = "SELECT c_mktsegment, COUNT(*) AS n, SUM(c_acctbal) AS s FROM customer GROUP BY c_mktsegment"
    assert [str(c.explain(sql)).replace(testing.noise_function(c), "noise") for c in (db, alone)] == \
        [str(alone.explain(sql)).replace(testing.noise_function(alone), "noise")] * 2
    assert testing.run(db, sql).rows == testing.run(alone, sql).rows == [("AUTO", 5, 2000.0), ("BUILDING", 5, 2500.0)]
    assert db.sql(sql).columns == ["c_mktsegment", "n", "s"]
    assert db.budget.spent_epsilon == 1


def test_a_directly_linked_table_is_bounded_per_person():
    """orders.o_custkey is the unit's key: customer k has k orders, at most C=3 of them count."""
    db = connect()
    assert testing.run(db, "SELECT COUNT(*) AS n FROM orders").rows == [(sum(min(k, 3) for k in range(1, 11)),)]
    assert testing.run(db, "SELECT COUNT(DISTINCT o_custkey) AS people FROM orders").rows == [(10,)]
    assert db.sql("SELECT o_status, AVG(o_totalprice) FROM orders GROUP BY o_status").columns == \
        ["o_status", "avg(o_totalprice)"]


def test_a_table_that_reaches_its_unit_only_through_joins_is_joined_to_it_by_dpsql():
    """lineitem alone: dpsql adds the joins along its path (frontend/joins.py) to bound per person;
    validation on its own (without them) still refuses the table (DP205, defence in depth)."""
    from dpsql.frontend.parse import parse
    from dpsql.frontend.validate import validate
    db = connect()
    sql = "SELECT COUNT(*) FROM lineitem WHERE l_quantity > 1"
    assert ("LEFT", "__path1") in sql_tree.joins(sql_tree.tree(db.explain(sql)), "orders")
    with pytest.raises(dpsql.DpsqlError) as info:
        validate(parse(sql), sql, db.policy)
    err = info.value
    assert err.code == "DP205" and err.rule == "unit_in_table"
    assert "lineitem.l_orderkey -> orders.o_orderkey, orders.o_custkey -> customer.c_custkey" in err.message
    assert sql[err.start:err.end + 1] == "lineitem"


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM orders WHERE o_orderkey < 5",
    "SELECT COUNT(*) FROM orders GROUP BY o_custkey",
])
def test_link_columns_are_identifiers_in_queries(sql):
    with pytest.raises(dpsql.DpsqlError) as info:
        connect().sql(sql, delta=1e-7)
    assert info.value.code == "DP203"


def test_a_public_table_alone_is_answered_exactly():
    """No person's data: exact, at epsilon 0 (tests/frontend/test_public_queries.py)."""
    exact = testing.run(connect(), "SELECT COUNT(*) AS n FROM nation WHERE n_name <> 'N0'")
    assert exact.rows == [(2,)] and "public tables only (nation): answered exactly" in str(exact.plan)


# --- the ledger's identity ------------------------------------------------------------------------------

SINGLE = {"version": 1, "budget": {"epsilon": 3.5, "delta": 1e-6}, "default_epsilon": 0.5,
          "tables": {"visits": {"privacy_unit": "person_id", "max_groups_per_unit": 2, "max_rows_per_unit": 3,
                                "columns": {"clinic": {"keys": ["b", "a", "c"]},
                                            "cost": {"type": "float", "lower": 0, "upper": 50},
                                            "ssn": {"identifier": True}, "note": {}}}}}


def test_identity_of_policies_without_links_is_unchanged():
    """Computed with the code before many-table policies existed: old ledgers stay readable."""
    assert policy_identity(load_policy(SINGLE)) == "126194dc2f1e3a5642d2e9fc8ea91636ecc5e1cdfc646e1e6241c659ca0403f8"
    before = {**POLICY, "tables": {k: v for k, v in POLICY["tables"].items() if k in ("people", "visits")}}
    assert policy_identity(load_policy(before)) == "bc5fd3228ca5ed2baeb5fdf38502810c933cc5ab661795906e02c8662ff29aa0"


def test_identity_of_a_linked_policy_includes_links_and_public_tables():
    doc = policy_document(load_policy(TPCH))
    assert doc["tables"]["lineitem"]["privacy_unit"] == {"via": "l_orderkey", "references": "orders.o_orderkey"}
    assert doc["tables"]["nation"] == {"public": True, "columns": {}}
    assert doc["tables"]["customer"]["privacy_unit"] == "c_custkey"
    base = policy_identity(load_policy(TPCH))
    reordered = {**TPCH, "tables": dict(reversed(list(TPCH["tables"].items())))}
    assert policy_identity(load_policy(reordered)) == base
    other_link = changed("tables.lineitem.privacy_unit.references", "orders.o_custkey")
    other_public = changed("tables.nation", {"privacy_unit": "row"})
    identities = {base, policy_identity(load_policy(other_link)), policy_identity(load_policy(other_public))}
    assert len(identities) == 3
    canonical(doc)   # serialisable


def test_a_ledger_of_a_linked_policy_is_reopened(tmp_path):
    path = str(tmp_path / "tpch.duckdb")
    con = duckdb.connect(path)
    tpch_database(con)
    con.close()
    ledger = str(tmp_path / "l.sqlite")
    dpsql.connect(path, policy=TPCH, ledger=ledger).sql("SELECT COUNT(*) FROM orders", epsilon=0.5)
    assert dpsql.connect(path, policy=TPCH, ledger=ledger).budget.spent_epsilon == 0.5
    # A public table's new column keeps the history (recorded); a link that changes would re-interpret it.
    more = changed("tables.nation", {"public": True, "columns": {"n_name": {}}})
    assert dpsql.connect(path, policy=more, ledger=ledger).budget.spent_epsilon == 0.5
    relinked = changed("tables.orders.privacy_unit", {"via": "o_orderkey", "references": "customer.c_custkey"})
    with pytest.raises(dpsql.DpsqlError) as info:
        dpsql.connect(path, policy=relinked, ledger=ledger)
    assert info.value.code == "DP404" and info.value.differences == ("tables.orders.privacy_unit.via",)

