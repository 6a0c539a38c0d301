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
import re
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dpsql
from conftest import POLICY, examples, make_database

# The accept corpus (grammar/accept, answered on the conftest fixture, which the fuzz database
# extends): the mutation seeds, so the mutants start from SQL that is answered.
ACCEPT_CORPUS = sorted((Path(__file__).resolve().parents[1] / "grammar" / "accept").glob("*.sql"))

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
    measurements = list(getattr(result.plan, "measurements", ()))
    if not measurements:
        raise FuzzFailure(("property", "no measurement"), f"answered without any measurement; {where}")
    noisy = []
    for m in measurements:
        scale, sensitivity = getattr(m, "scale", None), getattr(m, "sensitivity", None)
        if isinstance(scale, (int, float)) and scale > 0 and math.isfinite(scale):
            noisy.append(m)
        elif not (scale == 0 and sensitivity == 0):  # sensitivity 0: a provably constant quantity
            raise FuzzFailure(("property", "noise scale"), f"measurement {m!r} has scale {scale!r}; {where}")
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
        # An identical query answered before: same answer, no charge -- but only for the same release.
        if after != before:
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


# --------------------------------------------------------------------------------------------
# The SQL generator: the grammar of grammar/dpsql.ebnf over the fixture tables, and well past it
# --------------------------------------------------------------------------------------------
TABLES = {
    "people": {
        "bounded": ["age", "income"], "keys": ["sex", "state"], "string": ["sex", "state", "zip"],
        "number": ["age", "income"], "boolean": ["active"], "date": ["joined"],
        "identifiers": ["ssn", "id"], "unit": None, "private_keys": ["zip", "joined", "active"],
        "all": ["age", "income", "sex", "state", "zip", "joined", "active"],
    },
    "visits": {
        "bounded": ["cost"], "keys": ["clinic"], "string": ["clinic"], "number": ["cost"],
        "boolean": [], "date": [], "identifiers": ["person_id"], "unit": "person_id", "private_keys": [],
        "all": ["clinic", "cost"],
    },
}
KEY_VALUES = {"sex": ["F", "M", "X"], "state": ["CA", "NY", "TX", "WA"], "clinic": ["a", "b", "c", "z"]}
UNKNOWN_COLUMNS = ["height", "rowid", "people", "visits", "x", "n", "count", "_", "Age2", "ssn_", "Ssn",
                   "PERSON_ID", "iD"]

HUGE_NUMBERS = [
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "18446744073709551616",
    "170141183460469231731687303715884105727", "99999999999999999999999999999999999999999",
    "1e308", "1e309", "1e400", "-1e400", "2.2250738585072014e-308", "5e-324", "1e-400", "0.0", "-0.0",
    "0x7FFFFFFFFFFFFFFF", "1_000_000", ".5", "5.", "1e", "00000000000000000000001", "4294967296",
]
SPECIAL_VALUES = [
    "'nan'::DOUBLE", "'inf'::DOUBLE", "'-inf'::DOUBLE", "CAST('nan' AS DOUBLE)", "'NaN'::FLOAT",
    "'infinity'::DOUBLE", "CAST('Infinity' AS REAL)", "NULL::DOUBLE", "'nan'", "'inf'", "1e309::DOUBLE",
    "(0.0 / 0.0)", "(1.0 / 0.0)", "(-1 / 0)", "'9223372036854775808'::HUGEINT", "'-0'::DOUBLE",
]
STRINGS = ["''", "'a'", "'F'", "'M'", "'CA'", "'00042'", "'ssn-1'", "'it''s'", "'%'", "'_'", "'\\'",
           "'ünïcödé ✓'", "'\x00'", "'--'", "'/*'", "';'", "'\"'", "E'\\x41'", "'2020-06-01'",
           "'not a date'", "'2020-13-45'", "'yes'", "'true'", "'nan'", "'1e400'", "' 42 '"]
FORBIDDEN_FUNCTIONS = [
    "random()", "setseed(0.5)", "read_csv('/etc/passwd')", "read_csv_auto('/etc/passwd')",
    "current_setting('threads')", "getenv('HOME')", "now()", "current_timestamp", "uuid()",
    "gen_random_uuid()", "nextval('s')", "currval('s')", "glob('*')", "regexp_matches(zip, '(')",
    "regexp_matches(ssn, '[')", "regexp_matches(zip, '(a*)*b')", "version()", "current_database()",
    "read_text('/etc/passwd')", "read_blob('/etc/passwd')", "read_parquet('x.parquet')",
    "query('SELECT 1')", "query_table('people')", "hash(ssn)", "md5(ssn)", "typeof(ssn)",
    "duckdb_settings()", "which_secret('s3://x', 's3')", "pragma_version()", "error('boom')",
    "sleep_ms(1)", "txid_current()", "current_query()", "list_value(ssn)", "struct_pack(a := ssn)",
    "system.main.random()", "main.random()", "dpsql_noise_000000000000(1, 1, 0)", "count_star()",
    "system.main.dpsql_noise(1, 1, 0)", "to_json(people)", "row(ssn)",
]
SCALAR_FUNCTIONS = ["abs", "round", "floor", "ceil", "sqrt", "ln", "log10", "exp", "sign", "lower",
                    "upper", "length", "trim", "coalesce", "least", "greatest", "year", "month",
                    "strlen", "reverse", "isnan", "isinf", "nullif", "ifnull", "power", "mod",
                    "date_part", "date_trunc", "strftime", "concat", "substr", "left", "hash"]
