"""MEDIAN / QUANTILE_CONT / PERCENTILE_CONT: the quantile tree's sensitivity, accuracy, noise and refusals.

Every statistical check runs on one DuckDB thread with a seeded generator (trusted test API), so it
sees the same draws on every run: deterministic, with the tolerance stated where it is checked.
"""
import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy import stats

import dpsql
from dpsql import testing
from dpsql.mechanisms import discrete_laplace as noise
from dpsql.mechanisms import randomness
from dpsql.lower.quantile import ALPHA
from dpsql.plan.sensitivity import TREE_BRANCHING, TREE_DEPTH
from tests.support.checks import examples, refusal, within_sensitivity
from tests.support.exact import KEYS, ROW, VALUES, bounds, exact_sql, noiseless, plan_for, stage_names
from tests.support.stats import chi_squared_p

LEVELS = " UNION ALL ".join(f"SELECT {d} AS d, * FROM __m0_h{d}" for d in range(1, TREE_DEPTH + 1))


def tree_counts(rows, plan) -> dict:
    """Every node count of every partition's tree, exactly as the rewritten SQL computes them."""
    table = noiseless(rows, plan).sql(exact_sql(plan, LEVELS)).fetchall()
    return {tuple("NaN" if isinstance(x, float) and math.isnan(x) else x for x in row[:-1]): row[-1] for row in table}


def node_moves(plan, rows, neighbour) -> list[int]:
    before, after = tree_counts(rows, plan), tree_counts(neighbour, plan)
    return [after.get(k, 0) - before.get(k, 0) for k in before.keys() | after.keys()]


def moved(plan, rows, neighbour) -> int:
    return sum(abs(x) for x in node_moves(plan, rows, neighbour))


TREE_QUERIES = [
    "SELECT grp, MEDIAN(v), QUANTILE_CONT(v, 0.9), COUNT(*) FROM t GROUP BY grp",
    "SELECT v, MEDIAN(v) FROM t GROUP BY v",   # private keys: candidate groups from the data
    "SELECT PERCENTILE_CONT(v * 2 - 1, 0.25) FROM t WHERE v > 0 OR v IS NULL",
    "SELECT grp, MEDIAN(v, contribution_bounds_per_row => (-3, 7)) FROM t GROUP BY grp",
]


UNIT = dict(rows=st.lists(ROW, max_size=40), L=st.integers(1, 3), C=st.integers(1, 3), b=bounds,
            extra=st.lists(st.tuples(st.sampled_from(KEYS + ["zz", None]), VALUES), min_size=1, max_size=25),
            sql=st.sampled_from(TREE_QUERIES))


def unit_added(rows, extra, L, C, b, sql):
    plan = plan_for("u", L, C, b[0], b[1], sql)
    tree = next(m for m in plan.measurements if m.kind == "quantile")
    assert tree.sensitivity.l1 == TREE_DEPTH * plan.max_groups * C
    assert tree.sensitivity.l2_squared == TREE_DEPTH * plan.max_groups * C * C   # tighter than L0 * Linf^2
    moves = node_moves(plan, rows, rows + [(99, grp, v) for grp, v in extra])
    assert within_sensitivity(tree.sensitivity, moves) is None, within_sensitivity(tree.sensitivity, moves)


def row_added(rows, extra, b, sql):
    plan = plan_for("row", 1, 1, b[0], b[1], sql)
    tree = next(m for m in plan.measurements if m.kind == "quantile")
    assert tree.sensitivity.l1 == TREE_DEPTH
    moves = node_moves(plan, rows, rows + [extra])
    assert within_sensitivity(tree.sensitivity, moves) is None, within_sensitivity(tree.sensitivity, moves)


ROW_ADDED = dict(rows=st.lists(ROW, max_size=40), extra=ROW, b=bounds, sql=st.sampled_from(TREE_QUERIES))
QUICK = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
test_tree_counts_move_by_at_most_D_L_C_when_a_unit_is_added = QUICK(given(**UNIT)(unit_added))
test_tree_counts_move_by_at_most_D_when_a_row_is_added = QUICK(given(**ROW_ADDED)(row_added))
test_many_neighbours_unit_added = pytest.mark.slow(LONG(given(**UNIT)(unit_added)))
test_many_neighbours_row_added = pytest.mark.slow(LONG(given(**ROW_ADDED)(row_added)))


