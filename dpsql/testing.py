"""The trusted test seam: run a query's real rewritten SQL with the noise switched off.

For tests and the data owner's own checks, in-process only (never reachable over a server): it
spends no budget and draws no noise, so whoever can call it already holds the data.

* ``noise="identity"``: every measurement is released exact (bounded, but without noise): the
  sensitivity and differential tests compare these values; a quantile rule answers the quantile's
  own cell of the bounded histogram.
* ``noise="zero"``: every measurement reads 0 (a quantile rule answers cell 0), so two neighbouring
  databases release the same values, and anything that still differs (row order, row count, an
  error) is a side channel.

``sampling="hash"`` makes the choice of a unit's L partitions a fixed function of (unit, key), so
runs on neighbouring databases are coupled (``sampling="portable"``: a fixed function every engine
computes alike, so DuckDB and Spark choose the same partitions); ``stage="measurements"`` returns each
candidate group's keys and exact measurements instead of the released outputs.

The accessors below (``engine``, ``duckdb_connection``, ``ledger``, ``noise_function``, ``random_source``,
``bind``, ``fetch``, ``before_run``, ``engine_reads``, ``forget_key_checks``, and for the plan cache
``forget_plans``, ``keep_plans``, ``plannings``) hand the trusted caller what tests need from a
connection's inside, so tests never read its private attributes (tests/contracts/test_suite_rules.py
checks that they do not); they add nothing an analyst's SQL can reach.

>>> import duckdb, dpsql
>>> con = duckdb.connect(); _ = con.execute("CREATE TABLE t AS SELECT range % 2 AS g FROM range(10)")
>>> db = dpsql.connect(con, ledger=":memory:", policy={"budget": {"epsilon": 1}, "tables": {"t": {
...     "privacy_unit": "row", "columns": {"g": {"keys": [0, 1]}}}}})
>>> run(db, "SELECT g, COUNT(*) AS n FROM t GROUP BY g").table.to_pylist()
[{'g': 0, 'n': 5}, {'g': 1, 'n': 5}]
"""
from __future__ import annotations

import contextlib
import dataclasses
import secrets
from dataclasses import dataclass
from typing import Callable, Iterator

import duckdb
import numpy as np
import pyarrow as pa

from dpsql.accounting import measurements
from dpsql.accounting.ledger import Ledger
from dpsql.api.accountant import Accountant
from dpsql.api.connection import PrivateConnection
from dpsql.api.executor import Executor, keys_of_values
from dpsql.api.planner import Planner
from dpsql.api.plan_cache import PlanCache
from dpsql.engines import duckdb_schema
from dpsql.engines.duckdb import DuckDBEngine
from dpsql.engines.base import Engine
from dpsql.lower import shared
from dpsql.limits import NO_DEADLINE
from dpsql.lower.names import SALT, choice_function, top_k_function
from dpsql.mechanisms.quantile_rules import noiseless
from dpsql.mechanisms.randomness import RandomSource
from dpsql.plan.local import LocalPlan
from dpsql.plan.model import Plan
from dpsql.plan.public import PublicPlan

NOISE = ("identity", "zero")


@dataclass(frozen=True)
class Exact:
    """A plan and what its rewritten SQL returned with the noise switched off (a query over public
    tables only: its exact answer, as ``db.sql`` gives it)."""
    plan: Plan | PublicPlan
    table: pa.Table

    @property
    def rows(self) -> list[tuple]:
        return [tuple(r.values()) for r in self.table.to_pylist()]


def _identity(values: pa.Array, code: pa.Array, a: pa.Array, b: pa.Array, c: pa.Array) -> pa.Array:
    return pa.array(np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64), type=pa.int64())


def _zero(values: pa.Array, code: pa.Array, a: pa.Array, b: pa.Array, c: pa.Array) -> pa.Array:
    return pa.array(np.zeros(len(values), dtype=np.int64), type=pa.int64())


def _exact_choice(cells: pa.Array, counts: pa.Array, arguments: pa.Array) -> pa.Array:
    """A quantile rule's noiseless answer: the quantile's own cell (mechanisms/quantile_rules.py)."""
    rows = zip(cells.to_pylist(), counts.to_pylist(), arguments.to_pylist())
    return pa.array([noiseless(c, n, a) for c, n, a in rows], type=pa.int64())


