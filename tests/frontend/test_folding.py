"""Constant folding (dpsql/frontend/fold.py): expressions of literals only become one literal at plan
time, with DuckDB's exact semantics, checked against DuckDB itself; errors keep pointing into the SQL
as written; an INTERVAL that does not fold stays refused."""
import datetime
import math

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import dpsql
from dpsql import testing
from dpsql.frontend.fold import evaluate, fold_constants
from dpsql.frontend.parse import parse
from tests.support import sql_tree
from tests.support.checks import refusal


def folded(expression: str) -> str:
    """The expression as the folding pass leaves it (an output: its exact DuckDB type is kept)."""
    sql = f"SELECT {expression} AS v FROM t"
    return fold_constants(parse(sql), sql).expressions[0].this.sql("duckdb")


def in_duckdb(expression: str):
    """(value, DuckDB type) of a constant expression, or the error's class."""
    try:
        return duckdb.sql(f"SELECT {expression}, typeof({expression})").fetchall()[0]
    except duckdb.Error as e:
        return type(e).__name__


def same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple) and isinstance(a[0], float) and isinstance(b[0], float):
        return (math.isnan(a[0]) and math.isnan(b[0]) or a[0] == b[0]) and a[1] == b[1]
    return a == b


# --- what folds, and to what ---------------------------------------------------------------------

@pytest.mark.parametrize("expression, literal", [
    # TPC-H Q1, Q6, Q4, Q5: DATE +- INTERVAL is a TIMESTAMP in DuckDB
    ("DATE '1998-12-01' - INTERVAL '90' DAY", "CAST('1998-09-02 00:00:00' AS TIMESTAMP)"),
    ("date '1994-01-01' + interval '1' year", "CAST('1995-01-01 00:00:00' AS TIMESTAMP)"),
    ("date '1993-07-01' + interval '3' month", "CAST('1993-10-01 00:00:00' AS TIMESTAMP)"),
    # months clamp to the month's end
    ("DATE '2021-01-31' + INTERVAL 1 MONTH", "CAST('2021-02-28 00:00:00' AS TIMESTAMP)"),
    ("DATE '2020-03-31' - INTERVAL '1' MONTH", "CAST('2020-02-29 00:00:00' AS TIMESTAMP)"),
    ("DATE '2020-02-29' + INTERVAL 1 YEAR", "CAST('2021-02-28 00:00:00' AS TIMESTAMP)"),
    ("DATE '2020-01-31' + INTERVAL '1' QUARTER", "CAST('2020-04-30 00:00:00' AS TIMESTAMP)"),
    ("INTERVAL '3 months' + DATE '2020-11-30'", "CAST('2021-02-28 00:00:00' AS TIMESTAMP)"),
    ("DATE '2020-01-01' - INTERVAL '-1' WEEK", "CAST('2020-01-08 00:00:00' AS TIMESTAMP)"),
    ("TIMESTAMP '2020-01-31 10:00:00' + INTERVAL 1 MONTH", "CAST('2020-02-29 10:00:00' AS TIMESTAMP)"),
    # DATE +- integer is a DATE; DATE - DATE a number of days
    ("DATE '2020-01-01' + 5", "CAST('2020-01-06' AS DATE)"),
    ("5 + DATE '2020-01-01'", "CAST('2020-01-06' AS DATE)"),
    ("DATE '2020-03-01' - DATE '2020-01-01'", "CAST(60 AS BIGINT)"),
    # numbers, with DuckDB's types (an output keeps its exact type)
    ("1 + 2", "CAST(3 AS INT)"),
    ("-(3)", "-3"),                            # a negated literal is a literal in DuckDB
    ("0.06 - 0.01", "CAST(0.05 AS DECIMAL(4, 2))"),
    ("1 + 0.5", "CAST(1.5 AS DECIMAL(12, 1))"),
    ("1 / 2", "0.5e0"),
    ("7 // 2", "CAST(3 AS INT)"),
    ("(-7) % 3", "CAST(-1 AS INT)"),
    ("1e2 + 1", "101.0e0"),
    ("-(2147483648)", "-2147483648"),
    # comparisons
    ("1 < 2", "TRUE"),
    ("0.1 = 0.1e0", "TRUE"),
    ("'a' < 'b'", "TRUE"),
    ("DATE '2020-01-01' < TIMESTAMP '2020-01-01 00:00:01'", "TRUE"),
])
def test_constant_expressions_fold_to_duckdbs_own_value(expression, literal):
    assert folded(expression) == literal
    assert same(in_duckdb(literal), in_duckdb(expression)), (in_duckdb(literal), in_duckdb(expression))


