"""A batch: N statements under one budget, planned together, reserved at once, run one by one.

The connection's ``sql_batch`` (and, later, a release's ``dpsql.publish``) runs through the same three
parts as ``sql`` (api/planner.py, api/accountant.py, api/executor.py):

1. every statement planned (a refusal of any refuses the batch before anything is spent, naming the
   statement); the batch's budget allocated once (``allocate``: explicit epsilons, the rest by weight);
2. every statement bound, then all charged in ONE ledger transaction (``Ledger.reserve_many``): all or
   nothing, so a batch that does not fit leaves the ledger as it was;
3. each run in its own turn of the engine (so another analyst waits at most one statement, or one
   shared query) and released; one that fails while running stays spent (as one query does) and the
   others still run. Statements that read one frame (the same table, WHERE, GROUP BY keys, L and C;
   lower/shared.py) run as ONE engine query over one scan, each with exactly the release it gets
   alone: bound before the charge with the rest (a shared query that does not bind, or a statement
   it cannot take, runs alone as before), noised from the executor's one source. ``shared_scans=False``
   runs every statement alone.

The ledger holds one charge per statement, not one charge with N releases: each keeps its own SQL,
answer, replay key and outcome, so replay and a failure are per statement, as for ``sql``. Privacy is
the same either way: every accountant composes the rows' releases (basic sums them, zCDP adds their
rho, PLD composes their distributions), and a composition does not depend on how releases are grouped
into rows. A statement identical to an answered one (the same replay key) replays free, and so does a
repeat of an earlier statement of the same batch (unless ``fresh``).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import pyarrow as pa

from dpsql.accounting.ledger import Ticket
from dpsql.api import replay
from dpsql.api.accountant import Accountant, Order, charge_by
from dpsql.api.executor import Bound, Executor, held
from dpsql.api.plan_cache import Entry
from dpsql.api.planner import Planner
from dpsql.api.result import Result
from dpsql.api.statements import Statement, allocate, statements
from dpsql.engines.base import Engine
from dpsql.engines.failures import ENGINE_ERRORS
from dpsql.errors import DpsqlError, ExecutionError, NeedsBounds
from dpsql.limits import Deadline
from dpsql.lower import shared
from dpsql.plan.local import LocalPlan
from dpsql.plan.model import Plan


def named(err: DpsqlError, name: str) -> DpsqlError:
    """A statement's refusal, naming the statement (its code and position kept: they point into its SQL)."""
    err.message = f"statement {name!r} of the batch: {err.message}"
    err.statement = name
    return err


class Answers(Mapping[str, Result]):
    """A batch's answers by statement name, in the batch's order: ``answers[name]`` is its Result, or
    raises the error of a statement that failed while running (its spend stays recorded)."""

    def __init__(self, names: list[str], results: dict[str, Result], failed: dict[str, DpsqlError]):
        self.names, self.results, self.failed = names, results, failed

    def __getitem__(self, name: str) -> Result:
        if name in self.failed:
            raise self.failed[name]
        return self.results[name]

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"Answers({len(self.results)} answered, {len(self.failed)} failed)"


def charged_run(planner: Planner, accountant: Accountant, executor: Executor, sql: str, plan: Plan,
                ticket: Ticket, bind: Callable[[], Bound], clock: Deadline, options: dict) -> pa.Table:
    """A charged plan bound (``bind``), run by the executor in the caller's turn and settled by the
    accountant: released with its answer, or failed and still spent; a charge of measurements by identity
    runs with those it replays (accounting/released.py). ``options``: the call's, to plan a last stage
    again with its earlier stages' values (``Planner.last_stage``)."""
    replan = functools.partial(planner.last_stage, sql, plan, options=options)

    def run() -> pa.Table:
        try:
            bound = bind()
        except DpsqlError:   # it bound before the charge: a function of the schema, never of rows
            raise ExecutionError("DP900", "the query could not be bound again to run; its budget stays "
                                 "spent") from None
        return executor.run(plan, bound, clock, replan, ticket.kept if ticket.identities else None)
    return accountant.settle(ticket, plan, run)


