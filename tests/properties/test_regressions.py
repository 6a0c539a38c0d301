"""Privacy properties pinned at their exact edges, so that a planted bug (tools/mutants.py) fails a test.

Each test states one property of the spec (README: "How an answer is made private") and checks it on
explicit, deterministic examples chosen to hit the bound exactly: a unit with exactly C values in each
of L partitions, a row at exactly the clamp bound, a group with exactly tau units. Exact values come
from the trusted seam ``dpsql.testing.run`` (noise switched off, hash sampling, so neighbouring
databases are coupled); sensitivities are recomputed here from the spec, not read back from the code.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dpsql
from dpsql.api import replay
from dpsql.accounting.budget import Cost
from dpsql.errors import InternalError
from dpsql.mechanisms.losses import ZCDP, Loss, zcdp_delta
from dpsql.mechanisms.releases import Sensitivity
from dpsql.mechanisms.stable_quantile import PROPOSAL
from dpsql.plan.parts import Measurement
from dpsql.testing import run
from tests.support.checks import refusal
from tests.support.fixture import POLICY, make_database
from tests.support.paths import ACCEPT
from tests.support.stats import gaussian_pmf
from tests.support.queries.grammar import grammar_queries

TREE_DEPTH = 4   # README: quantile tree of branching 16 and depth 4, sensitivity 4*L*C
KEYS = ["a", "b", "c"]


# --- helpers -------------------------------------------------------------------------------------------

def private_table(rows, columns: dict, *, unit: str = "u", L: int = 2, C: int = 3,
                  schema: str = "u BIGINT, grp VARCHAR, v DOUBLE", budget: dict | None = None, rng=None):
    """A private connection over table t holding ``rows``; the policy declares ``columns``."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({schema})")
    if rows:
        con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(rows[0]))})", rows)
    table = {"privacy_unit": unit, "columns": columns}
    if unit != "row":
        table.update(max_groups_per_unit=L, max_rows_per_unit=C)
    policy = {"budget": budget or {"epsilon": 100.0, "delta": 1e-3}, "tables": {"t": table}}
    return dpsql.connect(con, ledger=":memory:", policy=policy, rng=rng)


def measurements(db, sql: str, **kw):
    """(plan, {group keys: {measurement name: exact bounded value}}) with the noise off."""
    exact = run(db, sql, noise="identity", stage="measurements", sampling="hash", **kw)
    names = [m.name for m in exact.plan.measurements if m.kind != "quantile"]
    groups = {}
    for row in exact.table.to_pylist():
        keys = tuple(v for k, v in row.items() if k not in names)
        groups[keys] = {n: row[n] for n in names}
    return exact.plan, groups


def movement(plan, before: dict, after: dict) -> dict:
    """L1 distance of each measurement between two neighbours, over every group of either."""
    zero = {m.name: 0 for m in plan.measurements}
    return {m.name: sum(abs(after.get(k, zero)[m.name] - before.get(k, zero)[m.name]) for k in before.keys() | after.keys())
            for m in plan.measurements if m.kind != "quantile"}


def spec_sensitivity(m: Measurement, plan) -> int:
    """How far one unit can move a measurement, from the spec alone (README, "Sensitivity"), with the L and
    C the rewrite enforces (plan.max_groups, plan.max_rows): COUNT and COUNT_IF L*C; SUM L*C*B grid steps; per-group
    (GoogleSQL) bounds L*B; unit counts and the clipping report's cut people L; COUNT(DISTINCT col) L*min(C, |keys|), L*C without keys; quantile
    tree 4*L*C."""
    L, C = plan.max_groups, plan.max_rows
    B = None
    if m.lower is not None:
        B = math.ceil(Fraction(max(abs(m.lower), abs(m.upper))) / Fraction(m.granularity))
    if m.kind in ("units", "count_units", "clipped"):   # a person counts, or is cut, 0 or 1 times per group
        return L
    if m.kind == "distinct":
        keys = plan.table.columns[m.column].keys
        return L * (C if keys is None else min(C, len(keys)))
    if m.kind == "quantile":
        return TREE_DEPTH * L * C
    if m.bounding != "rows":
        return L * B
    if m.kind == "sum":
        return L * C * B
    assert m.kind in ("count", "count_col", "count_if"), m.kind
    return L * C


