"""A link is checked in the type and collation in which it is joined (issue 20, finding 2).

``lineitem.l_orderkey DOUBLE -> orders.o_orderkey BIGINT`` joins in DOUBLE, where 2**60 and 2**60 + 1
are one value: a line item keyed 2**60 met every such order, each another person's, and moved
``COUNT(*) FROM lineitem`` (sensitivity 1) by the number of them. The referenced key's uniqueness is
now checked in the form the comparison builder writes (sql/compare.py ``key_form``), so such data
is a set-up error (DP504) at connect and nothing is ever answered on it. Strings compare byte for
byte (COLLATE C) in the join and in the check, whatever the columns' collations."""
import duckdb
import pytest
from sqlglot import exp

import dpsql
from dpsql import testing
from dpsql.errors import PolicyError
from tests.support import sql_tree


def policy(L: int = 1, C: int = 1):
    return {"budget": {"epsilon": 1000}, "tables": {
        "customer": {"privacy_unit": "c_custkey", "columns": {}},
        "orders": {"privacy_unit": {"via": "o_custkey", "references": "customer.c_custkey"}, "columns": {}},
        "lineitem": {"privacy_unit": {"via": "l_orderkey", "references": "orders.o_orderkey"},
                     "max_groups_per_unit": L, "max_rows_per_unit": C, "columns": {}}}}


def database(key_type: str, via_type: str, keys: list[int], lines: list[int], primary: bool = False):
    """One customer per order; the orders' keys as given, each line item's key as given."""
    con = duckdb.connect()
    con.execute("CREATE TABLE customer (c_custkey BIGINT)")
    con.execute(f"CREATE TABLE orders (o_orderkey {key_type}{' PRIMARY KEY' if primary else ''}, o_custkey BIGINT)")
    con.execute(f"CREATE TABLE lineitem (l_orderkey {via_type})")
    for n, key in enumerate(keys):
        con.execute("INSERT INTO customer VALUES (?)", [n])
        con.execute(f"INSERT INTO orders VALUES (CAST(? AS {key_type}), ?)", [str(key), n])
    for key in lines:
        con.execute(f"INSERT INTO lineitem VALUES (CAST(CAST(? AS {key_type}) AS {via_type}))", [str(key)])
    return con


NEAR = [2 ** 60 + 2 * k for k in range(101)]   # distinct BIGINTs, one DOUBLE (2**60 is 2**8 * 2**52: steps of 256)


@pytest.mark.parametrize("key_type,via_type,keys", [
    ("BIGINT", "DOUBLE", [2 ** 60, 2 ** 60 + 1]),
    ("INTEGER", "FLOAT", [2 ** 24, 2 ** 24 + 1]),
    ("DECIMAL(18,3)", "DOUBLE", ["123456789012345.678", "123456789012345.679"]),
    ("BIGINT", "DOUBLE", NEAR),
])
def test_keys_that_collide_only_in_the_common_type_are_a_set_up_error(key_type, via_type, keys):
    with pytest.raises(PolicyError) as info:
        dpsql.connect(database(key_type, via_type, keys, []), policy=policy(), ledger=":memory:")
    err = info.value
    assert err.code == "DP504" and "orders.o_orderkey is not unique" in err.message, err.message
    assert f"lineitem.l_orderkey ({via_type}) compares it" in err.message and via_type in err.message
    assert "one type" in err.hint
    assert not any(str(k) in err.message for k in keys), "no value of the data in the message"


def test_a_primary_key_does_not_vouch_for_a_form_that_merges_values():
    """PRIMARY KEY makes o_orderkey unique as a BIGINT, not as a DOUBLE: the check still reads the data."""
    with pytest.raises(PolicyError) as info:
        dpsql.connect(database("BIGINT", "DOUBLE", [2 ** 60, 2 ** 60 + 1], [], primary=True), policy=policy(),
                      ledger=":memory:")
    assert info.value.code == "DP504"


def test_the_same_keys_compared_in_their_own_type_connect():
    db = dpsql.connect(database("BIGINT", "BIGINT", NEAR, [2 ** 60]), policy=policy(), ledger=":memory:")
    assert testing.run(db, "SELECT COUNT(*) FROM lineitem").rows == [(1,)]


