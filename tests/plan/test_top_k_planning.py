"""Planning a noisy top-k (plan/top_k.py, issue 23): which queries are of its shape, what the choice
spends and at what temperature, what it releases, how explain shows it; MODE(x) as its top-1
(frontend/mode.py); OPTIONS(top_k = ...). On the fixture database (tests/support/fixture.py)."""
from fractions import Fraction

import duckdb
import pytest

import dpsql
from dpsql.limits import MAX_TOP_K, TOP_K_CANDIDATES, WorkLimits
from dpsql.mechanisms.base import SELECTION
from dpsql.mechanisms.losses import Loss
from dpsql.mechanisms.releases import Sensitivity
from tests.support.checks import refusal

TOP_K = [
    # (query, k, range, monotone, by_rank): people is row level (C = 1), visits L = 2, C = 3
    ("SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY n DESC LIMIT 2", 2, 1, True, False),
    ("SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY 3 LIMIT 1 OFFSET 2", 3, 1, True, False),
    ("SELECT clinic, SUM(cost) AS s FROM visits GROUP BY clinic ORDER BY SUM(cost) DESC LIMIT 1", 1, None, True, False),
    ("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic ORDER BY n LIMIT 2", 2, 3, True, False),
    ("SELECT clinic FROM visits GROUP BY clinic ORDER BY COUNT(DISTINCT cost) DESC LIMIT 2", 2, 3, True, True),
    ("SELECT clinic, SUM(cost, contribution_bounds_per_row => (-5, 5)) AS s FROM visits GROUP BY clinic "
     "ORDER BY s DESC LIMIT 1", 1, None, False, False),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) zip, COUNT_IF(age > 30) AS n FROM people "
     "GROUP BY zip ORDER BY n DESC LIMIT 5", 5, 1, True, False),
    ("SELECT MODE(state) FROM people", 1, 1, True, True),
    ("SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY n DESC, sex DESC LIMIT 2", 2, 1, True,
     False),   # TPC-H Q21's shape: the keys break ties
]


def exponential(sql: str) -> str:
    """The query with OPTIONS(top_k = 'exponential') (delta kept), or MODE as it is."""
    if "delta = 1e-6" in sql:
        return sql.replace("OPTIONS(delta = 1e-6)", "OPTIONS(delta = 1e-6, top_k = 'exponential')")
    return sql if "MODE" in sql else sql.replace("SELECT ", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') ", 1)


@pytest.mark.parametrize("sql, k, range_, monotone, by_rank", TOP_K, ids=lambda v: str(v)[:60])
def test_the_shape_plans_a_choice_of_k_groups(db, sql, k, range_, monotone, by_rank):
    """ORDER BY one orderable aggregate ... LIMIT k: k peels (LIMIT + OFFSET), each of range Linf
    (monotone) or 2 Linf, one release Sensitivity(k, range) whose epsilon is the choice's share."""
    plan = db.explain(exponential(sql))
    top = plan.top_k
    assert top is not None and (top.k, top.monotone, top.by_rank) == (k, monotone, by_rank)
    linf = top.utility.sensitivity.per_partition
    assert top.range == (range_ if range_ is not None else linf * (1 if monotone else 2))
    assert top.release.sensitivity == Sensitivity(k, top.range)
    assert SELECTION.epsilon(top.release) <= top.loss.epsilon
    assert top.release in plan.releases()
    others = bool(plan.measurements)
    assert float(top.loss.epsilon) == (0.5 if others else 1.0)
    assert (top.utility in plan.measurements) == (not by_rank or plan.selection is not None)


def test_the_temperature_is_the_smallest_on_the_grid():
    """s = k * range / epsilon, rounded up to the grid: at k = 2, range 1 and epsilon 0.5, 4."""
    assert SELECTION.calibrate(Sensitivity(2, Fraction(1)), Loss.pure(0.5)) == 4


def test_a_user_level_choice_pays_for_one_partition_not_L(db):
    """A unit moves up to L = 2 groups, each by at most C = 3: the spread of its changes is 3 all the
    same, so each peel costs 3 / s, not L * 3 / s (plan/top_k.py): s = 3 / 0.5."""
    plan = db.explain("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic ORDER BY n DESC LIMIT 1")   # the default
    assert plan.max_groups == 2 and plan.top_k.range == 3 and plan.top_k.scale == 6
    value = plan.top_k.utility
    assert value.sensitivity == Sensitivity(2, Fraction(3))   # the released counts do pay for L


NOT_TOP_K = [
    "SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n DESC",                 # no LIMIT
    "SELECT state, COUNT(*) AS n FROM people GROUP BY state HAVING n > 3 ORDER BY n DESC LIMIT 1",
    "SELECT state, AVG(age) AS a FROM people GROUP BY state ORDER BY a DESC LIMIT 1",         # not orderable
    "SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n * 2 DESC LIMIT 1",     # an expression
    "SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY n DESC, upper(sex) LIMIT 1",
    "SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY n DESC, COUNT(*) LIMIT 1",
    "SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY state LIMIT 1",          # a key
    "SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n DESC LIMIT 3",         # all 3 keys
    "SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n DESC LIMIT 0",
    "SELECT COUNT(*) AS n FROM people ORDER BY n LIMIT 1",                                     # no groups
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'noisy_values') state, COUNT(*) AS n FROM people "
    "GROUP BY state ORDER BY n DESC LIMIT 1",
    f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) zip, COUNT(*) AS n FROM people GROUP BY zip "
    f"ORDER BY n DESC LIMIT {MAX_TOP_K + 1}",
]


