"""Fuzzing the whole pipeline: SQL generated from the grammar (and well past it) and mutated
accepted queries must only ever be answered with noise or refused with a ``DpsqlError``.

Properties checked for every example (``check_query``):

* ``db.sql`` returns a Result or raises a ``DpsqlError`` subclass; anything else is a failure.
* DP999 (internal bug) and DP900 (engine failure after the spend) are failures: a query that
  validated must never fail in the engine, or the failure could be a data-dependent side channel.
* Error objects: ``code`` matches ``DP\\d{3}``, ``format()`` returns a str, a position lies in the SQL.
* A refused query spends nothing; an answered one is charged, a replayed one is not, and a replay
  only ever returns an answer drawn for the same plan (same measurements, bounds and epsilon).
* Every answer carries noise: at least one measurement with a positive scale (scale 0 only with
  sensitivity 0), the RandomSource called at least once per noisy measurement, and no aggregate
  output (an output drawn from measurements) is NaN, infinite or NULL.

Queries run against the fixture database, and (alternately) against it plus rows at the edges of
their types (NaN, infinities, int64 extremes, NULL keys). The default run is small and derandomized
(CI is deterministic); ``-m slow`` runs 10,000 examples per strategy. Failures a dpsql bug causes
and that are already reported go into ``KNOWN_BUGS``; fixed ones into ``FUZZ_FINDINGS``.
"""
from __future__ import annotations

import copy
import math
import numbers
import re
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import dpsql
from dpsql.plan.public import PublicPlan
from tests.support.checks import examples
from tests.support.fixture import POLICY, make_database
from tests.support.queries.grammar import grammar_queries
from tests.support.queries.mutations import ACCEPT_CORPUS, SEEDS, mutated_queries

# --------------------------------------------------------------------------------------------
# Known dpsql bugs: minimal SQL that still breaks a property. An example whose failure has the
# same signature (exception type/code, innermost dpsql frame, normalised message) as one of these
# is counted as known instead of failing the run. Remove an entry once it is fixed
# (test_known_bugs_still_reproduce then XPASSes) and move it to FUZZ_FINDINGS.
# An entry is one SQL string, or a tuple of strings run in order on one connection.
# --------------------------------------------------------------------------------------------
KNOWN_BUGS: list[str | tuple[str, ...]] = [
    # (Fixed: a LIMIT beyond int64 is DP307; sqlglot's crash on `SELECT a[ AS x` is DP100; an aggregate
    # of a constant, SUM(0), is released exactly on purpose. They are in grammar/ corpora now.)
]