def noise_covers(m: Measurement, sensitivity: int) -> bool:
    """The noise actually used is enough: scale * epsilon >= sensitivity, in exact arithmetic."""
    return Fraction(m.scale) * Fraction(m.epsilon) >= sensitivity


def release_probability_of_one_unit(scale: float, threshold: int) -> float:
    """P(1 + Z >= tau) for Z discrete Laplace of scale t: P(Z >= k) = q^k / (1 + q), q = exp(-1/t)."""
    q = math.exp(-1.0 / scale)
    return q ** (threshold - 1) / (1 + q)


# --- sensitivities, at the bound ---------------------------------------------------------------------

@pytest.mark.parametrize("C, values", [(2, ["w", "x", "y", "z"]), (3, ["x", "y"])], ids=["C<keys", "keys<C"])
def test_count_distinct_moves_by_exactly_L_times_min_C_keys(C, values):
    """COUNT(DISTINCT col) over public keys: a unit keeps at most C of its values in each of at most L
    partitions, so a unit holding every key, twice, in each of L+1 partitions moves the counts by exactly
    L*min(C, |keys|) in total, and the noise covers that."""
    L = 2
    columns = {"grp": {"keys": KEYS}, "d": {"keys": values}}
    schema = "u BIGINT, grp VARCHAR, d VARCHAR"
    base = [(1, "a", "not a key")]
    unit = [(99, g, d) for g in KEYS for d in values for _ in range(2)]
    sql = "SELECT grp, COUNT(DISTINCT d) FROM t GROUP BY grp"
    plan, before = measurements(private_table(base, columns, L=L, C=C, schema=schema), sql)
    _, after = measurements(private_table(base + unit, columns, L=L, C=C, schema=schema), sql)
    (m,) = plan.measurements
    moved = movement(plan, before, after)[m.name]
    assert moved == L * min(C, len(values))
    assert moved <= m.sensitivity.l1 and noise_covers(m, L * min(C, len(values)))


@pytest.mark.parametrize("lower, upper, value", [
    (0.0, 0.1, 0.1),            # exactly at a bound that is not on the grid: round(0.1 / g) = ceil(0.1 / g)
    (0.0, 0.1, 1e9),            # far beyond it: clamped to it
    (-3.0, 7.0, 7.0),
    (-3.0, 7.0, -1e9),          # below a negative lower bound
    (-0.1, 0.05, float("-inf")),
    (-0.1, 0.05, float("nan")),  # NaN clamps to the upper bound
])
def test_a_unit_at_its_limits_moves_count_and_sum_by_exactly_L_C_rows_at_the_bound(lower, upper, value):
    """One unit with C+2 rows at (or beyond, clamped to) a bound in each of L+1 partitions moves COUNT(*)
    and COUNT(v) by exactly L*C and SUM(v) by exactly L*C*|round(bound / g)| grid steps: C rows' worth in
    L partitions, never more than the sensitivity, and the noise covers L*C*B."""
    L, C = 2, 3
    columns = {"grp": {"keys": KEYS}, "v": {"lower": lower, "upper": upper}}
    base = [(1, "a", lower), (2, "b", upper), (3, "c", (lower + upper) / 2)]
    unit = [(99, g, value) for g in KEYS for _ in range(C + 2)]
    sql = "SELECT grp, COUNT(*), COUNT(v), SUM(v) FROM t GROUP BY grp"
    plan, before = measurements(private_table(base, columns, L=L, C=C), sql)
    _, after = measurements(private_table(base + unit, columns, L=L, C=C), sql)
    moved = movement(plan, before, after)
    clamped = upper if math.isnan(value) else min(max(value, lower), upper)
    for m in plan.measurements:
        steps = 1 if m.kind != "sum" else abs(round(Fraction(clamped) / Fraction(m.granularity)))
        assert moved[m.name] == L * C * steps, m.label
        assert moved[m.name] <= m.sensitivity.l1, m.label
        assert noise_covers(m, spec_sensitivity(m, plan)), m.label