GOOD_AGGREGATES = ["COUNT", "SUM", "AVG", "count", "Sum", "avg"]
BAD_AGGREGATES = ["MIN", "MAX", "MEDIAN", "STDDEV", "VARIANCE", "VAR_POP", "MODE", "FIRST", "LAST", "QUANTILE_DISC",
                  "ANY_VALUE", "ARBITRARY", "LIST", "STRING_AGG", "ARRAY_AGG", "HISTOGRAM", "BIT_OR",
                  "APPROX_COUNT_DISTINCT", "PRODUCT", "FSUM", "SUMKAHAN", "KAHAN_SUM", "ENTROPY",
                  "COUNT_IF", "BOOL_OR", "ARG_MAX", "QUANTILE_CONT", "GEOMEAN", "SUM_NO_OVERFLOW",
                  "FAVG", "MEAN", "COUNTIF", "REGR_COUNT", "COVAR_POP", "RESERVOIR_QUANTILE"]
STATEMENTS = [
    "PRAGMA database_list", "PRAGMA enable_profiling", "PRAGMA threads=1", "SET threads = 1",
    "SET enable_external_access = true", "SET lock_configuration = false", "RESET threads",
    "COPY people TO 'out.csv'", "COPY people FROM '/etc/passwd'", "ATTACH 'x.db' AS x",
    "ATTACH ':memory:' AS m", "DETACH x", "INSTALL httpfs", "LOAD httpfs", "FORCE INSTALL x",
    "CALL pragma_version()", "CALL duckdb_settings()", "EXPORT DATABASE '/tmp/x'",
    "IMPORT DATABASE '/tmp/x'", "CREATE TEMP MACRO random() AS 0.5",
    "CREATE TEMP MACRO dpsql_noise(a, b, c) AS a", "CREATE OR REPLACE TEMP MACRO count_star() AS 1",
    "CREATE TABLE t AS SELECT * FROM people", "CREATE VIEW v AS SELECT ssn FROM people",
    "CREATE SEQUENCE s", "DROP TABLE people", "DELETE FROM people", "UPDATE people SET age = 0",
    "INSERT INTO people SELECT * FROM people", "USE memory", "BEGIN", "COMMIT", "ROLLBACK",
    "CHECKPOINT", "VACUUM", "DESCRIBE people", "SHOW TABLES", "SUMMARIZE people",
    "EXPLAIN SELECT COUNT(*) FROM people", "EXPLAIN ANALYZE SELECT ssn FROM people",
    "SELECT ssn FROM people", "SELECT 1", "SELECT setseed(0.5)", "FROM people", "VALUES (1)",
    "TABLE people", "PIVOT people ON sex", "UNPIVOT people ON age INTO NAME k VALUE v",
    "SELECT * FROM duckdb_secrets()", "CREATE SECRET (TYPE s3)", "UPDATE EXTENSIONS",
]
TERMINATORS = [";", ";;", "; ", ";\n-- end", "; -- x", " ;", ";\x00", "; ;", ";\n\n"]
COMMENTS = ["-- comment\n", "/* c */", "/**/", "-- ; DROP TABLE people\n", "/* nested /* */ */",
            "/* unterminated", "--", "#", "\n", "\t", "  ", "\r\n", "\u00a0", "\u2028"]
DP_OPTION_NAMES = ["epsilon", "delta", "max_groups_contributed", "privacy_unit_column",
                   "max_rows_contributed", "EPSILON", "Delta", "epsilon", "bogus", "kappa",
                   "max_partitions_contributed", "min_privacy_units_per_group", "group_selection_strategy"]
DP_OPTION_VALUES = ["1", "1.0", "0.5", "10", "1e-6", "1e-9", "0", "-1", "1e-300", "5e-324", "1e300",
                    "1e400", "'nan'::DOUBLE", "'inf'::DOUBLE", "NULL", "'1'", "TRUE", "2.5", "0.999999",
                    "1", "9223372036854775807", "person_id", "ssn", "age", "id", "random()",
                    "(SELECT 1)", "-0.0", "1 + 1", "[1]", "'x'"]


