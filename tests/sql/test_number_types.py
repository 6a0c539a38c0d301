"""DuckDB's type of a number expression (dpsql/sql/number_types.py), checked against DuckDB's own
``typeof`` on the adversarial table's columns: where the rules give a type, it is DuckDB's."""
import itertools

import pytest

from dpsql.sql.number_types import annotated, number_type
from tests.support.adversarial import TYPES, adversarial_table, parse

NUMBERS = ["ti", "si", "i", "bi", "hi", "de", "f", "d"]
SHAPES = ["{a}", "-{a}", "abs({a})", "floor({a})", "ceil({a})", "{a} / 2", "{a} + {b}", "{a} - 50", "{a} * 500",
          "{a} // 7", "{a} % -1", "{a} + 5000000000", "{a} // {b}", "CAST({a} AS INTEGER) + 1", "floor({a} / 10) * 10",
          "CASE WHEN {a} < CAST('0' AS BIGINT) THEN CAST('0' AS BIGINT) ELSE {a} END", "coalesce({a}, {b})",
          "-1.5e0 + {a}", "nullif({a}, 0) % 3", "{a} / 0.001", "{a} * 2.5", "{a} + 123.45", "{a} / 2.5", "0.5", "0.001", ".5", "10.0",
          "{a} + 5.", "00012"]   # 5. (no digit after the point) crashed the rules once (the slow differential test)


@pytest.fixture(scope="module")
def con():
    return adversarial_table()


def expressions():
    for shape, a, b in itertools.product(SHAPES, NUMBERS, NUMBERS):
        if "{b}" in shape or b == "ti":
            yield shape.format(a=a, b=b)


@pytest.mark.parametrize("text", sorted(set(expressions())))
def test_a_type_given_is_duckdbs_own(con, text):
    found = number_type(parse(text), TYPES.get)
    if found is not None:
        assert con.sql(f"SELECT typeof({parse(text).sql('duckdb')}) FROM t LIMIT 1").fetchall()[0][0] == found


def test_the_rules_give_the_types_the_spark_printer_needs():
    given = {t: number_type(parse(t), TYPES.get) for t in ("floor(bi / 10)", "ti + 1", "-bi", "abs(i - 50)", "de // 2")}
    assert given == {"floor(bi / 10)": "DOUBLE", "ti + 1": "TINYINT", "-bi": "BIGINT", "abs(i - 50)": "INTEGER",
                     "de // 2": None}


def test_a_written_expression_carries_its_columns_types():
    """Once annotated (sql/guard.py), the expression is typed without the policy's types."""
    node = annotated(parse("abs(ti - 5)"), TYPES.get)
    assert number_type(node.copy(), lambda name: None) == "TINYINT"
    assert number_type(parse("abs(ti - 5)"), lambda name: None) is None