@pytest.mark.parametrize("sql", NOT_TOP_K, ids=lambda s: s[:70])
def test_other_shapes_keep_noisy_values(db, sql):
    """Anything else releases every candidate's noisy value and orders those (the meaning before)."""
    assert db.explain(sql).top_k is None


@pytest.mark.parametrize("sql, chosen", [
    ("SELECT MODE(state) FROM people", True),                       # s = 1 against a discrete Laplace of 1
    ("SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY n DESC LIMIT 2", False),
    ("SELECT state FROM people GROUP BY state ORDER BY COUNT(*) DESC LIMIT 2", False),   # 2 peels of 1
    ("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic ORDER BY n DESC LIMIT 1", True),   # L = 2
    ("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic ORDER BY n DESC LIMIT 2", False),
    ("SELECT MODE(clinic) FROM visits", True),
])
def test_by_default_the_choice_is_made_where_it_is_less_noisy(db, sql, chosen):
    """Without the option, a top-k only where its choice's noise (Gumbel of the temperature) has a
    smaller std than the noisy value each group would get: k small against L."""
    plan, asked = db.explain(sql), db.explain(exponential(sql))
    top = asked.top_k
    assert (plan.top_k is not None) == chosen == (top.noise_std < top.against)
    values = (plan if not chosen else db.explain(sql.replace("SELECT ", "SELECT WITH DIFFERENTIAL_PRIVACY "
                                                             "OPTIONS(top_k = 'noisy_values') ", 1)))
    ordering = values.outputs[values.order[0][0][1:].isdigit() and int(values.order[0][0][1:])]
    m = values.measurement(ordering.measurements[0])
    assert top.against == pytest.approx(m.std_dev / m.granularity)