class Gen:
    """One query's draws: ``wildness`` is the percentage of choices that leave the grammar."""

    def __init__(self, draw, wildness: int):
        self.draw = draw
        self.wildness = wildness
        self.table = "people"
        self.info = TABLES["people"]
        self.alias: str | None = None
        self.aliases: list[str] = []
        self.private_keys: list[str] = []

    # ---- draw helpers -----------------------------------------------------------------------
    def wild(self, scale: int = 1) -> bool:
        return self.wildness > 0 and self.draw(st.integers(0, 99)) < min(95, self.wildness * scale)

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def maybe(self, percent: int = 50) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def ws(self) -> str:
        if self.wild():
            return self.pick([" ", "  ", "\n", "\t", " /* x */ ", " -- c\n", "\n\n  "])
        return " "

    # ---- names ------------------------------------------------------------------------------
    def spell(self, name: str) -> str:
        """A name as the user may write it: any case, quoted or not."""
        style = self.draw(st.integers(0, 5 if self.wildness else 3))
        if style == 0:
            return name
        if style == 1:
            return name.upper()
        if style == 2:
            return "".join(self.pick([c.lower(), c.upper()]) for c in name) if name else name
        if style == 3:
            return f'"{name}"'
        if style == 4:
            return f'"{name.upper()}"'
        return f'"{name} "' if self.maybe(30) else f'"{name}""x"'

    def column_name(self, kind: str = "all") -> str | None:
        candidates = self.info.get(kind) or []
        if self.wild():
            return self.pick(self.info["identifiers"] + UNKNOWN_COLUMNS + TABLES["visits" if self.table == "people"
                                                                                   else "people"]["all"])
        if not candidates:
            return None
        return self.pick(candidates)

    def column(self, kind: str = "all") -> str:
        name = self.column_name(kind)
        if name is None:
            return self.literal(kind)
        ref = self.spell(name)
        qualifier = self.draw(st.integers(0, 3))
        if self.wild():
            q = self.pick(["x", "main", "main.people", "memory.main.people", "visits", "people", "v", "p",
                           "system.main", '"people"', "PEOPLE"])
            return f"{q}.{ref}" if not self.wild() else self.pick([f"{q}.*", "*", f"{ref}.{ref}", f"({ref})"])
        if qualifier == 1:
            return f"{self.spell(self.alias or self.table)}.{ref}"
        return ref

    # ---- literals ---------------------------------------------------------------------------
    def literal(self, kind: str = "number") -> str:
        if self.wild():
            return self.pick(HUGE_NUMBERS + SPECIAL_VALUES + STRINGS + ["NULL", "TRUE", "FALSE", "DATE '2020-01-01'",
                                                                        "INTERVAL 1 DAY", "[1, 2]", "{'a': 1}",
                                                                        "$1", "?", "$x", "x'00'"])
        if kind in ("number", "bounded"):
            value = self.draw(st.one_of(st.integers(-5, 1200), st.floats(-10, 1500, allow_nan=False).map(
                lambda f: round(f, 3))))
            return str(value)
        if kind == "boolean":
            return self.pick(["TRUE", "FALSE", "true"])
        if kind == "date":
            return self.pick(["'2020-06-01'", "'2021-01-01'", "DATE '2020-03-04'", "'2019-12-31'"])
        if kind in ("string", "keys"):
            values = [f"'{v}'" for vs in KEY_VALUES.values() for v in vs] + ["'00042'", "'00000'", "''", "'x'"]
            return self.pick(values)
        return self.pick(["1", "'a'", "NULL"])

    # ---- expressions past the grammar ------------------------------------------------------------
    def wild_expression(self, depth: int) -> str:
        col = self.column("number")
        choice = self.draw(st.integers(0, 14))
        if depth <= 0:
            choice = self.pick([0, 1, 2, 12])
        if choice == 0:
            return self.pick(FORBIDDEN_FUNCTIONS)
        if choice == 1:
            return self.pick(SPECIAL_VALUES + HUGE_NUMBERS)
        if choice == 2:
            op = self.pick(["*", "/", "//", "%", "+", "-", "<<", ">>", "^", "**", "&", "|", "||", "::"])
            rhs = self.pick(["9223372036854775807", "0", "(age - age)", "age", "0.0", "-1", "1e308",
                             "9223372036854775808", "income", "'x'", "NULL", "INTEGER", "DOUBLE"])
            return f"{col} {op} {rhs}"
        if choice == 3:
            target = self.pick(["INT", "INTEGER", "BIGINT", "HUGEINT", "TINYINT", "DOUBLE", "DATE", "BOOLEAN",
                                "VARCHAR", "DECIMAL(2,1)", "UTINYINT", "BIT", "UUID", "INTERVAL"])
            inner = self.pick([col, "zip", "sex", "ssn", "state", "joined", "income", "clinic", "cost"])
            return self.pick([f"CAST({inner} AS {target})", f"{inner}::{target}", f"TRY_CAST({inner} AS {target})"])
        if choice == 4:
            fname = self.pick(SCALAR_FUNCTIONS)
            args = ", ".join(self.wild_expression(depth - 1) if self.maybe(30) else self.column()
                             for _ in range(self.draw(st.integers(0, 3))))
            return f"{fname}({args})"
        if choice == 5:
            return (f"CASE WHEN {self.condition(depth - 1)} THEN {self.operand('number', depth - 1)} "
                    f"ELSE {self.operand('number', depth - 1)} END")
        if choice == 6:
            return f"({self.select(depth - 1)})"
        if choice == 7:
            return f"EXISTS ({self.select(depth - 1)})"
        if choice == 8:
            return f"({self.wild_expression(depth - 1)})"
        if choice == 9:
            return self.pick(["list_transform([1, 2], x -> x + age)", "[age, income]", "{'k': ssn}",
                              "COLUMNS(*)", "COLUMNS('s.*')", "* EXCLUDE (ssn)", "people", "people.*",
                              "row_number() OVER ()", "lag(age) OVER (ORDER BY ssn)", "age IS DISTINCT FROM 1",
                              "age::VARCHAR LIKE '1%'", "ssn SIMILAR TO 'x'", "ssn GLOB '*'", "ssn ILIKE '%1'"])
        if choice == 10:
            return f"{self.column()} COLLATE nocase"
        if choice == 11:
            return f"-{self.operand('number', depth - 1)}"
        if choice == 12:
            return self.pick(["age * 9223372036854775807", "income * 1e308 * 1e308", "age // 0", "age % 0",
                              "income / (age - age)", "CAST(zip AS INT)", "zip::INTEGER", "1 / 0",
                              "'nan'::DOUBLE", "sqrt(-1)", "ln(0)", "age - 9223372036854775807 - 2",
                              "power(10, 400)", "abs(-9223372036854775808)", "exp(1000)"])
        if choice == 13:
            return f"{self.aggregate(depth - 1)}"
        return f"{self.column()} {self.pick(['+', '*', '-', '/'])} {self.column()}"

    def operand(self, kind: str, depth: int) -> str:
        if depth > 0 and self.wild():
            return self.wild_expression(depth)
        if self.maybe(60):
            return self.column(kind)
        return self.literal(kind)

    # ---- predicates -------------------------------------------------------------------------
    def predicate(self, depth: int) -> str:
        kinds = [k for k in ("number", "string", "date") if self.info.get(k)]
        kind = self.pick(kinds)
        choice = self.draw(st.integers(0, 8))
        if choice in (6, 8) and not self.info["boolean"]:
            choice = 7
        if depth > 0 and self.wild():
            choice = self.draw(st.integers(9, 14))
        if choice <= 2:
            op = self.pick(["=", "<>", "!=", "<", "<=", ">", ">="] + (["==", "<=>", "~", "LIKE", "^@"]
                                                                      if self.wild() else []))
            return f"{self.operand(kind, depth)} {op} {self.operand(kind, depth)}"
        if choice == 3:
            items = ", ".join(self.literal(kind) for _ in range(self.draw(st.integers(1, 4))))
            return f"{self.column(kind)} {self.pick(['IN', 'NOT IN'])} ({items})"
        if choice == 4:
            return (f"{self.operand(kind, depth)} {self.pick(['BETWEEN', 'NOT BETWEEN'])} "
                    f"{self.operand(kind, depth)} AND {self.operand(kind, depth)}")
        if choice == 5:
            return f"{self.column()} IS {self.pick(['NULL', 'NOT NULL'])}"
        if choice == 6:
            return self.column("boolean")
        if choice == 7:
            return self.pick(["TRUE", "FALSE"])
        if choice == 8:
            return f"{self.column('boolean')} = {self.literal('boolean')}"
        if choice == 9:
            return f"{self.column()} IN ({self.select(depth - 1)})"
        if choice == 10:
            return f"EXISTS ({self.select(depth - 1)})"
        if choice == 11:
            return f"{self.wild_expression(depth - 1)} {self.pick(['=', '>', '<', 'IS NOT', 'IN'])} {self.literal()}"
        if choice == 12:
            return self.pick(["ssn = '123'", "ssn != '123'", "ssn LIKE 'ssn-1%'", "person_id = 3", "id < 5",
                              "zip = 42", "age = '42'", "joined > 'not a date'", "joined = '2020-02-30'",
                              "active = 'yes'", "income > 1e400", "age > 9223372036854775808",
                              "age IN (1, 'a')", "age BETWEEN 'a' AND 'b'", "zip > 0", "regexp_matches(zip, '(')",
                              "state = sex", "age = income", "joined = 1", "income = 'nan'", "active",
                              "NOT active", "age", "zip", "'x'", "1", "NULL", "age IN ()", "COUNT(*) > 1",
                              "sex = 'F' COLLATE nocase", "zip IN ('1', NULL)", "income = 'nan'::DOUBLE"])
        if choice == 13:
            return f"{self.column()} {self.pick(['IS', 'IS NOT'])} {self.pick(['TRUE', 'FALSE', 'NULL', 'DISTINCT FROM 1'])}"
        return f"{self.pick(FORBIDDEN_FUNCTIONS)} {self.pick(['=', '>', 'IS NOT'])} {self.literal()}"

    def condition(self, depth: int) -> str:
        if depth <= 0 or self.maybe(45):
            pred = self.predicate(depth)
        else:
            pred = f" {self.pick(['AND', 'OR', 'and', 'or'])} ".join(
                self.condition(depth - 1) for _ in range(self.draw(st.integers(2, 3))))
        if self.maybe(15):
            pred = f"NOT {pred}" if not self.maybe(50) else f"NOT ({pred})"
        if self.maybe(20):
            pred = f"({pred})"
        return pred

    # ---- aggregates and outputs ---------------------------------------------------------------
    def bounds(self, whole: bool = False) -> str:
        if self.wild():
            lo, hi = self.pick(["0", "-1e308", "'x'", "NULL", "'nan'::DOUBLE", "1e400", "100", "-5", "age"]), \
                self.pick(["50", "1e308", "0", "-1", "'inf'::DOUBLE", "age", "NULL", "9223372036854775807"])
            return self.pick([f"({lo}, {hi})", f"({lo})", f"({lo}, {hi}, 3)", lo, "()", f"[{lo}, {hi}]"])
        lo = self.draw(st.integers(0 if whole else -10, 20))
        hi = lo + self.draw(st.integers(1, 200))
        if not whole and self.maybe(20):
            return f"({lo}.5, {hi}.25)"
        return f"({lo}, {hi})"

    def aggregate(self, depth: int = 2) -> str:
        if self.wild():
            fname = self.pick(BAD_AGGREGATES + GOOD_AGGREGATES)
            inner = self.pick([self.column(), "*", f"DISTINCT {self.column()}", "DISTINCT person_id",
                               "DISTINCT *", self.wild_expression(depth - 1) if depth > 0 else "age",
                               f"{self.column()}, {self.column()}", "", "ALL age", f"{self.column()} ORDER BY age"])
            agg = f"{fname}({inner})"
            return self.pick([agg, f"{agg} FILTER (WHERE {self.condition(0)})", f"{agg} OVER ()",
                              f"{agg} OVER (PARTITION BY ssn)", f"{agg} * 2", f"{agg} + 1", f"-{agg}",
                              f"{agg} / COUNT(*)", f"CAST({agg} AS INT)", f"ROUND({agg})",
                              f"COUNT(DISTINCT {self.pick(['person_id', 'ssn', 'id', 'age'])})",
                              f"SUM({agg})", agg])
        kind = self.draw(st.integers(0, 3))
        if kind == 0:
            agg, bounded = f"{self.pick(['COUNT', 'count'])}(*)", False
        elif kind == 1:
            agg, bounded = f"{self.pick(['COUNT', 'Count'])}({self.column()})", False
        else:
            fname = self.pick(["SUM", "AVG", "sum", "avg", "MEDIAN", "QUANTILE_CONT", "percentile_cont"])
            q = f", {self.pick(['0', '0.1', '0.5', '0.9', '1', '1.0'])}" if fname.lower().endswith("_cont") else ""
            agg, bounded = f"{fname}({self.column('bounded')}{q})", True
        if self.maybe(20):
            # GoogleSQL per-aggregate bounds: per group (a unit's total; whole numbers for COUNT) on a
            # user-level table, per row (clamp each value) for SUM/AVG
            user_level = self.info["unit"] is not None
            if self.wild():
                name = self.pick(["contribution_bounds_per_row", "contribution_bounds_per_group",
                                  "CONTRIBUTION_BOUNDS_PER_GROUP", "bounds", "x"])
            elif bounded:
                name = self.pick(["contribution_bounds_per_group", "contribution_bounds_per_row"]) if user_level \
                    else "contribution_bounds_per_row"
            else:
                name = "contribution_bounds_per_group" if user_level else None
            if name is not None:
                agg = f"{agg[:-1]}, {name} => {self.bounds(whole=not bounded)})"
        return agg

    def output(self, keys: list[str]) -> tuple[str, str | None, str | None]:
        """(text, the key it selects or None, alias) of one SELECT item."""
        if keys and self.maybe(30):
            key = self.pick(keys)
            text = self.spell(key) if not self.maybe(20) else f"{self.spell(self.alias or self.table)}.{self.spell(key)}"
            is_key = key
        elif self.wild():
            text = self.pick([self.column(), "*", f"{self.spell(self.alias or self.table)}.*", self.wild_expression(2),
                              self.literal(), "COLUMNS(*)", f"{self.column()} AS {self.column()}"])
            is_key = None
        else:
            text = self.aggregate()
            is_key = None
        alias = None
        if self.maybe(30):
            alias = self.pick(["n", "total", "s", "a", "x", "count", "sex", "age", '"my col"', "ssn", "N",
                               '"n"', "o0", "__agg", "k0", "m0", "__out", '"o1"', '"m0"', "v_m0"])
            if self.wild():
                alias = self.pick(["NULL", "select", "1", "'s'", '""', '"a.b"', "count(*)", alias])
            text = f"{text} {self.pick(['AS ', ''])}{alias}"
        return text, is_key, alias

    # ---- DP clause ------------------------------------------------------------------------------
    def dp_clause(self) -> str:
        if not self.wild():
            options = [f"epsilon = {self.pick(['1', '0.5', '1.0', '2', '0.1'])}"]
            if self.private_keys:   # GROUP BY a key without public keys: partition selection needs delta
                options.append(f"delta = {self.pick(['1e-6', '1e-5', '0.000001', '1e-9', '1e-3'])}")
            elif self.maybe(50):
                options.append(f"delta = {self.pick(['1e-6', '1e-5', '0.000001', '0'])}")
            if self.maybe(40):
                options.append(f"max_groups_contributed = {self.pick(['1', '2', '3'])}"
                               if self.info["unit"] else "max_groups_contributed = 1")
            if self.table == "visits" and self.maybe(50):
                options.append(f"privacy_unit_column = {self.spell('person_id')}")
            options = self.draw(st.permutations(options))
        else:
            options = [f"{self.pick(DP_OPTION_NAMES)} {self.pick(['=', '=>', ':=', ''])} {self.pick(DP_OPTION_VALUES)}"
                       for _ in range(self.draw(st.integers(0, 5)))]
        body = ", ".join(options)
        form = self.draw(st.integers(0, 5 if self.wildness else 0))
        return [f"WITH DIFFERENTIAL_PRIVACY OPTIONS({body})", f"WITH DIFFERENTIAL_PRIVACY OPTIONS ({body})",
                "WITH DIFFERENTIAL_PRIVACY", f"with differential_privacy options({body}",
                f"WITH DIFFERENTIAL_PRIVACY OPTIONS({body}) OPTIONS({body})",
                f"WITH ANONYMIZATION OPTIONS({body})"][form]

    # ---- FROM ---------------------------------------------------------------------------------
    def source(self, depth: int) -> str:
        table = self.spell(self.table)
        alias = ""
        if self.alias:
            alias = f" {self.pick(['AS ', ''])}{self.spell(self.alias)}"
        if self.wild():
            other = "visits" if self.table == "people" else "people"
            choice = self.draw(st.integers(0, 9))
            if choice == 0:
                return self.pick(["main.people", "memory.main.people", "main.visits", "information_schema.tables",
                                  "read_csv('/etc/passwd')", "'/etc/passwd'", "'people.csv'", "duckdb_settings()",
                                  "range(10)", "people TABLESAMPLE 10%", "people USING SAMPLE 5",
                                  "(VALUES (1), (2)) t(age)", "system.main.people", "temp.main.people",
                                  "pg_catalog.pg_class", "secrets", "people, visits", "people AT (VERSION => 1)",
                                  "unnest([1, 2, 3])", "generate_series(1, 10)", "sqlite_master",
                                  "glob('*')", "query_table('people')", "people*"]) + alias
            if choice == 1 and depth > 0:
                return f"({self.select(depth - 1)}){alias or ' AS s'}"
            if choice == 2:
                join = self.pick(["JOIN", "LEFT JOIN", "CROSS JOIN", "NATURAL JOIN", "POSITIONAL JOIN",
                                  "ASOF JOIN", ",", "INNER JOIN", "SEMI JOIN", "ANTI JOIN"])
                on = "" if join in (",", "CROSS JOIN", "NATURAL JOIN", "POSITIONAL JOIN") else \
                    self.pick([" ON TRUE", f" ON {table}.id = {other}.person_id", " USING (id)", " ON 1 = 1"])
                return f"{table}{alias} {join} {self.pick([other, table + ' q', '(SELECT 1) z'])}{on}"
            if choice == 3:
                return f"{other}{alias}"
            if choice == 4:
                return f"{table}{alias} WITH ORDINALITY"
        return f"{table}{alias}"

    # ---- the SELECT -----------------------------------------------------------------------------
    def select(self, depth: int = 2) -> str:
        self.table = self.pick(list(TABLES))
        self.info = TABLES[self.table]
        self.alias = self.pick(["p", "v", "t", "x", "people"]) if self.maybe(25) else None
        keys = list(self.draw(st.lists(st.sampled_from(self.info["keys"]), max_size=2, unique=True)))
        # private keys (no public domain): GROUP BY them releases only groups a DP selection step keeps
        self.private_keys = [k for k in self.info["private_keys"] if self.maybe(12)]
        keys += self.private_keys
        if self.wild(2):
            keys += self.draw(st.lists(st.sampled_from(["zip", "ssn", "age", "joined", "active", "person_id",
                                                        "id", "income", "cost", "height"]), max_size=2))
        n_out = self.draw(st.integers(1, 4))
        outputs = [self.output(keys) for _ in range(n_out)]
        if not any(is_key is None for _, is_key, _ in outputs) and not self.wild():
            outputs.append((self.aggregate(), None, None))
        if self.maybe(30):
            outputs = list(self.draw(st.permutations(outputs)))
        texts = [t for t, _, _ in outputs]
        self.aliases = [a for _, _, a in outputs if a is not None]
        parts = ["SELECT"]
        if self.private_keys or self.maybe(10) or (self.wildness and self.maybe(10)):
            parts.append(self.dp_clause())
        if self.wild():
            parts.append(self.pick(["DISTINCT", "ALL", "DISTINCT ON (sex)", "TOP 5"]))
        parts.append(", ".join(texts))
        if not (self.wild() and self.maybe(30)):
            parts.append(f"FROM {self.source(depth)}")
        if self.maybe(50):
            parts.append(f"WHERE {self.condition(self.draw(st.integers(0, 3)))}")
        if keys:
            items = []
            for key in keys:
                positions = [i + 1 for i, (_, k, _) in enumerate(outputs) if k == key]
                if positions and self.maybe(20):
                    items.append(str(positions[0]))
                else:
                    items.append(self.spell(key))
            if self.wild():
                items.append(self.pick(["0", "99", "-1", "ALL", "ROLLUP(sex)", "CUBE(state)", "age + 1", "COUNT(*)",
                                        "GROUPING SETS ((sex), ())", "()", "random()", "'sex'", "1.5"]))
            parts.append(f"GROUP BY {', '.join(items)}")
        elif self.wild():
            parts.append(f"GROUP BY {self.pick(['ALL', 'ssn', 'zip', '1', '()', 'age'])}")
        if self.maybe(20):
            parts.append(f"HAVING {self.post_condition(keys, texts)}")
        if self.maybe(25):
            parts.append(f"ORDER BY {', '.join(self.order_item(keys, texts) for _ in range(self.draw(st.integers(1, 2))))}")
        if self.maybe(20):
            parts.append(f"LIMIT {self.count_literal()}")
            if self.maybe(40):
                parts.append(f"OFFSET {self.count_literal()}")
        if self.wild():
            parts.append(self.pick(["QUALIFY row_number() OVER () = 1", "WINDOW w AS ()", "FOR UPDATE",
                                    "USING SAMPLE 10", "LIMIT 1 LIMIT 2", "FETCH FIRST 1 ROWS ONLY"]))
        return self.ws().join(parts)

    def count_literal(self) -> str:
        if self.wild():
            return self.pick(["-1", "age", "1e10", "'5'", "(SELECT 1)", "10%", "NULL", "ALL", "1.5",
                              "9223372036854775807", "99999999999999999999", "random()", "$1"])
        return str(self.draw(st.integers(0, 10)))

    def post_operand(self, keys: list[str], texts: list[str], literal: bool = True) -> str:
        aliases = self.aliases
        choice = self.draw(st.integers(0, 3 if literal else 2))
        if choice == 0 or (choice == 1 and not aliases) or (choice == 2 and not keys):
            return self.aggregate()
        if choice == 1:
            return self.pick(aliases)
        if choice == 2:
            return self.spell(self.pick(keys))
        return self.literal(self.pick(["number", "string"]))

    def post_condition(self, keys: list[str], texts: list[str]) -> str:
        if self.wild():
            return self.pick([self.condition(1), f"{self.column()} > 1", "ssn = 'x'", "random() > 0.5",
                              f"{self.aggregate()} > (SELECT COUNT(*) FROM people)", "COUNT(*) / 0 > 1",
                              "SUM(income) = 'nan'::DOUBLE", "COUNT(*) > 9223372036854775807"])
        preds = []
        for _ in range(self.draw(st.integers(1, 2))):
            op = self.pick(["=", "<>", "<", "<=", ">", ">="])
            preds.append(f"{self.post_operand(keys, texts)} {op} {self.post_operand(keys, texts)}")
        return f" {self.pick(['AND', 'OR'])} ".join(preds)

    def order_item(self, keys: list[str], texts: list[str]) -> str:
        if self.wild():
            item = self.pick([self.column(), "random()", "99", "0", "ALL", "ssn", "age + 1", "-1",
                              "(SELECT 1)", "'x'", self.wild_expression(1)])
        else:
            item = self.post_operand(keys, texts, literal=False) if self.maybe(70) else \
                str(self.draw(st.integers(1, len(texts))))
        return f"{item}{self.pick(['', ' ASC', ' DESC', ' desc'])}" + (
            self.pick([" NULLS FIRST", " NULLS LAST"]) if self.wild() else "")