# Past fuzz findings, fixed since: every one must now hold every property (regression tests).
FUZZ_FINDINGS: list[str | tuple[str, ...]] = [
    # Replay matched queries whose per-row bounds differ only by a shift (same sensitivity); the
    # replay key now carries every measurement in full (bounds, centring) and every output.
    ("SELECT AVG(age, contribution_bounds_per_row => (0, 105)) FROM people",
     "SELECT AVG(age, contribution_bounds_per_row => (4, 109)) FROM people"),
    # epsilon too small to plan: ValueError / OverflowError / ZeroDivisionError from dyadic_scale
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1e-300) COUNT(*) FROM people",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1e-320) COUNT(*) FROM people",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 5e-324) COUNT(*), SUM(age) FROM people",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 1e300) COUNT(*) FROM visits",
    "SELECT COUNT(*, contribution_bounds_per_group => (0, 1e300)) FROM visits",
    # validated, charged, then DuckDB failed (DP900): type mismatches the validator did not see
    "SELECT clinic, COUNT(*) FROM visits GROUP BY clinic HAVING 0 < clinic",
    "SELECT clinic, COUNT(*) FROM visits GROUP BY clinic HAVING 0.0 < clinic",
    "SELECT -sex, COUNT(*) FROM people GROUP BY sex",
    "SELECT NOT sex, COUNT(*) FROM people GROUP BY sex",
    "SELECT COUNT(*) FROM people WHERE '2020-06-01' BETWEEN '2020-06-01' AND joined",
    "SELECT COUNT(*) FROM people WHERE joined > 'x'",
    "SELECT COUNT(*) FROM people WHERE regexp_matches(zip, '0', 'x')",
    "SELECT COUNT(*) FROM people WHERE COALESCE(zip, 0) > 10",
    "SELECT COUNT(*) FROM people WHERE abs(zip) > 1",
    "SELECT COUNT(*) FROM people WHERE CASE WHEN age > 60 THEN zip ELSE 0 END > 100",
    "SELECT COUNT(*) FROM people WHERE age > -'1'",
    # ... and the rewritten SQL did not parse in DuckDB (DP900)
    "SELECT COUNT(*) FROM people WHERE (age x) > 1",
    "SELECT COUNT(*) FROM people WHERE age > 1 = active",
    'SELECT COUNT(*) AS "" FROM people ORDER BY ""',
    "SELECT COUNT(*) FROM people WHERE age > " + " + ".join(["1"] * 1000),
    # plain Python exceptions: KeyError '*' (validator), KeyError 'from_' (CTE flattening)
    "SELECT COUNT(x.*) FROM people",
    "WITH t AS (SELECT 1) SELECT COUNT(*) FROM t",
    # DP100 positions past the end of the text for SQL ending with a newline
    "$SELECT COUNT(*) FROM people\n",
    "SELECT COUNT(*)$ FROM people\n",
    # inf released: rows clamped to 1e308 overflow the sum (whether depends on the data)
    "SELECT SUM(age, contribution_bounds_per_row => (1e308, 1e308)) FROM people",
    # replay ignored contribution bounds / max_groups_contributed: another release's answer for free
    ("SELECT SUM(cost, contribution_bounds_per_group => (0, 1)) FROM visits",
     "SELECT SUM(cost, contribution_bounds_per_group => (0, 50)) FROM visits"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 1) COUNT(*) FROM visits",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 2) COUNT(*) FROM visits"),
    # DP900 on a LIMIT beyond int64; AttributeError from sqlglot's parser escaping parse()
    "SELECT COUNT(*) FROM people LIMIT 99999999999999999999",
    "SELECT a[ AS x",
    # partition selection with a denormal delta: OverflowError in sensitivity.selection_threshold
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 5e-324) zip, COUNT(*) FROM people GROUP BY zip",
    # COUNT(+) (no argument) inside a per-person subquery: AttributeError in per_person's probe
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) n, COUNT(*) AS people "
    "FROM (SELECT person_id, COUNT(+) AS n FROM visits GROUP BY person_id) AS per GROUP BY n",
    # a per-person subquery that does not select the person: StopIteration in per_person._per_person_table
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) n, COUNT(*) AS people "
    "FROM (SELECT , COUNT(*) AS n FROM visits GROUP BY person_id) AS per GROUP BY n",
]

# --------------------------------------------------------------------------------------------
# The connection under test
# --------------------------------------------------------------------------------------------
FUZZ_POLICY = copy.deepcopy(POLICY)
FUZZ_POLICY["budget"] = {"epsilon": 1e15, "delta": 0.5}  # so BudgetExceeded never hides a bug

CODE = re.compile(r"DP\d{3}\Z")


class CountingSource:
    """A seeded RandomSource (trusted test API) that counts ``below`` calls and checks its input."""

    def __init__(self, generator: np.random.Generator):
        self.generator = generator
        self.calls = 0
        self.draws = 0
        self.bad_bounds: list[str] = []

    def below(self, n):
        n = np.asarray(n)
        self.calls += 1
        if n.dtype.kind not in "iu" or (n.size and n.min() < 1):
            self.bad_bounds.append(f"dtype={n.dtype} min={n.min() if n.size else None}")
            n = np.maximum(n.astype(np.int64), 1)
        self.draws += n.size
        if n.size == 0:
            return np.empty(n.shape, dtype=n.dtype)
        return self.generator.integers(0, n, dtype=n.dtype)