def test_the_finding_never_answers():
    """The issue's case: ~100 orders near 2**60, one per customer; D' adds a customer whose line item
    is keyed 2**60. Before: COUNT(*) FROM lineitem 0 on D, 101 on D'. Now neither connects."""
    for lines in ([], [2 ** 60]):
        with pytest.raises(PolicyError) as info:
            dpsql.connect(database("BIGINT", "DOUBLE", NEAR, lines), policy=policy(), ledger=":memory:")
        assert info.value.code == "DP504"


def nocase(parent_refs: list[str], notes: list[str], parent_collation: str = "", child_collation: str = "NOCASE"):
    con = duckdb.connect()
    con.execute(f"CREATE TABLE customer (c_custkey BIGINT, c_ref VARCHAR {'COLLATE ' + parent_collation if parent_collation else ''})")
    con.execute(f"CREATE TABLE notes (n_ref VARCHAR {'COLLATE ' + child_collation if child_collation else ''})")
    for n, ref in enumerate(parent_refs):
        con.execute("INSERT INTO customer VALUES (?, ?)", [n, ref])
    for ref in notes:
        con.execute("INSERT INTO notes VALUES (?)", [ref])
    return dpsql.connect(con, ledger=":memory:", policy={"budget": {"epsilon": 1000}, "tables": {
        "customer": {"privacy_unit": "c_custkey", "columns": {"c_ref": {"identifier": True}}},
        "notes": {"privacy_unit": {"via": "n_ref", "references": "customer.c_ref"}, "columns": {}}}})


def test_a_nocase_child_key_reaches_one_person_only():
    """D: three customers whose refs differ only in case, no notes; D' adds a customer 'AB' with one
    note 'AB'. A NOCASE join met all four customers (COUNT(*) moved by 4, sensitivity 1); byte for
    byte it meets one."""
    refs = ["aB", "Ab", "ab"]
    d, d_prime = nocase(refs, []), nocase(refs + ["AB"], ["AB"])
    counts = [testing.run(db, "SELECT COUNT(*) FROM notes").rows[0][0] for db in (d, d_prime)]
    assert counts == [0, 1]
    plan = testing.lower(d, "SELECT COUNT(*) FROM notes JOIN customer ON n_ref = c_ref")
    assert sql_tree.has(sql_tree.tree(plan), exp.Collate, lambda c: c.expression.name == "C")


def test_a_nocase_parent_key_is_checked_byte_for_byte():
    """'a' and 'A' are one value for a NOCASE column, two byte for byte, as the join compares them: the
    key is unique, and each note reaches the customer whose ref is its exact text."""
    db = nocase(["a", "A", "b"], ["a", "a", "A"], parent_collation="NOCASE", child_collation="")
    rows = testing.run(db, "SELECT COUNT(*) FROM notes").rows
    assert rows == [(2,)]   # C = 1 per person: 'a' (two notes, capped at 1) and 'A'
    with pytest.raises(PolicyError) as info:
        nocase(["a", "a"], [], parent_collation="NOCASE", child_collation="")
    assert info.value.code == "DP504"


def test_declared_keys_equal_as_the_column_compares_them_are_a_set_up_error():
    """'k1' and 'K1' are two keys of a VARCHAR, one value of a NOCASE column: a long key set is joined
    (lower/keys.py), and the row 'k1' met both and counted twice at row level (sensitivity 1)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, tag VARCHAR COLLATE NOCASE)")
    con.execute("INSERT INTO t VALUES (1, 'k1'), (2, 'k2')")
    keys = [f"k{i}" for i in range(300)]
    tables = lambda keys: {"t": {"privacy_unit": "row", "columns": {"tag": {"keys": keys}}}}  # noqa: E731
    with pytest.raises(PolicyError) as info:
        dpsql.connect(con, ledger=":memory:", policy={"budget": {"epsilon": 1}, "tables": tables(keys + ["K1"])})
    assert info.value.code == "DP502" and "collide" in info.value.message
    db = dpsql.connect(con, ledger=":memory:", policy={"budget": {"epsilon": 1}, "tables": tables(keys)})
    rows = testing.run(db, "SELECT tag, COUNT(*) AS n FROM t GROUP BY tag", stage="measurements").rows
    assert sorted(r for r in rows if r[1]) == [("k1", 1), ("k2", 1)]