def _deep(g: Gen, base: str) -> str:
    """Deep nesting and wide queries: the shapes that make recursive code fall over."""
    n = g.draw(st.sampled_from([2, 10, 50, 100, 200, 500, 1000, 3000]))
    choice = g.draw(st.integers(0, 10))
    if choice == 0:
        return f"SELECT COUNT(*) FROM people WHERE {'(' * n}age > 1{')' * n}"
    if choice == 1:
        return f"SELECT COUNT(*) FROM people WHERE {'NOT ' * n}active"
    if choice == 2:
        return f"SELECT COUNT(*) FROM people WHERE {' AND '.join(['age > 1'] * n)}"
    if choice == 3:
        return f"SELECT COUNT(*) FROM people WHERE {' OR '.join(f'age = {i}' for i in range(n))}"
    if choice == 4:
        return f"SELECT COUNT(*) FROM people WHERE age IN ({', '.join(str(i) for i in range(n))})"
    if choice == 5:
        return f"SELECT {', '.join(['COUNT(*)'] * min(n, 500))} FROM people"
    if choice == 6:
        inner = "SELECT COUNT(*) FROM people"
        for _ in range(min(n, 200)):
            inner = f"SELECT COUNT(*) FROM ({inner}) t"
        return inner
    if choice == 7:
        return f"SELECT COUNT(*) FROM people WHERE age > {'abs(' * n}1{')' * n}"
    if choice == 8:
        return f"SELECT COUNT(*) FROM people WHERE age > {' + '.join(['1'] * n)}"
    if choice == 9:
        return f"SELECT state, COUNT(*) FROM people GROUP BY state HAVING {' AND '.join(['COUNT(*) > 1'] * n)}"
    return f"{'(' * min(n, 300)}{base}{')' * min(n, 300)}"


