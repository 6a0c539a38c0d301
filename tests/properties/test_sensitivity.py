"""Each sensitivity is an upper bound: on random small tables and neighbours (one unit added, with
many rows, NULL/NaN/inf values), the bounded aggregates the rewritten SQL computes with noise off
move by at most the sensitivity the plan charges for: at most L0 partitions, each by at most Linf,
and within the L1 and L2 norms it states (tests/support/checks.py within_sensitivity). A noisy
top-k's utilities (issue 23) move with a spread max_i (u'_i - u_i) - min_i (u'_i - u_i) within the
range each of its choices is charged for, all one way where it says they are monotone."""
import math

import duckdb
import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import dpsql
from dpsql import testing
from dpsql.mechanisms.quantile_choice import candidates
from dpsql.mechanisms.quantile_ranks import Histogram, fraction_of
from dpsql.plan.quantities import Quantity
from dpsql.plan.sensitivity import TREE_LEAVES
from tests.support import sql_tree
from tests.support.checks import examples, within_sensitivity
from tests.support.exact import KEYS, ROW, VALUES, bounds, exact_sql, noiseless, plan_for


def exact_names(plan) -> set:
    """The measurements __noisy holds (a quantile's tree is not among them: its levels are checked by
    tests/lower/test_quantile.py)."""
    return {m.name for m in plan.measurements if m.kind is not Quantity.QUANTILE}


def measure(rows, plan) -> dict:
    table = noiseless(rows, plan).sql(exact_sql(plan)).to_arrow_table()
    key_cols = [c for c in table.column_names if c.startswith("__k")]
    out = {}
    for row in table.to_pylist():
        # NaN is one group in DuckDB but never equal to itself in Python: name it.
        key = tuple("NaN" if isinstance(row[k], float) and math.isnan(row[k]) else row[k] for k in key_cols)
        out[key] = {m.name: row[m.name] for m in plan.measurements if m.name in exact_names(plan)} | (
            {"__u": row["__u"]} if plan.top_k else {})
    return out


