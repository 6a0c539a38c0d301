"""The planner: SQL text to a Plan, with the plan cache, the stages and the automatic bounds.

One of the connection's three parts (this plans, api/executor.py runs, api/accountant.py charges).
Planning reads no private data and spends nothing itself: the engine's reads it makes are of public
data (api/reads.py), once per reader. Automatic bounds (``bounds: auto``, ``max_groups_per_unit:
auto``) are the one exception, and not its own: it asks ``histogram`` (the connection's ``sql``: an
ordinary DP query, charged to the caller and replayed free for the data version) and plans again.
"""
from __future__ import annotations

import dataclasses
import functools
import sqlglot
import sqlglot.errors
from typing import Callable

from dpsql.api import auto_bounds, auto_contributions
from dpsql.api.plan_cache import Entry, PlanCache, key as plan_key
from dpsql.api.reads import Reads
from dpsql.api.replay import noisy_values_sql
from dpsql.api.result import Result
from dpsql.engines.base import Engine
from dpsql.errors import DpsqlError, ExecutionError, InvalidParameter, NeedsBounds, SqlSyntaxError, UnsupportedConstruct
from dpsql.frontend import size
from dpsql.frontend.arg_max import arg_max, named_lookup
from dpsql.frontend.flatten import flatten
from dpsql.frontend.fold import fold_constants
from dpsql.frontend.joins import relate
from dpsql.frontend.local import local_query
from dpsql.frontend.mode import mode_as_top_one
from dpsql.frontend.names import output_names
from dpsql.frontend.parse import parse
from dpsql.frontend.per_person import per_person
from dpsql.frontend.public import public_only
from dpsql.frontend.stages import Stages, public_stage, repointed, split
from dpsql.frontend.validate import validate
from dpsql.limits import WorkLimits
from dpsql.mechanisms.base import PURE_NOISE
from dpsql.plan.allocation import check_budget_parameters
from dpsql.plan.build import build_plan
from dpsql.plan.local import LocalPlan, local_plan
from dpsql.plan.model import Plan, PublicStage, Stage
from dpsql.plan.public import PublicPlan, public_plan
from dpsql.lower.rewrite import rewrite
from dpsql.policy.model import Policy, TablePolicy
from dpsql.sql.positions import span

# A DP query run for the automatic bounds: the connection's ``sql`` (charged to the caller).
Histogram = Callable[..., Result]
AnyPlan = Plan | PublicPlan | LocalPlan


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


def _duckdb_names(parsed, sql: str, policy: Policy, expression_name: Callable[[str], str | None]) -> list[str | None]:
    """The output names plain DuckDB gives the query as written (issue 25, item 1): aliases and columns
    by frontend/names.py, other expressions printed by DuckDB's parser (None: it could not; the plan's
    own name stays). Read before the passes below rename columns; a function of the text alone."""
    names = output_names(parsed, policy.tables)
    return [name if name is not None else expression_name(_as_written(item.unalias(), sql))
            for name, item in zip(names, parsed.expressions)]