# Rows at the edges of their types (NaN, infinities, int64 extremes, NULL and undeclared keys) added to
# the fixture database for half the runs: one such row must never put a NaN, an infinity or an error
# into an answer (docs/architecture.md, threat model 5).
EXTREME_ROWS = [
    """INSERT INTO people VALUES
        (1000, 'ssn-1000', 9223372036854775807, 'F', 'CA', 'nan'::DOUBLE, '00001', DATE '2020-01-01', true),
        (1001, 'ssn-1001', -9223372036854775808, NULL, NULL, 'inf'::DOUBLE, NULL, NULL, NULL),
        (1002, 'ssn-1002', 0, 'M', 'NY', '-inf'::DOUBLE, '', DATE '1970-01-01', false),
        (1003, 'ssn-1003', 5, 'm', 'ca', 1.7976931348623157e308, 'x', DATE '9999-12-31', true),
        (1004, NULL, NULL, 'X', 'WA', -1.7976931348623157e308, '00042', NULL, false)""",
    """INSERT INTO visits (person_id, clinic, cost) VALUES (5, NULL, 'nan'::DOUBLE), (6, 'a', 'inf'::DOUBLE), (7, 'b', -1e308),
        (8, 'c', '-inf'::DOUBLE), (NULL, 'a', 1.0), (9, 'A', 1.7976931348623157e308)""",
]


def make_fuzz_database(extreme: bool):
    con = make_database()
    if extreme:
        for statement in EXTREME_ROWS:
            con.execute(statement)
    return con


def open_fuzz_db(seed: int = 20261125, extreme: bool = False):
    source = CountingSource(np.random.default_rng(seed))
    db = dpsql.connect(make_fuzz_database(extreme), policy=copy.deepcopy(FUZZ_POLICY), ledger=":memory:",
                       rng=source)
    return db, source


