"""The analyst-facing connection: SQL text in, noisy materialised results out, budget charged once.

Composed of three parts (docs/architecture.md): the planner (api/planner.py: text to a Plan, with the
plan cache, the stages, the automatic bounds), the accountant (api/accountant.py: costs, replay keys,
reserve / fail / release through the ledger) and the executor (api/executor.py: bound plans to released
tables, the noise). One query (``sql``)::

    plan -> [bind] -> reserve(one) -> execute (noise in DuckDB) -> release

a batch (``sql_batch``, api/batch.py): plan all, allocate once, reserve all at once, then each run
and released.
"""
from __future__ import annotations

import dataclasses
import secrets
import weakref
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from dpsql.mechanisms import randomness
from dpsql.accounting.budget import Budget
from dpsql.accounting import ledger as ledgers
from dpsql.errors import DpsqlError, InvalidParameter
from dpsql.plan.model import Plan
from dpsql.plan.public import PublicPlan
from dpsql.plan.local import LocalPlan
from dpsql.limits import Deadline, WorkLimits, check_seconds
from dpsql.policy.loading import load_policy
from dpsql.policy.model import Policy
from dpsql.engines import versions
from dpsql.engines.base import Engine
from dpsql.engines.open import described, open_engine
from dpsql.api import replay
from dpsql.api.accountant import Accountant, charge_by
from dpsql.api.batch import Answers, Batch, Call, charged_run
from dpsql.api.executor import Executor, held
from dpsql.api.planner import Planner
from dpsql.api.result import Result
from dpsql.api.statements import Statement
from dpsql.api.budget_note import budget_note