def _first_choice(cells: pa.Array, counts: pa.Array, arguments: pa.Array) -> pa.Array:
    """Every rule answers cell 0, whatever the data (the zero-noise release)."""
    return pa.array(np.zeros(len(cells), dtype=np.int64), type=pa.int64())



def _exact_top(ids: np.ndarray, utilities: np.ndarray, k: int, a: int, b: int) -> np.ndarray:
    """The top-k by exact utility, ties to the candidate numbered first (by key)."""
    return ids[np.lexsort((ids, -utilities))[:k]]


def _first(ids: np.ndarray, utilities: np.ndarray, k: int, a: int, b: int) -> np.ndarray:
    """The k candidates numbered first (by key), whatever their utilities: zero noise's choice."""
    return np.sort(ids)[:k]


def _function(db: PrivateConnection, noise: str) -> str:
    """The name of this connection's noiseless UDF of that kind, registered once with its quantile
    rules' choice function (lower/names.py ``choice_function``) and its top-k choice (the exact top k
    for identity, the first k by key for zero)."""
    if noise not in NOISE:
        raise ValueError(f"noise must be one of {NOISE}, got {noise!r}")
    names = db.__dict__.setdefault("_testing_functions", {})
    if noise not in names:
        names[noise] = f"dpsql_{noise}_{secrets.token_hex(6)}"
        exact = noise == "identity"
        _engine(db).register_noise(names[noise], _identity if exact else _zero)
        _engine(db).register_choice(choice_function(names[noise]), _exact_choice if exact else _first_choice)
        _engine(db).register_top_k(top_k_function(names[noise]), _exact_top if exact else _first)
    return names[noise]


def lower(db: PrivateConnection, sql: str, epsilon: float | None = None, delta: float | None = None, *,
          noise: str = "identity", sampling: str = "hash", stage: str = "output", earlier: str | None = None,
          **options) -> Plan | PublicPlan:
    """The query's plan lowered to SQL whose noise calls are the noiseless ``noise`` function (with the
    automatic contribution bounds ``db.sql`` chose for it, if any).

    A query of stages (frontend/stages.py) is lowered as its last stage with the earlier stages'
    values, released with the noiseless ``earlier`` function (default: ``noise``, but ``zero`` for
    ``stage="measurements"``: a check of the last stage's measurements on neighbouring databases holds
    the earlier stages' values fixed, as their noise makes them; those stages are queries of their
    own, checked as such)."""
    planning, running = planner(db), executor(db)
    options.setdefault("limits", planning.auto_limits.get(sql))
    lowering = dict(noise_function=_function(db, noise), sampling=sampling, stage=stage, **options)
    plan = planning.lowered(sql, epsilon, delta, **lowering)
    if isinstance(plan, Plan) and plan.then is not None and stage == "output":
        # a public last stage (plan/model.py PublicStage): the release's rows fill its table (kept), then
        # the last stage is what runs; at other stages the release's own lowering is the query's
        _engine(db).hold(plan.then.values)
        release = running.check(plan, NO_DEADLINE).query   # as db.sql: the last stage tried first (DP318)
        running.fill(plan.then.values, fetch(db, release), keys_of_values(plan.then.values))
        return plan.then.plan
    if not isinstance(plan, Plan) or not plan.stages:
        return plan
    earlier = earlier or ("zero" if stage == "measurements" else noise)
    values = []
    for s in plan.stages:
        ran = planning.lowered(s.plan.sql, s.plan.epsilon, s.plan.delta, noise_function=_function(db, earlier),
                          sampling=sampling)
        table = fetch(db, _engine(db).bind(ran.rewritten_sql, params(ran.rewritten_sql), ran.lowered))
        values.append(table.column(0)[0].as_py() if table.num_rows == 1 else None)
        if s.values is not None:   # a correlated stage: its rows fill the table the last stage reads (kept)
            _engine(db).hold(s.values)
            (lookup,) = [lookup for lookup in plan.table.lookups if lookup.table == s.values.name]
            running.fill(s.values, table, lookup.columns)
    if any(s.values is not None for s in plan.stages):
        return plan
    last = planning.last_stage(sql, plan, values, lowering)
    return dataclasses.replace(last, sql=sql, epsilon=plan.epsilon, delta=plan.delta, stages=plan.stages)