QUERIES = [
    "SELECT grp, COUNT(*), COUNT(v), SUM(v), AVG(v) FROM t GROUP BY grp",
    "SELECT v, COUNT(*), SUM(v) FROM t GROUP BY v",   # private key: partition selection's counts too
    "SELECT COUNT(*), SUM(v) FROM t",
    "SELECT grp, SUM(v) FROM t WHERE v > 0 OR v IS NULL GROUP BY grp",
    "SELECT grp, SUM(v, contribution_bounds_per_row => (-3, 7)), AVG(v, contribution_bounds_per_row => (0, 1)) "
    "FROM t GROUP BY grp",
    "SELECT grp, VAR_POP(v), STDDEV_SAMP(v), SUM(v * 2 - 1), SUM(CASE WHEN v > 0 THEN 1 ELSE 0 END), "
    "COUNT(v / 2) FROM t GROUP BY grp",
    # groups from the query and the keys alone (issue 14): a CASE of literals, WHERE pruning the keys
    "SELECT CASE WHEN v > 0 THEN 'pos' WHEN v < 0 THEN 'neg' END AS s, COUNT(*), SUM(v) FROM t GROUP BY s",
    "SELECT grp, COUNT(*), SUM(v) FROM t WHERE grp IN ('a', 'c') AND v > 1 GROUP BY grp",
    # noisy top-k (issue 23): the utilities of the candidates, besides the chosen groups' values
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') grp, COUNT(*) AS n FROM t GROUP BY grp ORDER BY n DESC LIMIT 1",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') grp, SUM(v) AS s FROM t GROUP BY grp ORDER BY s LIMIT 2",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') grp FROM t GROUP BY grp ORDER BY COUNT(DISTINCT v) DESC LIMIT 2",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') grp, COUNT_IF(v > 0) AS n, AVG(v) AS a FROM t GROUP BY grp ORDER BY n LIMIT 1",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') v, COUNT(*) AS n FROM t GROUP BY v ORDER BY n DESC LIMIT 2",   # private keys
    # bins derived from v's bounds as the WHERE narrows them (issue 24): two bins, so L = min(L, 2)
    "SELECT FLOOR(v / 2) AS b, COUNT(*), SUM(v) FROM t WHERE v >= 2 AND v <= 4 GROUP BY FLOOR(v / 2)",
    # the clipping report (issue 25): a person's 0/1 flag in each kept partition, and the count of people
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(report_clipping = true) grp, COUNT(*), SUM(v), AVG(v), "
    "COUNT_IF(v > 0) FROM t GROUP BY grp",
]
NARROWED = QUERIES[-2]
CLIPPING = QUERIES[-1]
# GoogleSQL per-unit bounds: each unit's total (or mean) in a partition is clamped, whatever its rows.
USER_QUERIES = QUERIES + [
    "SELECT grp, COUNT(*, contribution_bounds_per_group => (0, 2)), COUNT(v, contribution_bounds_per_group => (1, 4)), "
    "SUM(v, contribution_bounds_per_group => (-5, 20)), AVG(v, contribution_bounds_per_group => (-1, 3)) "
    "FROM t GROUP BY grp",
    "SELECT v, grp, COUNT(DISTINCT u), AVG(v) FROM t GROUP BY v, grp",
    "SELECT COUNT(DISTINCT grp), COUNT(*), SUM(v) FROM t",
    "SELECT v, COUNT(DISTINCT grp) FROM t GROUP BY v",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 1, privacy_unit_column = u) grp, "
    "SUM(v, contribution_bounds_per_row => (0, 1), contribution_bounds_per_group => (0, 2)) FROM t GROUP BY grp",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') grp, SUM(v, contribution_bounds_per_group => (0, 3)) AS s FROM t GROUP BY grp ORDER BY s DESC LIMIT 1",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') grp, COUNT(*, contribution_bounds_per_group => (1, 4)) AS n FROM t GROUP BY grp ORDER BY n LIMIT 1",
    # the clipping report over per-group bounds, private keys (the cut's count of partitions), a quantile
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(report_clipping = true) grp, COUNT(*, contribution_bounds_per_group "
    "=> (0, 2)), SUM(v, contribution_bounds_per_row => (0, 1), contribution_bounds_per_group => (0, 2)), "
    "AVG(v, contribution_bounds_per_group => (-1, 3)) FROM t GROUP BY grp",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(report_clipping = true) v, COUNT(*) FROM t GROUP BY v",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(report_clipping = true) grp, MEDIAN(v), COUNT(v) FROM t GROUP BY grp",
]
TOP_K = [q for q in USER_QUERIES if "LIMIT" in q]


def check(plan, before, after):
    # With private keys the neighbour may hold groups the other lacks: there the value is 0.
    zero = {m.name: 0 for m in plan.measurements}
    for m in [m for m in plan.measurements if m.name in exact_names(plan)]:
        moves = [after.get(k, zero)[m.name] - before.get(k, zero)[m.name] for k in before.keys() | after.keys()]
        assert within_sensitivity(m.sensitivity, moves) is None, (m.label, within_sensitivity(m.sensitivity, moves))
    top = plan.top_k
    if top is not None:   # a group on one side only is a candidate of the other's set, with no row there
        changes = [after.get(k, {}).get("__u", 0) - before.get(k, {}).get("__u", 0) for k in before.keys() | after.keys()]
        assert max(changes + [0]) - min(changes + [0]) <= top.range, (plan.sql, changes, top.range)
        assert not top.monotone or all(c >= 0 for c in changes) or all(c <= 0 for c in changes), (plan.sql, changes)


@settings(max_examples=examples(45), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, max_size=40), extra=st.lists(st.tuples(st.sampled_from(KEYS + ["zz", None]), VALUES),
       min_size=1, max_size=25), L=st.integers(1, 3), C=st.integers(1, 3), b=bounds, sql=st.sampled_from(USER_QUERIES))
@example(rows=[], extra=[("a", 1e-320)], L=1, C=1, b=[0.0, 5e-324], sql=QUERIES[0])  # subnormal bounds
@example(rows=[], extra=[("a", 5.0)] * 4 + [("b", -5.0)] * 4, L=2, C=3, b=[-5.0, 5.0], sql=TOP_K[1])  # 2 Linf
@example(rows=[(1, "a", 1.0)], extra=[("a", 2.0), ("b", float("nan")), ("c", 7.0)] * 3, L=3, C=2, b=[0.0, 5.0],
         sql=TOP_K[1])   # bounds >= 0: monotone, Linf
