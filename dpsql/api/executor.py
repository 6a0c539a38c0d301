"""The executor: bound plans run to released tables, in the caller's turn of the engine.

One of the connection's three parts (api/planner.py plans, api/accountant.py charges, this runs). It
owns the engine's noise: the UDFs the rewritten SQL calls (noise, a quantile rule's choice, a top-k's
choice), drawing from the connection's one random source, and the buffer they draw into, cleared
before every query (and every stage) runs so that no draw outlives its query. It binds a plan (every
stage, before anything is charged: a binder error is a free refusal) and runs it: the earlier stages,
their values into the last one (frontend/stages.py, frontend/correlated.py), the public last stage on
the released rows (plan/model.py PublicStage). It never charges: the caller has reserved before
``run`` and records the outcome after it.
"""
from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from dpsql.accounting import measurements
from dpsql.accounting.released import VALUE
from dpsql.engines.base import Engine
from dpsql.errors import ExecutionError, UnsupportedConstruct
from dpsql.frontend.correlated import TABLE as CORRELATED_VALUES, VALUE as CORRELATED_VALUE
from dpsql.limits import Deadline, WorkLimits
from dpsql.lower.names import SALT, choice_function, top_k_function
from dpsql.lower.shared import Shared
from dpsql.lower.rewrite import replayed_sql, rewrite
from dpsql.mechanisms import randomness
from dpsql.mechanisms.base import NoiseBuffer, choose_top, noise
from dpsql.mechanisms.quantile_rules import answer
from dpsql.plan.local import LocalPlan
from dpsql.plan.model import Plan
from dpsql.plan.public import PublicPlan
from dpsql.policy.model import TablePolicy
from dpsql.sql.compare import Form

KEPT_PLANS = 64   # plans whose lowered measurements stage ``measured`` keeps
SALT_BOUND = 2 ** 62   # a salt is uniform below it: DuckDB's HASH takes it as a BIGINT argument

# The last stage planned again with its earlier stages' released values (api/planner.py ``last_stage``).
Replan = Callable[[list], Plan]


@dataclass(frozen=True)
class Bound:
    """A DP plan bound on the engine: the query, and its earlier stages in order."""
    query: Any
    earlier: tuple[Any, ...]


def held(plan) -> list[TablePolicy]:
    """The TEMP tables of released values a plan's run fills (engines/duckdb.py ``holding``)."""
    then = getattr(plan, "then", None)
    return [s.values for s in getattr(plan, "stages", ()) if s.values is not None] + (
        [then.values] if then is not None else [])


