"""Consistency as post-processing (issue 26, item 4): released marginals made consistent by weighted
least squares, non-negative and integer on request; missing cells; refusals of malformed input."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dpsql.errors import ConsistencyError
from dpsql.publish.consistency import Marginal, make_consistent
from dpsql.publish.least_squares import Grouping, conjugate_gradients, tree


def hierarchy(seed: int, states: int = 6, most: int = 5, mean: float = 40.0):
    """A total, states and counties: (state, county) pairs and true counts, seeded."""
    rng = np.random.default_rng(seed)
    pairs = [(f"s{s}", f"s{s}c{c}") for s in range(states) for c in range(int(rng.integers(1, most + 1)))]
    return pairs, rng.poisson(mean, len(pairs)).astype(float)


def tables(pairs, counts, noise, variances=(2.0, 2.0, 2.0)):
    """The three released levels of ``counts`` plus ``noise`` (a draw per cell of each level)."""
    states = sorted({s for s, _ in pairs})
    by_state = np.array([sum(c for (s, _), c in zip(pairs, counts) if s == st) for st in states])
    total, state, county = (np.array([counts.sum()]) + noise[0][:1], by_state + noise[1][:len(states)],
                            counts + noise[2][:len(pairs)])
    return [Marginal(pa.table({"n": total}), (), "n", variances[0]),
            Marginal(pa.table({"state": states, "n": state}), ("state",), "n", variances[1]),
            Marginal(pa.table({"state": [s for s, _ in pairs], "county": [c for _, c in pairs], "n": county}),
                     ("state", "county"), "n", variances[2])]


def laplace(rng, scale, cells):
    return [rng.laplace(0, scale, cells) for _ in range(3)]


def sums_by(table: pa.Table, keys: list[str], value: str = "n") -> dict:
    """The table summed over ``keys`` (a coarser table computed from a finer one)."""
    out: dict = {}
    cols = [table[k].to_pylist() for k in keys]
    for i, v in enumerate(table[value].to_pylist()):
        key = tuple(c[i] for c in cols)
        out[key] = out.get(key, 0) + v
    return out


def as_dict(table: pa.Table, keys: list[str], value: str = "n") -> dict:
    cols = [table[k].to_pylist() for k in keys]
    return {tuple(c[i] for c in cols): v for i, v in enumerate(table[value].to_pylist())}


def assert_consistent(out, marginals, exact=False):
    finest = out[int(np.argmax([len(m.keys) for m in marginals]))]
    for table, m in zip(out, marginals):
        want = sums_by(finest, list(m.keys))
        got = as_dict(table, list(m.keys))
        assert set(got) == set(want)
        for key in want:
            assert got[key] == want[key] if exact else got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-9)


def test_one_level_equal_variances_is_the_closed_form():
    # Total T and n parts p_i, one variance: each part gets (T - sum p) / (n + 1) added.
    rng = np.random.default_rng(1)
    parts = rng.normal(10, 5, 7)
    total = parts.sum() + 13.0
    out = make_consistent([Marginal(pa.table({"n": [total]}), (), "n", 3.0),
                           Marginal(pa.table({"k": list("abcdefg"), "n": parts}), ("k",), "n", 3.0)],
                          nonnegative=False)
    shift = (total - parts.sum()) / 8
    assert out[1]["n"].to_pylist() == pytest.approx(list(parts + shift), abs=1e-12)
    assert out[0]["n"].to_pylist() == pytest.approx([parts.sum() + 7 * shift], abs=1e-12)


def dense_gls(marginals, cells):
    """GLS by brute force: the explicit matrix, numpy's lstsq (the finest cells ``cells`` as key dicts)."""
    rows, ys = [], []
    for m in marginals:
        w = 1 / np.sqrt(m.variance)
        for key, y in as_dict(m.table, list(m.keys)).items():
            rows.append([w * all(c[k] == v for k, v in zip(m.keys, key)) for c in cells])
            ys.append(w * y)
    return np.linalg.lstsq(np.array(rows, dtype=float), np.array(ys), rcond=None)[0]


def test_the_hierarchy_is_the_least_squares_solution_with_unequal_variances():
    pairs, counts = hierarchy(2)
    marginals = tables(pairs, counts, laplace(np.random.default_rng(3), 3.0, len(pairs)), variances=(50.0, 4.0, 1.5))
    out = make_consistent(marginals, nonnegative=False)
    want = dense_gls(marginals, [{"state": s, "county": c} for s, c in pairs])
    assert out[2]["n"].to_pylist() == pytest.approx(list(want), rel=1e-9, abs=1e-9)
    assert_consistent(out, marginals)