@dataclass(frozen=True)
class Call:
    """What a batch asks beyond its statements: the analyst (None: the owner), the deadline of each of
    its turns, new noise for all (``fresh``), and ``sql``'s options for every statement."""
    analyst: str | None = None
    seconds: float | None = None
    fresh: bool = False
    ci: float | None = None
    nonnegative: bool = True
    mechanism: str | None = None
    report_clipping: bool = False
    shared_scans: bool = True   # statements of one frame run as one query (lower/shared.py)

    def replan_options(self) -> dict:
        return dict(ci=self.ci, nonnegative=self.nonnegative, reader=self.analyst, deadline=self.seconds,
                    mechanism=self.mechanism, report_clipping=self.report_clipping)


@dataclass(frozen=True)
class Group:
    """Statements (their places in the batch) answered by one shared query (lower/shared.py)."""
    members: tuple[int, ...]
    query: shared.Shared


class Batch:
    """One connection's batch path, over its engine and its three parts (see the module docstring)."""

    def __init__(self, engine: Engine, planner: Planner, accountant: Accountant, executor: Executor):
        self.engine, self.planner, self.accountant, self.executor = engine, planner, accountant, executor

    def answer(self, given: Sequence[str | Statement], epsilon: float | None, delta: float | None,
               call: Call) -> Answers:
        batch = statements(given)
        shares = allocate(batch, epsilon, delta)
        entries = self._plan_all(batch, shares, call)
        with self.engine.turn(call.analyst, call.seconds) as clock:
            orders = [self._order(s, e, call.fresh, clock) for s, e in zip(batch, entries)]
            first: dict[str, int] = {}
            repeats = {i: first.setdefault(o.replay_key, i) for i, o in enumerate(orders)
                       if o.replay_key is not None and not call.fresh}
            charged = [i for i in range(len(batch)) if repeats.get(i, i) == i]
            groups = self._groups(entries, charged) if call.shared_scans and self.engine.one_query else []
            charge_by(clock)
            made = self.accountant.reserve_many([orders[i] for i in charged], call.analyst)
        tickets = dict(zip(charged, made))
        # A replayed statement is not run; one replaying kept measurements (accounting/released.py) runs
        # alone, from those values: a shared query draws every measurement afresh, which its charge (0,
        # or only the new ones' cost) does not pay for.
        drawn = [i for i in charged if tickets[i].answer is None and not any(k is not None for k in tickets[i].kept)]
        if any(i not in drawn for g in groups for i in g.members):
            with self.engine.turn(call.analyst, call.seconds):   # bound after the charge: if not, they run alone
                groups = self._groups(entries, drawn)
        return self._run_all(batch, entries, tickets, {i: j for i, j in repeats.items() if i != j}, call, groups)

    def _groups(self, entries: list[Entry], indices: list[int]) -> list[Group]:
        """The statements of ``indices`` that share a query (lower/shared.py ``groups``), each shared query
        built and bound; one that does not bind is dropped (its statements were each bound: they run
        alone, and a binder error is a function of the SQL and the schema only)."""
        plans = [entries[i].plan for i in indices]
        found = []
        for group in shared.groups(plans):
            query = shared.combined([plans[k] for k in group], self.executor.noise_function)   # type: ignore[misc]
            try:
                self.executor.bind_shared(query)
            except DpsqlError:
                continue
            found.append(Group(tuple(indices[k] for k in group), query))
        return found

    def _plan_all(self, batch: list[Statement], shares, call: Call) -> list[Entry]:
        """Every statement planned before anything is spent; one that needs automatic bounds waits until
        every other has planned, then chooses them as ``sql`` does (a DP query of its own, charged)."""
        def plan(s: Statement, share, bounds: bool) -> Entry | None:
            ask = self.planner.planned_with_bounds if bounds else self.planner.planned
            try:
                return ask(s.sql, share[0], share[1], call.ci, call.nonnegative, call.analyst, call.seconds,
                           call.mechanism, call.report_clipping)
            except NeedsBounds as err:
                if bounds:
                    raise named(err, str(s.name)) from None
                return None
            except DpsqlError as err:
                raise named(err, str(s.name)) from None
        first = [plan(s, share, False) for s, share in zip(batch, shares)]
        return [e or plan(s, share, True) for s, share, e in zip(batch, shares, first)]

    def _order(self, statement: Statement, entry: Entry, fresh: bool, clock: Deadline) -> Order:
        """A statement checked (bound, a public last stage tried: a refusal refuses the batch, free) and
        its charge's order."""
        plan = entry.plan
        try:
            with self.engine.holding(held(plan)):
                if isinstance(plan, Plan):
                    self.executor.check(plan, clock)
                else:
                    self.executor.bind_exact(plan)
        except DpsqlError as err:
            raise named(err, str(statement.name)) from None
        return self.accountant.order(statement.sql, entry, fresh) if isinstance(plan, Plan) else \
            self.accountant.exact_order(plan)

    def _run_all(self, batch: list[Statement], entries: list[Entry], tickets: dict[int, Ticket],
                 repeats: dict[int, int], call: Call, groups: list[Group]) -> Answers:
        """Each charged statement run in its own turn (a group's in one) and settled; a failure is kept
        and the rest run."""
        results: dict[str, Result] = {}
        failed: dict[str, DpsqlError] = {}
        outcome: dict[int, pa.Table | DpsqlError] = {}   # the released table, as the ledger keeps it
        group_of = {i: g for g in groups for i in g.members}
        for i, (statement, entry) in enumerate(zip(batch, entries)):
            name = str(statement.name)
            replayed = i in repeats or tickets[i].free
            if i in repeats:   # the same release as an earlier statement of the batch: replayed free
                outcome[i] = outcome[repeats[i]]
            elif tickets[i].answer is not None:
                outcome[i] = replay.unstored(tickets[i].answer)[0]
            else:
                try:
                    if i in group_of and group_of[i].members[0] == i:   # the group's first: runs them all
                        outcome.update(self._run_group(group_of[i], batch, entries, tickets, call))
                    elif i not in group_of:
                        outcome[i] = self._run_one(statement, entry.plan, tickets[i], call)
                except DpsqlError as err:
                    outcome[i] = named(err, name)
                except BaseException:   # interrupted: what was charged and not run is recorded failed
                    for j, ticket in tickets.items():
                        if j > i and ticket.answer is None:
                            self.accountant.fail(ticket)
                    raise
            got = outcome[i]
            if isinstance(got, DpsqlError):
                failed[name] = got
            else:
                plan = entry.plan
                results[name] = Result(plan.answer(got) if isinstance(plan, LocalPlan) else got, plan,
                                       replayed=replayed)
        return Answers([str(s.name) for s in batch], results, failed)

    def _run_one(self, statement: Statement, plan, ticket: Ticket, call: Call) -> pa.Table:
        """One charged statement in its own turn of the engine, its outcome recorded."""
        with self.engine.turn(call.analyst, call.seconds) as clock, self.engine.holding(held(plan)):
            if not isinstance(plan, Plan):
                return self.accountant.settle_exact(
                    ticket, plan, lambda: self.executor.run_exact(self.executor.bind_exact(plan), clock))
            return charged_run(self.planner, self.accountant, self.executor, statement.sql, plan, ticket,
                               lambda: self.executor.bind(plan), clock, call.replan_options())

    def _run_group(self, group: Group, batch: list[Statement], entries: list[Entry], tickets: dict[int, Ticket],
                   call: Call) -> dict[int, pa.Table | DpsqlError]:
        """A group's statements run as one query in one turn, then each settled with its own table (or
        the query's failure: each stays spent, as one query's would)."""
        tables: list[pa.Table] = []
        failure: BaseException | None = None
        with self.engine.turn(call.analyst, call.seconds) as clock:
            try:
                try:
                    bound = self.executor.bind_shared(group.query)
                except DpsqlError:   # it bound before the charge: a function of the schema, never of rows
                    raise ExecutionError("DP900", "the query could not be bound again to run; its budget "
                                         "stays spent") from None
                tables = shared.split(group.query, self.executor.run_shared(bound, clock))
            except (DpsqlError, *ENGINE_ERRORS, pa.ArrowException, ValueError, OverflowError) as err:
                failure = err
            except BaseException:   # interrupted: the first is recorded failed here, the rest by the caller
                self.accountant.fail(tickets[group.members[0]])
                raise

        def released(k: int) -> pa.Table:
            if failure is not None:
                raise failure
            return tables[k]
        out: dict[int, pa.Table | DpsqlError] = {}
        for k, i in enumerate(group.members):
            try:
                out[i] = self.accountant.settle(tickets[i], entries[i].plan, functools.partial(released, k))  # type: ignore[arg-type]
            except DpsqlError as err:
                out[i] = named(err, str(batch[i].name))
        return out
