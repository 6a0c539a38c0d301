"""Automatic contribution bounds (``max_rows_per_unit: auto``, ``max_groups_per_unit: auto``): chosen for
each query's tables and groups by a DP histogram of people by their rows and groups, charged once per
data version and replayed after; refused with DP330 only by explain, which spends nothing; the bounds
then hold exactly as declared ones do."""
import duckdb
import numpy as np
import pyarrow as pa
import pytest

import dpsql
from dpsql import testing
from dpsql.api import auto_contributions
from dpsql.errors import NeedsBounds, PolicyError
from dpsql.policy.loading import load_policy

CLINICS = ["a", "b", "c", "d", "e", "f"]


def _database(n=3000, seed=0, heavy=None):
    """Everyone has 4 to 7 visits spread over 2 or 3 of six clinics."""
    rng = np.random.default_rng(seed)
    visits = rng.integers(4, 8, n)
    person = np.repeat(np.arange(n), visits)
    favourites = rng.choice(len(CLINICS), (n, 3))
    clinic = favourites[person, rng.integers(0, 2 + (np.arange(n) % 2)[person])]
    names = np.array(CLINICS)[clinic]
    if heavy is not None:
        person = np.concatenate([person, np.full(heavy, n)])
        names = np.concatenate([names, np.array(CLINICS)[np.arange(heavy) % len(CLINICS)]])
    visits = pa.table({"pid": pa.array(person, pa.int64()), "clinic": pa.array(names, pa.string()),   # noqa: F841
                       "cost": pa.array(np.full(len(person), 10.0))})
    con = duckdb.connect()
    con.execute("CREATE TABLE visits AS SELECT * FROM visits")
    return con


def _policy(L="auto", C="auto", **extra):
    return {"budget": {"epsilon": 100, "delta": 1e-3}, "default_epsilon": 1.0, **extra,
            "tables": {"visits": {"privacy_unit": "pid", "max_groups_per_unit": L, "max_rows_per_unit": C,
                                  "columns": {"clinic": {"keys": CLINICS}, "cost": {"lower": 0, "upper": 20}}}}}


def _connect(con, seed=1, **policy):
    return dpsql.connect(con, policy=_policy(**policy), ledger=":memory:", rng=np.random.default_rng(seed))


def test_the_policy_takes_auto_for_either_bound_and_nothing_else():
    table = load_policy(_policy()).tables["visits"]
    assert table.auto_contributions == (("visits", "groups"), ("visits", "rows"))
    assert (table.max_groups_per_unit, table.max_rows_per_unit) == (1, 1), "until chosen: 1, which is sound"
    with pytest.raises(PolicyError, match="max_rows_per_unit: must be a whole number or auto"):
        load_policy(_policy(C="automatic"))
    row_level = _policy()
    row_level["tables"]["visits"]["privacy_unit"] = "row"
    with pytest.raises(PolicyError, match="with `row`"):
        load_policy(row_level)


def test_explain_says_they_are_not_chosen_and_spends_nothing():
    db = _connect(_database())
    with pytest.raises(NeedsBounds) as info:
        db.explain("SELECT COUNT(*) FROM visits")
    assert info.value.code == "DP330" and info.value.contributions == (("visits", "rows"),)
    assert "visits.max_rows_per_unit" in info.value.message
    assert db.budget.spent_epsilon == 0


def test_a_query_pays_for_the_histogram_once_and_its_bounds_fit_the_data():
    con = _database()
    truth = con.execute("SELECT COUNT(*) FROM visits").fetchone()[0]
    db = _connect(con, auto_bounds={"epsilon": 0.1})
    count = db.sql("SELECT COUNT(*) AS n FROM visits").fetchall()[0][0]
    assert db.budget.spent_epsilon == pytest.approx(1.1)
    plan = db.explain("SELECT COUNT(*) AS n FROM visits")
    assert 6 <= plan.max_rows <= 12, "everyone has 4 to 7 rows: a C below drops rows, far above adds noise"
    assert "automatic contribution bounds: C = " in str(plan)
    assert abs(count - truth) < 200
    db.sql("SELECT COUNT(*) AS n FROM visits WHERE cost > 5")
    assert db.budget.spent_epsilon == pytest.approx(2.1), "a filter does not change the histogram: replayed free"


