"""Automatic bounds (``bounds: auto``): chosen by a DP histogram the first time a query needs them,
charged once per data version (replayed after, for anyone), refused with DP330 only by explain,
which spends nothing; the choice is post-processing of the noisy counts."""
import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.api import auto_bounds
from dpsql.errors import NeedsBounds, PolicyError
from dpsql.policy.loading import load_policy


def _database(path, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    income = np.round(rng.lognormal(10, 1, n)).astype(int)          # skewed, all positive
    change = rng.normal(-50, 20, n)                                   # mostly negative
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people AS SELECT unnest(range(?)) AS id, unnest(?) AS income, unnest(?) AS change",
                [n, income.tolist(), change.tolist()])
    con.close()
    return income, change


def _policy(**extra):
    return {"budget": {"epsilon": 10}, **extra,
            "tables": {"people": {"privacy_unit": "id", "columns": {"income": {"bounds": "auto"},
                                                                   "change": {"bounds": "auto"}}}}}


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "people.duckdb"
    income, change = _database(path)
    return path, income, change


def test_explain_says_the_bounds_are_not_chosen_and_spends_nothing(data):
    path, _, _ = data
    db = dpsql.connect(str(path), policy=_policy(), rng=np.random.default_rng(1))
    with pytest.raises(NeedsBounds) as info:
        db.explain("SELECT SUM(income) FROM people")
    assert info.value.code == "DP330" and info.value.columns == (("people", "income"),)
    assert "people.income" in info.value.message and info.value.start == 7
    assert db.budget.spent_epsilon == 0


def test_a_query_that_needs_them_pays_for_the_histogram_once_and_the_bounds_fit_the_data(data):
    path, income, change = data
    db = dpsql.connect(str(path), policy=_policy(auto_bounds={"epsilon": 0.2}), rng=np.random.default_rng(2))
    total = db.sql("SELECT SUM(income) AS s FROM people", epsilon=1).fetchall()[0][0]
    assert db.budget.spent_epsilon == pytest.approx(1.2)
    bounds = db.policy.tables["people"].columns["income"]
    assert bounds.lower == 0 and np.quantile(income, 0.9) <= bounds.upper <= 2 * income.max()
    assert abs(total - income.sum()) / income.sum() < 0.02
    assert f"automatic bounds (bounds: auto; chosen by a DP histogram, paid once per data version): income [0, " \
           f"{bounds.upper:g}]" in str(db.explain("SELECT SUM(income) FROM people"))
    db.sql("SELECT AVG(income) AS a FROM people", epsilon=1)
    assert db.budget.spent_epsilon == pytest.approx(2.2), "chosen once: the next query pays only for itself"
    db.sql("SELECT SUM(change) AS s FROM people", epsilon=1)
    mostly_negative = db.policy.tables["people"].columns["change"]
    assert mostly_negative.lower <= np.quantile(change, 0.05) and mostly_negative.lower >= 2 * change.min() - 1
    assert mostly_negative.upper < 2 ** -10 or mostly_negative.upper <= 4 * max(change.max(), 1)


def test_a_new_connection_replays_the_paid_histogram_for_free(data, tmp_path):
    path, _, _ = data
    ledger = str(tmp_path / "ledger.sqlite")
    first = dpsql.connect(str(path), policy=_policy(), ledger=ledger, rng=np.random.default_rng(3))
    first.sql("SELECT SUM(income) FROM people", epsilon=1)
    chosen = first.policy.tables["people"].columns["income"]
    spent = first.budget.spent_epsilon
    first.close()
    again = dpsql.connect(str(path), policy=_policy(), ledger=ledger, rng=np.random.default_rng(4))
    again.sql("SELECT SUM(income) FROM people WHERE change < 0", epsilon=1)
    assert again.budget.spent_epsilon == pytest.approx(spent + 1), "the bounds' histogram was replayed"
    assert again.policy.tables["people"].columns["income"] == chosen


def test_the_choice_trades_what_clipping_loses_against_the_noise_of_the_bound():
    # 500 values near 12 (bin [8, 16)), 40 near 24 ([16, 32)), noise below the threshold elsewhere.
    counts = {4: 500.0, 5: 40.0, 30: 3.0, -7: 2.0}
    assert auto_bounds.choose(counts, 5.0, True, 1, 1.0) == (0.0, 32.0)
    # At a small epsilon the noise of a wide bound costs more than clipping the few large values.
    assert auto_bounds.choose(counts, 5.0, True, 1, 0.05) == (0.0, 16.0)
    # Mirrored: a column of negative values is bounded below, by 0 above.
    assert auto_bounds.choose({-b: c for b, c in counts.items()}, 5.0, True, 1, 1.0) == (-32.0, 0.0)
    assert auto_bounds.choose({}, 5.0, False, 1, 1.0) == (0.0, 0.0)


def test_a_thin_tail_counts_as_its_decay_predicts_and_a_column_that_ends_is_not_extended():
    """Strict threshold 150, noise sd 14. Beyond the body (bins 2 to 4: ratios 0.28, then 0.2, so each
    next ratio shrinks by 0.72), bins 5 to 7 count as predicted (72, 7.5, 0.56), so the bound covers
    the thin tail; bin 30 (25) is noise far away. Where a noisy count is far below the prediction
    (bin 5 at 10, sd 0.5), or an age-like column has nothing above [32, 64), the column ends there."""
    counts = {2: 9000.0, 3: 2500.0, 4: 500.0, 5: 95.0, 6: 25.0, 7: 3.0, 8: -2.0, 30: 25.0}
    assert auto_bounds.choose(counts, 150.0, True, 1, 1.0, sd=14.0) == (0.0, 48.0)
    assert auto_bounds.choose({**counts, 5: 10.0}, 150.0, True, 1, 1.0, sd=0.5) == (0.0, 16.0)
    assert auto_bounds.choose({5: 4500.0, 6: 3000.0, 7: 10.0, 8: -3.0}, 69.0, True, 1, 1.0, sd=14.0) == (0.0, 64.0)


def test_the_histogram_is_a_dp_query_with_public_bins():
    sql = auto_bounds.histogram_sql("people", "income", True)
    assert sql.count("WHEN") == 2 * (2 * 51 + 1) and '"income" >= 1 THEN 1 ' in sql and "<= -1125899906842624 THEN -51" in sql
    floats = auto_bounds.histogram_sql("people", "x", False)
    assert '"x" >= 1.52587890625e-05 THEN 1 ' in floats and '"x" > -1.52587890625e-05 THEN 0' in floats


@pytest.mark.parametrize("column, message", [
    ({"bounds": 5}, "must be auto"),
    ({"bounds": "auto", "lower": 0, "upper": 1}, "exclude each other"),
    ({"bounds": "auto", "identifier": True}, "cannot have keys, bounds"),
])
def test_a_malformed_auto_entry_is_refused_naming_it(column, message):
    with pytest.raises(PolicyError, match=message):
        load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": column}}}})


def test_the_bounds_budget_defaults_to_a_tenth_of_a_query_and_never_exceeds_the_total():
    p = load_policy({"budget": {"epsilon": 3}, "default_epsilon": 0.5, "tables": {"t": {"privacy_unit": "row"}}})
    assert (p.auto_bounds.epsilon, p.auto_bounds.for_epsilon) == (0.05, 0.5)
    with pytest.raises(PolicyError, match="auto_bounds.epsilon"):
        load_policy({"budget": {"epsilon": 1}, "auto_bounds": {"epsilon": 2}, "tables": {"t": {"privacy_unit": "row"}}})
