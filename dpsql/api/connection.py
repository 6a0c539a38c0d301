"""The analyst-facing connection: SQL text in, noisy materialised results out, budget charged once.

The pipeline, in one place (``PrivateConnection.plan``)::

    parse -> validate(policy) -> build_plan -> rewrite -> [charge budget] -> execute (noise in DuckDB)
"""
from __future__ import annotations

import dataclasses
import functools
import secrets
import threading
from pathlib import Path
from typing import Mapping

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from dpsql.mechanisms.base import PURE_NOISE, NoiseBuffer, choose_top, noise
from dpsql.mechanisms.quantile_rules import answer
from dpsql.mechanisms import randomness
from dpsql.accounting.budget import ZERO, Budget
from dpsql.errors import DeadlineExceeded, DpsqlError, ExecutionError, InvalidParameter, NeedsBounds, UnsupportedConstruct
from dpsql.accounting import ledger as ledgers
from dpsql.frontend.arg_max import arg_max, named_lookup
from dpsql.frontend.flatten import flatten
from dpsql.frontend.fold import fold_constants
from dpsql.frontend.joins import relate
from dpsql.frontend.mode import mode_as_top_one
from dpsql.frontend.names import output_names
from dpsql.frontend.per_person import per_person
from dpsql.frontend.scope import Scope, group_keys
from dpsql.frontend.correlated import TABLE as CORRELATED_VALUES, VALUE as CORRELATED_VALUE
from dpsql.sql.compare import Form
from dpsql.frontend.stages import Stages, public_stage, repointed, split
from dpsql.frontend.parse import parse
from dpsql.plan.allocation import check_budget_parameters
from dpsql.plan.build import build_plan
from dpsql.plan.model import Plan, PublicStage, Stage
from dpsql.plan.public import PublicPlan, public_plan
from dpsql.frontend.public import public_only
from dpsql.frontend import key_pruning, public_bounds
from dpsql.frontend.local import local_query
from dpsql.plan.local import LocalPlan, local_plan
from dpsql.frontend import size
from dpsql.limits import Deadline, WorkLimits, check_seconds
from dpsql.policy.loading import load_policy
from dpsql.policy.model import JointKeys, Policy, TablePolicy
from dpsql.lower.names import choice_function, top_k_function
from dpsql.lower.rewrite import rewrite
from dpsql.engines import versions
from dpsql.engines.duckdb import DuckDBEngine
from dpsql.engines.duckdb_names import expression_name
from dpsql.frontend.validate import validate
from dpsql.api import auto_bounds, auto_contributions, replay
from dpsql.api.replay import plan_signature
from dpsql.api.result import Result
from dpsql.api.budget_note import budget_note
from dpsql.api.plan_cache import Entry, PlanCache, key as plan_key

def _repointed(plan_stage, sql: str, text: str, *args, **kwargs):
    """A stage planned from its regenerated ``text``, a refusal pointing into the query as written
    (frontend/stages.py ``repointed``)."""
    try:
        return plan_stage(text, *args, **kwargs)
    except DpsqlError as err:
        raise repointed(err, sql) from None


def _choose(name: str, caller, query, default):
    """The caller's value, else the query's OPTIONS, else the policy default; two different ones conflict."""
    if caller is not None and query is not None and caller != query:
        raise InvalidParameter("DP401", f"{name} is given twice: {caller!r} by the caller and {query!r} in OPTIONS")
    return caller if caller is not None else query if query is not None else default


def _duckdb_names(parsed, policy: Policy) -> list[str | None]:
    """The output names plain DuckDB gives the query as written (issue 25, item 1): aliases and columns
    by frontend/names.py, other expressions printed by DuckDB's parser (None: it could not; the plan's
    own name stays). Read before the passes below rename columns; a function of the text alone."""
    names = output_names(parsed, policy.tables)
    return [name if name is not None else expression_name(item.unalias().sql(dialect="duckdb"))
            for name, item in zip(names, parsed.expressions)]


