"""The clipping report (issue 25, item 2; plan/clipping.py): per group, a noisy count of the people whose
rows or values bounding cut and of the group's people, asked for by report_clipping, paid for from the
query's epsilon; a warning when the share is material. Seeded connections: the same noise every run."""
import duckdb
import numpy as np
import pytest

import dpsql
from dpsql import testing
from dpsql.api.clipping import split
from dpsql.errors import DpsqlError
from dpsql.plan.kinds import Quantity

# TPC-H Q1's shape: 200 people with 100 rows each over two flags, C = 5 rows and L = 2 flags per person:
# every person's rows are cut in every group.
HEAVY = {"budget": {"epsilon": 100}, "tables": {"t": {"privacy_unit": "u", "max_groups_per_unit": 2,
         "max_rows_per_unit": 5, "columns": {"u": {"identifier": True}, "g": {"keys": ["a", "b"]},
                                             "v": {"lower": 0, "upper": 10}}}}}
Q1 = "SELECT g, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS a FROM t GROUP BY g"


def table(person: str):
    """20,000 rows over two flags, their person ``person`` (an expression of ``range``)."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT {person} AS u, CASE WHEN range % 3 = 0 THEN 'a' ELSE 'b' END AS g, "
                "(range % 7)::DOUBLE AS v FROM range(20000)")
    return con


@pytest.fixture(scope="module")
def heavy():
    return table("range % 200")


@pytest.fixture(scope="module")
def light():
    """One row per person, every value inside its bounds: bounding cuts nothing."""
    return table("range")


def connect(con, seed: int = 7, **changes):
    policy = {"budget": HEAVY["budget"], "tables": {"t": {**HEAVY["tables"]["t"], **changes}}}
    return dpsql.connect(con, policy=policy, ledger=":memory:", rng=np.random.default_rng(seed))


MATERIAL = "bounding changed the answer materially"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_warning_fires_where_every_person_is_capped(heavy, seed):
    res = connect(heavy, seed).sql(Q1, epsilon=10.0, report_clipping=True)
    assert [w for w in res.warnings if MATERIAL in w], res.warnings
    report = res.clipping.to_pylist()
    assert [r["g"] for r in report] == ["a", "b"]
    assert all(r["fraction_ci_low"] > 0.5 and r["fraction_ci_low"] <= r["fraction"] <= r["fraction_ci_high"]
               for r in report), report


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_warning_where_nothing_is_cut(light, seed):
    res = connect(light, seed).sql(Q1, epsilon=10.0, report_clipping=True)
    assert not [w for w in res.warnings if MATERIAL in w], res.warnings
    assert all(r["fraction_ci_low"] < 0.05 for r in res.clipping.to_pylist())


def test_the_exact_report_counts_each_reason_once():
    """Noise off: a person counts in a group where they have more than C rows, more groups than L, or a
    value outside its bounds; once however many reasons. People 0-3: one reason each, 4: all of them."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u BIGINT, g VARCHAR, v DOUBLE)")
    rows = [(0, "a", 1.0)] * 6 + [(1, "a", 1.0), (1, "b", 1.0), (1, "c", 1.0), (2, "b", 11.0), (3, "c", -1.0),
                                  (5, "a", 1.0), (6, "b", None)] + [(4, "a", 50.0)] * 7 + [(4, "b", 1.0), (4, "c", 1.0)]
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    db = connect(con, max_groups_per_unit=2, columns={"u": {"identifier": True}, "g": {"keys": ["a", "b", "c"]},
                                                       "v": {"lower": 0, "upper": 10}})
    exact = testing.run(db, "SELECT g, SUM(v) AS s FROM t GROUP BY g", report_clipping=True)
    answer, counts = split(exact.table)
    got = dict(zip(answer.column("g").to_pylist(), zip(*(c.to_pylist() for c in counts.columns))))
    # Persons 1 and 4 keep 2 of their 3 groups (L = 2; which ones: the seam's hash), each cut in both.
    assert sum(c for c, _ in got.values()) == 1 + 2 + 1 + 1 + 2 and sum(p for _, p in got.values()) == 9, got
    assert got["a"][1] - got["a"][0] == 1 and got["b"][1] - got["b"][0] == 1 and got["c"][0] == got["c"][1], got


def test_the_report_is_charged_within_the_querys_epsilon(heavy):
    db = connect(heavy)
    res = db.sql(Q1, epsilon=2.0, report_clipping=True)
    assert db.budget.spent_epsilon == pytest.approx(2.0)
    plan = res.plan
    clipped = plan.measurement(plan.clipping.clipped)
    assert clipped.kind == Quantity.CLIPPED and clipped.sensitivity.partitions == 2
    assert clipped.sensitivity.per_partition == 1
    assert sum(m.epsilon for m in plan.measurements) <= 2.0
    report = [m for m in plan.measurements if m.name in (plan.clipping.clipped, plan.clipping.people)]
    assert sum(m.epsilon for m in report) == pytest.approx(0.2)
    assert clipped.release in plan.releases()
    stated = db.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(clipping_epsilon = 0.5) g, COUNT(*) AS n FROM t GROUP BY g",
                    epsilon=2.0).plan
    assert sum(m.epsilon for m in stated.measurements if m.kind in (Quantity.CLIPPED, Quantity.UNITS)) == \
        pytest.approx(0.5)
    assert db.budget.spent_epsilon == pytest.approx(4.0)


def test_explain_states_the_reports_epsilon(heavy):
    text = str(connect(heavy).explain(Q1, epsilon=1.0, report_clipping=True))
    assert "clipping report (report_clipping): epsilon 0.1 of the query's 1 (the default 10%)" in text
    assert "COUNT(people whose rows or values bounding cut)" in text
    assert "clipping report" not in str(connect(heavy).explain(Q1, epsilon=1.0))


def test_without_the_option_nothing_changes(heavy):
    res = connect(heavy).sql(Q1, epsilon=1.0)
    assert res.clipping is None and res.columns == ["g", "n", "s", "a"]
    assert not any(m.kind == Quantity.CLIPPED for m in res.plan.measurements)
    reported = connect(heavy).sql(Q1, epsilon=1.0, report_clipping=True)
    assert reported.columns == ["g", "n", "s", "a"] and "clipping report" in str(reported)


def test_a_replay_gives_the_same_report(heavy):
    db = connect(heavy)
    first = db.sql(Q1, epsilon=1.0, report_clipping=True)
    again = db.sql(Q1, epsilon=1.0, report_clipping=True)
    assert again.replayed and again.clipping == first.clipping
    assert not db.sql(Q1, epsilon=1.0).replayed   # without the report: another release


@pytest.mark.parametrize("sql, code", [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(clipping_epsilon = 1) g, COUNT(*) FROM t GROUP BY g", "DP331"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(clipping_epsilon = 0) g, COUNT(*) FROM t GROUP BY g", "DP331"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(report_clipping = 1) g, COUNT(*) FROM t GROUP BY g", "DP308"),
])
def test_bad_options_are_refused_before_spending(heavy, sql, code):
    db = connect(heavy)
    with pytest.raises(DpsqlError) as err:
        db.sql(sql, epsilon=1.0)
    assert err.value.code == code and err.value.hint
    assert db.budget.spent_epsilon == 0
    with pytest.raises(DpsqlError):
        db.sql(Q1, epsilon=1.0, report_clipping="yes")
