"""Output names as plain DuckDB gives them (issue 25, item 1), read from the query as written: the
end-to-end check against DuckDB is the differential test's (tests/properties/test_differential.py)."""
from dpsql.engines.duckdb_names import expression_name
from dpsql.frontend.names import output_names
from dpsql.frontend.parse import parse
from dpsql.policy.loading import load_policy
from tests.support.tpch import POLICY

TABLES = load_policy(POLICY).tables


def names(sql: str) -> list[str | None]:
    return output_names(parse(sql), TABLES)


def test_columns_take_the_name_their_subquery_or_cte_gives_them():
    assert names("SELECT g, t.h, COUNT(*) AS n FROM (SELECT c_seg AS g, c_nationkey AS h FROM customer) t "
                 "GROUP BY g, t.h") == ["g", "h", "n"]
    assert names("WITH a AS (SELECT c_seg AS s FROM customer), b AS (SELECT s AS k FROM a) "
                 "SELECT k FROM b") == ["k"]
    assert names("WITH a AS (SELECT c_seg AS s FROM customer) SELECT q.s FROM (SELECT * FROM a) q") == ["s"]


def test_a_tables_column_takes_its_name_in_the_table_through_joins_and_plain_references():
    assert names("SELECT o.o_status, C_SEG FROM orders o JOIN customer c ON o.o_custkey = c.c_custkey") == \
        ["o_status", "c_seg"]
    assert names("SELECT x.C_SEG FROM (SELECT C_SEG FROM customer) x") == ["c_seg"]


def test_other_expressions_are_left_to_duckdbs_printer():
    assert names("SELECT SUM(l_qty + 1), COUNT(*) FROM lineitem") == [None, None]
    assert expression_name("SUM(l_qty + 1)") == "sum((l_qty + 1))"
    assert expression_name("EXTRACT(YEAR FROM d)") == "date_part('YEAR', d)"


def test_the_printer_names_one_expression_or_nothing():
    """Text that is not one expression alone is not named (the plan's own name stays)."""
    assert [expression_name(t) for t in ("a, b", "x FROM t", "x WHERE y", "SUM(", "1; SELECT 2")] == [None] * 5