def run(db: PrivateConnection, sql: str, epsilon: float | None = None, delta: float | None = None, *,
        noise: str = "identity", sampling: str = "hash", stage: str = "output", **options) -> Exact:
    """Plan, lower and run ``sql`` without noise; nothing is charged or recorded.

    Raises what ``db.sql`` would raise for a refused query; an engine error propagates as is
    (``duckdb.Error``): for these tests any such error is a finding.
    """
    plan = lower(db, sql, epsilon, delta, noise=noise, sampling=sampling, stage=stage, **options)
    return Exact(plan, fetch(db, bind(db, plan.rewritten_sql)))


def run_on_engine(db: PrivateConnection, sql: str, epsilon: float | None = None, delta: float | None = None, *,
                  noise: str = "identity", sampling: str = "hash", **options) -> Exact:
    """``run`` through the engine's own ``bind`` and ``run`` with the plan's tree (Plan.lowered), as the
    executor binds it: an engine of stages (engines/spark.py) splits and prints it itself, and refuses
    what it cannot run (DP440). The salt, if read, fixed as ``params`` fixes it."""
    plan = lower(db, sql, epsilon, delta, noise=noise, sampling=sampling, **options)
    engine = db._engine
    return Exact(plan, engine.run(engine.bind(plan.rewritten_sql, params(plan.rewritten_sql),
                                              getattr(plan, "lowered", None))))


def run_shared(db: PrivateConnection, sqls: list[str], epsilon: float | None = None, delta: float | None = None, *,
               noise: str = "identity", sampling: str = "hash", **options) -> list[pa.Table]:
    """Statements of one frame run as one shared query (lower/shared.py, as ``db.sql_batch`` runs
    them) without noise: each statement's table, to compare with ``run`` of it alone. Raises
    ValueError when they do not share one query."""
    plans = [lower(db, sql, epsilon, delta, noise=noise, sampling=sampling, **options) for sql in sqls]
    if shared.groups(plans) != [list(range(len(plans)))]:
        raise ValueError("these statements do not share one query (lower/shared.py groups)")
    built = shared.combined(plans, _function(db, noise), sampling=sampling)   # type: ignore[arg-type]
    return shared.split(built, fetch(db, bind(db, built.sql)))


def measured(db: PrivateConnection, plan: Plan, noise: str = "identity", sampling: str = "hash") -> pa.Table | None:
    """The answer of a lowered plan as ``db.sql`` computes it when its measurements are kept by identity
    (api/executor.py ``measured``: the measurements drawn, then the outputs from them), with the noiseless
    ``noise`` function; None for a plan that runs as one query. Engine errors propagate."""
    if not isinstance(plan, Plan) or not measurements.replayable(plan):
        return None
    fresh = (None,) * len(plan.measurements)
    return executor(db).measured(plan, fresh, NO_DEADLINE, noise_function=_function(db, noise), sampling=sampling)[0]


# --- trusted accessors: in-process only, never behind a server ---------------------------------------

def _engine(db: PrivateConnection) -> DuckDBEngine:
    return db._engine


def engine(db: PrivateConnection) -> Engine:
    """The engine ``db`` runs on (engines/base.py): its turns, its reads of public data, its runs."""
    return db._engine


def duckdb_connection(db: PrivateConnection) -> duckdb.DuckDBPyConnection:
    """The DuckDB connection ``db`` runs its queries on (locked down, read-only for a file).

    Whatever runs on it bypasses the allowlist, the noise and the budget: tests set up data, read
    exact answers and check the lock-down with it.
    """
    return _engine(db).con


def ledger(db: PrivateConnection) -> Ledger:
    """The budget ledger ``db`` charges (tests close it to let another process lock the file)."""
    return accountant(db).ledger


def planner(db: PrivateConnection) -> Planner:
    """``db``'s planner (api/planner.py): text to plans, its plan cache, the automatic bounds chosen."""
    return db._planner


def executor(db: PrivateConnection) -> Executor:
    """``db``'s executor (api/executor.py): bound plans run, the noise drawn."""
    return db._executor


def accountant(db: PrivateConnection) -> Accountant:
    """``db``'s accountant (api/accountant.py): costs, replay keys, the ledger's charges."""
    return db._accountant


PARTS = {"planner": "_planner", "executor": "_executor", "accountant": "_accountant"}