def two_way(seed: int, states: int = 5, sexes: int = 2, noise: float = 2.0, mean: float = 30.0):
    rng = np.random.default_rng(seed)
    keys = [(f"s{i}", f"x{j}") for i in range(states) for j in range(sexes)]
    counts = rng.poisson(mean, len(keys)).astype(float)
    st = sorted({a for a, _ in keys})
    sx = sorted({b for _, b in keys})

    def noisy(values):
        return np.asarray(values, dtype=float) + rng.laplace(0, noise, len(values))
    return keys, counts, [
        Marginal(pa.table({"n": noisy([counts.sum()])}), (), "n", 2 * noise ** 2),
        Marginal(pa.table({"state": st, "n": noisy([counts[[a == s for a, _ in keys]].sum() for s in st])}),
                 ("state",), "n", 2 * noise ** 2),
        Marginal(pa.table({"sex": sx, "n": noisy([counts[[b == x for _, b in keys]].sum() for x in sx])}),
                 ("sex",), "n", 2 * noise ** 2),
        Marginal(pa.table({"sex": [b for _, b in keys], "state": [a for a, _ in keys], "n": noisy(counts)}),
                 ("sex", "state"), "n", 2 * noise ** 2)]


def test_a_two_way_marginal_set_is_the_least_squares_solution_and_consistent():
    keys, _, marginals = two_way(4)
    marginals[1] = Marginal(marginals[1].table, ("state",), "n", 0.5)   # weights differ per table
    out = make_consistent(marginals, nonnegative=False)
    want = dense_gls(marginals, [{"state": a, "sex": b} for a, b in keys])
    got = as_dict(out[3], ["state", "sex"])
    assert [got[k] for k in keys] == pytest.approx(list(want), rel=1e-9, abs=1e-9)
    assert_consistent(out, marginals)


def test_the_tree_and_conjugate_gradients_agree_on_a_hierarchy_with_missing_nodes():
    rng = np.random.default_rng(5)
    states = rng.integers(0, 20, 300)                 # 300 cells, 20 states, one total
    levels = [Grouping(np.zeros(300, dtype=np.int64), np.array([1000.0]), 0.01),
              Grouping(states, np.where(rng.random(20) < 0.3, np.nan, rng.normal(50, 5, 20)), 0.2),
              Grouping(np.arange(300), rng.normal(3, 2, 300), 1.0)]
    fixed = rng.random(300) < 0.1
    assert tree(levels, fixed) == pytest.approx(conjugate_gradients(levels, fixed), rel=1e-8, abs=1e-8)


def test_unbiased_and_less_error_at_every_level():
    # 400 seeded draws of Laplace noise (b = 2, variance 8) on a 1 + 6 + ~20 hierarchy of counts near 40
    # (non-negativity never binds): the mean error of each level's cells is within 4 standard errors of
    # 0, and the mean squared error falls below the raw releases' at every level; the total's ratio is the
    # tree's: 1 / (1 + 1 / V) with V = sum over states of k / (k + 1) (k its counties), within 0.05.
    pairs, counts = hierarchy(6)
    rng = np.random.default_rng(7)
    draws = 400
    errors: dict[int, list] = {0: [], 1: [], 2: []}
    raw: dict[int, list] = {0: [], 1: [], 2: []}
    for _ in range(draws):
        truth = tables(pairs, counts, [np.zeros(len(pairs))] * 3)
        noisy = tables(pairs, counts, laplace(rng, 2.0, len(pairs)), variances=(8.0, 8.0, 8.0))
        out = make_consistent(noisy, nonnegative=False)
        for level in range(3):
            t = np.array(truth[level].table["n"].to_pylist())
            errors[level].append(np.array(out[level]["n"].to_pylist()) - t)
            raw[level].append(np.array(noisy[level].table["n"].to_pylist()) - t)
    ratios = []
    for level in range(3):
        e, r = np.array(errors[level]), np.array(raw[level])
        assert np.all(np.abs(e.mean(axis=0)) < 4 * e.std(axis=0) / np.sqrt(draws)), level
        ratios.append((e ** 2).mean() / (r ** 2).mean())
    k = np.unique([s for s, _ in pairs], return_counts=True)[1]
    v = (k / (k + 1)).sum()
    assert all(r < 0.9 for r in ratios) and ratios[0] == pytest.approx(1 / (1 + 1 / v), abs=0.05), ratios