@example(rows=[(1, "a", 3.0)], extra=[("a", v) for v in (0.0, 2.0, 3.0, 4.0, 5.0, 9.0)] * 2, L=3, C=2, b=[0.0, 10.0],
         sql=NARROWED)   # a heavy unit in every bin: L narrowed to the two the WHERE leaves
@example(rows=[(1, "a", 0.0), (2, "b", 100.0)], extra=[("a", 9e9), ("b", -9e9), ("c", float("nan")), ("zz", 1.0)] * 6,
         L=2, C=1, b=[0.0, 1.0], sql=CLIPPING)   # a heavy person cut by C, L and both clamps: 1 in each of L groups
def test_user_level_sensitivity_bounds_one_unit_with_many_rows(rows, extra, L, C, b, sql):
    plan = plan_for("u", L, C, b[0], b[1], sql)
    neighbour = rows + [(99, grp, v) for grp, v in extra]
    check(plan, measure(rows, plan), measure(neighbour, plan))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, max_size=40), extra=ROW, b=bounds, sql=st.sampled_from(QUERIES))
def test_row_level_sensitivity_bounds_one_row(rows, extra, b, sql):
    plan = plan_for("row", 1, 1, b[0], b[1], sql)
    check(plan, measure(rows, plan), measure(rows + [extra], plan))


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, max_size=40), extra=st.lists(st.tuples(st.sampled_from(KEYS + ["zz", None]), VALUES),
       min_size=1, max_size=25), keys=st.lists(st.integers(-20, 20), min_size=1, max_size=4, unique=True))