@pytest.mark.parametrize("expression", [
    "2147483647 + 1",                         # DuckDB raises: overflow of INTEGER
    "9223372036854775807 * 2",
    "1 // 0", "1 % 0",                         # division by zero raises
    "1 / 0",                                   # infinity in DuckDB: not a finite literal
    "DATE '9999-12-31' + INTERVAL 1 DAY",      # past the year 9999
    "DATE '2020-01-01' + INTERVAL '1 year 2 months'",
    "DATE '2020-01-01' + INTERVAL '1.5' DAY",
    "DATE '2020-02-30' + INTERVAL 1 DAY",      # not a day
    "99999999999999999999 + 1",                # a HUGEINT literal
    "7.5 // 2",                                # DOUBLE // is not integer division in DuckDB
    "'1' + 1",                                 # a string cast to a number
])
def test_what_duckdb_would_refuse_or_read_otherwise_is_left_as_written(expression):
    assert evaluate(parse(f"SELECT {expression}").expressions[0]) is None
    assert same(in_duckdb(folded(expression)), in_duckdb(expression))


def test_a_folded_value_keeps_its_type_inside_arithmetic():
    """``tinyint + (1 + 1)`` is INTEGER arithmetic in DuckDB; ``tinyint + 2`` would be TINYINT and
    overflow at 127: the folded value is a typed literal there, a plain one where only its value
    matters."""
    sql = "SELECT COUNT(*) FROM t WHERE CAST(x AS TINYINT) + (1 + 1) > 1 + 1"
    where = fold_constants(parse(sql), sql).args["where"].sql("duckdb")
    assert where == "WHERE CAST(x AS TINYINT) + CAST(2 AS INT) > 2"
    assert duckdb.sql("SELECT CAST(127 AS TINYINT) + CAST(2 AS INT)").fetchall() == [(129,)]


def test_group_by_and_order_by_positions_are_not_folded():
    sql = "SELECT COUNT(*) FROM t GROUP BY 1 + 0 ORDER BY 1 + 1, x + (1 + 1)"
    statement = fold_constants(parse(sql), sql)
    assert statement.args["group"].sql() == "GROUP BY 1 + 0"
    assert statement.args["order"].sql("duckdb") == "ORDER BY 1 + 1, x + CAST(2 AS INT)"


# --- against DuckDB, at random -------------------------------------------------------------------

INTEGERS = st.sampled_from(["0", "1", "2", "3", "7", "10", "100", "127", "255", "2147483647", "2147483648",
                            "4294967296", "9223372036854775807"])
DECIMALS = st.sampled_from(["0.5", "0.05", "0.01", "1.5", "2.25", "123.456", "0.1", "999999999.999999999",
                            "0.000000000000000001", "5."])
DOUBLES = st.sampled_from(["1e2", "0.5e0", "1e300", "2.5e-3"])
DATES = st.sampled_from(["DATE '1998-12-01'", "DATE '2020-02-29'", "DATE '2021-01-31'", "DATE '0001-01-01'",
                         "DATE '9999-12-31'", "DATE '1970-01-01'", "TIMESTAMP '2020-01-31 10:30:00'",
                         "TIMESTAMP '1999-12-31 23:59:59.999999'"])
INTERVALS = st.builds(lambda n, unit, quoted: f"INTERVAL {repr(str(n)) if quoted or n < 0 else n} {unit}",
                      st.integers(-30, 400), st.sampled_from(["DAY", "DAYS", "WEEK", "MONTH", "MONTHS", "QUARTER",
                                                               "YEAR", "YEARS"]), st.booleans())