def test_a_two_way_set_is_unbiased_with_less_error_at_every_level():
    # 300 seeded draws (Laplace b = 2) of a total, 4 states, 3 sexes and the 12 cells (conjugate
    # gradients): each cell's mean error within 4 standard errors of 0, every level's MSE lower than raw.
    keys, counts, first = two_way(13, states=4, sexes=3)
    truth = [np.array([counts.sum()])] + [np.array([counts[[k[i] == v for k in keys]].sum() for v in
                                                   m.table[m.keys[0]].to_pylist()]) for i, m in ((0, first[1]), (1, first[2]))]
    truth.append(counts)
    errors, raw = [[] for _ in range(4)], [[] for _ in range(4)]
    for seed in range(300):
        noisy = redraw(first, truth, seed)
        out = make_consistent(noisy, nonnegative=False)
        for level in range(4):
            errors[level].append(np.array(out[level]["n"].to_pylist()) - truth[level])
            raw[level].append(np.array(noisy[level].table["n"].to_pylist()) - truth[level])
    for level in range(4):
        e, r = np.array(errors[level]), np.array(raw[level])
        assert np.all(np.abs(e.mean(axis=0)) < 4 * e.std(axis=0) / np.sqrt(300)), level
        assert (e ** 2).mean() < 0.95 * (r ** 2).mean(), level


def redraw(marginals, truth, seed):
    """The same tables with the true values plus a fresh seeded Laplace draw (b = 2)."""
    rng = np.random.default_rng(seed)
    return [Marginal(m.table.set_column(m.table.column_names.index("n"), "n", pa.array(t + rng.laplace(0, 2.0, t.size))),
                     m.keys, "n", m.variance) for m, t in zip(marginals, truth)]


def test_a_very_noisy_total_barely_moves_the_parts_and_a_precise_one_holds():
    parts = np.array([5.0, 7.0, 9.0])
    loud = make_consistent([Marginal(pa.table({"n": [100.0]}), (), "n", 1e8),
                            Marginal(pa.table({"k": list("abc"), "n": parts}), ("k",), "n", 1.0)], nonnegative=False)
    assert loud[1]["n"].to_pylist() == pytest.approx(list(parts), abs=1e-5)
    quiet = make_consistent([Marginal(pa.table({"n": [100.0]}), (), "n", 1e-8),
                             Marginal(pa.table({"k": list("abc"), "n": parts}), ("k",), "n", 1.0)], nonnegative=False)
    assert quiet[0]["n"].to_pylist() == pytest.approx([100.0], abs=1e-5)
    assert quiet[1]["n"].to_pylist() == pytest.approx(list(parts + (100 - 21) / 3), abs=1e-5)


@pytest.mark.parametrize("solver", ["tree", "cg"])
def test_non_negative_cells_keep_every_table_consistent(solver):
    rng = np.random.default_rng(8)
    pairs, counts = hierarchy(9, states=8, mean=1.0)     # small counts: noise makes many negative
    marginals = tables(pairs, counts, laplace(rng, 3.0, len(pairs)), variances=(18.0, 18.0, 18.0))
    if solver == "cg":   # the same tables twice at the top: not a chain of key sets, so conjugate gradients
        marginals.append(marginals[0])
    out = make_consistent(marginals)
    for table in out:
        assert min(table["n"].to_pylist()) >= 0
    assert min(marginals[2].table["n"].to_pylist()) < 0
    assert_consistent(out, marginals)


@pytest.mark.parametrize("seed", [0, 9, 23])   # the block iteration without its freeing step misses these
def test_non_negative_cells_are_the_non_negative_least_squares_optimum(seed):
    # Against scipy's NNLS (Lawson and Hanson) on the explicit weighted matrix: a hierarchy and a
    # two-way set, small counts under Laplace noise of b = 3, so many cells sit at 0.
    from scipy.optimize import nnls
    pairs, counts = hierarchy(seed, states=5, mean=2.0)
    sets = [(tables(pairs, counts, laplace(np.random.default_rng(seed), 3.0, len(pairs)), variances=(40.0, 18.0, 9.0)),
             [{"state": s, "county": c} for s, c in pairs], ["state", "county"])]
    keys, _, two = two_way(seed, states=4, sexes=3, noise=4.0, mean=2.0)
    sets.append((two, [{"state": a, "sex": b} for a, b in keys], ["state", "sex"]))
    for marginals, cells, names in sets:
        out = make_consistent(marginals)
        rows = [[all(c[k] == v for k, v in zip(m.keys, key)) / np.sqrt(m.variance) for c in cells]
                for m in marginals for key in as_dict(m.table, list(m.keys))]
        ys = [y / np.sqrt(m.variance) for m in marginals for y in as_dict(m.table, list(m.keys)).values()]
        want, _ = nnls(np.array(rows, dtype=float), np.array(ys))
        got = as_dict(out[-1], names)
        assert [got[tuple(c[k] for k in names)] for c in cells] == pytest.approx(list(want), abs=1e-6)
        assert (want == 0).any()