@st.composite
def grammar_queries(draw) -> str:
    """A query from the grammar, with a drawn share of choices (0-60%) past it, then wrapped."""
    g = Gen(draw, draw(st.sampled_from([0, 0, 3, 10, 25, 60])))
    sql = g.select(depth=2)
    if g.wild():
        wrap = draw(st.integers(0, 12))
        if wrap == 0:
            sql = f"WITH t AS ({sql}) SELECT COUNT(*) FROM t"
        elif wrap == 1:
            sql = f"WITH people AS (SELECT * FROM people WHERE ssn = 'ssn-1') {sql}"
        elif wrap == 2:
            sql = f"{sql} {draw(st.sampled_from(['UNION', 'UNION ALL', 'EXCEPT', 'INTERSECT', 'UNION BY NAME']))} {g.select(1)}"
        elif wrap == 3:
            sql = f"{sql}; {draw(st.sampled_from(STATEMENTS))}"
        elif wrap == 4:
            sql = f"{draw(st.sampled_from(STATEMENTS))}; {sql}"
        elif wrap == 5:
            sql = draw(st.sampled_from(STATEMENTS))
        elif wrap == 6:
            sql += draw(st.sampled_from(TERMINATORS))
        elif wrap == 7:
            sql = f"{draw(st.sampled_from(COMMENTS))}{sql}{draw(st.sampled_from(COMMENTS))}"
        elif wrap == 8:
            sql = _deep(g, sql)
        elif wrap == 9:
            sql = f"({sql})"
        elif wrap == 10:
            sql = draw(st.sampled_from(["EXPLAIN ", "DESCRIBE ", "SUMMARIZE ", "FROM people ", "WITH RECURSIVE "])) + sql
        elif wrap == 11:
            sql = f"WITH t AS MATERIALIZED ({sql}) SELECT COUNT(*) FROM t"
        else:
            sql = f"SELECT COUNT(*) FROM ({sql}) AS sub"
    elif draw(st.integers(0, 9)) == 0:
        sql += ";"
    return sql