@contextlib.contextmanager
def injected(db: PrivateConnection, *, planner: Planner | None = None, executor: Executor | None = None,
             accountant: Accountant | None = None) -> Iterator[PrivateConnection]:
    """``db`` with some of its three parts replaced while the block runs (a test's own subclass or
    wrapper: a ledger that fails, an executor that watches each run, a planner that counts), then its
    own again: tests inject parts instead of patching a connection's attributes. ``sql``, ``sql_batch``
    and ``explain`` go through whatever parts are in place."""
    given = {"planner": planner, "executor": executor, "accountant": accountant}
    saved = {name: getattr(db, PARTS[name]) for name, part in given.items() if part is not None}
    for name in saved:
        setattr(db, PARTS[name], given[name])
    try:
        yield db
    finally:
        for name, part in saved.items():
            setattr(db, PARTS[name], part)


def noise_function(db: PrivateConnection) -> str:
    """The name of ``db``'s real noise UDF, as its rewritten SQL calls it."""
    return executor(db).noise_function


def forget_plans(db: PrivateConnection) -> None:
    """Empty ``db``'s plan cache (api/plan_cache.py): the next query is planned from scratch."""
    planner(db).plans.clear()


def forget_key_checks() -> None:
    """Forget which data versions' referenced keys were found unique (engines/duckdb_schema.py keeps
    that per process): the next connection checks its keys again, as a new process would."""
    duckdb_schema._UNIQUE_CHECKED.clear()


def keep_plans(db: PrivateConnection, per_analyst: int) -> None:
    """Give ``db`` a new, empty plan cache that keeps ``per_analyst`` plans per analyst (tests reach
    its bound with a few queries)."""
    planner(db).plans = PlanCache(per_analyst)


@contextlib.contextmanager
def plannings(db: PrivateConnection) -> Iterator[list[str]]:
    """The SQL of every query ``db`` plans (parses, validates, plans, lowers) while the block runs, in
    order: a query whose plan the cache kept is not in it. Tests see what api/plan_cache.py keeps."""
    planning, seen = planner(db), []
    lowered = planning.lowered

    def counted(sql: str, *args, **kwargs) -> Plan | PublicPlan | LocalPlan:
        seen.append(sql)
        return lowered(sql, *args, **kwargs)
    # On the planner itself, not a copy: planning changes its state (the automatic bounds chosen).
    planning.lowered = counted   # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del planning.lowered


def random_source(db: PrivateConnection) -> RandomSource:
    """Where ``db``'s noise draws its randomness."""
    return executor(db).source


def bind(db: PrivateConnection, sql: str) -> duckdb.DuckDBPyRelation:
    """``sql`` bound on ``db``'s engine, one query at a time; a binder error propagates as ``duckdb.Error``
    (``db.sql`` would refuse it for free as DP311)."""
    engine = _engine(db)
    with engine.run_lock:
        return engine.con.sql(sql, params=params(sql))


def params(sql: str) -> dict | None:
    """The parameters a rewritten SQL reads (a production plan's salt for its keyed hash, lower/bounding.py),
    fixed here (benchmarks and tests that run the SQL by hand); None when it reads none."""
    return {SALT: 0} if f"${SALT}" in sql else None


def fetch(db: PrivateConnection, bound: duckdb.DuckDBPyRelation) -> pa.Table:
    """Run a bound query to the end on ``db``'s engine; an engine error propagates as is."""
    return _engine(db).run(bound)


@contextlib.contextmanager
def before_run(db: PrivateConnection, hook: Callable[[], None]) -> Iterator[None]:
    """Call ``hook`` each time ``db``'s engine is about to run a bound query (after ``db.sql`` has
    charged): tests look at the ledger file at that moment."""
    engine = _engine(db)
    run, shadowed = engine.run, "run" in vars(engine)

    def watched(bound: duckdb.DuckDBPyRelation, *args, **kwargs) -> pa.Table:
        hook()
        return run(bound, *args, **kwargs)
    engine.run = watched   # type: ignore[method-assign]
    try:
        yield
    finally:
        if shadowed:
            engine.run = run   # type: ignore[method-assign]
        else:
            del engine.run


@contextlib.contextmanager
def engine_reads(db: PrivateConnection) -> Iterator[list[str]]:
    """Every statement ``db``'s engine executes on its DuckDB connection while the block runs (the
    SQL text of each ``execute``), in order: tests compare the planning paths of two analysts."""
    engine, seen = _engine(db), []
    con = engine.con

    class Counting:
        def __getattr__(self, name):
            return getattr(con, name)

        def execute(self, sql, *args, **kwargs):
            seen.append(sql)
            return con.execute(sql, *args, **kwargs)
    engine.con = Counting()   # type: ignore[assignment]
    try:
        yield seen
    finally:
        engine.con = con