def test_per_group_bounds_and_unit_counts_move_by_exactly_L_bounds():
    """With contribution_bounds_per_group a unit adds one clamped value per partition, whatever its rows:
    a unit with many large rows in L+1 partitions moves COUNT(*) bounded by (0, 2) by exactly 2L, a SUM
    or AVG bounded by (0, 5) by exactly L*B grid steps, and the counts of units (COUNT(DISTINCT u), AVG's
    denominator) by exactly L."""
    L, C = 2, 3
    columns = {"grp": {"keys": KEYS}, "v": {"lower": 0, "upper": 100}}
    base = [(1, "a", 1.0), (2, "b", 2.0)]
    unit = [(99, g, 100.0) for g in KEYS for _ in range(5)]
    sql = ("SELECT grp, COUNT(*, contribution_bounds_per_group => (0, 2)), "
           "SUM(v, contribution_bounds_per_group => (0, 5)), AVG(v, contribution_bounds_per_group => (0, 5)), "
           "COUNT(DISTINCT u) FROM t GROUP BY grp")
    plan, before = measurements(private_table(base, columns, L=L, C=C), sql)
    _, after = measurements(private_table(base + unit, columns, L=L, C=C), sql)
    moved = movement(plan, before, after)
    kinds = sorted((m.kind, m.bounding) for m in plan.measurements)
    assert kinds == [("count", "unit_total"), ("count_units", "rows"), ("sum", "unit_mean"), ("sum", "unit_total"),
                     ("units", "rows")]
    for m in plan.measurements:
        expected = {"count": L * 2, "units": L, "count_units": L}.get(m.kind) or L * round(5 / m.granularity)
        assert moved[m.name] == expected, m.label
        assert moved[m.name] <= m.sensitivity.l1 and noise_covers(m, spec_sensitivity(m, plan)), m.label


def test_a_quantile_keeps_at_most_C_values_per_unit():
    """The quantile tree counts at most C values of a unit per partition: a unit with exactly C+1 equal
    values moves no node count beyond what C of them do, so its (C+1)-th value cannot change a quantile.
    Here unit 1 holds C values at 10 and unit 2 C values at 90: the 0.55-quantile lies at 90, and stays
    there when unit 1 has one value more (with C+1 values counted it would drop to 10)."""
    C = 3
    columns = {"v": {"lower": 0, "upper": 100}}
    schema = "u BIGINT, v DOUBLE"
    others = [(2, 90.0)] * C
    sql = "SELECT QUANTILE_CONT(v, 0.55) AS q FROM t"
    answers = []
    for n in (C, C + 1, C + 4):
        db = private_table([(1, 10.0)] * n + others, columns, L=1, C=C, schema=schema)
        answers.append(run(db, sql, noise="identity").table.to_pylist()[0]["q"])
    assert answers[0] > 80, answers
    assert answers[1] == answers[0] and answers[2] == answers[0], answers


# --- budget: epsilon split, delta, scale, threshold over many plans ------------------------------------

CORPUS = [
    "SELECT COUNT(*), SUM(income), AVG(age), COUNT(income) FROM people",
    "SELECT COUNT(*), SUM(income), AVG(age), SUM(age), VAR_POP(income) FROM people",
    "SELECT sex, VAR_SAMP(income), STDDEV(age), COUNT(*) FROM people GROUP BY sex",
    "SELECT state, AVG(income), SUM(age) FROM people WHERE age > 30 GROUP BY state",
    "SELECT zip, COUNT(*) FROM people GROUP BY zip",
    "SELECT zip, SUM(income), AVG(age) FROM people GROUP BY zip",
    "SELECT zip, sex, COUNT(*), MEDIAN(age) FROM people GROUP BY zip, sex",
    "SELECT MEDIAN(income), QUANTILE_CONT(age, 0.9), COUNT(*) FROM people",
    "SELECT COUNT(DISTINCT state), COUNT(*) FROM people",
    "SELECT clinic, COUNT(*), SUM(cost), AVG(cost) FROM visits GROUP BY clinic",
    "SELECT cost, COUNT(*), COUNT(DISTINCT person_id) FROM visits GROUP BY cost",
    "SELECT cost, clinic, SUM(cost), MEDIAN(cost) FROM visits GROUP BY cost, clinic",
    "SELECT COUNT(DISTINCT clinic), COUNT(DISTINCT person_id), MEDIAN(cost) FROM visits",
    "SELECT clinic, SUM(cost, contribution_bounds_per_group => (0, 20)), AVG(cost, contribution_bounds_per_group "
    "=> (0, 10)), COUNT(*, contribution_bounds_per_group => (0, 4)) FROM visits GROUP BY clinic",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 1) clinic, COUNT(*), SUM(cost) "
    "FROM visits GROUP BY clinic",
]
ACCEPTED = sorted(p.read_text() for p in ACCEPT.glob("*.sql"))
EPSILONS = [1.0, 0.3, 1.1, 2.0]