def test_numeric_keys_bound_what_they_key(rows, extra, keys):
    """A column with number keys and no bounds is clamped to [min, max] of its keys (issue 14)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u BIGINT, grp VARCHAR, v DOUBLE)")
    policy = {"budget": {"epsilon": 10}, "tables": {"t": {
        "privacy_unit": "u", "max_groups_per_unit": 2, "max_rows_per_unit": 2,
        "columns": {"grp": {"keys": KEYS}, "v": {"keys": keys}}}}}
    plan = dpsql.connect(con, ledger=":memory:", policy=policy).explain(
        "SELECT grp, COUNT(v), SUM(v), AVG(v), VAR_POP(v) FROM t GROUP BY grp", epsilon=1.0)
    assert "clamped to [%g, %g]" % (min(keys), max(keys)) in str(plan)   # AVG back into the keys' range
    neighbour = rows + [(99, grp, v) for grp, v in extra]
    check(plan, measure(rows, plan), measure(neighbour, plan))


def test_the_bound_is_tight_for_a_unit_at_its_limits():
    """A unit with many maximal rows in many groups moves the sum by exactly L*C*B: no slack hides a bug."""
    plan = plan_for("u", 2, 3, 0.0, 10.0, "SELECT grp, SUM(v) FROM t GROUP BY grp")
    unit = [(99, k, 10.0) for k in KEYS for _ in range(5)]
    before, after = measure([], plan), measure(unit, plan)
    m = plan.measurements[0]
    assert sum(abs(after[k][m.name] - before[k][m.name]) for k in before) == m.sensitivity.l1


# COUNT_IF (added through the spec tables alone): a row counts where its condition holds, guarded as
# a WHERE is (the CAST fails on NaN, infinities and huge values: TRY, not a failure); a unit counts at
# most C rows in each of at most L partitions, so L*C as any count.
COUNT_IF_QUERIES = [
    "SELECT grp, COUNT_IF(v > 0), COUNT_IF(v IS NULL OR grp = 'zz') FROM t GROUP BY grp",
    "SELECT COUNT_IF(CAST(v AS INTEGER) % 2 = 0 OR v < -10) AS n, COUNT(*) FROM t",
    "SELECT v, COUNT_IF(isnan(v) OR v >= 1) FROM t GROUP BY v",   # private keys: partition selection's count too
]
# COUNT(DISTINCT v) of a column without keys (issue 23): the values as they are (NaN, infinities,
# -0.0 beside 0.0), C of a unit's distinct values in each of its L partitions: L*C as well.
KEYLESS_DISTINCT = ["SELECT grp, COUNT(DISTINCT v) FROM t GROUP BY grp", "SELECT COUNT(DISTINCT v), COUNT(*) FROM t",
                    "SELECT v, COUNT(DISTINCT v), COUNT(*) FROM t GROUP BY v"]
L_C_COUNTS = [(sql, "count_if") for sql in COUNT_IF_QUERIES] + [(sql, "distinct") for sql in KEYLESS_DISTINCT]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, max_size=40), extra=st.lists(st.tuples(st.sampled_from(KEYS + ["zz", None]), VALUES),
       min_size=1, max_size=25), L=st.integers(1, 3), C=st.integers(1, 4), query=st.sampled_from(L_C_COUNTS),
       row_level=st.booleans())
@example(rows=[(0, "a", 0.0)], extra=[("a", -0.0), ("a", float("nan")), ("a", 1.0), ("a", 2.0)], L=1, C=2,
         query=(KEYLESS_DISTINCT[0], "distinct"), row_level=False)   # -0.0 is 0.0; C = 2 of the other three
def test_counts_move_by_at_most_L_C(rows, extra, L, C, query, row_level):
    """COUNT_IF(cond) and COUNT(DISTINCT v) without keys are charged L*C (row level: 1), and one unit
    moves them by no more, whatever its rows."""
    sql, kind = query
    plan = plan_for("row", 1, 1, -100.0, 100.0, sql) if row_level else plan_for("u", L, C, -100.0, 100.0, sql)
    counted = [m for m in plan.measurements if m.kind == kind]
    assert counted and all(m.sensitivity.l1 == plan.max_groups * plan.max_rows for m in counted)
    neighbour = rows + ([(99, *extra[0])] if row_level else [(99, grp, v) for grp, v in extra])
    check(plan, measure(rows, plan), measure(neighbour, plan))


def test_count_if_is_tight_for_a_unit_at_its_limits():
    """A unit whose rows all hold the condition, C + 2 of them in every group, moves COUNT_IF by
    exactly L*C: its cap is C, not more, and not fewer."""
    plan = plan_for("u", 2, 3, 0.0, 10.0, "SELECT grp, COUNT_IF(v > 5) FROM t GROUP BY grp")
    unit = [(99, k, 10.0) for k in KEYS for _ in range(5)] + [(99, k, 1.0) for k in KEYS]
    before, after = measure([], plan), measure(unit, plan)
    m = plan.measurements[0]
    assert sum(abs(after[k][m.name] - before[k][m.name]) for k in before) == m.sensitivity.l1 == 6


POOL = ["a", "b", "c", "d", "e", "f", "g"]


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique=True), C=st.integers(1, 6),
       L=st.integers(1, 3), rows=st.lists(st.tuples(st.integers(0, 6), st.sampled_from(POOL + [None]), VALUES),
                                          max_size=30),
       extra=st.lists(st.sampled_from(POOL + [None]), min_size=1, max_size=12),
       sql=st.sampled_from(["SELECT COUNT(DISTINCT grp) FROM t", "SELECT v, COUNT(DISTINCT grp) FROM t GROUP BY v"]))
@example(keys=["a", "b"], C=5, L=1, rows=[(0, "a", 1.0)], extra=["c", "d", "e", "f", "g"],
         sql="SELECT COUNT(DISTINCT grp) FROM t")   # C undeclared values: 1 -> 6 if they counted
def test_count_distinct_counts_declared_keys_only(keys, C, L, rows, extra, sql):
    """COUNT(DISTINCT col) of a column with declared keys is charged L * min(C, number of keys): a unit
    adds at most that many of the declared values, whatever undeclared values its rows hold (issue 28)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u BIGINT, grp VARCHAR, v DOUBLE)")
    policy = {"budget": {"epsilon": 10}, "tables": {"t": {
        "privacy_unit": "u", "max_groups_per_unit": L, "max_rows_per_unit": C,
        "columns": {"grp": {"keys": keys}, "v": {"lower": -100, "upper": 100}}}}}
    plan = dpsql.connect(con, ledger=":memory:", policy=policy).explain(sql, epsilon=1.0, delta=1e-5)
    distinct = next(m for m in plan.measurements if "DISTINCT" in m.label)
    assert distinct.sensitivity.l1 == plan.max_groups * min(C, len(keys))
    neighbour = rows + [(99, grp, float(i % 3)) for i, grp in enumerate(extra)]
    check(plan, measure(rows, plan), measure(neighbour, plan))


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(KEYS + ["zz", None]), VALUES), max_size=60),
       C=st.integers(1, 4), sql=st.sampled_from(["SELECT COUNT(DISTINCT grp) FROM t",
                                                  "SELECT v, COUNT(DISTINCT grp) FROM t GROUP BY v"]))
