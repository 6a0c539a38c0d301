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


def whole(customers: int = 30) -> duckdb.DuckDBPyConnection:
    """Every TPC-H table with the columns and types benchmarks/tpch/policy.yaml names (keys BIGINT,
    money DECIMAL(15,2), dates DATE), a few synthetic rows each: ``customers`` customers with 2 orders
    of 3 line items, 5 regions of 5 nations, 10 parts, 4 suppliers, partsupp's cost in [1.00, 1000.00]."""
    con = duckdb.connect()
    con.execute("CREATE TABLE region AS SELECT range AS r_regionkey, ['AFRICA', 'AMERICA', 'ASIA', 'EUROPE', "
                "'MIDDLE EAST'][range + 1] AS r_name, '' AS r_comment FROM range(5)")
    con.execute("CREATE TABLE nation AS SELECT range AS n_nationkey, 'NATION' || range AS n_name, "
                "range // 5 AS n_regionkey, '' AS n_comment FROM range(25)")
    con.execute("CREATE TABLE part AS SELECT range + 1 AS p_partkey, CASE WHEN range % 2 = 0 THEN 'green tin' "
                "ELSE 'red tin' END AS p_name, 'ECONOMY ANODIZED STEEL' AS p_type, (range % 50) + 1 AS p_size "
                "FROM range(10)")
    con.execute("CREATE TABLE supplier AS SELECT range + 1 AS s_suppkey, 'S' || range AS s_name, "
                "(range * 7) % 25 AS s_nationkey FROM range(4)")
    con.execute("CREATE TABLE partsupp AS SELECT p.range + 1 AS ps_partkey, s.range + 1 AS ps_suppkey, "
                "CAST(1 + ((p.range * 4 + s.range) * 37) % 1000 AS DECIMAL(15,2)) AS ps_supplycost, 100 AS ps_availqty "
                "FROM range(10) p, range(4) s")
    con.execute(f"""CREATE TABLE customer AS SELECT range + 1 AS c_custkey, 'C' || range AS c_name, '' AS c_address,
        '' AS c_phone, range % 25 AS c_nationkey, CAST(range * 10.5 AS DECIMAL(15,2)) AS c_acctbal,
        ['AUTOMOBILE', 'BUILDING'][range % 2 + 1] AS c_mktsegment, '' AS c_comment FROM range({customers})""")
    con.execute("""CREATE TABLE orders AS SELECT range + 1 AS o_orderkey, range // 2 + 1 AS o_custkey,
        'F' AS o_orderstatus, CAST(1000 + range AS DECIMAL(15,2)) AS o_totalprice,
        DATE '1992-01-01' + CAST((range * 97) % 2550 AS INTEGER) AS o_orderdate, '1-URGENT' AS o_orderpriority,
        '' AS o_clerk, 0 AS o_shippriority, '' AS o_comment FROM range(""" + str(2 * customers) + ")")
    con.execute("""CREATE TABLE lineitem AS SELECT range // 3 + 1 AS l_orderkey, range % 10 + 1 AS l_partkey,
        range % 4 + 1 AS l_suppkey, range % 3 + 1 AS l_linenumber, CAST(range % 50 + 1 AS DECIMAL(15,2)) AS l_quantity,
        CAST(100 + range * 3 AS DECIMAL(15,2)) AS l_extendedprice, CAST((range % 10) / 100 AS DECIMAL(15,2)) AS l_discount,
        CAST(0.02 AS DECIMAL(15,2)) AS l_tax, 'N' AS l_returnflag, 'O' AS l_linestatus,
        DATE '1993-01-01' AS l_shipdate, DATE '1993-01-02' AS l_commitdate, DATE '1993-01-03' AS l_receiptdate,
        'NONE' AS l_shipinstruct, 'AIR' AS l_shipmode, '' AS l_comment FROM range(""" + str(6 * customers) + ")")
    return con