def test_a_grouped_query_gets_its_own_L_and_options_can_give_it():
    con = _database()
    db = _connect(con, auto_bounds={"epsilon": 0.1})
    db.sql("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic")
    plan = db.explain("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic")
    assert 2 <= plan.max_groups <= 4, "everyone visits 2 or 3 clinics"
    assert 2 <= plan.max_rows <= 8
    assert "L = " in str(plan).split("automatic contribution bounds:")[1].splitlines()[0]
    spent = db.budget.spent_epsilon
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 2) clinic, COUNT(*) AS n " \
          "FROM visits GROUP BY clinic"
    db.sql(sql)
    assert db.explain(sql).max_groups == 2
    assert db.budget.spent_epsilon == pytest.approx(spent + 1.0), "only C to choose: the same histogram, replayed"


def test_declared_bounds_stay_as_declared():
    db = _connect(_database(), L=2, auto_bounds={"epsilon": 0.1})
    db.sql("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic")
    plan = db.explain("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic")
    assert plan.max_groups == 2 and "L = " not in str(plan).split("automatic contribution bounds:")[1].splitlines()[0]


@pytest.mark.parametrize("sql", ["SELECT COUNT(*) AS n FROM visits",
                                 "SELECT clinic, SUM(cost) AS s FROM visits GROUP BY clinic"])
def test_a_heavy_neighbour_moves_the_bounded_answer_by_at_most_the_sensitivity(sql):
    """The chosen bounds are enforced as declared ones are: added to the data, a person with 500 rows
    in every clinic moves each bounded exact value by at most L * C (times the value bound)."""
    db = _connect(_database())
    db.sql(sql)
    plan = db.explain(sql)
    L, C = plan.max_groups, plan.max_rows
    bigger = dpsql.connect(_database(heavy=3000), policy=_policy(L=L, C=C), ledger=":memory:")
    smaller = dpsql.connect(_database(), policy=_policy(L=L, C=C), ledger=":memory:")
    before = {r[:-1]: r[-1] for r in testing.run(smaller, sql).rows}
    after = {r[:-1]: r[-1] for r in testing.run(bigger, sql).rows}
    per_row = 20 if "SUM" in sql else 1
    moved = [abs(after[k] - before[k]) for k in before]
    assert sum(moved) <= L * C * per_row + 1e-9 and max(moved) <= C * per_row + 1e-9
    assert testing.run(db, sql).rows == testing.run(smaller, sql).rows, "the chosen bounds are the ones applied"


def test_the_choice_fits_the_histogram():
    # 900 people with 2-3 rows in one group, 100 with 4-7 rows in 2-3 groups: at epsilon 1 bounds that
    # drop nothing (L 3, C 3) cost less than the rows smaller ones drop; at epsilon 0.1 the noise of
    # L 3 costs more than the hundred's third groups.
    assert auto_contributions.choose({(2, 1): 900.0, (3, 2): 100.0}, 1.0, None, None, None) == (3, 3)
    assert auto_contributions.choose({(2, 1): 900.0, (3, 2): 100.0}, 0.1, None, None, None) == (2, 3)
    # Many people with many rows: dropping them costs more than the noise of a larger C.
    L, C = auto_contributions.choose({(2, 1): 100.0, (6, 1): 5000.0}, 1.0, None, 1, None)
    assert L == 1 and C >= 32
    # Empty cells far out (noise) are not taken for heavy people; a run of real ones beyond is.
    kept = auto_contributions.nonempty({(2, 1): 900.0, (3, 1): 60.0, (4, 1): 30.0, (12, 1): 25.0}, 50.0, 10.0)
    assert kept == {(2, 1): 900.0, (3, 1): 60.0, (4, 1): 30.0}


def test_the_histogram_reads_the_querys_own_tables_and_groups_not_its_filter():
    sql = auto_contributions.histogram_sql("SELECT clinic AS c, COUNT(*) FROM visits WHERE cost > 1 GROUP BY c", "pid",
                                           load_policy(_policy()))
    assert "COUNT(DISTINCT clinic)" in sql and "cost" not in sql and 'GROUP BY "pid"' in sql
    assert "groups_bin" not in auto_contributions.histogram_sql("SELECT COUNT(*) FROM visits", "pid", load_policy(_policy()))
