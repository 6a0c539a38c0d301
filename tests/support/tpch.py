"""TPC-H's shape in miniature for the join tests: customer (the unit), orders -> customer, lineitem ->
orders, and a public nation table; ``SMALL`` a few rows of each, with an order and a line item that
reach nobody."""
import duckdb

POLICY = {"budget": {"epsilon": 1000}, "tables": {
    "customer": {"privacy_unit": "c_custkey", "columns": {
        "c_custkey": {"identifier": True}, "c_nationkey": {"keys": [0, 1, 2, 3]}, "c_seg": {"keys": ["a", "b"]},
        "c_acctbal": {"lower": -10, "upper": 100}}},
    "orders": {"privacy_unit": {"via": "o_custkey", "references": "customer.c_custkey"},
               "max_groups_per_unit": 2, "max_rows_per_unit": 3, "columns": {
                   "o_orderkey": {"identifier": True}, "o_total": {"lower": 0, "upper": 100},
                   "o_status": {"keys": ["F", "O"]}}},
    "lineitem": {"privacy_unit": {"via": "l_orderkey", "references": "orders.o_orderkey"},
                 "max_groups_per_unit": 2, "max_rows_per_unit": 4, "columns": {
                     "l_id": {"identifier": True}, "l_qty": {"lower": 1, "upper": 50}, "l_flag": {"keys": ["A", "R"]}}},
    "nation": {"public": True},
}}


def database(customers, orders, lineitems) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE nation AS SELECT range AS n_nationkey, 'N' || range AS n_name FROM range(5)")
    con.execute("CREATE TABLE customer (c_custkey BIGINT, c_nationkey BIGINT, c_seg VARCHAR, c_acctbal DOUBLE)")
    con.execute("CREATE TABLE orders (o_orderkey BIGINT, o_custkey BIGINT, o_total DOUBLE, o_status VARCHAR)")
    con.execute("CREATE TABLE lineitem (l_id BIGINT, l_orderkey BIGINT, l_qty DOUBLE, l_flag VARCHAR)")
    for name, rows in (("customer", customers), ("orders", orders), ("lineitem", lineitems)):
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return con


SMALL = dict(
    customers=[(c, c % 4, "ab"[c % 2], float(c * 7 % 110 - 10)) for c in range(12)],
    orders=[(o, o % 12, float(o * 13 % 120), "FO"[o % 2]) for o in range(40)] + [(99, 77, 5.0, "F")],  # 99: no customer
    lineitems=[(i, i % 41 if i % 41 != 40 else 99, float(i % 60), "AR"[i % 3 == 0]) for i in range(150)]
    + [(500, 12345, 3.0, "A")],   # an orphan line item: its order does not exist
)