class Executor:
    """Runs bound plans on one engine, drawing noise from one source (see the module docstring)."""

    def __init__(self, engine: Engine, limits: WorkLimits,
                 rng: np.random.Generator | randomness.RandomSource | None = None):
        self.engine = engine
        self.limits = limits
        self.source = randomness.as_random_source(rng)
        self._noise = NoiseBuffer()
        self._lock = threading.Lock()
        self.noise_function = f"dpsql_noise_{secrets.token_hex(6)}"
        self.values_table = f"{CORRELATED_VALUES}_{secrets.token_hex(6)}"   # frontend/correlated.py
        self.measured_table = f"__dpsql_measured_{secrets.token_hex(6)}"   # a run's measurements (``measured``)
        self._sql: OrderedDict[int, tuple[Plan, Plan, str]] = OrderedDict()
        self.owner: object = None   # what lives as long as the engine's functions (api/connection.py)
        engine.register_noise(self.noise_function, self._noise_udf)
        engine.register_choice(choice_function(self.noise_function), self._choice_udf)
        engine.register_top_k(top_k_function(self.noise_function), self._choose)

    def _noise_udf(self, values: pa.Array, codes: pa.Array, a: pa.Array, b: pa.Array, c: pa.Array) -> pa.Array:
        """Vectorised noise: one call per chunk of output groups, never per input row; each row's
        mechanism (its code) draws with its own arguments (mechanisms/base.py ``noise``)."""
        if len(values) == 0:
            return pa.array([], type=pa.int64())
        exact = np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        columns = [np.asarray(x.to_numpy(zero_copy_only=False), dtype=np.int64) for x in (codes, a, b, c)]
        with self._lock:
            released = noise(self._noise, self.source, exact, columns[0], np.column_stack(columns[1:]))
        return pa.array(released, type=pa.int64())

    def _choice_udf(self, cells: pa.Array, counts: pa.Array, arguments: pa.Array) -> pa.Array:
        """A quantile rule's answer for each group of one chunk, drawn from the connection's source
        (mechanisms/quantile_rules.py ``answer``): a cell, or None for PTR's "no answer"."""
        rows = zip(cells.to_pylist(), counts.to_pylist(), arguments.to_pylist())
        with self._lock:
            return pa.array([answer(self.source, c, n, a) for c, n, a in rows], type=pa.int64())

    def _choose(self, ids: np.ndarray, utilities: np.ndarray, k: int, a: int, b: int) -> np.ndarray:
        """The top-k choice of one query (lower/top_k.py): k peeled exponential choices, from the same
        source as the noise (mechanisms/base.py ``choose_top``)."""
        with self._lock:
            return choose_top(self.source, ids, utilities, k, a, b)

    def _clear(self) -> None:
        with self._lock:
            self._noise.clear()   # no draw outlives its query

    def bind(self, plan: Plan) -> Bound:
        """Every stage bound before the charge (the last with NULL values; a public last stage with its
        values' table empty), so a binder error spends nothing (DP311)."""
        query = self._bound(plan)
        earlier = tuple(self._bound(s.plan) for s in plan.stages)
        if plan.then is not None:
            self.engine.bind(plan.then.plan.rewritten_sql)
        return Bound(query, earlier)

    def check(self, plan: Plan, clock: Deadline) -> Bound:
        """Everything that may refuse a plan free, before its charge: every stage bound (``bind``), and a
        public last stage tried on every key its release may hold, each value NULL (frontend/correlated.py
        ``probe``; public tables only, so its error is safe to show: DP318). Without the try, such a
        stage's engine error (a cast of '' to a number) would come after the charge."""
        bound = self.bind(plan)
        if plan.then is not None:
            failed = self.engine.drain(self.engine.bind(plan.then.probe.rewritten_sql), clock)
            if failed is not None:
                raise UnsupportedConstruct("DP318", f"the query over public tables around the subquery fails in "
                                           f"the engine on their rows: {failed}", rule="engine_runs",
                                           hint="nothing was spent; check the types of the expressions")
        return bound

    def _bound(self, plan: Plan) -> Any:
        """A DP plan's SQL bound, with a fresh salt for its keyed hash if it reads one (lower/bounding.py):
        drawn from the connection's one random source, never from the query's text. The engine gets the
        plan's tree too (an engine of stages splits it: lower/program.py)."""
        return self._bind(plan.rewritten_sql, plan.salted, plan.lowered)

    def _bind(self, sql: str, salted: bool, lowered=None) -> Any:
        """``sql`` bound, given a salt from the connection's one random source if it reads one."""
        salt = {SALT: int(self.source.below(np.array([SALT_BOUND], dtype=np.int64))[0])} if salted else None
        return self.engine.bind(sql, salt, lowered)

    def run(self, plan: Plan, bound: Bound, clock: Deadline, replan: Replan,
            kept: tuple[pa.Table | None, ...] | None = None) -> pa.Table | tuple[pa.Table, pa.Table | None]:
        """A charged DP plan run to its released table; the engine's errors propagate (the caller
        records the charge failed: it stays spent). ``kept``: a plan of measurements by identity
        (api/accountant.py), run as ``measured`` does, with the measurements it drew."""
        if kept is not None:
            return self.measured(plan, kept, clock)
        query = self._run_stages(plan, bound.earlier, clock, replan) if bound.earlier else bound.query
        self._clear()
        table = self.engine.run(query, clock)
        return self._then(plan, table, clock) if plan.then is not None else table

    def bind_shared(self, query: Shared) -> Any:
        """A shared query of a batch's statements bound (lower/shared.py; DP311 before the charge), with a
        fresh salt if it reads one (as ``_bound``)."""
        return self._bind(query.sql, query.salted)

    def run_shared(self, bound: Any, clock: Deadline) -> pa.Table:
        """A charged shared query run to its tagged answer (lower/shared.py ``split`` cuts it): one query,
        so one buffer of draws, cleared first as for any query; every group's and measurement's draw
        is its own (the buffer hands each out once)."""
        self._clear()
        return self.engine.run(bound, clock)

    def measured(self, plan: Plan, kept: tuple[pa.Table | None, ...], clock: Deadline,
                 **lowering) -> tuple[pa.Table, pa.Table | None]:
        """A plan of scalar measurements run in two steps: the measurements it lacks drawn by the engine
        (``stage="released"``: each released group's keys and noisy values), then its outputs computed
        from those and the ``kept`` ones alone (lower/rewrite.py ``replayed_sql``: post-processing, in
        the column types the one-query form has). Returns the answer and what it drew (None: nothing).
        ``lowering``: the test seam's noiseless function and sampling (dpsql/testing.py ``measured``)."""
        new = tuple(m for m, old in zip(plan.measurements, kept) if old is None)
        released, post = self._lowered(plan, lowering)
        # The types of the measurements' stage: the draw's own when it draws them all (bound, not run).
        like = self._bound(released) if len(new) < len(kept) else None
        drawn = None
        if new:
            self._clear()
            alone = measurements.alone(plan, new)
            draw = self._bound(released if len(new) == len(kept) else rewrite(
                alone, **{"noise_function": self.noise_function, **lowering, "stage": "released"}))
            like = draw if like is None else like
            drawn = self.engine.run(draw, clock)
        assert like is not None
        with self.engine.rows(_joined(plan, kept, drawn), like, self.measured_table):
            return self.engine.run(self.engine.bind(post), clock), drawn   # released values only: no salt

    def _lowered(self, plan: Plan, lowering: dict) -> tuple[Plan, str]:
        """A plan's measurements stage (lowered: its SQL, whether it reads the salt) and its post-processing
        over ``measured_table`` (lower/rewrite.py), kept for the plans asked last (lowering a plan takes
        milliseconds; a cached plan is asked again)."""
        found = self._sql.get(id(plan)) if not lowering else None
        if found is not None and found[0] is plan:
            return found[1], found[2]
        released = rewrite(plan, **{"noise_function": self.noise_function, **lowering, "stage": "released"})
        made = (released, replayed_sql(plan, self.measured_table))
        if not lowering:
            self._sql[id(plan)] = (plan, *made)   # the plan held: its id is not reused while kept
            while len(self._sql) > KEPT_PLANS:
                self._sql.popitem(last=False)
        return made

    def bind_exact(self, plan: PublicPlan | LocalPlan) -> Any:
        """A public-only or local-model plan bound (before it is recorded: a binder error is DP311, free)."""
        return self.engine.bind(plan.rewritten_sql)

    def run_exact(self, bound: Any, clock: Deadline) -> pa.Table:
        """A public-only or local-model plan run exactly, at most ``limits.max_rows`` rows (DP315)."""
        return self.engine.run(bound, clock, max_rows=self.limits.max_rows)

    def _run_stages(self, plan: Plan, earlier, clock: Deadline, replan: Replan) -> Any:
        """Run the earlier stages (each one released value: its one row's first column; none: NULL), then
        bind the last one with their values (``replan``: the planner's ``last_stage`` with the call's
        options). A correlated stage's released rows fill its table instead, and the last stage is bound
        as planned."""
        values = []
        for stage, bound in zip(plan.stages, earlier):
            self._clear()
            table = self.engine.run(bound, clock)
            if stage.values is not None:
                (lookup,) = [lookup for lookup in plan.table.lookups if lookup.table == stage.values.name]
                self.fill(stage.values, table, lookup.columns)
            values.append(table.column(0)[0].as_py() if table.num_rows == 1 and table.num_columns else None)
        self._clear()
        if any(s.values is not None for s in plan.stages):
            return self._bound(plan)
        return self._bound(replan(values))

    def _then(self, plan: Plan, released: pa.Table, clock: Deadline) -> pa.Table:
        """The public last stage (plan/model.py PublicStage) run on the released rows: they fill the values'
        table, keys compared as written (same types: sql/compare.py gives them bare), then the query over
        public tables reads them. Its rows are a function of public data and the release (post-processing),
        so an answer past ``limits.max_rows`` (DP315) says nothing the release does not."""
        assert plan.then is not None
        values = plan.then.values
        self.fill(values, released, keys_of_values(values))
        self._clear()
        return self.engine.run(self.engine.bind(plan.then.plan.rewritten_sql), clock, max_rows=self.limits.max_rows)

    def fill(self, values: TablePolicy, released: pa.Table, keys) -> None:
        """A correlated stage's released rows (keys, then the value) into its table, held for this run by
        the engine; its keys are unique by construction (one released row per group), checked here as a
        lookup's are, in ``keys``' forms (DP999 otherwise: a bug, and the budget stays spent)."""
        if not self.engine.fill(values.name, released.select(list(range(len(values.columns)))), keys):
            raise ExecutionError("DP999", "a stage's released keys repeat: this is probably a bug; its budget "
                                 "stays spent")