class PrivateConnection:
    """Answers aggregate SQL with differential privacy over a locked-down engine (DuckDB today).

    Use ``dpsql.connect`` to make one.
    """

    def __init__(self, engine: DuckDBEngine, policy: Policy, ledger: ledgers.Ledger,
                 rng: np.random.Generator | randomness.RandomSource | None = None, *, data_version: str | None = None,
                 limits: WorkLimits | None = None):
        self._engine = engine
        self.policy = policy
        self.limits = limits or WorkLimits()   # what one request may ask (dpsql/limits.py)
        self._ledger = ledger
        self._data_version = data_version or versions.connection_data_version()
        self._source = randomness.as_random_source(rng)
        self._noise = NoiseBuffer()
        self._lock = threading.Lock()
        self._noise_function = f"dpsql_noise_{secrets.token_hex(6)}"
        self._values_table = f"{CORRELATED_VALUES}_{secrets.token_hex(6)}"   # frontend/correlated.py
        self._plans = PlanCache()
        # ``bounds: auto`` columns: chosen once per connection (and paid once per data version: the
        # histogram query replays), kept here and put in place of the declared policy's missing bounds.
        self._declared_policy = policy
        self._auto_columns = [(t.name, c.name) for t in policy.tables.values() for c in t.columns.values() if c.auto]
        self._auto_bounds: dict[tuple[str, str], tuple[float, float]] = {}
        # ``max_groups_per_unit: auto`` and ``max_rows_per_unit: auto``: (L, C) chosen per query text
        # likewise (api/auto_contributions.py); None where the query's bound is not automatic.
        self._auto_limits: dict[str, tuple[int | None, int | None]] = {}
        engine.register_noise(self._noise_function, self._noise_udf)
        engine.register_choice(choice_function(self._noise_function), self._choice_udf)
        engine.register_top_k(top_k_function(self._noise_function), self._choose)
        # pyarrow loads its compute functions on first use (0.7 s): load them now, not in the first
        # DP query, whose time would tell its analyst that nobody had run one (a shared cache).
        pa.array([None], type=pa.int64()).fill_null(0)

    def _noise_udf(self, values: pa.Array, codes: pa.Array, a: pa.Array, b: pa.Array, c: pa.Array) -> pa.Array:
        """Vectorised noise: one call per chunk of output groups, never per input row; each row's
        mechanism (its code) draws with its own arguments (mechanisms/base.py ``noise``)."""
        if len(values) == 0:
            return pa.array([], type=pa.int64())
        exact = np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        columns = [np.asarray(x.to_numpy(zero_copy_only=False), dtype=np.int64) for x in (codes, a, b, c)]
        with self._lock:
            released = noise(self._noise, self._source, exact, columns[0], np.column_stack(columns[1:]))
        return pa.array(released, type=pa.int64())

    def _choice_udf(self, cells: pa.Array, counts: pa.Array, arguments: pa.Array) -> pa.Array:
        """A quantile rule's answer for each group of one chunk, drawn from the connection's source
        (mechanisms/quantile_rules.py ``answer``): a cell, or None for PTR's "no answer"."""
        rows = zip(cells.to_pylist(), counts.to_pylist(), arguments.to_pylist())
        with self._lock:
            return pa.array([answer(self._source, c, n, a) for c, n, a in rows], type=pa.int64())

    def _choose(self, ids: np.ndarray, utilities: np.ndarray, k: int, a: int, b: int) -> np.ndarray:
        """The top-k choice of one query (lower/top_k.py): k peeled exponential choices, from the same
        source as the noise (mechanisms/base.py ``choose_top``)."""
        with self._lock:
            return choose_top(self._source, ids, utilities, k, a, b)

    def plan(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
             ci: float | None = None, nonnegative: bool = True, mechanism: str | None = None,
             report_clipping: bool = False) -> Plan | PublicPlan | LocalPlan:
        """parse -> flatten -> validate -> plan -> rewrite. Pure with respect to the budget: spends nothing."""
        return self._planned(sql, epsilon, delta, ci, nonnegative, None, self._seconds(None), mechanism,
                             report_clipping).plan

    def _planned(self, sql: str, epsilon, delta, ci, nonnegative: bool, analyst: str | None,
                 deadline: float | None, mechanism: str | None = None, report_clipping: bool = False) -> Entry:
        """The plan of this call, from the analyst's plan cache (api/plan_cache.py) when asked before."""
        limits = self._auto_limits.get(sql)
        call = plan_key(sql, epsilon, delta, ci, nonnegative, mechanism, limits, report_clipping)
        return self._plans.lookup(analyst, call, lambda: self._lowered(
            sql, epsilon, delta, ci=ci, nonnegative=nonnegative, reader=analyst, deadline=deadline,
            mechanism=mechanism, limits=limits, report_clipping=report_clipping))

    def _planned_with_bounds(self, sql: str, epsilon, delta, ci, nonnegative: bool, analyst: str | None,
                             deadline: float | None, mechanism: str | None, report_clipping: bool = False) -> Entry:
        """``_planned``, after choosing the automatic bounds it needs (api/auto_bounds.py,
        api/auto_contributions.py): each one is a DP query of its own, charged to this caller, then
        the query is planned again."""
        for _ in range(len(self._auto_columns) + 2):
            try:
                return self._planned(sql, epsilon, delta, ci, nonnegative, analyst, deadline, mechanism,
                                     report_clipping)
            except NeedsBounds as need:
                for table, column in need.columns:
                    self._choose_bounds(table, column, analyst, deadline)
                if need.contributions:
                    self._choose_contributions(sql, need, analyst, deadline)
        return self._planned(sql, epsilon, delta, ci, nonnegative, analyst, deadline, mechanism, report_clipping)

    def _histogram(self, text: str, epsilon: float, analyst: str | None,
                   deadline: float | None) -> tuple[dict, tuple[float, float]]:
        """A bounds histogram asked as any DP query (charged, or replayed for free once paid for this
        data version): its noisy counts by bin (a tuple of bins when it has several keys), and the
        thresholds its plan gives."""
        result = self.sql(text, epsilon=epsilon, delta=0.0, mechanism=PURE_NOISE.option, analyst=analyst,
                          deadline=deadline, nonnegative=False)
        counts = {(int(r[0]) if len(r) == 2 else tuple(int(b) for b in r[:-1])): float(r[-1])
                  for r in result.fetchall() if None not in r}
        return counts, auto_bounds.thresholds(result.plan)

    def _choose_bounds(self, table: str, column: str, analyst: str | None, deadline: float | None) -> None:
        """One auto column's bounds, chosen from its histogram (post-processing)."""
        if (table, column) in self._auto_bounds:
            return
        declared = self._declared_policy.tables[table].columns[column]
        self._auto_bounds[(table, column)] = auto_bounds.chosen(
            self.policy, table, declared, lambda text, eps: self._histogram(text, eps, analyst, deadline))
        self.policy = auto_bounds.with_bounds(self._declared_policy, self._auto_bounds)

    def _choose_contributions(self, sql: str, need: NeedsBounds, analyst: str | None,
                              deadline: float | None) -> None:
        """The automatic L and C of this query, chosen from the histogram of people by their rows and
        groups (api/auto_contributions.py)."""
        assert self.policy.auto_bounds is not None and need.unit is not None
        rules = self.policy.auto_bounds
        try:
            text = auto_contributions.histogram_sql(sql, need.unit, self.policy)
            counts, (strict, sd) = self._histogram(text, rules.epsilon, analyst, deadline)
        except DpsqlError as e:
            raise NeedsBounds("DP330", "the automatic contribution bounds cannot be chosen for this query: its "
                                       f"rows and groups per person cannot be counted ({e.message})", sql=sql,
                              hint="pass OPTIONS(max_groups_contributed = n) for L, or declare max_groups_per_unit "
                                   "and max_rows_per_unit for its tables") from None
        waiting = {kind for _, kind in need.contributions}
        L, C = auto_contributions.choose(auto_contributions.nonempty(counts, strict, sd), rules.for_epsilon,
                                         need.partitions, None if "groups" in waiting else need.limits[0],
                                         None if "rows" in waiting else need.limits[1])
        self._auto_limits[sql] = (L if "groups" in waiting else None, C if "rows" in waiting else None)

    def _seconds(self, seconds: float | None) -> float | None:
        """A call's deadline: its own seconds (checked, DP401), else the connection's (``limits.deadline``)."""
        return check_seconds(seconds) if seconds is not None else self.limits.deadline

    def _lowered(self, sql: str, epsilon: float | None, delta: float | None, *, ci: float | None = None,
                 nonnegative: bool = True, noise_function: str | None = None, reader: str | None = None,
                 deadline: float | None = None, mechanism: str | None = None,
                 limits: tuple[int | None, int | None] | None = None, stages: int = 1,
                 named_by: str | None = None, released: TablePolicy | None = None, report_clipping: bool = False,
                 **lowering) -> Plan | PublicPlan | LocalPlan:
        """The pipeline; ``noise_function`` and ``lowering`` options are for dpsql.testing only. A query
        over public tables only is answered exactly (frontend/public.py), before the DP pipeline.
        Its input is bounded first (frontend/size.py): planning is linear in it, so it is not
        interrupted; the engine's reads are (``reader``: who asks, ``deadline``: seconds of a read).
        ``stages``: the query's stages (frontend/stages.py); this one is planned at its share of the budget;
        ``named_by``: the SQL its outputs are named by (a last stage's: the query's own, not the one with its
        subqueries' values in their places).
        ``released``: a table of an earlier stage's released values it reads (frontend/correlated.py), public.
        ``report_clipping``: the clipping report (plan/clipping.py), of the last stage only."""
        policy = self.policy if released is None else dataclasses.replace(
            self.policy, tables={**self.policy.tables, released.name: released})
        try:
            size.check_text(sql, self.limits)
            parsed = parse(sql)
            size.check_shape(parsed, sql, self.limits)
            staged = split(parsed, sql, self.policy, self._values_table) if stages == 1 else None
            if staged is not None:
                plan_stage = functools.partial(self._lowered, ci=ci, nonnegative=nonnegative, reader=reader,
                                               deadline=deadline, mechanism=mechanism,
                                               noise_function=noise_function, **lowering)
                return self._staged(staged, sql, epsilon, delta, plan_stage, report_clipping)
            if public_only(parsed, policy):
                return public_plan(parsed, sql, policy)
            local = local_query(parsed, policy)
            if local is not None:   # a count of a randomized column's reports (frontend/local.py): no central noise
                return local_plan(local, sql, policy, ci, nonnegative)
            names = _duckdb_names(parse(named_by) if named_by else parsed, policy)
            parsed, lookup = arg_max(parsed, policy)   # the row of the largest private total: a top-1
            statement, policy = per_person(parsed, sql, policy)
            statement, policy = relate(flatten(statement, sql), sql, policy)
            statement = mode_as_top_one(fold_constants(statement, sql), sql)
            policy = self._public_bounds(statement, sql, policy, reader, deadline)
            scope = self._public_keys(statement, validate(statement, sql, policy), reader, deadline)
            if limits is not None:   # automatic L and C, chosen for this query
                scope = auto_contributions.applied(scope, *limits)
            self._check_lookups(scope.table, policy, reader, deadline)
            eps = _choose("epsilon", epsilon, scope.options.epsilon, self.policy.default_epsilon)
            dlt = _choose("delta", delta, scope.options.delta, self.policy.default_delta)
            if stages > 1:   # a stage's share (checked by _staged: DP401 before the division)
                eps, dlt = eps / stages, dlt / stages
            plan = build_plan(statement, scope, epsilon=eps, delta=dlt, confidence=ci,
                              nonnegative=nonnegative, mechanism=mechanism, names=names, report_clipping=report_clipping)
            size.check_groups(plan.partitions, statement, sql, self.limits)
            if lookup is not None:   # the top-1's outputs under DuckDB's names, as every other output
                plan = dataclasses.replace(plan, lookup=named_lookup(lookup, names))
            return rewrite(plan, noise_function or self._noise_function, **lowering)
        except RecursionError:
            raise UnsupportedConstruct("DP102", "the query is nested too deeply") from None

    def _staged(self, staged: Stages, sql: str, epsilon: float | None, delta: float | None, plan_stage,
                report_clipping: bool = False) -> Plan:
        """A query with scalar subqueries over private data (frontend/stages.py): each planned as a query of
        its own, then the query with NULL in their places (the values come when it runs: ``_run_stages``);
        the budget split equally between them, the whole charged once."""
        options = staged.options(sql)
        eps = _choose("epsilon", epsilon, options.epsilon, self.policy.default_epsilon)
        eps, dlt = check_budget_parameters(eps, _choose("delta", delta, options.delta, self.policy.default_delta))
        plan_stage = functools.partial(_repointed, plan_stage, sql)
        if staged.public:
            return self._public_last(staged, sql, eps, dlt, plan_stage)
        n = len(staged.inner) + 1
        plans = [plan_stage(text, eps, dlt, stages=n) for text in staged.inner]
        plans.append(plan_stage(staged.placeholder_sql(), eps, dlt, stages=n, named_by=sql, released=staged.values,
                                report_clipping=report_clipping))
        if not all(isinstance(p, Plan) for p in plans):
            raise public_stage(sql)
        return dataclasses.replace(plans[-1], sql=sql, epsilon=eps, delta=dlt,
                                   stages=tuple(Stage(p, staged.values) for p in plans[:-1]))

    def _public_last(self, staged: Stages, sql: str, eps: float, dlt: float, plan_stage) -> Plan:
        """A correlated stage in a query otherwise over public tables (frontend/stages.py ``public``, TPC-H
        Q20): the stage released at the whole budget, then the query over public tables and its released
        values answered exactly (frontend/public.py; post-processing, so the query costs the stage alone)."""
        (text,) = staged.inner
        assert staged.values is not None
        last = plan_stage(staged.placeholder_sql(), eps, dlt, stages=2, named_by=sql, released=staged.values)
        release = plan_stage(text, eps, dlt)
        if not isinstance(last, PublicPlan) or not isinstance(release, Plan):
            raise public_stage(sql)
        return dataclasses.replace(release, sql=sql, then=PublicStage(last, staged.values, text))

    def _last_stage(self, sql: str, plan: Plan, values: list, options: dict) -> Plan:
        """The last stage planned again with the earlier stages' released values in place of the subqueries:
        post-processing of those releases, so a refusal here depends on them alone (spent: DP900)."""
        staged = split(parse(sql), sql, self.policy, self._values_table)
        assert staged is not None
        try:
            final = self._lowered(staged.outer_sql(values), plan.epsilon, plan.delta, stages=len(plan.stages) + 1,
                                  named_by=sql, **options)
        except DpsqlError as err:
            raise ExecutionError("DP900", f"the query could not be planned with its subqueries' released values "
                                 f"({err.code}); its budget stays spent") from None
        if not isinstance(final, Plan) or final.releases() != dataclasses.replace(plan, stages=()).releases():
            raise ExecutionError("DP999", "the last stage's releases changed with its subqueries' values: this is "
                                 "probably a bug; its budget stays spent")
        return final

    def _run_stages(self, plan: Plan, earlier: list, clock: Deadline, replan) -> duckdb.DuckDBPyRelation:
        """Run the earlier stages (each one released value: its one row's first column; none: NULL), then
        bind the last one with their values (``replan``: ``_last_stage`` with the call's options). A
        correlated stage's released rows fill its table instead, and the last stage is bound as planned."""
        values = []
        for stage, bound in zip(plan.stages, earlier):
            with self._lock:
                self._noise.clear()
            table = self._engine.run(bound, clock)
            if stage.values is not None:
                (lookup,) = [lookup for lookup in plan.table.lookups if lookup.table == stage.values.name]
                self._fill(stage.values, table, lookup.columns)
            values.append(table.column(0)[0].as_py() if table.num_rows == 1 and table.num_columns else None)
        with self._lock:
            self._noise.clear()
        if any(s.values is not None for s in plan.stages):
            return self._engine.bind(plan.rewritten_sql)
        return self._engine.bind(replan(values).rewritten_sql)

    def _then(self, plan: Plan, released: pa.Table, clock: Deadline) -> pa.Table:
        """The public last stage (plan/model.py PublicStage) run on the released rows: they fill the values'
        table, keys compared as written (same types: sql/compare.py gives them bare), then the query over
        public tables reads them. Its rows are a function of public data and the release (post-processing),
        so an answer past ``limits.max_rows`` (DP315) says nothing the release does not."""
        assert plan.then is not None
        values = plan.then.values
        self._fill(values, released, self._keys_of_values(values))
        with self._lock:
            self._noise.clear()
        return self._engine.run(self._engine.bind(plan.then.plan.rewritten_sql), clock, max_rows=self.limits.max_rows)

    @staticmethod
    def _keys_of_values(values: TablePolicy) -> list:
        """The key columns of a table of released values, as a public last stage compares them: bare
        (frontend/correlated.py writes each tie between a key and its own type, which sql/compare.py leaves bare)."""
        return [(c, Form()) for c in values.columns if c != CORRELATED_VALUE]

    def _fill(self, values: TablePolicy, released: pa.Table, keys) -> None:
        """A correlated stage's released rows (keys, then the value) into its table, held for this run by
        the engine; its keys are unique by construction (one released row per group), checked here as a
        lookup's are, in ``keys``' forms (DP999 otherwise: a bug, and the budget stays spent)."""
        if not self._engine.fill(values.name, released.select(list(range(len(values.columns)))), keys):
            raise ExecutionError("DP999", "a stage's released keys repeat: this is probably a bug; its budget "
                                 "stays spent")

    def _check_lookups(self, table, policy: Policy, reader: str | None, deadline: float | None) -> None:
        """Every public table the query joins is a lookup: the columns it is joined on are unique in it
        as compared (frontend/lookups.py), else DP207 before anything runs. Public data, read by the
        engine once per reader (engines/duckdb.py ``unique``), never shared between analysts. A table of
        released values is not filled yet: it is checked once its stage has run (``_run_stages``)."""
        for lookup in table.lookups if table is not None else ():
            if policy.tables[lookup.table].released:
                continue
            if not self._engine.unique(lookup.table, lookup.columns, reader, deadline):
                raise lookup.refusal()

    def _public_bounds(self, statement, sql: str, policy: Policy, reader: str | None, deadline: float | None) -> Policy:
        """A joined public table's number column that an aggregate reads without declared bounds gets
        [MIN, MAX] of its values as bounds (frontend/public_bounds.py: public data, so free), read by
        the engine once per reader (engines/duckdb.py ``public_bounds``)."""
        for column, node in public_bounds.wanted(statement, policy):
            table, name = column.public_source or ("", "")   # wanted() gives public columns only
            extremes = self._engine.public_bounds(table, name, reader, deadline)
            policy = public_bounds.with_bounds(statement, policy, column, node, extremes, sql)
        return policy

    def _public_keys(self, statement, scope: Scope, reader: str | None, deadline: float | None) -> Scope:
        """GROUP BY columns of joined public tables get their values as keys, read from the engine
        (once per reader: engines/duckdb.py ``public_keys``)."""
        wanted = {c.name for k in group_keys(statement, scope) for c in k.columns
                  if c.public_source is not None and c.keys is None}
        if not wanted:
            return scope
        columns = {name: self._keys_of(statement, scope, c, reader, deadline) if name in wanted else c
                   for name, c in scope.table.columns.items()}
        joint = self._joint_keys(statement, scope, wanted, reader, deadline)
        return dataclasses.replace(scope, table=dataclasses.replace(scope.table, columns=columns, joint_keys=joint))

    def _joint_keys(self, statement, scope: Scope, wanted: set[str], reader: str | None,
                    deadline: float | None) -> JointKeys | None:
        """GROUP BY items that are all columns of one joined public table get the distinct tuples of its
        rows (that pass the query's public conditions) as their groups (frontend/key_pruning.py
        ``joint_read``), counted by the engine (public data only, so free). The tuples stay a read in the
        lowered SQL (lower/keys.py keys_source) and are never kept: nothing grows per WHERE an analyst
        writes; their count is bounded as any query's groups (DP315, frontend/size.py)."""
        keys = group_keys(statement, scope)
        names = [k.expression.name for k in keys if isinstance(k.expression, exp.Column)]
        if len(keys) < 2 or len(names) != len(keys) or not set(names) <= wanted:
            return None
        read = key_pruning.joint_read(statement, scope.table, names, scope.policy)
        if read is None:
            return None
        text = read[0].sql(dialect="duckdb")
        return JointKeys(tuple(names), text, self._engine.pruned_count(text, reader, deadline), read[1])

    def _keys_of(self, statement, scope: Scope, column, reader: str | None, deadline: float | None):
        """One public column's keys: its values, or those of the rows of the public tables that pass the
        WHERE's public conjuncts (frontend/key_pruning.py: public data only, so free)."""
        pruned = key_pruning.pruned_read(statement, scope.table, column, scope.policy)
        keys = self._engine.pruned_keys(pruned[0].sql(dialect="duckdb"), reader, deadline) if pruned else None
        if pruned is not None and keys is not None:
            return dataclasses.replace(column, keys=keys, keys_where=pruned[1])
        return self._engine.public_keys(scope.table.name, column, f"__dpsql_keys_{secrets.token_hex(4)}", reader,
                                        deadline)

    def explain(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
                ci: float | None = None, nonnegative: bool = True, deadline: float | None = None,
                analyst: str | None = None, mechanism: str | None = None,
                report_clipping: bool = False) -> Plan | PublicPlan | LocalPlan:
        """The Plan the query would run, with the rewritten SQL and the budget remaining before it (the
        ``analyst``'s own, else the total: in the accountant's terms and as (epsilon, delta), and whether
        the query would fit; api/budget_note.py); spends nothing and writes nothing. ``deadline``:
        seconds for the engine's read planning may need (a joined public table's keys), DP425 past them.

        Example:
            >>> print(db.explain("SELECT sex, COUNT(*) FROM people GROUP BY sex"))  # doctest: +SKIP
        """
        plan = self._planned(sql, epsilon, delta, ci, nonnegative, analyst, self._seconds(deadline), mechanism,
                             report_clipping).plan
        if isinstance(plan, (PublicPlan, LocalPlan)):   # spends nothing: no budget to show
            return plan
        # The remaining budget (the analyst's own, or the total) and whether this would fit: read only.
        return dataclasses.replace(plan, budget_note=budget_note(self._ledger, plan, analyst))

    def sql(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
            fresh: bool = False, ci: float | None = None, nonnegative: bool = True,
            analyst: str | None = None, deadline: float | None = None, mechanism: str | None = None,
            report_clipping: bool = False) -> Result:
        """Answer one aggregate query with differential privacy.

        The cost is recorded in the ledger before the query runs. An identical query already answered
        (same normalised SQL, epsilon, delta, policy and data version) gets that same answer back at
        no cost (``result.replayed``): averaging repeats gains nothing.

        Args:
            sql: one SELECT in the dpsql dialect (see grammar/).
            epsilon, delta: this query's budget; default from the policy.
            fresh: draw new noise and pay, even if an identical query was answered before.
            ci: add ``<col>_ci_low`` / ``<col>_ci_high`` at this confidence level around each noisy
                value (exact for counts and sums, conservative for AVG; post-processing, free).
            nonnegative: release counts, and sums of non-negative values, clamped at 0 (default).
            mechanism: the noise, ``"laplace"`` or ``"gaussian"`` (needs delta > 0); default: the
                query's OPTIONS(mechanism = ...), else the policy's ``mechanism``, else what the
                ledger's accountant composes best (mechanisms/base.py ``choose``).
            report_clipping: also release, per group, the noisy count of people whose rows or values
                the bounds cut and their share of the group's people (``result.clipping``), at 10% of
                epsilon unless OPTIONS(clipping_epsilon = ...) says how much; taken from epsilon, not
                added (plan/clipping.py). A warning says when the share is material.
            analyst: charge this analyst's budget (and the total) instead of the owner's; see ``analyst()``.
            deadline: seconds this call may hold the engine (default ``limits.deadline``: none), from
                the start of its turn (turns go round robin between analysts); DuckDB is interrupted
                when they pass (DP425, nothing spent; DP901 once the query was charged).
        Returns:
            Result, materialised once; ``.plan`` is the Plan that was charged.
        Raises:
            DpsqlError: refused (nothing spent); BudgetExceeded (nothing spent); LedgerError (the
            ledger is foreign, locked or corrupt: nothing spent); ExecutionError (spent);
            DeadlineExceeded (DP425 nothing spent, DP901 spent).
        Example:
            >>> db.sql("SELECT sex, AVG(income) FROM people GROUP BY sex", epsilon=0.5).fetchall()  # doctest: +SKIP
        """
        if not isinstance(fresh, bool):
            raise InvalidParameter("DP401", f"fresh must be True or False, got {fresh!r}")
        seconds = self._seconds(deadline)
        planned = self._planned_with_bounds(sql, epsilon, delta, ci, nonnegative, analyst, seconds, mechanism,
                                            report_clipping)
        # Bind, charge and run in one turn of the engine (shared fairly between analysts): once a
        # query is charged it runs at once, never waits behind another analyst's.
        then = getattr(planned.plan, "then", None)
        held = [s.values for s in getattr(planned.plan, "stages", ()) if s.values is not None] + (
            [then.values] if then is not None else [])
        with self._engine.turn(analyst, seconds) as clock, self._engine.holding(held):
            if isinstance(planned.plan, (PublicPlan, LocalPlan)):
                return self._exact(planned.plan, analyst, clock)
            options = dict(ci=ci, nonnegative=nonnegative, reader=analyst, deadline=seconds, mechanism=mechanism,
                           report_clipping=report_clipping)
            replan = functools.partial(self._last_stage, sql, planned.plan, options=options)
            return self._private(sql, planned, fresh, analyst, clock, replan)

    def _private(self, sql: str, planned: Entry, fresh: bool, analyst: str | None, clock: Deadline,
                 replan) -> Result:
        """A DP query: bound, charged, run (inside the caller's turn of the engine). A query of stages
        binds every stage before the charge (the last with NULL values), so a binder error spends nothing."""
        plan = planned.plan
        bound = self._engine.bind(plan.rewritten_sql)
        earlier = [self._engine.bind(s.plan.rewritten_sql) for s in plan.stages]
        if plan.then is not None:   # bound (its values' table empty) before the charge: a binder error spends nothing
            self._engine.bind(plan.then.plan.rewritten_sql)
        cost = self._ledger.cost(plan)
        if planned.normalised is None:
            text, names = replay.normalise_sql(sql)
            # A replay must match everything that shapes the release: noise (bounds, sensitivities,
            # scales, L, selection) and post-processing, not only the SQL text.
            planned.normalised = (text, names + (plan_signature(plan),))
        normalised = planned.normalised
        if clock.passed():   # the last moment a stop spends nothing
            raise DeadlineExceeded("DP425", f"the query reached its deadline of {clock.seconds:g} s before it was "
                                   "charged; nothing was spent", hint="retry later")
        ticket = self._ledger.reserve(
            cost, sql=normalised[0], plan=replay.plan_summary(plan), fresh=fresh, data_version=self._data_version,
            replay_key=replay.replay_key(normalised, cost, self._ledger.identity, self._data_version), analyst=analyst,
            releases=plan.releases())
        if ticket.replayed:
            return Result(replay.unstored(ticket.answer)[0], plan, replayed=True)
        try:
            if earlier:
                bound = self._run_stages(plan, earlier, clock, replan)
            with self._lock:
                self._noise.clear()   # no draw outlives its query
            table = self._engine.run(bound, clock)
            if plan.then is not None:
                table = self._then(plan, table, clock)
        except DeadlineExceeded as stopped:
            # Whether a query ends before its deadline depends on its running time, which the analyst
            # sees anyway: the stop is a function of that time and tells nothing it does not. Spent.
            self._ledger.fail(ticket)
            raise DeadlineExceeded("DP901", f"{stopped.message}; its budget stays spent",
                                   hint="ask for less, or ask the data owner for a longer deadline") from None
        except (duckdb.Error, pa.ArrowException, ValueError, OverflowError):
            # No engine detail: it could depend on the data. The spend stays recorded.
            self._ledger.fail(ticket)
            raise ExecutionError("DP900", "the query failed while running; its budget stays spent") from None
        except BaseException:
            self._ledger.fail(ticket)
            raise
        self._ledger.release(ticket, replay.stored(table, plan))
        return Result(table, plan)

    def _exact(self, plan: PublicPlan | LocalPlan, analyst: str | None, clock: Deadline) -> Result:
        """A query over public tables only: no person's data, so answered exactly and charged nothing; or
        a local-model count (plan/local.py): the randomized reports counted, then debiased, which costs
        no central budget. Recorded in the history at epsilon 0, without its answer (nothing to replay:
        running it again gives the same rows). Public data: an engine error's message is safe to show,
        and so are its stops (the deadline, more rows than ``limits.max_rows``); a local-model table's
        is not, and the counting query cannot fail on any row (plan/local.py), so it never shows one."""
        public = isinstance(plan, PublicPlan)
        spent = "public tables only: nothing was spent" if public else "local model: nothing was spent"
        bound = self._engine.bind(plan.rewritten_sql)
        ticket = self._ledger.reserve(ZERO, sql=replay.normalise_sql(plan.sql)[0], plan=plan.summary,
                                      data_version=self._data_version, analyst=analyst, releases=())
        try:
            table = self._engine.run(bound, clock, max_rows=self.limits.max_rows)
        except (duckdb.Error, pa.ArrowException, ValueError, OverflowError) as e:
            self._ledger.fail(ticket)
            first = (str(e).splitlines()[0] if str(e) else type(e).__name__) if public else "no detail (private data)"
            raise ExecutionError("DP900", f"the query failed while running: {first}", hint=spent) from None
        except DeadlineExceeded as stopped:
            self._ledger.fail(ticket)
            raise DeadlineExceeded("DP425", stopped.message, hint=f"{spent}; ask for "
                                   "less (fewer rows, fewer joined tables) or retry later") from None
        except BaseException:
            self._ledger.fail(ticket)
            raise
        self._ledger.release(ticket, None)
        return Result(table if isinstance(plan, PublicPlan) else plan.answer(table), plan)

    def close(self) -> None:
        """Close the engine's connection (dpsql owns it once connected)."""
        self._engine.close()

    def __enter__(self) -> "PrivateConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def budget(self) -> Budget:
        """Total, spent and remaining (epsilon, delta), and the ledger's per-query history."""
        return self._ledger.budget()

    def analyst(self, name: str | None = None, *, token: str | None = None) -> "AnalystView":
        """This connection as one analyst sees it (what ``dpsql serve`` runs for a token): their queries
        charged to their budget and the total, their own budget, history and answers; no trusted knob.

        Args:
            name: the analyst, for the owner's own jobs run as them; or
            token: the analyst's token, as a server receives it.
        Raises:
            AuthError (DP407): no such analyst, a revoked one, or an unknown token (the same error).
        """
        if (name is None) == (token is None):
            raise InvalidParameter("DP401", "pass an analyst's name or their token, not both")
        if token is not None:
            name = self._ledger.authenticate(token)
        else:
            self._ledger.budget(analyst=name)   # an unknown name fails here, not at the first query
        return AnalystView(self, name)