@functools.lru_cache(maxsize=1)
def corpus_db():
    policy = {**POLICY, "budget": {"epsilon": 1e15, "delta": 0.5}}
    return dpsql.connect(make_database(), ledger=":memory:", policy=policy, rng=np.random.default_rng(7))


def with_delta(action, sql: str, **kw):
    """``action(sql, **kw)``, again with delta=1e-6 if private GROUP BY keys need one (DP304)."""
    try:
        return action(sql, **kw)
    except dpsql.DpsqlError as err:
        if err.code != "DP304":
            raise
        return action(sql, delta=1e-6, **kw)


def rule_sensitivity(m: Measurement, plan) -> Fraction:
    """A quantile rule's sensitivity from the spec (per partition, times L): the exponential mechanism's
    utility range, C ranks at q in {0, 1} and 2 C max(q, 1 - q) else; PTR and smooth sensitivity read
    the histogram, C values."""
    L, C = plan.max_groups, plan.max_rows
    q = Fraction(m.quantile).limit_denominator(1 << 20)
    if m.mechanism != "exponential":
        return Fraction(L * C)
    return L * (Fraction(C) if q in (0, 1) else 2 * C * max(q, 1 - q))


def check_rule(m: Measurement, plan, sql: str) -> None:
    """A quantile rule's noise against its loss, from the spec: the exponential mechanism's range / s
    (pure) or range^2 / 8 s^2 (zCDP, bounded range); PTR's two discrete Laplace noises (sensitivities
    L and L * proposal) within its epsilon and its delta its own; smooth sensitivity's one (epsilon,
    delta) release is its loss."""
    sensitivity = rule_sensitivity(m, plan)
    assert m.sensitivity.l1 >= sensitivity, (sql, m.label)
    releases = m.releases
    if m.mechanism == "exponential":
        if m.loss.measure == "pure":
            assert noise_covers(m, sensitivity), (sql, m.label)
        else:
            assert plan.max_groups * (sensitivity / plan.max_groups) ** 2 / (8 * m.scale ** 2) <= m.loss.rho, sql
        return
    assert m.loss.measure == "approximate" and 0 < m.loss.delta, (sql, m.label)
    if m.mechanism == "propose-test-release":
        test, answer, tests = releases
        assert (test.sensitivity.l1, answer.sensitivity.l1) == (plan.max_groups, plan.max_groups * PROPOSAL), sql
        assert test.sensitivity.l1 / test.scale + answer.sensitivity.l1 / answer.scale <= m.loss.epsilon, sql
        assert tests.delta == m.loss.delta and m.scale >= answer.scale, sql
    else:
        assert [(r.epsilon, r.delta) for r in releases] == [(m.loss.epsilon, m.loss.delta)], sql


def rule_deltas(plan) -> Fraction:
    return sum((m.loss.delta for m in plan.measurements if m.kind == "histogram"), Fraction(0))