def test_count_distinct_keeps_a_units_C_smallest_declared_values(rows, C, sql):
    """COUNT(DISTINCT grp) at user level: each unit keeps, in each partition it keeps, its C smallest
    distinct declared values (MIN(v, C) over its distinct values, no list of all of them): the choice
    the sorted lists made."""
    plan = plan_for("u", 2, C, -100.0, 100.0, sql)
    keys = [f"__k{i}" for i in range(len(plan.group_keys))]
    pair = ", ".join(["__unit", *keys])
    con = noiseless(rows, plan)

    def named(row):
        return tuple("NaN" if isinstance(x, float) and math.isnan(x) else x for x in row)
    kept = None
    if "__bounded" in sql_tree.stages(plan):
        kept = {named(row) for row in con.sql(exact_sql(plan, f"SELECT {pair} FROM __bounded")).fetchall()}
    values: dict = {}
    for unit, grp, v in rows:
        key = named((unit,) if not keys else (unit, v))
        if grp in KEYS and (kept is None or key in kept):
            values.setdefault(key, set()).add(grp)
    got = con.sql(exact_sql(plan, f"SELECT {pair}, __v_m0 FROM __m0_values")).fetchall()
    assert {named(row[:-1]): row[-1] for row in got} == {key: sorted(found)[:C] for key, found in values.items()}


def test_count_distinct_per_unit_compares_in_the_columns_collation():
    """Under a NOCASE column 'A' is the declared key 'a' (the key test matches under the collation), so
    a unit's 'a' and 'A' are one value: the unit contributes at most min(C, keys) and the group counts
    at most |keys|, whichever spelling its rows hold (comparing bytewise once counted 3 of 2 keys)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u BIGINT, grp VARCHAR COLLATE NOCASE)")
    con.execute("INSERT INTO t VALUES (1, 'a'), (1, 'A'), (1, 'b'), (2, 'A'), (2, 'a'), (3, 'B')")
    policy = {"budget": {"epsilon": 10}, "tables": {"t": {"privacy_unit": "u", "max_rows_per_unit": 3,
                                                           "columns": {"grp": {"keys": ["a", "b"]}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy)
    plan = db.explain("SELECT COUNT(DISTINCT grp) FROM t", epsilon=1.0)
    assert plan.measurements[0].sensitivity.l1 == 2
    units = sorted(testing.duckdb_connection(db).sql(exact_sql(plan, "SELECT __unit, __v_m0 FROM __m0_values")).fetchall())
    assert [(u, len(v)) for u, v in units] == [(1, 2), (2, 1), (3, 1)]
    assert testing.run(db, "SELECT COUNT(DISTINCT grp) FROM t", noise="identity").rows == [(2,)]


def test_count_distinct_of_a_column_without_keys_is_tight():
    """A unit with C + 2 new distinct values in every group moves the count by exactly L*C."""
    plan = plan_for("u", 2, 3, 0.0, 10.0, "SELECT grp, COUNT(DISTINCT v) FROM t GROUP BY grp")
    unit = [(99, k, float(i)) for k in KEYS for i in range(5)]
    before, after = measure([], plan), measure(unit, plan)
    m = plan.measurements[0]
    assert sum(abs(after[k][m.name] - before[k][m.name]) for k in before) == m.sensitivity.l1 == 6


def test_the_range_of_a_top_k_is_tight():
    """A unit with C rows of the upper bound in one group and of the lower in another moves a count's
    utilities by exactly C (monotone), a SUM's over [-5, 5] by -C*B and C*B: the range each choice is
    charged for, no slack."""
    for sql in TOP_K[:2]:
        plan = plan_for("u", 2, 3, -5.0, 5.0, sql)
        before, after = measure([], plan), measure([(99, "a", 5.0)] * 4 + [(99, "b", -5.0)] * 4, plan)
        changes = [after.get(k, {}).get("__u", 0) - before.get(k, {}).get("__u", 0) for k in before.keys() | after.keys()]
        linf = plan.top_k.utility.sensitivity.per_partition
        assert max(changes) - min(changes) == plan.top_k.range == linf * (1 if plan.top_k.monotone else 2)


# MIN, MAX and the quantile rules (issue 23): each group's histogram moves by at most C values in at
# most L groups (plan/sensitivity.py histogram_sensitivity), and the exponential mechanism's utilities
# by at most the range its release states (mechanisms/quantile_choice.py), cell by cell.
HISTOGRAM_QUERIES = [
    "SELECT grp, MIN(v), MAX(v), MEDIAN(v, mechanism => 'exponential') FROM t GROUP BY grp",
    "SELECT v, MAX(v) FROM t GROUP BY v",   # private keys: groups from the data
    "SELECT QUANTILE_CONT(v, 0.9, mechanism => 'exponential'), MEDIAN(v, mechanism => 'ptr') FROM t",
    "SELECT grp, QUANTILE_CONT(v * 2 - 1, 0.25, mechanism => 'smooth', contribution_bounds_per_row => (-3, 7)) "
    "FROM t GROUP BY grp",
]


def histograms(rows, plan, m) -> dict:
    """Each group's histogram of ``m`` as the rewritten SQL gathers it: {keys: {cell: count}}."""
    keys = ", ".join(f'"__k{i}"' for i in range(len(plan.group_keys)))
    final = f"SELECT {keys + ', ' if keys else ''}cells, counts FROM __{m.name}_hist"
    out = {}
    for row in noiseless(rows, plan).sql(exact_sql(plan, final)).fetchall():
        key = tuple("NaN" if isinstance(x, float) and math.isnan(x) else x for x in row[:-2])
        out[key] = dict(zip(row[-2] or [], row[-1] or []))   # a global histogram of nothing: NULL lists
    return out


