"""Ranges on bounded columns narrow derived keys and L (issue 24, item 3; frontend/ranges.py): TPC-H
Q8's two years instead of seven, L = 2 instead of 4; each comparison form's narrowed bounds hold every
value DuckDB's own WHERE keeps (no row the query counts is dropped) and are the tightest whole days or
integers that do."""
import datetime

import duckdb
import pytest
import sqlglot

import dpsql
from dpsql.frontend.ranges import narrowed
from dpsql.policy.model import ColumnPolicy
from dpsql.testing import run
from tests.support.fixture import POLICY, make_database
from tests.support.paths import ROOT
from tests.support.tpch import whole

TPCH = ROOT / "benchmarks" / "tpch"
LO, HI = datetime.date(1994, 12, 25), datetime.date(1995, 1, 8)
LITERALS = ["DATE '1995-01-01'", "TIMESTAMP '1995-01-01 00:00:00'", "TIMESTAMP '1995-01-01 12:30:00'",
            "DATE '1994-12-20'", "DATE '1995-02-01'"]
OPERATORS = ["<", "<=", ">", ">=", "="]


def test_q8_releases_two_years_at_l_two():
    db = dpsql.connect(whole(), policy=str(TPCH / "policy.yaml"), ledger=":memory:")
    sql = (TPCH / "queries" / "q08.sql").read_text()
    plan = db.explain(sql)
    assert plan.group_keys[0].columns[0].keys == (datetime.date(1995, 1, 1), datetime.date(1996, 1, 1))
    assert (plan.max_groups, plan.partitions) == (2, 2)
    assert "the policy's 1992-01-01..1998-12-31 narrowed by the WHERE" in str(plan).split("rewritten SQL:")[0]
    assert [r[0] for r in run(db, sql).rows] == [1995, 1996]


def _where(condition: str) -> sqlglot.exp.Expression:
    return sqlglot.parse_one(f"SELECT 1 FROM t WHERE {condition}", read="duckdb").args["where"].this


@pytest.mark.parametrize("kind", ["DATE", "TIMESTAMP"])
@pytest.mark.parametrize("op", OPERATORS)
@pytest.mark.parametrize("literal", LITERALS)
def test_day_bounds_hold_what_duckdb_keeps_and_no_more(kind, op, literal):
    """Values every 30 minutes across the bounds (a DATE column: each day): the narrowed days are those of
    the first and last value DuckDB's WHERE keeps, or the policy's where none is kept."""
    con = duckdb.connect()
    step = "1 DAY" if kind == "DATE" else "30 MINUTES"
    con.execute(f"CREATE TABLE t AS SELECT CAST(range AS {kind}) AS d FROM range(TIMESTAMP '{LO}', "
                f"TIMESTAMP '{HI}' + INTERVAL 1 DAY, INTERVAL {step})")
    kept = con.execute(f"SELECT MIN(d), MAX(d) FROM t WHERE d {op} {literal}").fetchall()[0]
    column = ColumnPolicy("d", dates=(LO, HI), sql_type=kind)
    days = narrowed(column, _where(f"d {op} {literal}")).dates
    if kept[0] is None:   # nothing kept: the policy's bounds stand
        assert days == (LO, HI)
    else:
        first, last = (v if kind == "DATE" else v.date() for v in kept)
        assert days == (first, last), (kept, days)


INTEGERS = ["30", "30.5", "-2.5", "200"]


@pytest.mark.parametrize("kind", ["BIGINT", "DOUBLE", "DECIMAL(10, 2)"])
@pytest.mark.parametrize("op", OPERATORS)
@pytest.mark.parametrize("literal", INTEGERS)
def test_number_bounds_hold_what_duckdb_keeps(kind, op, literal):
    """Values every quarter in [-10, 100]: the narrowed bounds contain every value the WHERE keeps, and
    for an integer column are the first and last of them."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT CAST(range / 4 AS {kind}) AS x FROM range(-40, 401)")
    kept = con.execute(f"SELECT MIN(x), MAX(x) FROM t WHERE x {op} {literal}").fetchall()[0]
    column = ColumnPolicy("x", lower=-10, upper=100, sql_type=kind)
    bounds = narrowed(column, _where(f"x {op} {literal}"))
    if kept[0] is None:
        assert (bounds.lower, bounds.upper) == (-10, 100)
        return
    assert bounds.lower <= kept[0] and bounds.upper >= kept[1], (kept, bounds)
    if kind == "BIGINT":
        assert (bounds.lower, bounds.upper) == kept


def test_only_top_level_conjuncts_narrow():
    column = ColumnPolicy("x", lower=0, upper=100, sql_type="BIGINT")
    for condition in ("x > 50 OR x < 10", "NOT x > 50", "x + 1 > 50", "y > 50", "x > y"):
        assert narrowed(column, _where(condition)) is column, condition
    both = narrowed(column, _where("(x > 50 AND x <= 70) AND 20 <= x"))
    assert (both.lower, both.upper) == (51, 70)


def test_bins_and_l_narrowed_and_the_answer_is_duckdbs():
    db = dpsql.connect(make_database(), policy={**POLICY, "tables": {**POLICY["tables"], "people": {
        **POLICY["tables"]["people"], "privacy_unit": "id", "max_groups_per_unit": 5}}}, ledger=":memory:")
    sql = "SELECT FLOOR(age / 10) AS d, COUNT(*) AS n FROM people WHERE age >= 25 AND age < 45 GROUP BY FLOOR(age / 10)"
    plan = db.explain(sql)
    assert (plan.max_groups, plan.partitions) == (3, 3)
    plain = make_database().execute("SELECT FLOOR(age / 10) AS d, COUNT(*) AS n FROM people WHERE age >= 25 AND age "
                                    "< 45 GROUP BY 1 ORDER BY 1").fetchall()
    assert run(db, sql).rows == plain


@pytest.mark.parametrize("op", OPERATORS)
@pytest.mark.parametrize("literal", LITERALS)
def test_instant_bounds_hold_what_duckdb_keeps(op, literal):
    """A TIMESTAMP column bounded by instants (not whole days): the narrowed instants hold every value
    the WHERE keeps, and are the literal's where it lies within the bounds."""
    first, last = datetime.datetime(1994, 12, 25, 6), datetime.datetime(1995, 1, 8, 18)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT range AS d FROM range(TIMESTAMP '{first}', TIMESTAMP '{last}', "
                "INTERVAL 30 MINUTES)")
    kept = con.execute(f"SELECT MIN(d), MAX(d) FROM t WHERE d {op} {literal}").fetchall()[0]
    bounds = narrowed(ColumnPolicy("d", dates=(first, last), sql_type="TIMESTAMP"), _where(f"d {op} {literal}")).dates
    if kept[0] is not None:
        assert bounds[0] <= kept[0] and bounds[1] >= kept[1], (kept, bounds)
        assert (bounds[1] - bounds[0]) <= (kept[1] - kept[0]) + datetime.timedelta(hours=1), (kept, bounds)