class AnalystView:
    """One analyst's side of a connection: ``sql``/``explain``/``budget`` as theirs (see
    ``PrivateConnection.analyst``); ``answer`` replays one of their released answers, free."""

    def __init__(self, db: PrivateConnection, name: str):
        self._db = db
        self.name = name

    def sql(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
            fresh: bool = False, ci: float | None = None, nonnegative: bool = True,
            deadline: float | None = None, mechanism: str | None = None, report_clipping: bool = False) -> Result:
        return self._db.sql(sql, epsilon, delta, fresh=fresh, ci=ci, nonnegative=nonnegative, analyst=self.name,
                            deadline=deadline, mechanism=mechanism, report_clipping=report_clipping)

    def explain(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
                ci: float | None = None, nonnegative: bool = True, deadline: float | None = None,
                mechanism: str | None = None, report_clipping: bool = False) -> Plan | PublicPlan | LocalPlan:
        return self._db.explain(sql, epsilon, delta, ci=ci, nonnegative=nonnegative, deadline=deadline,
                                analyst=self.name, mechanism=mechanism, report_clipping=report_clipping)

    @property
    def budget(self) -> Budget:
        """The analyst's own budget, spent, remaining and history."""
        return self._db._ledger.budget(analyst=self.name)

    @property
    def totals(self) -> Budget:
        """``budget`` without the history (what every answer reports; its cost does not grow with it)."""
        return self._db._ledger.totals(analyst=self.name)

    def answer(self, charge_id: int) -> pa.Table | None:
        """The answer of one of this analyst's released queries (None for any other id)."""
        found = self.stored(charge_id)
        return None if found is None else found[0]

    def stored(self, charge_id: int) -> tuple[pa.Table, float | None] | None:
        """``answer``, and the confidence level of its intervals (None: none, or not recorded)."""
        table = self._db._ledger.answer(charge_id, analyst=self.name)
        return None if table is None else replay.unstored(table)