def check_gaussian_plan(plan, sql: str) -> None:
    """A discrete Gaussian plan against the spec: each sensitivity at least the spec's L1 bound; its
    losses compose to the query's (epsilon, delta): zCDP shares add in rho and convert (CKS Corollary
    13), one count's (epsilon, delta) checked on dp-accounting's own (pessimistic) curve; selection's
    threshold from the exact tail."""
    from dp_accounting.pld import privacy_loss_distribution as pld
    selection_delta = plan.selection.delta if plan.selection is not None else 0.0
    for m in plan.measurements:
        if m.kind == "histogram":
            check_rule(m, plan, sql)
            continue
        assert m.sensitivity.l1 >= spec_sensitivity(m, plan), (sql, m.label)
        if m.loss.measure == ZCDP:
            assert m.sensitivity.l2_squared / (2 * m.scale ** 2) <= m.loss.rho, (sql, m.label)
        else:
            curve = pld.from_discrete_gaussian_mechanism(float(m.scale), sensitivity=int(m.sensitivity.per_partition))
            assert curve.get_delta_for_epsilon(float(m.loss.epsilon)) <= float(m.loss.delta) * 1.02, (sql, m.label)
    rhos = [m.loss.rho for m in plan.measurements if m.loss.measure == ZCDP]
    if rhos:
        assert zcdp_delta(float(sum(rhos)), plan.epsilon) <= plan.delta - selection_delta - rule_deltas(plan), sql
    else:
        noise = [m for m in plan.measurements if m.kind != "histogram"]
        assert len(noise) == 1 and sum(m.loss.epsilon for m in plan.measurements) <= plan.epsilon, sql
    if plan.selection is not None:
        units = plan.measurement(plan.selection.measurement)
        sigma, tau = float(units.scale), plan.selection.threshold
        assert gaussian_pmf(sigma, range(tau - 1, tau + int(40 * sigma) + 10)).sum() <= selection_delta / plan.max_groups


def check_plan(plan, sql: str = "") -> None:
    """What a plan spends and how much noise it adds, against the spec."""
    if any(m.loss.measure == "zCDP" or (m.kind != "histogram" and m.loss.measure != "pure")
           for m in plan.measurements):
        return check_gaussian_plan(plan, sql)
    # Sequential composition: the measurements' epsilons sum to at most the query's epsilon (a quantile
    # rule's (epsilon, delta) added by basic composition).
    assert sum(Fraction(m.epsilon) for m in plan.measurements) <= Fraction(plan.epsilon), sql
    assert rule_deltas(plan) + Fraction(plan.selection.delta if plan.selection else 0) <= Fraction(plan.delta), sql
    for m in plan.measurements:
        if m.kind == "histogram":
            check_rule(m, plan, sql)
        else:
            assert noise_covers(m, spec_sensitivity(m, plan)), (sql, m.label, m.scale, m.epsilon, m.sensitivity.l1)
    if plan.selection is not None:
        # Partition selection: a group of one unit, who reaches <= L groups, is released with
        # probability <= delta / L, by the noisy unit count, which is one of the measurements.
        units = plan.measurement(plan.selection.measurement)
        assert units.kind == "units" and plan.selection.delta + rule_deltas(plan) == plan.delta > 0, sql
        assert release_probability_of_one_unit(units.scale, plan.selection.threshold) <= \
            plan.delta / plan.max_groups, sql


def answer_and_check(db, sql: str, epsilon: float | None = None) -> bool:
    """Answer ``sql`` (fresh: charged), check its plan and that the ledger charged what it spends;
    False if refused."""
    try:
        result = with_delta(db.sql, sql, epsilon=epsilon, fresh=True)
    except dpsql.DpsqlError:
        return False
    plan, charge = result.plan, db.budget.history[-1]
    check_plan(plan, sql)
    assert (charge.epsilon, charge.delta, charge.status) == (plan.epsilon, plan.delta, "released"), sql
    return True


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_every_plan_spends_at_most_its_epsilon_with_enough_noise(epsilon):
    """For every query of the corpus: the measurements' epsilons sum to at most the query's epsilon
    (shares rounded down, partition selection's unit count included); every measurement's
    scale*epsilon covers its sensitivity recomputed from the spec; the selection threshold bounds a
    lone unit's release by delta/L."""
    db = corpus_db()
    for sql in CORPUS:
        check_plan(with_delta(db.explain, sql, epsilon=epsilon), sql)


def test_every_accepted_query_spends_at_most_its_epsilon_with_enough_noise():
    """The same for every query of grammar/accept (the plans only: nothing is run)."""
    db = corpus_db()
    planned = 0
    for sql in ACCEPTED:
        try:
            plan = with_delta(db.explain, sql)
        except dpsql.DpsqlError:
            continue   # an accepted query may still be over this policy's budget or need options
        check_plan(plan, sql)
        planned += 1
    assert planned >= len(ACCEPTED) * 3 // 4


def test_the_ledger_charges_what_every_plan_spends():
    """db.sql charges the ledger the plan's epsilon and delta (partition selection's delta included),
    before the answer is released; the charge covers every measurement's epsilon."""
    db = corpus_db()
    answered = [sql for sql in CORPUS if answer_and_check(db, sql, 1.0)]
    assert answered == CORPUS