class FuzzTarget:
    """The connection under test, renewed every ``ROTATE`` queries ("fresh enough": the in-memory
    ledger's history, read on every ``db.budget``, stays short), with what it has released."""

    ROTATE = 1000

    def __init__(self, seed: int = 20261125, extreme: bool = False):
        self.seed = seed
        self.extreme = extreme   # start with the extreme rows; rotations alternate
        self.queries = 0
        self.db = None
        self._renew()

    def _renew(self):
        if self.db is not None:
            self.db.close()
        extreme = self.extreme ^ bool((self.queries // self.ROTATE) % 2)
        self.db, self.source = open_fuzz_db(self.seed + self.queries, extreme=extreme)
        self.released: dict[tuple, dict] = {}  # ledger's "same query" key -> {plan signature: first SQL}

    def next(self):
        self.queries += 1
        if self.queries % self.ROTATE == 0:
            self._renew()
        return self

    def close(self):
        self.db.close()


class FuzzFailure(Exception):
    """A property broke; ``signature`` identifies the bug (for KNOWN_BUGS), ``message`` explains it."""

    def __init__(self, signature: tuple, message: str):
        super().__init__(message)
        self.signature = signature
        self.message = message


def _normalise(text: str) -> str:
    """A message without its data: quoted text and numbers replaced, first line only, bounded."""
    text = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "_", text)
    text = re.sub(r"\d+(\.\d+)?([eE][+-]?\d+)?", "_", text)
    text = re.sub(r"\b[A-Z][A-Z0-9_]+(\([^)]*\))?", "_", text)   # type names (VARCHAR, DECIMAL(2,1), ...)
    text = re.sub(r"\b(option) \S+", r"\1 _", text)
    return text[:100]


def _innermost_frame(exc: BaseException, prefer: str = "dpsql") -> str:
    """``file:function`` of the innermost traceback frame in ``prefer`` (else the innermost one)."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f"/{prefer}/" in f.filename.replace("\\", "/")]
    frame = (mine or frames or [None])[-1]
    return f"{Path(frame.filename).name}:{frame.name}" if frame else "?"


def _last_frames(exc: BaseException, n: int = 4) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-n:]
    return "".join(traceback.format_list(frames))


def _describe(sql: str, kwargs: dict) -> str:
    return f"SQL: {sql!r}" + (f" kwargs={kwargs!r}" if kwargs else "")


def _check_error(err: dpsql.DpsqlError, sql: str, kwargs: dict) -> None:
    where = _describe(sql, kwargs)
    if not isinstance(err.code, str) or not CODE.match(err.code):
        raise FuzzFailure(("property", "error code format", type(err).__name__),
                          f"error code {err.code!r} does not match DP###; {where}")
    try:
        text = err.format()
    except Exception as e:  # noqa: BLE001
        raise FuzzFailure(("property", "format() raised", type(e).__name__, _innermost_frame(e)),
                          f"[{err.code}] err.format() raised {type(e).__name__}: {e}; {where}\n"
                          f"{_last_frames(e)}") from e
    if not isinstance(text, str):
        raise FuzzFailure(("property", "format() type", err.code),
                          f"[{err.code}] err.format() returned {type(text).__name__}; {where}")
    if err.start is not None:
        if not (isinstance(err.start, int) and 0 <= err.start < max(len(sql), 1)):
            raise FuzzFailure(("property", "start outside the SQL", err.code),
                              f"[{err.code}] err.start={err.start!r} outside the SQL (len {len(sql)}); "
                              f"{where}\n{text}")
        if err.end is not None and not (isinstance(err.end, int) and err.start <= err.end < max(len(sql), 1)):
            raise FuzzFailure(("property", "end outside the SQL", err.code),
                              f"[{err.code}] err.end={err.end!r} outside [start={err.start}, len {len(sql)}); "
                              f"{where}\n{text}")
        if err.sql is not None and err.sql != sql:
            raise FuzzFailure(("property", "position in another text", err.code),
                              f"[{err.code}] err.start refers to {err.sql!r}, not the query; {where}")


def _aggregate_columns(result) -> list[int]:
    """Indices of the result's columns that are noisy aggregates: outputs drawn from measurements.

    Group keys, and expressions over released outputs (post-processing, e.g. ``NOT sex`` or
    ``SUM(x) / COUNT(*)``), may be anything: they depend on the data only through noisy values.
    """
    if getattr(result.plan, "then", None) is not None:   # a public last stage's rows (plan/model.py PublicStage)
        return []
    try:
        outputs = result.plan.visible_outputs
        if len(outputs) == len(result.columns):
            if all(hasattr(o, "measurements") for o in outputs):
                return [i for i, o in enumerate(outputs) if o.measurements]
            return [i for i, o in enumerate(outputs) if getattr(o, "kind", None) != "key"]
    except AttributeError:
        pass
    return list(range(len(result.columns)))


def _bad_value(value) -> str | None:
    if value is None:
        return "NULL"
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return repr(value)
    return None


def _spent(budget) -> tuple:
    return (budget.spent_epsilon, budget.spent_delta, budget.queries)


def _plan_signature(plan) -> tuple:
    """What makes two releases the same: every measurement (bounds, sensitivity, epsilon, scale)."""
    return tuple(repr(m) for m in getattr(plan, "measurements", ()))


def _release_key(sql: str, plan) -> tuple | None:
    """What the ledger treats as "the same query" (its own normalisation), with the plan's cost."""
    try:
        from dpsql.api.replay import normalise_sql
        return normalise_sql(sql), repr(getattr(plan, "epsilon", None)), repr(getattr(plan, "delta", None))
    except Exception:  # noqa: BLE001 -- the ledger changed shape: skip the replay check
        return None


def _noised(plan, where: str) -> list:
    """The measurements with noise; something is released with noise: a measurement of scale > 0 (or of
    sensitivity 0: a constant), or a noisy top-k's choice (MODE may be all a query releases) at a
    temperature > 0."""
    measurements = list(getattr(plan, "measurements", ()))
    top = getattr(plan, "top_k", None)
    if not measurements and top is None:
        raise FuzzFailure(("property", "no measurement"), f"answered without any measurement; {where}")
    if top is not None and not (top.scale > 0 and top.loss.epsilon > 0):
        raise FuzzFailure(("property", "top-k temperature"), f"top-k {top!r} chooses without noise; {where}")
    noisy = []
    for m in measurements:
        scale, sensitivity = getattr(m, "scale", None), getattr(m, "sensitivity", None)
        if isinstance(scale, numbers.Real) and scale > 0 and math.isfinite(scale):   # an exact Fraction
            noisy.append(m)
        elif not (scale == 0 and sensitivity.l1 == 0):  # sensitivity 0: a provably constant quantity
            raise FuzzFailure(("property", "noise scale"), f"measurement {m!r} has scale {scale!r}; {where}")
    return noisy


def check_query(target: FuzzTarget, sql: str, kwargs: dict | None = None) -> str:
    """Run one query and check every property; return the outcome ("answered", "replayed" or the code).

    Raises FuzzFailure (with a signature) when a property breaks.
    """
    db, source = target.db, target.source
    kwargs = kwargs or {}
    where = _describe(sql, kwargs)
    before = _spent(db.budget)
    calls_before = source.calls
    bad_before = len(source.bad_bounds)
    try:
        result = db.sql(sql, **kwargs)
    except dpsql.DpsqlError as err:
        after = _spent(db.budget)
        if err.code in ("DP999", "DP900"):
            cause = err.__cause__ or err.__context__
            detail = (f"{type(cause).__name__}: {str(cause).strip()[:500]}" if cause is not None else "")
            sig = ("raised", err.code, type(cause).__name__ if cause is not None else None,
                   _normalise(str(cause)) if cause is not None else _normalise(err.message),
                   _innermost_frame(err))
            raise FuzzFailure(sig, f"[{err.code}] {err.message} -- a query dpsql could not plan or run "
                                   f"safely; {where}\ncause: {detail}\n{_last_frames(err)}"
                                   + (f"\ncause frames:\n{_last_frames(cause)}" if cause is not None else "")) from err
        _check_error(err, sql, kwargs)
        if after != before:
            raise FuzzFailure(("property", "refusal spent budget", err.code),
                              f"[{err.code}] refused query spent budget: (eps, delta, queries) {before} -> {after}; "
                              f"{where}") from err
        return err.code
    except Exception as e:  # noqa: BLE001  -- any other exception type is the bug we are fuzzing for
        raise FuzzFailure(("raised", type(e).__name__, _normalise(str(e)), _innermost_frame(e)),
                          f"{type(e).__name__} (not a DpsqlError): {e}; {where}\n{_last_frames(e)}") from e

    after = _spent(db.budget)
    if not isinstance(result, dpsql.Result):
        raise FuzzFailure(("property", "not a Result"), f"db.sql returned {type(result).__name__}; {where}")
    if isinstance(result.plan, PublicPlan):   # public tables only (frontend/public.py): exact, free
        private = [t for t in result.plan.tables if not FUZZ_POLICY["tables"].get(t, {}).get("public")]
        if private or after[:2] != before[:2]:
            raise FuzzFailure(("property", "exact answer over private data"),
                              f"answered exactly while reading {private} (spent {before} -> {after}); {where}")
        return "answered"
    noisy = _noised(result.plan, where)
    # Every measurement having sensitivity 0 (SUM(0), SUM(age * 0)) is allowed: such an answer is a
    # constant that no row can move, so releasing it exactly is 0-DP (decided by the lead).
    rows = result.fetchall()
    for i in _aggregate_columns(result):
        for row in rows:
            bad = _bad_value(row[i])
            if bad is not None:
                raise FuzzFailure(("property", "non-finite aggregate", bad),
                                  f"aggregate column {result.columns[i]!r} released {bad}; {where}\nrows: {rows[:5]}")
    released = _release_key(sql, result.plan)
    signature = _plan_signature(result.plan)
    if getattr(result, "replayed", False):
        # An identical query answered before, or one whose measurements were all released before (issue
        # 26: recorded in the history at 0): same answer, no charge -- but only for the same release.
        if after[:2] != before[:2] or after[2] not in (before[2], before[2] + 1):
            raise FuzzFailure(("property", "replay charged"),
                              f"a replayed answer was charged: {before} -> {after}; {where}")
        drawn_by = target.released.get(released) if released is not None else None
        if drawn_by and signature not in drawn_by:
            raise FuzzFailure(("property", "replay of a different release"),
                              f"replayed an answer drawn for a different plan (bounds, sensitivity or epsilon "
                              f"differ); {where}\nthis plan: {signature}\nanswers drawn for: {drawn_by}")
        return "replayed"
    if after[2] != before[2] + 1 or not after[0] > before[0]:
        raise FuzzFailure(("property", "answer not charged"),
                          f"answered query was not charged: (eps, delta, queries) {before} -> {after}; {where}")
    if len(source.bad_bounds) > bad_before:
        raise FuzzFailure(("property", "bad below() bounds"),
                          f"RandomSource.below got invalid bounds {source.bad_bounds[bad_before:]}; {where}")
    # Measurements released before replay free (issue 26): only the others are drawn.
    note = db.budget.history[-1].plan.partition("replayed free (released before): ")[2]
    kept = set(re.findall(r"(?:^|, )(m\d+) ", note))
    noisy = [m for m in noisy if getattr(m, "name", m) not in kept]
    if rows and source.calls - calls_before < len(noisy):
        raise FuzzFailure(("property", "too few noise draws"),
                          f"{len(rows)} rows released with {source.calls - calls_before} RandomSource calls "
                          f"for {len(noisy)} measurements with noise; {where}")
    if released is not None:
        target.released.setdefault(released, {}).setdefault(signature, sql)
    return "answered"


# --------------------------------------------------------------------------------------------
# Known-bug signatures, computed once on a private connection
# --------------------------------------------------------------------------------------------
_known_signatures: dict[tuple, str] | None = None


def known_signatures() -> dict[tuple, str]:
    global _known_signatures
    if _known_signatures is None:
        sigs = {}
        for entry in KNOWN_BUGS:
            target = FuzzTarget(seed=1)
            try:
                for sql in _known_bug_queries(entry):
                    check_query(target, sql)
            except FuzzFailure as f:
                sigs[f.signature] = _known_bug_queries(entry)[-1]
            finally:
                target.close()
        _known_signatures = sigs
    return _known_signatures


def _known_bug_queries(entry) -> list[str]:
    """A KNOWN_BUGS entry: one SQL string, or a tuple of strings run in order on one connection."""
    return [entry] if isinstance(entry, str) else list(entry)


def run_example(target: FuzzTarget, sql: str, kwargs: dict | None = None) -> None:
    target.next()
    try:
        outcome = check_query(target, sql, kwargs)
    except FuzzFailure as f:
        known = known_signatures().get(f.signature)
        if known is not None:
            event(f"known bug: {known[:60]}")
            return
        raise AssertionError(f.message) from f.__cause__
    event(f"outcome: {outcome}")


# Analyst-supplied epsilon/delta (dpsql query --epsilon, PrivateConnection.sql(epsilon=...))
BUDGET_ARGUMENTS = st.one_of(
    st.just({}), st.just({}), st.just({}), st.just({}),
    st.fixed_dictionaries({}, optional={
        "epsilon": st.sampled_from([0.5, 1, 2.0, 1e-300, 5e-324, 1e300, 0, -1.0, float("nan"), float("inf"),
                                    -0.0, True, "1", None, np.float64(0.5), np.int64(1), 1e-12, 2**70]),
        "delta": st.sampled_from([0.0, 1e-6, 0.5, 1, -1e-9, float("nan"), None, 0.999999999]),
        "fresh": st.sampled_from([True, False, True, False, 1, "yes", None]),
    }),
)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------
COMMON = dict(deadline=None, database=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.large_base_example, HealthCheck.filter_too_much,
                                     HealthCheck.function_scoped_fixture])