def utility_cells(cells: dict, m) -> np.ndarray:
    """The exponential mechanism's utility of every cell (in 1 / den ranks), from its candidates."""
    num, den = fraction_of(m.quantile)
    _, widths, us = candidates(Histogram.of(list(cells), list(cells.values()), TREE_LEAVES), num, den)
    return np.repeat(np.array(us, dtype=np.int64), widths)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, max_size=40), extra=st.lists(st.tuples(st.sampled_from(KEYS + ["zz", None]), VALUES),
       min_size=1, max_size=25), L=st.integers(1, 3), C=st.integers(1, 3), b=bounds,
       sql=st.sampled_from(HISTOGRAM_QUERIES))
# The q = 0.9 range's worst case: an added top value moves the target 0.9 ranks away from the cells
# between the two clusters and 0.9 ranks toward those above them: a range of 1.8 C, not C.
@example(rows=[(i, "a", 0.0) for i in range(5)] + [(i, "a", 1.0) for i in range(5, 10)], extra=[("a", 10.0)],
         L=1, C=1, b=[0.0, 10.0], sql=HISTOGRAM_QUERIES[2])
def test_a_unit_moves_each_histogram_and_its_utilities_within_their_sensitivity(rows, extra, L, C, b, sql):
    plan = plan_for("u", L, C, b[0], b[1], sql)
    neighbour = rows + [(99, grp, v) for grp, v in extra]
    for m in [m for m in plan.measurements if m.kind == "histogram"]:
        before, after = histograms(rows, plan, m), histograms(neighbour, plan, m)
        moved = {k: sum(abs(after.get(k, {}).get(c, 0) - before.get(k, {}).get(c, 0))
                        for c in before.get(k, {}).keys() | after.get(k, {}).keys()) for k in before.keys() | after.keys()}
        # Groups a public key set does not hold (grp 'zz', NULL) are never released: only theirs count.
        moved = {k: v for k, v in moved.items() if v and (plan.selection is not None or not k or k[0] in KEYS)}
        assert len(moved) <= plan.max_groups and all(v <= plan.max_rows for v in moved.values()), (m.label, moved)
        if m.mechanism != "exponential":
            continue
        _, den = fraction_of(m.quantile)
        for k in moved:
            shift = utility_cells(after.get(k, {}), m) - utility_cells(before.get(k, {}), m)
            assert int(shift.max() - shift.min()) <= m.sensitivity.per_partition * den, (m.label, k)