def _joined(plan: Plan, kept: tuple[pa.Table | None, ...], drawn: pa.Table | None) -> pa.Table:
    """Every measurement's column beside the groups' keys, in the plan's order: drawn or kept. The kept
    ones hold the same groups as each other (accounting/released.py); the drawn ones must too (public
    groups, drawn again: the same key domain), else DP999 (a bug; the budget stays spent)."""
    names = [m.name for m in plan.measurements]
    first = drawn if drawn is not None else next(t for t in kept if t is not None)
    keys = first.select([c for c in first.column_names if c not in names and c != VALUE])
    columns = []
    for name, old in zip(names, kept):
        if old is not None and not old.drop_columns([VALUE]).equals(keys):
            raise ExecutionError("DP999", "kept measurements hold other groups than those drawn: this is probably "
                                 "a bug; its budget stays spent")
        columns.append(old.column(VALUE) if old is not None else drawn.column(name))
    for name, column in zip(names, columns):
        keys = keys.append_column(name, column)
    return keys


def keys_of_values(values: TablePolicy) -> list:
    """The key columns of a table of released values, as a public last stage compares them: bare
    (frontend/correlated.py writes each tie between a key and its own type, which sql/compare.py leaves bare)."""
    return [(c, Form()) for c in values.columns if c != CORRELATED_VALUE]