DEFAULT = settings(max_examples=examples(100), derandomize=True, **COMMON)
SLOW = settings(max_examples=10_000, **COMMON)


@pytest.fixture
def fuzz_db(request):
    """One connection per test (not per example), a seeded counting RandomSource, a huge budget;
    the mutation tests start on the database with extreme rows, the grammar tests on the plain one."""
    target = FuzzTarget(extreme="mutated" in request.node.name)
    yield target
    target.close()


def _with_fresh(kwargs: dict, fresh: bool) -> dict:
    """Half the queries pass fresh=True, so repeats draw new noise (and pay) rather than replay."""
    return {**kwargs, "fresh": True} if fresh and "fresh" not in kwargs else kwargs


@DEFAULT
@given(sql=grammar_queries(), kwargs=BUDGET_ARGUMENTS, fresh=st.booleans())
def test_grammar_queries_are_answered_with_noise_or_refused(fuzz_db, sql, kwargs, fresh):
    run_example(fuzz_db, sql, _with_fresh(kwargs, fresh))


@DEFAULT
@given(sql=mutated_queries())
# The slow run's finding: a public last stage compared a boolean with a string holding the correlated
# stage's release, and failed after the charge (DP900); now DP306 before it (frontend/public.py).
@example(sql="SELECT clinic, region FROM clinics\nWHERE clinic IN (SELECT k.clinic FROM clinics k WHERE k.region IN "
             "(SELECT region FROM clinics WHERE doctors > 2)\n = k.doctors * 12 || (SELECT AVG(cost) FROM visits "
             "WHERE visits.clinic = k.clinic))\nORDER BY clinic\n")