def connect(con_or_path=None, policy: str | Path | Mapping | None = None, ledger=None,
            rng: np.random.Generator | randomness.RandomSource | None = None, *,
            data_version: str | None = None, limits: WorkLimits | None = None) -> PrivateConnection:
    """Open a differentially private connection over DuckDB, files or DataFrames.

    Args:
        con_or_path: where the data is (dpsql reads files and DataFrames itself, before the lock-down):
            a DuckDB database file (opened read-only); a ``duckdb`` connection (handed over: dpsql locks
            it down; its tables, views, TEMP tables and registered DataFrames); a Parquet or CSV file
            (one table: the policy's table without a ``source:``, or the one named like the file); a
            dict ``{"people": df, "visits": "visits.parquet"}`` of pandas/polars DataFrames, Arrow tables
            or Parquet/CSV paths; one DataFrame (one table); or None (every table from its ``source:``).
        policy: the data owner's policy, a YAML path or a dict (see docs/architecture.md and README).
        ledger: the SQLite file that records every spend, across processes and crashes. Default for a
            database or data file: ``<file>.dpsql-ledger.sqlite`` beside it. Other data has no file, so
            it needs ``ledger=`` a path, or ``":memory:"`` (this connection only).
        rng: trusted callers only (tests): a seeded ``numpy.random.Generator``; default the OS CSPRNG.
        data_version: names the data behind a connection object or DataFrames, so identical queries are
            replayed across connections to the same data; default a per-connection token. Files (a
            database, sources) are named by their identities (engines/versions.py).
        limits: what one request may ask (``dpsql.limits.WorkLimits``: SQL size, outputs, tables, rows of
            an answer, a default deadline); see README, "Limits".
    Raises:
        PolicyError: the policy is invalid or does not match the data (DP501, DP502), the database
            cannot be opened or locked down (DP503), a source cannot be read (DP505).
        LedgerError: no ledger for data without a file (DP403), or the ledger belongs to another
            policy (DP404), is locked (DP405) or is corrupt (DP406).
    Example:
        >>> db = dpsql.connect("people.duckdb", policy="policy.yaml")  # doctest: +SKIP
        >>> db = dpsql.connect({"people": df}, policy="policy.yaml", ledger="budget.sqlite")  # doctest: +SKIP
    """
    if policy is None:
        raise TypeError("connect() needs policy=: the data owner's policy (a YAML path or a dict)")
    pol = load_policy(policy)
    if data_version is not None and not isinstance(data_version, str):
        raise InvalidParameter("DP401", f"data_version must be a string, got {data_version!r}")
    home = _ledger_home(con_or_path)
    if ledger is None and home is None:
        raise ledgers.LedgerError(
            "DP403", f"{_what(con_or_path)} has no database file to keep the budget ledger beside",
            hint="pass ledger=\"budget.sqlite\" (persistent) or ledger=\":memory:\" (this connection only: "
                 "the budget starts afresh with every connection)")
    engine = DuckDBEngine.open(con_or_path, pol)
    try:
        read = engine.read_sources(pol)   # before the lock-down: dpsql reads the files itself
        stable = None if engine.opaque else versions.file_data_version(engine.path, read)   # after the read-only open
        bound = engine.bind_policy(pol, f"__dpsql_keys_{secrets.token_hex(6)}", stable)
        engine.lock_down()
        if data_version is not None or stable is None:
            stable = versions.connection_data_version(data_version, read)
        engine.check_unchanged()   # the files are those the version names
        # The ledger binds to the policy as written, not as bound to the schema.
        book = ledgers.Ledger(ledgers.default_ledger_path(home) if ledger is None else ledger, pol)
    except BaseException:
        if not engine.handed_over:
            engine.close()
        raise
    return PrivateConnection(engine, bound, book, rng, data_version=stable, limits=limits)


def _ledger_home(con_or_path) -> str | None:
    """The file a default ledger lives beside: a database or data file (not a glob), else None."""
    if not isinstance(con_or_path, (str, Path)) or any(ch in str(con_or_path) for ch in "*?["):
        return None
    return str(con_or_path)


def _what(con_or_path) -> str:
    if isinstance(con_or_path, duckdb.DuckDBPyConnection):
        return "a DuckDB connection object"
    if con_or_path is None or isinstance(con_or_path, (str, Path)):
        return "data read from sources or a glob"
    return "in-memory data (DataFrames)"


__all__ = ["connect", "PrivateConnection", "Result", "DpsqlError"]