# --------------------------------------------------------------------------------------------
# Mutation of accepted queries
# --------------------------------------------------------------------------------------------
EXTRA_SEEDS = [
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = 2, "
    "privacy_unit_column = person_id) clinic, AVG(cost, contribution_bounds_per_group => (0, 50)) AS avg_cost "
    "FROM visits GROUP BY clinic",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5) COUNT(*) FROM people",
    # people is row level: its bounds are per row (per group is DP310 there, a refusal, not a seed).
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) sex, SUM(income, "
    "contribution_bounds_per_row => (0, 100)) FROM people GROUP BY sex",
    "SELECT COUNT(*) FROM people WHERE age >= 18 AND income < 500",
    "SELECT sex, COUNT(*) AS n, SUM(age) AS s FROM people WHERE active GROUP BY sex HAVING n > 5 ORDER BY s DESC",
    "SELECT state, AVG(income) FROM people AS p WHERE p.joined >= '2020-03-01' GROUP BY 1 LIMIT 2 OFFSET 1",
]


def _seed_queries() -> list[str]:
    """EXTRA_SEEDS, then the accept corpus, each once."""
    seeds = []
    for text in EXTRA_SEEDS + [path.read_text() for path in ACCEPT_CORPUS]:
        if text.strip() and text not in seeds:
            seeds.append(text)
    return seeds