@settings(max_examples=30, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(sql=grammar_queries())
def test_grammar_queries_are_charged_what_they_spend_with_enough_noise(sql):
    """The same properties over queries drawn from the grammar (those that are answered)."""
    answer_and_check(corpus_db(), sql)


@pytest.mark.parametrize("unit, L", [("row", 1), ("u", 2), ("u", 3)])
def test_partition_selection_releases_a_group_iff_its_units_reach_a_threshold_that_bounds_delta(unit, L):
    """Private GROUP BY keys: tau is such that a group of one unit (who reaches <= L groups) is released
    with probability <= delta / L, and with the noise off exactly the groups of >= tau units appear."""
    delta = 1e-5
    columns = {"grp": {}}   # no keys: private
    probe = private_table([], columns, unit=unit, L=L, C=1, schema="u BIGINT, grp VARCHAR")
    plan = probe.explain("SELECT grp, COUNT(*) FROM t GROUP BY grp", epsilon=1.0, delta=delta)
    tau, units = plan.selection.threshold, plan.measurement(plan.selection.measurement)
    assert units.kind == "units" and noise_covers(units, L)
    assert release_probability_of_one_unit(units.scale, tau) <= delta / L
    rows = [(i, "reaches") for i in range(tau)] + [(1000 + i, "short") for i in range(tau - 1)]
    db = private_table(rows, columns, unit=unit, L=L, C=1, schema="u BIGINT, grp VARCHAR")
    released = run(db, "SELECT grp, COUNT(*) AS n FROM t GROUP BY grp", epsilon=1.0, delta=delta).table.to_pylist()
    assert released == [{"grp": "reaches", "n": tau}]


def test_a_measurement_cannot_be_under_noised():
    """A Measurement whose noise is below what its loss needs cannot even be constructed: a Laplace
    scale * epsilon below its L1 sensitivity, or a Gaussian sigma whose exact curve (one partition,
    CKS Theorem 7) or zCDP bound (several) exceeds its loss."""
    fields = dict(name="m0", kind="count", column=None, lower=None, upper=None, granularity=1.0,
                  sensitivity=Sensitivity(2, Fraction(3)), loss=Loss.pure(0.5), scale=12.0, mechanism="discrete Laplace")
    assert Measurement(**fields).scale == 12
    for scale in (11.999999, 6.0, 0.0):
        with pytest.raises(InternalError):
            Measurement(**{**fields, "scale": scale})
    # sigma = 2 * sqrt(2): rho = l2^2 / (2 sigma^2) = (2 * 3^2) / 16 = 9/8 exactly.
    gaussian = {**fields, "mechanism": "discrete Gaussian", "loss": Loss.zcdp(Fraction(9, 8)), "scale": Fraction(3)}
    assert Measurement(**gaussian).release.scale == 3
    for scale in (Fraction(2), Fraction(2.8), 0):
        with pytest.raises(InternalError):
            Measurement(**{**gaussian, "scale": scale})
    one = {**gaussian, "sensitivity": Sensitivity(1, Fraction(1)), "loss": Loss.approximate(1.0, 1e-6)}
    assert Measurement(**{**one, "scale": Fraction(17, 4)})   # epsilon 1, delta 1e-6 needs sigma 4.23
    with pytest.raises(InternalError):
        Measurement(**{**one, "scale": Fraction(4)})


# --- the ledger ----------------------------------------------------------------------------------------

class FailingSource:
    """A RandomSource (trusted test API) whose entropy fails: the query fails after it was charged."""

    def below(self, n):
        raise RuntimeError("entropy source failed")


def test_a_query_that_fails_after_its_charge_stays_spent(raw, policy):
    """The charge is recorded before the query runs; if the query then fails, the charge is still spent:
    it shows in the budget and counts against the next charge."""
    policy["budget"] = {"epsilon": 1.0, "delta": 1e-6}
    db = dpsql.connect(raw, ledger=":memory:", policy=policy, rng=FailingSource())
    err = refusal(db, "SELECT COUNT(*) FROM people", epsilon=0.6)
    assert err.code == "DP900"
    budget = db.budget
    assert budget.spent_epsilon == 0.6 and budget.remaining_epsilon == 0.4
    assert [c.status for c in budget.history] == ["failed"]
    assert refusal(db, "SELECT COUNT(*) FROM people WHERE age > 3", epsilon=0.5).code == "DP402"
    assert refusal(db, "SELECT COUNT(*) FROM people WHERE age > 3", epsilon=0.4).code == "DP900"
    assert db.budget.spent_epsilon == 1.0 and db.budget.remaining_epsilon == 0


def test_the_replay_key_names_the_whole_cost():
    """An earlier answer is replayed only for the same cost: the key changes with epsilon and with delta."""
    text = replay.normalise_sql("SELECT COUNT(*) FROM people")
    costs = [Cost.of(0.5, 0), Cost.of(1.0, 0), Cost.of(0.5, 1e-6)]
    assert len({replay.replay_key(text, c, "policy", "data") for c in costs}) == len(costs)
    assert replay.replay_key(text, costs[0], "policy", "data") == replay.replay_key(text, Cost.of(0.5, 0.0),
                                                                                      "policy", "data")


def test_a_repeated_query_is_replayed_only_at_the_same_epsilon(db):
    """The same SQL at another epsilon is a new release, charged; at the same epsilon it is replayed free."""
    sql = "SELECT sex, COUNT(*) FROM people GROUP BY sex"
    first = db.sql(sql, epsilon=0.5)
    other = db.sql(sql, epsilon=0.25)
    again = db.sql(sql, epsilon=0.5)
    assert not first.replayed and not other.replayed and again.replayed
    assert again.fetchall() == first.fetchall() and db.budget.spent_epsilon == 0.75


def test_epsilons_and_deltas_add_up_and_both_are_checked(raw, policy):
    """Across queries epsilons add and deltas add (partition selection's delta is charged); a query
    whose epsilon or delta does not fit in what remains is refused and spends nothing."""
    policy["budget"] = {"epsilon": 1.0, "delta": 3e-6}
    db = dpsql.connect(raw, ledger=":memory:", policy=policy, rng=np.random.default_rng(1))
    db.sql("SELECT zip, COUNT(*) FROM people GROUP BY zip", epsilon=0.25, delta=1e-6)
    db.sql("SELECT zip, SUM(income) FROM people GROUP BY zip", epsilon=0.25, delta=1e-6)
    assert (db.budget.spent_epsilon, db.budget.spent_delta) == (0.5, 2e-6)
    assert [c.delta for c in db.budget.history] == [1e-6, 1e-6]
    assert refusal(db, "SELECT zip, COUNT(*) AS n FROM people GROUP BY zip", epsilon=0.25, delta=2e-6).code == "DP402"
    assert refusal(db, "SELECT COUNT(*) AS n FROM people", epsilon=0.75).code == "DP402"
    assert (db.budget.spent_epsilon, db.budget.spent_delta) == (0.5, 2e-6)
    db.sql("SELECT COUNT(*) AS n FROM people", epsilon=0.5)
    assert db.budget.remaining_epsilon == 0


# --- validation ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) AS ssn FROM people GROUP BY ssn",
    "SELECT sex, COUNT(*) AS ssn FROM people GROUP BY sex ORDER BY ssn",
    "SELECT sex, COUNT(*) AS ssn FROM people GROUP BY sex HAVING ssn > 0",
    "SELECT sex, COUNT(*) AS SSN FROM people GROUP BY sex, ssn",
    "SELECT COUNT(ssn) FROM people",
    "SELECT COUNT(*) FROM people WHERE ssn = 'ssn-1'",
])
def test_an_identifier_column_is_refused_everywhere_even_behind_an_alias_of_its_name(db, sql):
    """Identifier columns may appear nowhere: an output alias spelled like one does not make the
    column's use in GROUP BY, HAVING or ORDER BY an alias reference (DP203)."""
    assert refusal(db, sql, delta=1e-6).code == "DP203"