def test_more_public_groups_than_a_choice_may_take_keep_noisy_values():
    """Past TOP_K_CANDIDATES public groups (a connection may allow more rows) a choice would peel too
    long: noisy values (DP308 if asked)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    policy = {"budget": {"epsilon": 10}, "tables": {"t": {"privacy_unit": "row", "columns": {
        "a": {"keys": {"range": [0, 999]}}, "b": {"keys": {"range": [0, 1000]}}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy, limits=WorkLimits(max_rows=2_000_000))
    sql = "SELECT {}a, b, COUNT(*) AS n FROM t GROUP BY a, b ORDER BY n DESC LIMIT 1"
    assert db.explain(sql.format(""), epsilon=1.0).partitions == 1_001_000 > TOP_K_CANDIDATES
    assert db.explain(sql.format(""), epsilon=1.0).top_k is None
    assert refusal(db, sql.format("WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') "), epsilon=1.0).code == "DP308"


def test_noisy_values_is_the_plan_of_before(db):
    """OPTIONS(top_k = 'noisy_values') plans what the same query planned without top-k: one noisy
    count per group at the whole epsilon."""
    plan = db.explain("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'noisy_values') state, sex, COUNT(*) AS n "
                      "FROM people GROUP BY state, sex ORDER BY n DESC LIMIT 2")
    assert plan.top_k is None and [float(m.loss.epsilon) for m in plan.measurements] == [1.0]


@pytest.mark.parametrize("sql, caret", [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'gumbel') state, COUNT(*) FROM people GROUP BY state", "'gumbel'"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 1) state, COUNT(*) FROM people GROUP BY state", "1"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') state, AVG(age) AS a FROM people "
     "GROUP BY state ORDER BY a DESC LIMIT 1", "top_k = 'exponential'"),
])
def test_a_malformed_or_unmet_top_k_option_is_refused(db, sql, caret):
    err = refusal(db, sql)
    assert err.code == "DP308" and sql[err.start:err.end + 1] == caret, err.format()


def test_explain_shows_the_choice(db):
    text = str(db.explain(exponential("SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex ORDER BY n DESC "
                                      "LIMIT 2")))
    assert "top-k by the exponential mechanism: 2 peeled choice(s) at epsilon 0.25 each, temperature 4" in text
    assert "values by discrete Laplace (m0), for the chosen groups only" in text
    assert "+ the top-k choice: epsilon 0.5 (pure)" in text


def test_mode_is_the_top_one_group_by_count(db):
    """MODE(x) plans x's groups, the one chosen at the whole epsilon, its count not released."""
    plan = db.explain("SELECT MODE(state) FROM people WHERE age > 30")
    assert [o.name for o in plan.visible_outputs] == ['"mode"(state)'] and plan.measurements == ()   # DuckDB's name
    assert plan.top_k.k == 1 and plan.top_k.utility.label == "COUNT(*)" and plan.limit == 1
    assert [o.name for o in db.explain("SELECT MODE(state) AS s FROM people").visible_outputs] == ["s"]


@pytest.mark.parametrize("sql", [
    "SELECT MODE(state), COUNT(*) FROM people",
    "SELECT sex, MODE(state) FROM people GROUP BY sex",
    "SELECT MODE(state) FROM people LIMIT 1",
    "SELECT COUNT(*) FROM people WHERE MODE(state) = 'CA'",
    "SELECT MODE(*) FROM people",
    "SELECT MODE(DISTINCT state) FROM people",
])
def test_mode_beside_anything_else_is_refused(db, sql):
    err = refusal(db, sql)
    assert err.code == "DP303" and err.rule == "mode_alone" and sql[err.start:err.start + 4].upper() == "MODE"


def test_mode_of_a_column_without_keys_needs_delta(db):
    """With private keys at row level the noisy unit count partition selection thresholds is the count
    itself, at the whole epsilon: its largest is the default MODE; the choice, asked for, takes half."""
    assert refusal(db, "SELECT MODE(zip) FROM people").code == "DP304"
    plan = db.explain("SELECT MODE(zip) FROM people", delta=1e-6)
    assert plan.selection is not None and plan.top_k is None and plan.limit == 1
    asked = db.explain("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') MODE(zip) FROM people", delta=1e-6)
    assert asked.selection is not None and asked.top_k.k == 1 and float(asked.top_k.loss.epsilon) == 0.5
