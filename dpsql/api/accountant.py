"""The accountant: what a plan costs, its replay key, and its charge reserved, failed or released.

One of the connection's three parts (api/planner.py plans, api/executor.py runs, this charges). It
writes nothing but through the ledger (accounting/ledger.py), whose one transaction is the one place
a budget is checked: ``reserve`` charges one plan, ``reserve_many`` a batch all or nothing. A charge
is recorded before its query runs; ``settle`` records how the run ended, and a run that fails after
the charge stays spent (threat model 6).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import duckdb
import pyarrow as pa

from dpsql.accounting.budget import ZERO, Cost
from dpsql.accounting.ledger import Ledger, Request, Ticket
from dpsql.api import replay
from dpsql.api.plan_cache import Entry
from dpsql.api.replay import plan_signature
from dpsql.errors import DeadlineExceeded, ExecutionError
from dpsql.limits import Deadline
from dpsql.plan.local import LocalPlan
from dpsql.plan.model import Plan
from dpsql.plan.public import PublicPlan


def charge_by(clock: Deadline) -> None:
    """DP425 if the call's deadline has passed: the last moment a stop spends nothing."""
    if clock.passed():
        raise DeadlineExceeded("DP425", f"the query reached its deadline of {clock.seconds:g} s before it was "
                               "charged; nothing was spent", hint="retry later")


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
                                   plan.releases()))

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

    def settle(self, ticket: Ticket, plan: Plan, run: Callable[[], pa.Table]) -> pa.Table:
        """``run()``'s released table, kept with the charge for replay; a run that fails marks the charge
        failed (it stays spent) and says so without an engine detail, which could depend on the data."""
        try:
            table = run()
        except DeadlineExceeded as stopped:
            # Whether a query ends before its deadline depends on its running time, which the analyst
            # sees anyway: the stop is a function of that time and tells nothing it does not. Spent.
            self.ledger.fail(ticket)
            raise DeadlineExceeded("DP901", f"{stopped.message}; its budget stays spent",
                                   hint="ask for less, or ask the data owner for a longer deadline") from None
        except (duckdb.Error, pa.ArrowException, ValueError, OverflowError):
            self.ledger.fail(ticket)
            raise ExecutionError("DP900", "the query failed while running; its budget stays spent") from None
        except BaseException:
            self.ledger.fail(ticket)
            raise
        self.ledger.release(ticket, replay.stored(table, plan))
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
        except (duckdb.Error, pa.ArrowException, ValueError, OverflowError) as e:
            self.ledger.fail(ticket)
            first = (str(e).splitlines()[0] if str(e) else type(e).__name__) if public else "no detail (private data)"
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