def test_integer_cells_keep_every_table_consistent_and_near_the_real_ones():
    pairs, counts = hierarchy(10, states=10)
    marginals = tables(pairs, counts, laplace(np.random.default_rng(11), 2.0, len(pairs)))
    real = make_consistent(marginals)
    whole = make_consistent(marginals, integer=True)
    assert_consistent(whole, marginals, exact=True)
    for r, w in zip(real, whole):
        assert w["n"].type == pa.int64()
        assert np.all(np.abs(np.array(w["n"].to_pylist()) - np.array(r["n"].to_pylist())) < 1)


def test_integer_cells_of_a_two_way_set_are_consistent():
    _, _, marginals = two_way(12, states=12, sexes=3)
    whole = make_consistent(marginals, integer=True)
    assert_consistent(whole, marginals, exact=True)
    assert all(v >= 0 for t in whole for v in t["n"].to_pylist())


def test_a_state_without_released_counties_gets_a_rest_cell_and_an_unreleased_state_is_added():
    total = Marginal(pa.table({"n": [100.0]}), (), "n", 1.0)
    states = Marginal(pa.table({"state": ["a", "b"], "n": [60.0, 30.0]}), ("state",), "n", 1.0)
    counties = Marginal(pa.table({"state": ["a", "a", "c"], "county": ["a1", "a2", "c1"], "n": [25.0, 30.0, 8.0]}),
                        ("state", "county"), "n", 1.0)
    out = make_consistent([total, states, counties], nonnegative=False)
    assert out[1]["state"].to_pylist() == ["a", "b", "c"]          # c: only its county was released
    assert out[2]["state"].to_pylist() == ["a", "a", "c", "b"]     # b: no county, its rest
    assert out[2]["county"].to_pylist() == ["a1", "a2", "c1", None]
    assert_consistent(out, [total, states, counties])
    rest = out[2]["n"].to_pylist()[3]
    assert rest == pytest.approx(out[1]["n"].to_pylist()[1]) and 25 < rest < 35


def test_a_rest_cell_appears_in_a_null_group_of_a_table_grouped_by_a_key_it_lacks():
    total = Marginal(pa.table({"n": [50.0]}), (), "n", 1.0)
    states = Marginal(pa.table({"state": ["a", "b"], "n": [30.0, 20.0]}), ("state",), "n", 1.0)
    sexes = Marginal(pa.table({"sex": ["F", "M"], "n": [16.0, 14.0]}), ("sex",), "n", 1.0)
    cells = Marginal(pa.table({"state": ["a", "a"], "sex": ["F", "M"], "n": [15.0, 15.0]}), ("state", "sex"), "n", 1.0)
    marginals = [total, states, sexes, cells]
    out = make_consistent(marginals, nonnegative=False)
    assert out[2]["sex"].to_pylist() == ["F", "M", None]
    assert out[3]["sex"].to_pylist() == ["F", "M", None] and out[3]["state"].to_pylist() == ["a", "a", "b"]
    assert_consistent(out, marginals)


def test_only_a_total_and_keys_in_another_order():
    total = Marginal(pa.table({"n": pa.array([5], pa.int64())}), (), "n", 1.0)
    assert make_consistent([total], integer=True)[0]["n"].to_pylist() == [5]
    a = Marginal(pa.table({"y": [1, 2], "x": ["p", "p"], "n": [1.0, 2.0]}), ("y", "x"), "n", 1.0)
    b = Marginal(pa.table({"x": ["p", "p"], "y": [2, 1], "n": [2.0, 1.0]}), ("x", "y"), "n", 1.0)
    out = make_consistent([a, b])
    assert out[0]["n"].to_pylist() == [1.0, 2.0] and out[1]["n"].to_pylist() == [2.0, 1.0]
    assert out[0]["y"].type == pa.int64()


