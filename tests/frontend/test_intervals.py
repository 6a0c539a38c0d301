"""Interval arithmetic is sound: for random expressions and random values within the columns'
bounds, DuckDB's value of the expression, guarded per operation as the lowering writes it (a failing
operation NULL on its own), lies in the derived interval (up to float rounding, which the rewrite's
final clamp absorbs anyway)."""
import math

import duckdb
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.frontend.intervals import interval
from dpsql.sql.guard import per_operation
from tests.support.checks import examples

LITERALS = st.integers(-5, 5).map(str) | st.sampled_from(["0.5", "2.25", "-1.5"])


def expressions(depth=3):
    leaf = st.sampled_from(["a", "b"]) | LITERALS
    if depth == 0:
        return leaf
    sub = expressions(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(sub, st.sampled_from(["2", "-4", "0.5"])).map(lambda t: f"({t[0]} / {t[1]})"),
        st.tuples(sub, sub).map(lambda t: f"CASE WHEN a > b THEN {t[0]} ELSE {t[1]} END"),
        st.tuples(sub, sub).map(lambda t: f"GREATEST({t[0]}, {t[1]})"),
        st.tuples(sub, sub).map(lambda t: f"LEAST({t[0]}, {t[1]})"),
        sub.map(lambda e: f"ABS({e})"),
        sub.map(lambda e: f"ROUND({e})"),
        sub.map(lambda e: f"CAST({e} AS INTEGER)"),
        sub.map(lambda e: f"-({e})"),
    )


def written(expr: str) -> str:
    """The expression as the lowering writes it over DOUBLE columns a and b (sql/guard.py)."""
    return per_operation(sqlglot.parse_one(expr, read="duckdb"), {"a": "DOUBLE", "b": "DOUBLE"}.get).sql("duckdb")


bounds = st.tuples(st.floats(-100, 100), st.floats(-100, 100)).map(sorted).map(tuple)


@settings(max_examples=examples(120), deadline=None)
@given(expr=expressions(), a=bounds, b=bounds, fractions=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)),
                                                                    min_size=1, max_size=20))
def test_the_value_stays_in_the_derived_interval(expr, a, b, fractions):
    derived = interval(sqlglot.parse_one(expr, read="duckdb"), {"a": a, "b": b}.get)
    if derived is None:
        return
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a DOUBLE, b DOUBLE)")
    rows = [(a[0] + fa * (a[1] - a[0]), b[0] + fb * (b[1] - b[0])) for fa, fb in fractions]
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    values = [v for (v,) in con.execute(f"SELECT {written(expr)} FROM t").fetchall() if v is not None]
    slack = 1e-9 * max(1.0, abs(derived[0]), abs(derived[1]))
    for v in values:
        assert derived[0] - slack <= v <= derived[1] + slack, (expr, rows, v, derived)


def test_a_divisor_that_can_be_zero_has_no_bound():
    assert interval(sqlglot.parse_one("a / b"), {"a": (0, 1), "b": (-1, 1)}.get) is None
    assert interval(sqlglot.parse_one("a / b"), {"a": (0, 1), "b": (1, 2)}.get) == (0.0, 1.0)


def test_unbounded_columns_give_no_bound_unless_only_in_conditions():
    bound = {"a": (0, 1)}.get
    assert interval(sqlglot.parse_one("a + z"), bound) is None
    assert interval(sqlglot.parse_one("CASE WHEN z = 'x' THEN a ELSE 2 END"), bound) == (0.0, 2.0)
    assert not math.isinf(interval(sqlglot.parse_one("a * 1e300"), bound)[1])


def test_greatest_and_least_skip_null_arguments():
    # DuckDB's LEAST(NULL, 300) is 300: an argument that can be NULL may drop out of the comparison.
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (-3.0, 1.0), (NULL, 2.0), (2.0, NULL), (NULL, NULL)) v(a, b)")
    bound = {"a": (-5.0, 5.0), "b": (0.0, 2.0)}.get
    for expr in ["LEAST(a, b)", "GREATEST(a, b)", "LEAST(TRY_CAST(a AS UTINYINT), 300)", "GREATEST(a, 4, b)",
                 "LEAST(a, 4, 1)", "GREATEST(-a, b)"]:
        lo, hi = interval(sqlglot.parse_one(expr, read="duckdb"), bound)
        values = [v for (v,) in con.execute(f"SELECT {written(expr)} FROM t").fetchall() if v is not None]
        assert values and all(lo <= v <= hi for v in values), (expr, values, (lo, hi))
    assert interval(sqlglot.parse_one("LEAST(a, 4, 1)"), bound) == (-5.0, 1.0)
