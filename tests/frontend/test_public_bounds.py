"""A joined public table's number column aggregated without declared bounds gets [MIN, MAX] of its data
(issue 24, item 1; frontend/public_bounds.py): TPC-H Q9 plans under benchmarks/tpch/policy.yaml without
ps_supplycost's bounds, explain shows them, the bounds hold every value exactly, they are read once per
reader and never depend on a private row, and a column with no value to read is refused (DP316)."""
from fractions import Fraction

import duckdb
import pytest

import dpsql
from dpsql.testing import engine_reads, run
from tests.support.paths import ROOT
from tests.support.tpch import whole

TPCH = ROOT / "benchmarks" / "tpch"
POLICY = {"budget": {"epsilon": 100}, "tables": {
    "t": {"privacy_unit": "id", "max_groups_per_unit": 1, "max_rows_per_unit": 2,
          "columns": {"id": {"identifier": True}, "k": {}, "x": {"lower": 0, "upper": 10}}},
    "p": {"public": True}}}
QUERY = "SELECT SUM(x * price) AS s FROM t JOIN p ON t.k = p.k"


def database(prices: list, private: list) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE p (k BIGINT, price DECIMAL(15, 2))")
    con.execute("CREATE TABLE t (id BIGINT, k BIGINT, x DOUBLE)")
    if prices:
        con.executemany("INSERT INTO p VALUES (?, ?)", list(enumerate(prices)))
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", private)
    return con


PRIVATE = [(i, i % 3, float(i % 11)) for i in range(30)]


def test_q9_plans_with_ps_supplycost_bounds_read_from_partsupp():
    db = dpsql.connect(whole(), policy=str(TPCH / "policy.yaml"), ledger=":memory:")
    assert "bounds" not in (TPCH / "policy.yaml").read_text().split("partsupp")[1]
    plan = db.explain((TPCH / "queries" / "q09.sql").read_text())
    low, high = whole().execute("SELECT MIN(ps_supplycost), MAX(ps_supplycost) FROM partsupp").fetchone()
    column = plan.table.columns["ps_supplycost"]
    assert (Fraction(column.lower), Fraction(column.upper)) == (Fraction(low), Fraction(high))
    assert f"ps_supplycost: bounds [{float(low):.15g}, {float(high):.15g}] read from the public table partsupp" \
        in str(plan).split("rewritten SQL:")[0]
    (m,) = plan.measurements
    assert m.lower == pytest.approx(-50 * float(high)) and m.upper == pytest.approx(105_000 - float(low))


def test_bounds_hold_every_value_exactly():
    # 0.1 and 0.3 are no doubles: the nearest ones outside them are taken.
    db = dpsql.connect(database([0.1, 0.2, 0.3], PRIVATE), policy=POLICY, ledger=":memory:")
    column = db.explain(QUERY).table.columns["price"]
    assert Fraction(column.lower) <= Fraction("0.1") < Fraction(column.lower) + Fraction(1, 10 ** 15)
    assert Fraction(column.upper) >= Fraction("0.3") > Fraction(column.upper) - Fraction(1, 10 ** 15)
    exact = sum(x * (0.1, 0.2, 0.3)[k] for _, k, x in PRIVATE)
    assert run(db, QUERY).rows[0][0] == pytest.approx(exact, rel=1e-4)


def test_a_private_row_never_moves_the_bounds():
    """Neighbours (one person more, with extreme values) read the same bounds: public data only."""
    plans = [dpsql.connect(database([2, 5, 7], rows), policy=POLICY, ledger=":memory:").explain(QUERY)
             for rows in (PRIVATE, PRIVATE + [(999, 2, 1e9)])]
    assert [(m.lower, m.upper, m.sensitivity) for m in plans[0].measurements] == \
        [(m.lower, m.upper, m.sensitivity) for m in plans[1].measurements]
    assert plans[0].measurements[0].upper == 70.0


def test_read_once_per_reader():
    db = dpsql.connect(database([2, 5, 7], PRIVATE), policy=POLICY, ledger=":memory:")
    with engine_reads(db) as seen:
        db.explain(QUERY)
        db.explain(QUERY.replace("AS s", "AS s2"))
    assert sum("MIN(" in s for s in seen) == 1   # the second query is planned anew, the bounds kept


@pytest.mark.parametrize("prices", [[], [None, None]], ids=["empty", "nulls"])
def test_no_value_to_read_is_refused(prices):
    db = dpsql.connect(database(prices, PRIVATE), policy=POLICY, ledger=":memory:")
    with pytest.raises(dpsql.DpsqlError) as info:
        db.explain(QUERY)
    assert info.value.code == "DP316" and "p.price" in info.value.message and "bounds" in info.value.hint
    assert "no value to read them from" in info.value.message
    assert QUERY[info.value.start:info.value.end + 1] == "SUM(x * price)"


def test_declared_bounds_win():
    policy = {**POLICY, "tables": {**POLICY["tables"], "p": {"public": True, "columns": {
        "price": {"lower": 0, "upper": 100}}}}}
    db = dpsql.connect(database([2, 5, 7], PRIVATE), policy=policy, ledger=":memory:")
    with engine_reads(db) as seen:
        column = db.explain(QUERY).table.columns["price"]
    assert (column.lower, column.upper, column.bounds_read) == (0, 100, False)
    assert not any("MIN(" in s for s in seen)
