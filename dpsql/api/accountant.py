"""The accountant: what a plan costs, its replay key, and its charge reserved, failed or released.

One of the connection's three parts (api/planner.py plans, api/executor.py runs, this charges). It
writes nothing but through the ledger (accounting/ledger.py), whose one transaction is the one place
a budget is checked: ``reserve`` charges one plan, ``reserve_many`` a batch all or nothing. A charge
is recorded before its query runs; ``settle`` records how the run ended, and a run that fails after
the charge stays spent (threat model 6).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence, TypeAlias

import pyarrow as pa

from dpsql.accounting import measurements
from dpsql.accounting.budget import ZERO, Cost
from dpsql.accounting.ledger import Ledger, Request, Ticket
from dpsql.accounting.released import VALUE, Measured
from dpsql.api import replay
from dpsql.api.plan_cache import Entry
from dpsql.api.replay import plan_signature
from dpsql.engines.failures import ENGINE_ERRORS
from dpsql.errors import DeadlineExceeded, ExecutionError, first_line
from dpsql.limits import Deadline
from dpsql.plan.local import LocalPlan
from dpsql.plan.model import Plan
from dpsql.plan.public import PublicPlan


def charge_by(clock: Deadline) -> None:
    """DP425 if the call's deadline has passed: the last moment a stop spends nothing."""
    if clock.passed():
        raise DeadlineExceeded("DP425", f"the query reached its deadline of {clock.seconds:g} s before it was "
                               "charged; nothing was spent", hint="retry later")


# What a run gives: the released table, or with it the measurements it drew (api/executor.py ``run``).
Ran: TypeAlias = "pa.Table | tuple[pa.Table, pa.Table | None]"


def kept(ticket: Ticket, plan: Plan, drawn: pa.Table | None) -> list[tuple[str, pa.Table]]:
    """The measurements a charge drew, each as the ledger keeps it: (identity, its groups' keys and value)."""
    if drawn is None or not ticket.identities:
        return []
    names = [m.name for m in plan.measurements]
    keys = [c for c in drawn.column_names if c not in names]
    return [(identity, drawn.select(keys).append_column(VALUE, drawn.column(m)))
            for identity, m, old in zip(ticket.identities, names, ticket.kept) if old is None]


@dataclass(frozen=True)
class Order:
    """A DP plan's charge before it is reserved: its cost, the ledger's request and the replay key."""
    cost: Cost
    request: Request

    @property
    def replay_key(self) -> str | None:
        return self.request.replay_key