def test_mutated_queries_are_answered_with_noise_or_refused(fuzz_db, sql):
    run_example(fuzz_db, sql)


@pytest.mark.slow
@SLOW
@given(sql=grammar_queries(), kwargs=BUDGET_ARGUMENTS, fresh=st.booleans())
def test_grammar_queries_slow(fuzz_db, sql, kwargs, fresh):
    run_example(fuzz_db, sql, _with_fresh(kwargs, fresh))


@pytest.mark.slow
@SLOW
@given(sql=mutated_queries())
def test_mutated_queries_slow(fuzz_db, sql):
    run_example(fuzz_db, sql)


def test_seed_queries_are_answered(fuzz_db):
    """Every mutation seed is answered: the fuzzer starts from valid SQL (and has seeds at all)."""
    assert len(ACCEPT_CORPUS) >= 20 and len(SEEDS) >= len(ACCEPT_CORPUS), "the mutation strategy has seeds"
    for sql in SEEDS:
        assert check_query(fuzz_db, sql) in ("answered", "replayed"), sql


@pytest.mark.parametrize("sql", KNOWN_BUGS or [pytest.param(None, marks=pytest.mark.skip(reason="no known bugs"))],
                         ids=lambda e: " ; ".join(_known_bug_queries(e))[:80] if e else "none")
@pytest.mark.xfail(reason="a known dpsql bug (see KNOWN_BUGS); XPASS means it is fixed: remove it",
                   raises=FuzzFailure, strict=False)
def test_known_bugs_still_reproduce(sql):
    """Each KNOWN_BUGS entry still breaks a property (XPASS: it is fixed, move it to FUZZ_FINDINGS)."""
    target = FuzzTarget(seed=2)
    try:
        for query in _known_bug_queries(sql):
            check_query(target, query)
    finally:
        target.close()


@pytest.mark.parametrize("entry", FUZZ_FINDINGS, ids=lambda e: " ; ".join(_known_bug_queries(e))[:80])
@pytest.mark.parametrize("extreme", [False, True], ids=["plain", "extreme-rows"])
def test_past_fuzz_findings_hold(entry, extreme):
    """Regressions: what the fuzzer once found stays fixed, on both fuzz databases."""
    target = FuzzTarget(seed=3, extreme=extreme)
    try:
        for query in _known_bug_queries(entry):
            check_query(target, query)
    finally:
        target.close()