SEEDS = _seed_queries()
TOKEN = re.compile(r"""'(?:[^']|'')*'?|"(?:[^"]|"")*"?|--[^\n]*|/\*.*?\*/|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|"""
                   r"""\w+|::|=>|<>|!=|<=|>=|//|\|\||\s+|.""", re.S)
VOCABULARY = sorted(set(
    "SELECT FROM WHERE GROUP BY HAVING ORDER LIMIT OFFSET AS AND OR NOT IN BETWEEN IS NULL TRUE FALSE "
    "DISTINCT UNION ALL EXCEPT INTERSECT JOIN ON USING WITH OPTIONS DIFFERENTIAL_PRIVACY CASE WHEN THEN ELSE "
    "END CAST TRY_CAST EXISTS LIKE ILIKE ASC DESC NULLS FIRST LAST PRAGMA SET COPY ATTACH INSTALL LOAD CALL "
    "EXPORT CREATE TEMP MACRO DROP INSERT FILTER OVER PARTITION QUALIFY INTERVAL DATE RECURSIVE MATERIALIZED "
    "LATERAL TABLE VALUES COLLATE".split()) | set(
    "COUNT SUM AVG MIN MAX MEDIAN random setseed read_csv current_setting getenv now uuid nextval glob "
    "regexp_matches abs round coalesce least greatest epsilon delta max_groups_contributed privacy_unit_column "
    "contribution_bounds_per_group".split()) | set(
    "people visits ssn id person_id age income sex state zip joined active clinic cost height p v t "
    "main information_schema system".split()))