class Accountant:
    """Charges one connection's plans to its ledger, for one data version (see the module docstring)."""

    def __init__(self, ledger: Ledger, data_version: str):
        self.ledger = ledger
        self.data_version = data_version

    def order(self, sql: str, planned: Entry, fresh: bool) -> Order:
        """The charge a planned query asks: its cost and its replay key (api/replay.py), which must match
        everything that shapes the release: noise (bounds, sensitivities, scales, L, selection) and
        post-processing, not only the SQL text. The normalised text is kept with the cached plan."""
        plan = planned.plan
        cost = self.ledger.cost(plan)
        if planned.normalised is None:
            text, names = replay.normalise_sql(sql)
            planned.normalised = (text, names + (plan_signature(plan),))
        normalised = planned.normalised
        key = replay.replay_key(normalised, cost, self.ledger.identity, self.data_version)
        return Order(cost, Request(cost, normalised[0], replay.plan_summary(plan), key, self.data_version, fresh,
                                   plan.releases(), self.measured(planned)))

    def measured(self, planned: Entry) -> Measured | None:
        """A plan's measurements by identity (accounting/measurements.py), for the ledger to replay those
        this analyst has released; None for a plan that replays only whole (a byte-identical query). The
        identities are kept with the cached plan (the policy and data version are this accountant's)."""
        plan = planned.plan
        if not isinstance(plan, Plan) or not measurements.replayable(plan):
            return None
        context = (self.ledger.identity, self.data_version)   # a rebind changes the policy's identity
        if planned.identities is None or planned.identities[0] != context:
            planned.identities = (context, measurements.identities(plan, *context))
        price = functools.partial(measurements.price, plan) if measurements.partial(plan) else None
        return Measured(planned.identities[1], tuple(f"{m.name} {m.label}" for m in plan.measurements), price)

    def replay_note(self, planned: Entry, analyst: str | None) -> tuple[Cost, tuple, list[str]] | None:
        """What a run of ``plan`` would cost now, its releases and explain's lines saying which measurements
        replay (released before to this analyst) and what is charged; None when nothing would replay.
        Reads only: the ledger's ``reserve`` decides again, in its transaction."""
        measured = self.measured(planned)
        if measured is None:
            return None
        held = self.ledger.held(measured.identities, analyst)
        if not any(held):
            return None
        replayed = ", ".join(label for label, h in zip(measured.labels, held) if h)
        if all(held):
            return ZERO, (), [f"  replay free (released before): {replayed}; charged: epsilon 0 (post-processing)"]
        if measured.price is None:
            return None   # all or nothing: charged in full, as without replay
        new = tuple(i for i, h in enumerate(held) if not h)
        cost, releases = measured.price(new)
        drawn = ", ".join(measured.labels[i] for i in new)
        return cost, releases, [f"  replay free (released before): {replayed}; charged: epsilon {cost.epsilon} "
                                f"(drawn: {drawn})"]

    def preferred(self, planned: Entry, twin: Callable[[], Entry | None], analyst: str | None, fresh: bool) -> Entry:
        """A noisy top-k's plan, or its twin answered from every group's noisy value (``twin()``: the
        query with OPTIONS(top_k = 'noisy_values'), api/replay.py ``noisy_values_sql``) when the analyst
        has every one of those values released: then ORDER BY ... LIMIT over them is post-processing, free.
        The choice reads the analyst's own releases only, and a plan they could have asked for by name."""
        plan = planned.plan
        if fresh or not isinstance(plan, Plan) or plan.top_k is None:
            return planned
        other = twin()
        if other is None or not isinstance(other.plan, Plan) or not measurements.replayable(other.plan):
            return planned
        if [o.name for o in other.plan.visible_outputs] != [o.name for o in plan.visible_outputs]:
            return planned
        measured = self.measured(other)
        return other if measured is not None and all(self.ledger.held(measured.identities, analyst)) else planned

    def reserve(self, order: Order, analyst: str | None) -> Ticket:
        """One charge (or an earlier identical answer); BudgetExceeded writes nothing."""
        return self.reserve_many([order], analyst)[0]

    def reserve_many(self, orders: Sequence[Order], analyst: str | None) -> list[Ticket]:
        """Every order charged (or replayed) in one ledger transaction, all or nothing."""
        return self.ledger.reserve_many([o.request for o in orders], analyst=analyst)

    def exact_order(self, plan: PublicPlan | LocalPlan) -> Order:
        """A public-only or local-model query's record in the history: at epsilon 0, never replayed."""
        return Order(ZERO, Request(ZERO, replay.normalise_sql(plan.sql)[0], plan.summary, None, self.data_version,
                                   False, ()))

    def fail(self, ticket: Ticket) -> None:
        """A charge whose query will not run (interrupted): recorded failed, still spent."""
        self.ledger.fail(ticket)

    def settle(self, ticket: Ticket, plan: Plan, run: Callable[[], Ran]) -> pa.Table:
        """``run()``'s released table, kept with the charge for replay (and the measurements it drew, by
        identity); a run that fails marks the charge failed (it stays spent) and says so without an engine
        detail, which could depend on the data."""
        try:
            ran = run()
        except DeadlineExceeded as stopped:
            # Whether a query ends before its deadline depends on its running time, which the analyst
            # sees anyway: the stop is a function of that time and tells nothing it does not. Spent.
            self.ledger.fail(ticket)
            raise DeadlineExceeded("DP901", f"{stopped.message}; its budget stays spent",
                                   hint="ask for less, or ask the data owner for a longer deadline") from None
        except (*ENGINE_ERRORS, pa.ArrowException, ValueError, OverflowError):
            self.ledger.fail(ticket)
            raise ExecutionError("DP900", "the query failed while running; its budget stays spent") from None
        except BaseException:
            self.ledger.fail(ticket)
            raise
        table, drawn = ran if isinstance(ran, tuple) else (ran, None)
        # An answer of kept measurements only is not kept again: charged 0, it would grow the ledger by a
        # whole answer per free request; asked again, it is computed again from them (free as well).
        answer = None if ticket.free else replay.stored(table, plan)
        self.ledger.release(ticket, answer, kept(ticket, plan, drawn))
        return table

    def settle_exact(self, ticket: Ticket, plan: PublicPlan | LocalPlan, run: Callable[[], pa.Table]) -> pa.Table:
        """``settle`` for a query recorded at epsilon 0. Public data: an engine error's message is safe
        to show, and so are its stops (the deadline, more rows than ``limits.max_rows``); a local-model
        table's is not, and the counting query cannot fail on any row (plan/local.py), so it never
        shows one. Nothing to replay: running it again gives the same rows."""
        public = isinstance(plan, PublicPlan)
        spent = "public tables only: nothing was spent" if public else "local model: nothing was spent"
        try:
            table = run()
        except (*ENGINE_ERRORS, pa.ArrowException, ValueError, OverflowError) as e:
            self.ledger.fail(ticket)
            first = first_line(e) if public else "no detail (private data)"
            raise ExecutionError("DP900", f"the query failed while running: {first}", hint=spent) from None
        except DeadlineExceeded as stopped:
            self.ledger.fail(ticket)
            raise DeadlineExceeded("DP425", stopped.message, hint=f"{spent}; ask for "
                                   "less (fewer rows, fewer joined tables) or retry later") from None
        except BaseException:
            self.ledger.fail(ticket)
            raise
        self.ledger.release(ticket, None)
        return table