@pytest.mark.parametrize("sql", ["SELECT * FROM people", "SELECT SUM(*) FROM people",
                                 "SELECT sex, * FROM people GROUP BY sex"])
def test_star_is_refused_outside_count(db, sql):
    """``*`` only as COUNT(*): anywhere else it would release raw rows (DP301)."""
    assert refusal(db, sql).code == "DP301"


# --- noise, post-processing, intervals -----------------------------------------------------------------

def test_released_counts_carry_noise_of_the_plan_scale():
    """Each released count is its exact value plus discrete Laplace noise of the plan's scale: over 1000
    groups (seeded, so deterministic) the noise has mean ~0 and mean |noise| ~ E|Z| = 2q / (1 - q^2)."""
    keys = list(range(1000))
    db = private_table([(k,) for k in keys], {"k": {"keys": keys}}, unit="row", schema="k INTEGER",
                       rng=np.random.default_rng(20261125))
    sql = "SELECT k, COUNT(*) AS n FROM t GROUP BY k"
    result = db.sql(sql, epsilon=0.1, nonnegative=False)
    (m,) = result.plan.measurements
    assert m.scale == 10.0
    noise = np.array([n - 1 for _, n in result.fetchall()], dtype=float)
    q = math.exp(-1 / m.scale)
    expected = 2 * q / (1 - q * q)
    assert abs(noise.mean()) < 1.5
    assert 0.85 * expected < np.abs(noise).mean() < 1.15 * expected