def test_empty_tables():
    total = Marginal(pa.table({"n": [12.0]}), (), "n", 2.0)
    states = Marginal(pa.table({"state": ["a", "b"], "n": [3.0, 4.0]}), ("state",), "n", 2.0)
    nothing = pa.table({"state": pa.array([], pa.string()), "county": pa.array([], pa.string()),
                        "n": pa.array([], pa.float64())})
    out = make_consistent([total, states, Marginal(nothing, ("state", "county"), "n", 2.0)])
    assert out[2]["county"].to_pylist() == [None, None] and out[0]["n"].to_pylist() == [pytest.approx(31 / 3)]
    empty = make_consistent([Marginal(pa.table({"n": pa.array([], pa.float64())}), (), "n", 2.0)])
    assert empty[0].num_rows == 0 and empty[0]["n"].type == pa.float64()


BAD = [
    ("DP520", Marginal(pa.table({"n": [1.0]}), (), "n", 0.0), "variance"),
    ("DP520", Marginal(pa.table({"n": [1.0]}), (), "n", float("inf")), "variance"),
    ("DP520", Marginal(pa.table({"n": [1.0]}), ("state",), "n", 1.0), "'state'"),
    ("DP520", Marginal(pa.table({"k": ["a"], "n": ["1"]}), ("k",), "n", 1.0), "not a number"),
    ("DP520", Marginal(pa.table({"k": ["a", "b"], "n": [1.0, float("nan")]}), ("k",), "n", 1.0), "NaN"),
    ("DP520", Marginal(pa.table({"k": ["a", None], "n": [1.0, 2.0]}), ("k",), "n", 1.0), "NULL"),
    ("DP520", Marginal(pa.table({"k": ["a"], "n": [1.0]}), ("k", "k"), "n", 1.0), "twice"),
    ("DP521", Marginal(pa.table({"k": ["a", "a"], "n": [1.0, 2.0]}), ("k",), "n", 1.0), "twice"),
]


@pytest.mark.parametrize("code,marginal,says", BAD, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(BAD)])
def test_malformed_input_is_refused_with_a_code_and_a_hint(code, marginal, says):
    with pytest.raises(ConsistencyError) as info:
        make_consistent([marginal])
    assert info.value.code == code and says in info.value.message
    assert info.value.hint and f"hint: {info.value.hint}" in str(info.value)


def test_keys_that_are_not_subsets_of_one_table_are_refused():
    a = Marginal(pa.table({"x": ["p"], "n": [1.0]}), ("x",), "n", 1.0)
    b = Marginal(pa.table({"y": ["q"], "z": ["r"], "n": [1.0]}), ("y", "z"), "n", 1.0)
    with pytest.raises(ConsistencyError) as info:
        make_consistent([a, b])
    assert info.value.code == "DP522" and "['x']" in info.value.message


def test_marginals_read_from_results_with_their_plans_variances(db):
    total = db.sql("SELECT COUNT(*) AS n FROM people", epsilon=1.0, nonnegative=False)
    by_state = db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=1.0, nonnegative=False)
    by_both = db.sql("SELECT state, sex, COUNT(*) AS n FROM people GROUP BY state, sex", epsilon=1.0, nonnegative=False)
    marginals = [Marginal.from_result(r, "n") for r in (total, by_state, by_both)]
    assert [m.keys for m in marginals] == [(), ("state",), ("state", "sex")]
    assert marginals[1].variance == pytest.approx(total.plan.measurements[0].std_dev ** 2) and marginals[1].variance > 1
    out = make_consistent(marginals, integer=True)
    assert_consistent(out, marginals, exact=True)
    sums = db.sql("SELECT state, SUM(income) AS s FROM people GROUP BY state", epsilon=1.0, nonnegative=False)
    assert Marginal.from_result(sums, "s").variance == pytest.approx(sums.plan.measurements[0].std_dev ** 2)
    assert Marginal.from_result(sums, "s").variance > 1000 * marginals[1].variance   # income's bound is 1000
    avg = db.sql("SELECT state, AVG(income) AS a FROM people GROUP BY state", epsilon=1.0, nonnegative=False)
    with pytest.raises(ConsistencyError) as info:
        Marginal.from_result(avg, "a")
    assert info.value.code == "DP523"