class PrivateConnection:
    """Answers aggregate SQL with differential privacy over a locked-down engine (DuckDB today).

    Use ``dpsql.connect`` to make one.
    """

    def __init__(self, engine: Engine, policy: Policy, ledger: ledgers.Ledger,
                 rng: np.random.Generator | randomness.RandomSource | None = None, *, data_version: str | None = None,
                 limits: WorkLimits | None = None):
        self._engine = engine
        self.limits = limits or WorkLimits()   # what one request may ask (dpsql/limits.py)
        # The three parts (docs/architecture.md): the executor owns the noise, so it names the function
        # the planner's lowering calls; the planner asks this connection's ``sql`` for automatic bounds.
        self._executor = Executor(engine, self.limits, rng)
        # The planner asks the histograms through a weak reference: a strong one would make a cycle, and
        # this connection (its ledger's file) would be closed by the cycle collector at any later time.
        sql = weakref.WeakMethod(self.sql)
        self._planner = Planner(engine, policy, self.limits, self._executor.noise_function,
                                self._executor.values_table, histogram=lambda *a, **k: sql()(*a, **k))
        self._accountant = Accountant(ledger, data_version or versions.connection_data_version())
        # The engine's registered functions hold the executor for the engine's life, and through it this
        # connection (its ledger) as when they were the connection's own methods: a connection that is
        # no longer referenced keeps its ledger open until the process ends, never closed at a moment
        # the cycle collector picks (closing the last SQLite connection rewrites the file's header).
        self._executor.owner = self
        # pyarrow loads its compute functions on first use (0.7 s): load them now, not in the first
        # DP query, whose time would tell its analyst that nobody had run one (a shared cache).
        pa.array([None], type=pa.int64()).fill_null(0)

    @property
    def policy(self) -> Policy:
        """The policy queries are planned under: the owner's, bound to the catalog, with the automatic
        bounds chosen so far."""
        return self._planner.policy

    @property
    def _ledger(self) -> ledgers.Ledger:
        return self._accountant.ledger

    @property
    def ledger(self) -> ledgers.Ledger:
        """The owner's ledger (a release reads its charges, their answers and whether a release fits).
        In-process only: whoever holds this connection holds the data; an analyst's view has none."""
        return self._accountant.ledger

    @property
    def data_version(self) -> str:
        """The version of the data this connection answers from (engines/versions.py), part of every
        replay key. The owner's: it may hold a digest of the data's files, so never show it as is."""
        return self._accountant.data_version

    def plan(self, sql: str, epsilon: float | None = None, delta: float | None = None, *,
             ci: float | None = None, nonnegative: bool = True, mechanism: str | None = None,
             report_clipping: bool = False) -> Plan | PublicPlan | LocalPlan:
        """parse -> flatten -> validate -> plan -> rewrite. Pure with respect to the budget: spends nothing."""
        return self._planner.planned(sql, epsilon, delta, ci, nonnegative, None, self._seconds(None), mechanism,
                                     report_clipping).plan

    def _seconds(self, seconds: float | None) -> float | None:
        """A call's deadline: its own seconds (checked, DP401), else the connection's (``limits.deadline``)."""
        return check_seconds(seconds) if seconds is not None else self.limits.deadline

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
        seconds = self._seconds(deadline)
        planned = self._planner.planned(sql, epsilon, delta, ci, nonnegative, analyst, seconds, mechanism,
                                        report_clipping)
        planned = self._accountant.preferred(planned, lambda: self._planner.twin(   # the plan that would run
            sql, epsilon, delta, ci, nonnegative, analyst, seconds, mechanism, report_clipping), analyst, False)
        plan = planned.plan
        if isinstance(plan, (PublicPlan, LocalPlan)):   # spends nothing: no budget to show
            return plan
        # The remaining budget (the analyst's own, or the total) and whether this would fit: read only.
        return dataclasses.replace(plan, budget_note=budget_note(
            self._ledger, plan, analyst, lambda: self._accountant.replay_note(planned, analyst)))

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
        planned = self._planner.planned_with_bounds(sql, epsilon, delta, ci, nonnegative, analyst, seconds, mechanism,
                                                    report_clipping)
        planned = self._accountant.preferred(planned, lambda: self._planner.twin(
            sql, epsilon, delta, ci, nonnegative, analyst, seconds, mechanism, report_clipping), analyst, fresh)
        # plan -> reserve(one) -> execute -> release. Bind, charge and run in one turn of the engine
        # (shared fairly between analysts): once a query is charged it runs at once, never waits
        # behind another analyst's.
        with self._engine.turn(analyst, seconds) as clock, self._engine.holding(held(planned.plan)):
            if isinstance(planned.plan, (PublicPlan, LocalPlan)):
                return self._exact(planned.plan, analyst, clock)
            plan = planned.plan
            bound = self._executor.check(plan, clock)   # before the charge: a binder error spends nothing
            order = self._accountant.order(sql, planned, fresh)
            charge_by(clock)
            ticket = self._accountant.reserve(order, analyst)
            if ticket.answer is not None:
                return Result(replay.unstored(ticket.answer)[0], plan, replayed=True)
            options = dict(ci=ci, nonnegative=nonnegative, reader=analyst, deadline=seconds, mechanism=mechanism,
                           report_clipping=report_clipping)
            return Result(charged_run(self._planner, self._accountant, self._executor, sql, plan, ticket,
                                      lambda: bound, clock, options), plan, replayed=ticket.free)

    def sql_batch(self, statements: Sequence[str | Statement], epsilon: float | None = None,
                  delta: float | None = None, *, fresh: bool = False, ci: float | None = None,
                  nonnegative: bool = True, analyst: str | None = None, deadline: float | None = None,
                  mechanism: str | None = None, report_clipping: bool = False, shared_scans: bool = True) -> Answers:
        """Answer a batch of statements under one budget, reserved all at once (api/batch.py).

        Args:
            statements: SQL strings, or ``Statement(sql, name=..., epsilon=... or weight=...)``; unnamed
                ones are named by their place ("1", "2", ...).
            epsilon, delta: the batch's budget: explicit epsilons (deltas) first, the rest split by
                weight (default 1); None: each statement its own (its OPTIONS or the policy's default).
            deadline: seconds of each turn of the engine (the binding and charge, then each statement).
            fresh, ci, nonnegative, mechanism, report_clipping, analyst: as ``sql``, for every statement.
            shared_scans: statements that read one frame (table, WHERE, GROUP BY keys, L, C) run as one
                engine query, each released as alone (lower/shared.py); False: each on its own.
        Returns:
            Answers: by name, each statement's Result (``replayed`` when it cost nothing); one that failed
            while running raises its error when read (``answers.failed``), and stays spent.
        Raises:
            DpsqlError: a statement refused (named; nothing spent), a bad allocation (DP426), or
            BudgetExceeded: the batch does not fit (nothing spent, the ledger as it was).
        Example:
            >>> db.sql_batch(["SELECT COUNT(*) FROM people", dpsql.Statement("SELECT ...", weight=3)],
            ...              epsilon=1.0)  # doctest: +SKIP
        """
        if not isinstance(fresh, bool):
            raise InvalidParameter("DP401", f"fresh must be True or False, got {fresh!r}")
        if not isinstance(shared_scans, bool):
            raise InvalidParameter("DP401", f"shared_scans must be True or False, got {shared_scans!r}")
        call = Call(analyst, self._seconds(deadline), fresh, ci, nonnegative, mechanism, report_clipping, shared_scans)
        return Batch(self._engine, self._planner, self._accountant, self._executor).answer(
            statements, epsilon, delta, call)

    def _exact(self, plan: PublicPlan | LocalPlan, analyst: str | None, clock: Deadline) -> Result:
        """A query over public tables only: no person's data, so answered exactly and charged nothing; or
        a local-model count (plan/local.py): the randomized reports counted, then debiased, which costs
        no central budget. Recorded in the history at epsilon 0, without its answer (api/accountant.py
        ``settle_exact``)."""
        bound = self._executor.bind_exact(plan)
        ticket = self._accountant.reserve(self._accountant.exact_order(plan), analyst)
        table = self._accountant.settle_exact(ticket, plan, lambda: self._executor.run_exact(bound, clock))
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

    def sql_batch(self, statements: Sequence[str | Statement], epsilon: float | None = None,
                  delta: float | None = None, *, fresh: bool = False, ci: float | None = None,
                  nonnegative: bool = True, deadline: float | None = None, mechanism: str | None = None,
                  report_clipping: bool = False) -> Answers:
        return self._db.sql_batch(statements, epsilon, delta, fresh=fresh, ci=ci, nonnegative=nonnegative,
                                  analyst=self.name, deadline=deadline, mechanism=mechanism,
                                  report_clipping=report_clipping)

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
    """Open a differentially private connection over DuckDB, files, DataFrames or a Spark session.

    Args:
        con_or_path: where the data is (dpsql reads files and DataFrames itself, before the lock-down):
            a DuckDB database file (opened read-only); a ``duckdb`` connection (handed over: dpsql locks
            it down; its tables, views, TEMP tables and registered DataFrames); a Parquet or CSV file
            (one table: the policy's table without a ``source:``, or the one named like the file); a
            dict ``{"people": df, "visits": "visits.parquet"}`` of pandas/polars DataFrames, Arrow tables
            or Parquet/CSV paths; one DataFrame (one table); or None (every table from its ``source:``); or a
            ``pyspark.sql.SparkSession`` (engines/spark.py: the session's tables and views of the policy's
            names, or its ``source:`` paths read by Spark; the exact stage runs on Spark, the noise in this
            process; ``pip install 'dpsql[spark]'``).
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
            "DP403", f"{described(con_or_path)} has no database file to keep the budget ledger beside",
            hint="pass ledger=\"budget.sqlite\" (persistent) or ledger=\":memory:\" (this connection only: "
                 "the budget starts afresh with every connection)")
    engine = open_engine(con_or_path, pol)
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


__all__ = ["connect", "PrivateConnection", "Result", "DpsqlError", "Statement", "Answers"]