def test_a_sum_whose_values_can_be_negative_is_not_clamped_at_zero():
    """nonnegative clamps only counts and sums of values >= 0: a sum of values in [-10, 10] is released
    below 0 (here exactly, with the noise off)."""
    db = private_table([(1, "a", -4.0), (2, "a", -4.0), (3, "a", -4.0), (4, "b", 2.0)],
                       {"grp": {"keys": ["a", "b"]}, "v": {"lower": -10, "upper": 10}}, unit="row")
    rows = run(db, "SELECT grp, SUM(v) AS s FROM t GROUP BY grp", noise="identity").table.to_pylist()
    assert rows == [{"grp": "a", "s": -12.0}, {"grp": "b", "s": 2.0}]


def half_width(scale: float, confidence: float) -> int:
    """The smallest k with P(|Z| <= k) = 1 - 2 q^(k+1) / (1 + q) >= confidence, Z discrete Laplace of
    scale t, q = exp(-1/t): from k ~ t ln(2 / ((1 - c)(1 + q))) - 1, stepped to the smallest that holds."""
    q = math.exp(-1.0 / scale)

    def holds(k):
        return 1 - 2 * math.exp(-(k + 1) / scale) / (1 + q) >= confidence
    k = max(0, math.ceil(scale * math.log(2 / ((1 - confidence) * (1 + q)))) - 1)
    while not holds(k):
        k += 1
    while k > 0 and holds(k - 1):
        k -= 1
    return k


def test_intervals_have_the_exact_discrete_laplace_width_and_avg_uses_the_union_bound(db):
    """ci=0.95: a count's or sum's interval is the released value -/+ the smallest k with
    P(|noise| <= k) >= 0.95 (grid steps times g); AVG's comes from (1 + 0.95)/2 intervals of its sum and
    count (union bound): the widest corners of (s -/+ a) / (n -/+ b) around the midpoint."""
    sql = "SELECT COUNT(*) AS n, SUM(income) AS s, AVG(age) AS a FROM people"
    kw = dict(epsilon=1.0, ci=0.95, nonnegative=False)
    out = run(db, sql, noise="identity", **kw)
    plan, (row,) = out.plan, out.table.to_pylist()
    _, exact = measurements(db, sql, **kw)
    (values,) = exact.values()
    outputs = {o.name: [plan.measurement(n) for n in o.measurements] for o in plan.outputs}
    (count,), (total,) = outputs["n"], outputs["s"]
    assert row["n_ci_high"] - row["n"] == row["n"] - row["n_ci_low"] == half_width(count.scale, 0.95)
    assert row["s_ci_high"] - row["s"] == pytest.approx(half_width(total.scale, 0.95) * total.granularity, rel=1e-12)
    centred, n = outputs["a"]
    a = half_width(centred.scale, 0.975) * centred.granularity
    b = half_width(n.scale, 0.975)
    s, c = values[centred.name] * centred.granularity, values[n.name]
    corners = [centred.offset + (s + da) / (c + db_) for da in (-a, a) for db_ in (-b, b)]
    assert row["a_ci_low"] == pytest.approx(max(min(corners), 0.0), rel=1e-9)
    assert row["a_ci_high"] == pytest.approx(min(max(corners), 100.0), rel=1e-9)