def expressions():
    numbers = st.one_of(INTEGERS, DECIMALS, DOUBLES)
    leaves = st.one_of(numbers, DATES, INTERVALS, st.sampled_from(["'a'", "'b'", "TRUE", "FALSE"]))

    def extend(inner):
        return st.one_of(
            st.builds(lambda a, op, b: f"({a} {op} {b})", inner,
                      st.sampled_from(["+", "-", "*", "/", "//", "%", "<", "<=", "=", "<>", ">", ">="]), inner),
            st.builds(lambda a: f"-({a})", inner))
    return st.recursive(leaves, extend, max_leaves=6)


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=expressions())
def test_folding_agrees_with_duckdb(expression):
    """Whatever folds, DuckDB computes the same value of the same type from the folded text as from
    the original; whatever DuckDB refuses stays refused (nothing that fails is folded away)."""
    written = parse(f"SELECT {expression} AS v").expressions[0].this.sql("duckdb")   # as sqlglot prints it
    before, after = in_duckdb(written), in_duckdb(folded(expression))
    assert same(before, after), f"{written} -> {folded(expression)}: {before} != {after}"


# --- through dpsql -------------------------------------------------------------------------------

def test_date_arithmetic_is_answered_as_if_folded_by_hand(db):
    """TPC-H Q1's filter: the same noiseless answer as the literal written by hand."""
    by_hand = testing.run(db, "SELECT COUNT(*) AS n FROM people WHERE joined <= DATE '2021-09-02'").rows
    folded_ = testing.run(db, "SELECT COUNT(*) AS n FROM people WHERE joined <= DATE '2021-12-01' - INTERVAL '90' DAY").rows
    assert folded_ == by_hand and by_hand[0][0] > 0


def test_decimal_arithmetic_in_between_is_folded(db):
    plan = db.explain("SELECT COUNT(*) FROM people WHERE income BETWEEN 0.06 - 0.01 AND 0.06 + 0.01")
    (between,) = sql_tree.tree(plan).find_all(exp.Between)
    assert [float(between.args[side].this) for side in ("low", "high") if between.args[side].is_number] == [0.05, 0.07]


def test_errors_still_point_into_the_sql_as_written(db):
    sql = "SELECT COUNT(*) FROM people WHERE zip = 1 + 1"
    err = refusal(db, sql)
    assert err.code == "DP306" and sql[err.start:err.end + 1] == "zip = 1 + 1"
    sql = "SELECT COUNT(*) FROM people LIMIT 0.5 + 0.5"
    err = refusal(db, sql)
    assert err.code == "DP307" and sql[err.start:err.end + 1] == "0.5 + 0.5"


@pytest.mark.parametrize("sql, caret", [
    ("SELECT COUNT(*) FROM people WHERE joined + INTERVAL 1 DAY > DATE '2020-01-01'", "INTERVAL 1 DAY"),
    ("SELECT COUNT(*) FROM people WHERE INTERVAL '1' month + joined > DATE '2020-01-01'", "INTERVAL '1' month"),
    ("SELECT COUNT(*) FROM people WHERE joined > DATE '2020-01-01' + INTERVAL '1 year 2 months'",
     "INTERVAL '1 year 2 months'"),
])
def test_an_interval_that_does_not_fold_stays_refused(db, sql, caret):
    err = refusal(db, sql)
    assert err.code == "DP102" and "INTERVAL" in err.message and "DATE '1998-12-01'" in err.hint
    assert sql[err.start:err.end + 1] == caret


def test_folding_spends_nothing_and_keeps_replays(db):
    sql = "SELECT COUNT(*) FROM people WHERE joined < DATE '2020-01-01' + INTERVAL 1 YEAR"
    first = db.sql(sql)
    again = db.sql(sql)
    assert again.replayed and again.fetchall() == first.fetchall()


def test_a_folded_date_is_a_timestamp_where_duckdb_says_so(db):
    """Outside a comparison with a DATE column the folded value keeps DuckDB's type."""
    assert isinstance(duckdb.sql("SELECT " + folded("DATE '2020-01-01' + INTERVAL 1 DAY")).fetchall()[0][0],
                      datetime.datetime)
    assert dpsql  # the package under test