PUNCTUATION = ["(", ")", ",", ";", ".", "*", "=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "/", "//", "%",
               "||", "::", "=>", "'", '"', "--", "/*", "*/", "[", "]", "{", "}", "?", "$1", ":", "\\", "\n", "\x00"]
LITERALS = ["0", "1", "-1", "1.5", "1e-6", "''", "'F'", "'x'", "NULL", "TRUE", "9223372036854775807",
            "9223372036854775808", "1e400", "'nan'::DOUBLE", "'inf'::DOUBLE", "'2020-01-01'", "99999999999999999999"]
INSERTABLE = VOCABULARY + PUNCTUATION + LITERALS + FORBIDDEN_FUNCTIONS[:12] + [
    "WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1)", "contribution_bounds_per_group => (0, 10)",
    "(SELECT 1)", "(SELECT ssn FROM people)", "; DROP TABLE people", "JOIN visits ON TRUE", "UNION SELECT 1",
    "CAST(zip AS INT)", "age * 9223372036854775807", "age // 0", "OVER ()", "DISTINCT", "GROUP BY ssn"]
CHARS = st.one_of(st.sampled_from(list("()'\";,.*=<>!+-/%|:\\ \n\t0123456789aeEnN_$?[]{}#@`~^&")),
                  st.characters(codec="utf-8", exclude_categories=("Cs",)))


def tokenize(sql: str) -> list[str]:
    return TOKEN.findall(sql)


@st.composite
def mutated_queries(draw) -> str:
    """An accepted query after 1-5 token or character mutations."""
    tokens = tokenize(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 2, 3, 5]))):
        # ops 9-11 keep the syntax (same token class), so more mutants reach planning and the engine
        op = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 10, 10, 11, 11]))
        n = len(tokens)
        if n == 0:
            tokens = [draw(st.sampled_from(INSERTABLE))]
            continue
        i = draw(st.integers(0, n - 1))
        if op == 0:                                  # delete a token
            del tokens[i]
        elif op == 1:                                # duplicate a token (or a run)
            j = draw(st.integers(i, min(n, i + 4)))
            tokens[j:j] = tokens[i:j] or [tokens[i]]
        elif op == 2:                                # swap two tokens
            j = draw(st.integers(0, n - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == 3:                                # insert a vocabulary token
            tokens[i:i] = [" ", draw(st.sampled_from(INSERTABLE)), " "]
        elif op == 4:                                # replace a token
            tokens[i] = draw(st.sampled_from(INSERTABLE))
        elif op == 5:                                # character edit inside the text
            text = "".join(tokens)
            k = draw(st.integers(0, len(text)))
            edit = draw(st.integers(0, 2))
            c = draw(CHARS)
            if edit == 0:
                text = text[:k] + c + text[k:]
            elif edit == 1:
                text = text[:k] + text[k + 1:]
            else:
                text = text[:k] + c + text[k + 1:]
            tokens = tokenize(text)
        elif op == 6:                                # change case
            style = draw(st.integers(0, 2))
            tokens[i] = [tokens[i].upper(), tokens[i].lower(), tokens[i].swapcase()][style]
            if draw(st.booleans()):
                tokens = [t.upper() if style == 0 else t.lower() if style == 1 else t.swapcase() for t in tokens]
        elif op == 7:                                # quote an identifier
            if re.fullmatch(r"\w+", tokens[i]):
                tokens[i] = f'"{tokens[i]}"' if draw(st.booleans()) else f'"{tokens[i].upper()}"'
        elif op == 9:                                # replace a literal by another (edge) literal
            spots = [k for k, t in enumerate(tokens) if re.fullmatch(r"'.*'?|\d.*", t, re.S)]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(
                    LITERALS + HUGE_NUMBERS + SPECIAL_VALUES + STRINGS))
        elif op == 10:                               # replace an operator by another
            ops = ["=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "//", "%", "||", "::", "AND", "OR",
                   "IS", "LIKE", "^", "&", "<<"]
            spots = [k for k, t in enumerate(tokens) if t in ops or t.upper() in ("AND", "OR")]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(ops))
        elif op == 11:                               # replace a function name by another
            funcs = GOOD_AGGREGATES + BAD_AGGREGATES + SCALAR_FUNCTIONS + [
                "random", "setseed", "read_csv", "current_setting", "getenv", "now", "uuid", "nextval", "glob",
                "regexp_matches", "typeof", "hash", "md5", "error", "query", "list", "struct_pack"]
            spots = [k for k in range(len(tokens) - 1) if re.fullmatch(r"[A-Za-z_]\w*", tokens[k])
                     and tokens[k + 1] == "("]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(funcs))
        else:                                        # replace an identifier by an identifier column
            names = [k for k, t in enumerate(tokens) if re.fullmatch(r"[A-Za-z_]\w*", t)
                     and t.upper() not in VOCABULARY]
            if names:
                k = draw(st.sampled_from(names))
                tokens[k] = draw(st.sampled_from(["ssn", "SSN", '"Ssn"', "id", "person_id", "p.ssn", "people.ssn",
                                                 "zip", "joined", "height"]))
    return "".join(tokens)


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