def test_the_bound_is_tight_and_a_unit_keeps_C_evenly_spaced_values():
    """One unit with 10 values 0..9 in one partition, C = 3: it keeps ranks 2, 6, 9 (values 1, 5, 8),
    each in its own node on every level: exactly D*C = 12 counts move."""
    plan = plan_for("u", 1, 3, 0.0, 16.0, "SELECT grp, MEDIAN(v) FROM t GROUP BY grp")
    unit = [(99, "a", float(v)) for v in range(10)]
    counts = tree_counts(unit, plan)
    leaves = sorted(node for (d, key, node), n in counts.items() if d == TREE_DEPTH for _ in range(n))
    assert leaves == [int(v * 65536 / 16) for v in (1, 5, 8)]
    assert moved(plan, [], unit) == TREE_DEPTH * 3 == plan.measurements[0].sensitivity.l1


# Few units, many rows each, values that repeat (several rows in one leaf), NULL, NaN and infinities.
LEAF_VALUES = st.one_of(st.none(), st.sampled_from([0.0, 1.5, 7.0, 16.0, math.nan, math.inf, -math.inf, 3.2]),
                        st.floats(-5, 20))
LEAF_ROWS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(KEYS + ["zz", None]), LEAF_VALUES), max_size=80)


def kept_leaves(leaves: list, C: int) -> list:
    """The leaves a unit keeps in one partition, by the definition: all of them when n <= C, else its
    sorted leaves at the ranks 1 + floor((2i + 1) n / 2C), i < C."""
    ordered = sorted(min(leaf, TREE_BRANCHING ** TREE_DEPTH - 1) for leaf in leaves if leaf is not None)
    n = len(ordered)
    return ordered if n <= C else [ordered[(2 * i + 1) * n // (2 * C)] for i in range(C)]


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=LEAF_ROWS, L=st.integers(1, 3), C=st.integers(1, 5),
       sql=st.sampled_from(["SELECT grp, MEDIAN(v) FROM t GROUP BY grp", "SELECT MEDIAN(v), COUNT(*) FROM t"]))
@example(rows=[(0, "a", float(v)) for v in range(10)] * 3 + [(0, "a", None)], L=1, C=3,
         sql="SELECT grp, MEDIAN(v) FROM t GROUP BY grp")
def test_leaf_counts_are_the_evenly_spaced_ranks_of_each_unit(rows, L, C, sql):
    """The tree's leaf counts (counted per unit, partition and leaf, C kept in closed form) are those
    of each kept unit and partition's sorted leaves at the evenly spaced ranks, as when a unit's
    leaves were a sorted list: the same answers, without a list."""
    plan = plan_for("u", L, C, 0.0, 16.0, sql)
    con = noiseless(rows, plan)
    keys = [f"__k{i}" for i in range(len(plan.group_keys))]
    pair = ", ".join(["__unit", *keys])
    cells = con.sql(exact_sql(plan, f"SELECT {pair}, __v_m0 FROM __rows")).fetchall()
    kept = None
    if "__bounded" in stage_names(plan):
        kept = set(con.sql(exact_sql(plan, f"SELECT {pair} FROM __bounded")).fetchall())
    by_pair: dict = {}
    for *unit_and_keys, leaf in cells:
        if kept is None or tuple(unit_and_keys) in kept:
            by_pair.setdefault(tuple(unit_and_keys), []).append(leaf)
    expected: dict = {}
    for (_unit, *key), leaves in by_pair.items():
        for leaf in kept_leaves(leaves, C):
            expected[(*key, leaf)] = expected.get((*key, leaf), 0) + 1
    got = con.sql(exact_sql(plan, f"SELECT {', '.join([*keys, 'leaf', 'n'])} FROM __m0_leaf")).fetchall()
    assert {tuple(row[:-1]): row[-1] for row in got} == expected


def connection(values_by_group: dict, lower=0.0, upper=100.0, seed=11, unit="row"):
    """Table t(k, v): one public key per entry of values_by_group (empty lists: empty groups)."""
    con = duckdb.connect(config={"threads": 1})
    keys = list(values_by_group)
    # `data` is read by DuckDB's replacement scan (FROM data) below.
    data = pa.table({"k": pa.array([k for k, vs in values_by_group.items() for _ in vs], pa.string()),  # noqa: F841
                     "v": pa.array([v for vs in values_by_group.values() for v in vs], pa.float64())})
    con.execute("CREATE TABLE t AS SELECT * FROM data")
    policy = {"budget": {"epsilon": 1e6}, "tables": {"t": {
        "privacy_unit": unit, "columns": {"k": {"keys": keys}, "v": {"lower": lower, "upper": upper}}}}}
    return dpsql.connect(con, ledger=":memory:", policy=policy, rng=np.random.default_rng(seed))


def test_median_and_deciles_of_20k_uniform_rows_within_0_1_of_the_truth():
    values = np.random.default_rng(3).uniform(0, 100, 20_000)
    db = connection({"a": values})
    row = db.sql("SELECT MEDIAN(v), QUANTILE_CONT(v, 0.1), PERCENTILE_CONT(v, 0.9) FROM t", epsilon=5).fetchall()[0]
    assert np.allclose(row, np.quantile(values, [0.5, 0.1, 0.9]), atol=0.1), row


def test_empty_groups_get_an_answer_within_the_bounds():
    db = connection({"a": [10.0] * 50, "b": [], "c": []}, lower=-5.0, upper=20.0)
    rows = dict(db.sql("SELECT k, MEDIAN(v) FROM t GROUP BY k", epsilon=0.1).fetchall())
    assert set(rows) == {"a", "b", "c"}
    assert all(v is not None and math.isfinite(v) and -5.0 <= v <= 20.0 for v in rows.values())


def test_null_is_skipped_nan_and_infinities_are_clamped_like_sum():
    """NULL is left out (DuckDB's MEDIAN too); NaN and +inf count as the upper bound, -inf as the lower."""
    data = {"null": [10.0] * 1000 + [None] * 3000, "nan": [10.0] * 1000 + [math.nan] * 3000,
            "inf": [10.0] * 1000 + [math.inf] * 3000, "-inf": [10.0] * 1000 + [-math.inf] * 3000}
    db = connection(data)
    got = dict(db.sql("SELECT k, MEDIAN(v) FROM t GROUP BY k", epsilon=10).fetchall())
    assert abs(got["null"] - 10.0) < 0.05
    assert got["nan"] > 99.9 and got["inf"] > 99.9 and got["-inf"] < 0.1


def test_median_beside_count_splits_epsilon_and_several_quantiles_share_one_tree(db):
    plan = db.explain("SELECT clinic, MEDIAN(cost), QUANTILE_CONT(cost, 0.9), COUNT(*) FROM visits GROUP BY clinic",
                      epsilon=1.0)
    tree, count = plan.measurements
    assert (tree.kind, count.kind) == ("quantile", "count") and tree.epsilon == count.epsilon == 0.5
    assert tree.sensitivity.l1 == TREE_DEPTH * 2 * 3 and tree.scale == tree.sensitivity.l1 / 0.5
    assert "QUANTILE TREE(cost)" in str(plan) and "sensitivity 24" in str(plan)
    rows = db.sql("SELECT clinic, MEDIAN(cost), QUANTILE_CONT(cost, 0.9), COUNT(*) FROM visits GROUP BY clinic",
                  epsilon=1.0).fetchall()
    assert [r[0] for r in rows] == ["a", "b", "c"] and all(0 <= r[1] <= r[2] <= 50 for r in rows)
    assert "QUANTILE TREE(cost) discrete Laplace, epsilon 0.5" in db.budget.history[-1].plan


def test_private_keys_release_a_quantile_only_for_selected_groups(db):
    res = db.sql("SELECT zip, MEDIAN(age) AS m, COUNT(*) AS n FROM people GROUP BY zip", epsilon=10, delta=1e-7)
    rows = res.fetchall()
    assert rows and all(0 <= m <= 100 for _, m, _ in rows)
    assert [m.kind for m in res.plan.measurements] == ["quantile", "units"], "COUNT(*) is the selection count"


def test_confidence_intervals_are_not_given_for_quantiles(db):
    res = db.sql("SELECT MEDIAN(age), COUNT(*) AS n FROM people", ci=0.9)
    assert res.columns == ["median(age)", "n", "n_ci_low", "n_ci_high"]


# A reference implementation of the mechanism in numpy (n independent releases at once), to compare
# the released distribution with.
def reference_quantiles(leaves: np.ndarray, q: float, scale: float, lower: float, upper: float, source,
                        n: int) -> np.ndarray:
    B = TREE_BRANCHING
    node, depth, rank = np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, q)
    active = np.ones(n, bool)
    for d in range(1, TREE_DEPTH + 1):
        level = np.bincount(leaves // B ** (TREE_DEPTH - d), minlength=B ** d)
        exact = level[node[:, None] * B + np.arange(B)]
        counts = np.maximum(exact + noise.discrete_laplace(source, scale, n * B).reshape(n, B), 0)
        counts = np.where(counts >= ALPHA * counts.sum(axis=1, keepdims=True), counts, 0)
        total = counts.sum(axis=1)
        active &= total > 0   # every child reads 0: stop and interpolate in this node
        cum = np.cumsum(counts, axis=1)
        child = np.argmax((counts > 0) & (cum >= (rank * total)[:, None]), axis=1)
        picked, before = counts[np.arange(n), child], cum[np.arange(n), child] - counts[np.arange(n), child]
        with np.errstate(divide="ignore", invalid="ignore"):
            moved = np.clip((rank * total - before) / picked, 0.0, 1.0)
        rank = np.where(active, moved, rank)
        node = np.where(active, node * B + child, node)
        depth = np.where(active, d, depth)
    return np.clip(lower + (node + rank) * (upper - lower) / float(B) ** depth, lower, upper)


SMALL = [2.5 * i for i in range(40)]   # 40 rows on [0, 100]: at epsilon 1 the noise matters


def test_released_medians_follow_the_simulated_mechanism():
    """1500 groups with the same 40 values: the released medians against 1500 draws of the numpy
    reference, two-sample KS test, rejected only if p < 0.001."""
    db = connection({f"g{i}": SMALL for i in range(1500)})
    released = [m for _, m in db.sql("SELECT k, MEDIAN(v) FROM t GROUP BY k", epsilon=1.0).fetchall()]
    source = randomness.GeneratorRandomSource(np.random.default_rng(5))
    leaves = np.floor(np.array(SMALL) / 100 * 65536).astype(np.int64)
    simulated = reference_quantiles(leaves, 0.5, TREE_DEPTH / 1.0, 0.0, 100.0, source, 1500)
    assert stats.ks_2samp(released, simulated).pvalue > 0.001
    assert abs(np.median(released) - np.median(SMALL)) < 2.5


def test_noisy_node_counts_are_discrete_laplace_with_scale_D_over_epsilon():
    """Level-1 noisy counts minus exact counts over 1500 groups x 16 children: chi-squared, p > 0.001."""
    db = connection({f"g{i}": SMALL for i in range(1500)})
    plan = db.explain("SELECT k, MEDIAN(v) FROM t GROUP BY k", epsilon=0.5)
    assert plan.measurements[0].scale == TREE_DEPTH / 0.5
    diff = exact_sql(plan, "SELECT c.noisy - COALESCE(h.n, 0) FROM __m0_c1 c LEFT JOIN __m0_h1 h "
                           "ON c.__k0 = h.__k0 AND h.node = c.child")
    draws = np.array([z for (z,) in testing.duckdb_connection(db).sql(diff).fetchall()])
    assert len(draws) == 1500 * TREE_BRANCHING
    assert chi_squared_p(draws, TREE_DEPTH / 0.5) > 0.001


@pytest.mark.parametrize("call", ["QUANTILE_CONT(x, 0.5{b})", "PERCENTILE_CONT(x, 0.5{b})", "MEDIAN(x{b})"])
def test_per_row_bounds_make_a_column_without_policy_bounds_usable(call):
    """The query's bounds reach every quantile (QUANTILE_CONT once dropped them: DP302)."""
    con = duckdb.connect(config={"threads": 1})
    con.execute("CREATE TABLE t AS SELECT (range % 20)::DOUBLE AS x FROM range(500)")
    policy = {"budget": {"epsilon": 100}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy, rng=np.random.default_rng(4))
    sql = f"SELECT {call.format(b=', contribution_bounds_per_row => (0, 10)')} FROM t"
    assert "clamp to [0, 10]" in str(db.explain(sql))
    ((value,),) = db.sql(sql).fetchall()
    assert 0 <= value <= 10
    assert refusal(db, f"SELECT {call.format(b='')} FROM t").code == "DP302", "no bounds at all"


@pytest.mark.parametrize("sql, code", [
    ("SELECT QUANTILE_CONT(age, 1.5) FROM people", "DP312"),
    ("SELECT QUANTILE_CONT(age, -0.1) FROM people", "DP312"),
    ("SELECT QUANTILE_CONT(age, age) FROM people", "DP312"),
    ("SELECT QUANTILE_CONT(age, [0.1, 0.9]) FROM people", "DP312"),
    ("SELECT PERCENTILE_CONT(age, '0.5') FROM people", "DP312"),
    ("SELECT QUANTILE_CONT(age) FROM people", "DP312"),
    ("SELECT MEDIAN(DISTINCT age) FROM people", "DP303"),
    ("SELECT MEDIAN(age) OVER () FROM people", "DP102"),
    ("SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) FROM people", "DP312"),
    ("SELECT QUANTILE_DISC(age, 0.5) FROM people", "DP303"),
    ("SELECT MEDIAN(zip) FROM people", "DP302"),
    ("SELECT MEDIAN(cost, contribution_bounds_per_group => (0, 1)) FROM visits", "DP310"),
    ("SELECT MEDIAN(MEDIAN(age)) FROM people", "DP305"),
])
def test_refused(db, sql, code):
    err = refusal(db, sql)
    assert err.code == code, err.format()
    assert db.budget.spent_epsilon == 0