def _as_written(item: sqlglot.exp.Expression, sql: str) -> str:
    """The expression's own text in ``sql`` where it reads back as the same expression, else sqlglot's
    print of it: DuckDB names what was written, and sqlglot drops some of it (``SUM( + 1)``, DuckDB's
    ``sum((+(1)))``, prints as ``SUM(1)``). A span that misses a token (a leading ``-`` or parenthesis)
    reads back as another expression, or not at all, and is not used."""
    printed = item.sql(dialect="duckdb")
    start, end = span(item, sql)
    if start is None or end is None:
        return printed
    written = sql[start:end + 1]
    if written == printed:
        return written
    try:
        same = sqlglot.parse_one(written, read="duckdb") == sqlglot.parse_one(printed, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return printed
    return written if same else printed


class Planner:
    """SQL text to plans for one connection: its policy (with the automatic bounds chosen so far), its
    limits, its noise function's name and its values' table (api/executor.py), one plan cache."""

    def __init__(self, engine: Engine, policy: Policy, limits: WorkLimits, noise_function: str,
                 values_table: str, histogram: Histogram | None = None):
        self.policy = policy
        self.limits = limits
        self.noise_function = noise_function
        self.values_table = values_table
        self.histogram = histogram
        self.reads = Reads(engine)
        self.plans = PlanCache()
        # ``bounds: auto`` columns: chosen once per connection (and paid once per data version: the
        # histogram query replays), kept here and put in place of the declared policy's missing bounds.
        self._declared_policy = policy
        self._auto_columns = [(t.name, c.name) for t in policy.tables.values() for c in t.columns.values() if c.auto]
        self._auto_bounds: dict[tuple[str, str], tuple[float, float]] = {}
        # ``max_groups_per_unit: auto`` and ``max_rows_per_unit: auto``: (L, C) chosen per query text
        # likewise (api/auto_contributions.py); None where the query's bound is not automatic.
        self.auto_limits: dict[str, tuple[int | None, int | None]] = {}

    def planned(self, sql: str, epsilon, delta, ci, nonnegative: bool, analyst: str | None,
                deadline: float | None, mechanism: str | None = None, report_clipping: bool = False) -> Entry:
        """The plan of this call, from the analyst's plan cache (api/plan_cache.py) when asked before."""
        limits = self.auto_limits.get(sql)
        call = plan_key(sql, epsilon, delta, ci, nonnegative, mechanism, limits, report_clipping)
        return self.plans.lookup(analyst, call, lambda: self.lowered(
            sql, epsilon, delta, ci=ci, nonnegative=nonnegative, reader=analyst, deadline=deadline,
            mechanism=mechanism, limits=limits, report_clipping=report_clipping))

    def twin(self, sql: str, *args) -> Entry | None:
        """``planned`` with OPTIONS(top_k = 'noisy_values') (api/replay.py ``noisy_values_sql``), or None
        where there is none or it does not plan (api/accountant.py ``preferred``)."""
        text = noisy_values_sql(sql)
        if text is None:
            return None
        try:
            return self.planned(text, *args)
        except DpsqlError:
            return None

    def planned_with_bounds(self, sql: str, epsilon, delta, ci, nonnegative: bool, analyst: str | None,
                            deadline: float | None, mechanism: str | None, report_clipping: bool = False) -> Entry:
        """``planned``, after choosing the automatic bounds it needs (api/auto_bounds.py,
        api/auto_contributions.py): each one is a DP query of its own, charged to this caller, then
        the query is planned again."""
        for _ in range(len(self._auto_columns) + 2):
            try:
                return self.planned(sql, epsilon, delta, ci, nonnegative, analyst, deadline, mechanism,
                                    report_clipping)
            except NeedsBounds as need:
                for table, column in need.columns:
                    self._choose_bounds(table, column, analyst, deadline)
                if need.contributions:
                    self._choose_contributions(sql, need, analyst, deadline)
        return self.planned(sql, epsilon, delta, ci, nonnegative, analyst, deadline, mechanism, report_clipping)

    def _histogram(self, text: str, epsilon: float, analyst: str | None,
                   deadline: float | None) -> tuple[dict, tuple[float, float]]:
        """A bounds histogram asked as any DP query (charged, or replayed for free once paid for this
        data version): its noisy counts by bin (a tuple of bins when it has several keys), and the
        thresholds its plan gives."""
        assert self.histogram is not None, "the connection gives its planner the way to ask a histogram"
        result = self.histogram(text, epsilon=epsilon, delta=0.0, mechanism=PURE_NOISE.option, analyst=analyst,
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
        self.auto_limits[sql] = (L if "groups" in waiting else None, C if "rows" in waiting else None)

    def lowered(self, sql: str, epsilon: float | None, delta: float | None, *, ci: float | None = None,
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
            staged = split(parsed, sql, self.policy, self.values_table) if stages == 1 else None
            if staged is not None:
                plan_stage = functools.partial(self.lowered, ci=ci, nonnegative=nonnegative, reader=reader,
                                               deadline=deadline, mechanism=mechanism,
                                               noise_function=noise_function, **lowering)
                return self._staged(staged, sql, epsilon, delta, plan_stage, report_clipping)
            if public_only(parsed, policy):
                return public_plan(parsed, sql, policy)
            local = local_query(parsed, policy)
            if local is not None:   # a count of a randomized column's reports (frontend/local.py): no central noise
                return local_plan(local, sql, policy, ci, nonnegative)
            names = _duckdb_names(parse(named_by) if named_by else parsed, named_by or sql, policy,
                                  self.reads.engine.expression_name)
            parsed, lookup = arg_max(parsed, policy)   # the row of the largest private total: a top-1
            statement, policy = per_person(parsed, sql, policy)
            statement, policy = relate(flatten(statement, sql), sql, policy)
            statement = mode_as_top_one(fold_constants(statement, sql), sql)
            policy = self.reads.public_bounds(statement, sql, policy, reader, deadline)
            scope = self.reads.public_keys(statement, validate(statement, sql, policy), reader, deadline)
            if limits is not None:   # automatic L and C, chosen for this query
                scope = auto_contributions.applied(scope, *limits)
            self.reads.check_lookups(scope.table, policy, reader, deadline)
            eps = _choose("epsilon", epsilon, scope.options.epsilon, self.policy.default_epsilon)
            dlt = _choose("delta", delta, scope.options.delta, self.policy.default_delta)
            if stages > 1:   # a stage's share (checked by _staged: DP401 before the division)
                eps, dlt = eps / stages, dlt / stages
            plan = build_plan(statement, scope, epsilon=eps, delta=dlt, confidence=ci,
                              nonnegative=nonnegative, mechanism=mechanism, names=names, report_clipping=report_clipping)
            size.check_groups(plan.partitions, statement, sql, self.limits)
            if lookup is not None:   # the top-1's outputs under DuckDB's names, as every other output
                plan = dataclasses.replace(plan, lookup=named_lookup(lookup, names))
            return rewrite(plan, noise_function or self.noise_function, **lowering)
        except RecursionError:
            raise UnsupportedConstruct("DP102", "the query is nested too deeply") from None
        except sqlglot.errors.ParseError:   # a node sqlglot parsed and cannot write (frontend/parse.py)
            raise SqlSyntaxError("DP100", "syntax error: sqlglot cannot write a part of the query again", sql=sql,
                                 hint="check each function call has its arguments") from None

    def _staged(self, staged: Stages, sql: str, epsilon: float | None, delta: float | None, plan_stage,
                report_clipping: bool = False) -> Plan:
        """A query with scalar subqueries over private data (frontend/stages.py): each planned as a query of
        its own, then the query with NULL in their places (the values come when it runs: api/executor.py ``run``);
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
        tried = plan_stage(staged.probe_sql(), eps, dlt, stages=2, named_by=sql)
        release = plan_stage(text, eps, dlt)
        if not isinstance(last, PublicPlan) or not isinstance(tried, PublicPlan) or not isinstance(release, Plan):
            raise public_stage(sql)
        return dataclasses.replace(release, sql=sql, then=PublicStage(last, staged.values, text, tried))

    def last_stage(self, sql: str, plan: Plan, values: list, options: dict) -> Plan:
        """The last stage planned again with the earlier stages' released values in place of the subqueries:
        post-processing of those releases, so a refusal here depends on them alone (spent: DP900)."""
        staged = split(parse(sql), sql, self.policy, self.values_table)
        assert staged is not None
        try:
            final = self.lowered(staged.outer_sql(values), plan.epsilon, plan.delta, stages=len(plan.stages) + 1,
                                  named_by=sql, **options)
        except DpsqlError as err:
            raise ExecutionError("DP900", f"the query could not be planned with its subqueries' released values "
                                 f"({err.code}); its budget stays spent") from None
        if not isinstance(final, Plan) or final.releases() != dataclasses.replace(plan, stages=()).releases():
            raise ExecutionError("DP999", "the last stage's releases changed with its subqueries' values: this is "
                                 "probably a bug; its budget stays spent")
        return final
