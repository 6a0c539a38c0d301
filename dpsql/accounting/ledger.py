"""The budget ledger: every spend is recorded durably in SQLite before the query runs.

Charge before release (docs/architecture.md, threat model 6). ``reserve`` runs in one ``BEGIN IMMEDIATE``
transaction: the accountant in force (the policy's: basic, zcdp or pld; accounting/accountants.py)
composes every recorded charge with the new one, and it refuses with ``BudgetExceeded`` (nothing
written) if they do not fit, else inserts a ``reserved`` row with what the query released and commits (WAL, ``synchronous=FULL``:
on disk before DuckDB starts). SQLite lets one writer at a time into that transaction, so two
processes can never both pass a check only one of them fits. The row becomes ``released`` (with
the answer, for replay) or ``failed``; a crash leaves it ``reserved``. All three count as spent.
A charge for an analyst checks their own budget and the total in that same transaction.

Storage only: the SQL text and plan summary arrive as strings and are kept as given, up to
``RECORDED_CHARS`` characters each (``recorded``): a record's size is bounded whatever the query, so
free queries (public tables only, recorded at epsilon 0) cannot grow the file without bound. Where the file
lives and how it fails closed: ``accounting/store.py``; replay keys and data versions:
``api/replay.py`` and ``engines/versions.py``; released measurements kept by identity, replayed free:
``accounting/released.py`` (``Request.measured``); analysts: ``accounting/analysts.py``; which policy changes keep the history:
``accounting/policies.py``.

>>> from dpsql.policy import load_policy
>>> from dpsql.accounting.budget import Cost
>>> book = Ledger(":memory:", load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row"}}}))
>>> t = book.reserve(Cost.of(0.75, 0), sql="SELECT COUNT(*) FROM t", plan="t: 1 measurement", replay_key="k")
>>> book.budget().spent_epsilon, book.budget().history[0].status
(0.75, 'reserved')
>>> book.reserve(Cost.of(0.5, 0), sql="SELECT COUNT(*) FROM t", plan="", replay_key="k2")
Traceback (most recent call last):
...
dpsql.errors.BudgetExceeded: error[DP402]: privacy budget exceeded: requested epsilon=0.5, delta=0; remaining epsilon=0.25, delta=0; short by epsilon=0.25, delta=0...
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import math
import operator
import sqlite3
import threading
import warnings
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, Iterable, Sequence, TypeVar

import pyarrow as pa

from dpsql.accounting import analysts as people
from dpsql.accounting import policies, released
from dpsql.accounting.analysts import Analyst
from dpsql.accounting import history
from dpsql.accounting.accountants import ACCOUNTANTS, Accountant
from dpsql.accounting.budget import Budget, Charge, Cost
from dpsql.accounting.composition import Charged
from dpsql.accounting.identity import policy_document
from dpsql.accounting.released import Measured
from dpsql.accounting.store import MEMORY, LedgerError, Store, default_ledger_path, encode_answer, now
from dpsql.errors import AuthError, BudgetExceeded, InternalError
from dpsql.policy.model import Policy


T = TypeVar("T")
RECORDED_CHARS = 4096   # of a charge's SQL text and plan summary (a TPC-H query is 1-2 KB)


def recorded(text: str, limit: int = RECORDED_CHARS) -> str:
    """``text`` as a record keeps it: whole up to ``limit`` characters, else its start, its length and
    the SHA-256 of the whole (the owner can still match it with a query they hold).

    >>> recorded("SELECT 1")
    'SELECT 1'
    >>> recorded("x" * 100, limit=10)
    'xxxxxxxxxx... [100 characters, SHA-256 09ecb6ebc8bcefc733f6f2ec44f791abeed6a99edf0cc31519637898aebd52d8]'
    """
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{text[:limit]}... [{len(text)} characters, SHA-256 {digest}]"


@dataclass(frozen=True)
class Ticket:
    """What ``reserve`` hands back: a new charge to run, or an earlier answer to replay at no cost. A charge
    of measurements (``Request.measured``) has their ``identities`` and the ``kept`` values it replays
    (None: drawn by this charge; accounting/released.py)."""
    id: int
    answer: pa.Table | None = None
    identities: tuple[str, ...] = ()
    kept: tuple[pa.Table | None, ...] = ()

    @property
    def replayed(self) -> bool:
        return self.answer is not None

    @property
    def free(self) -> bool:
        """An earlier answer, or a charge of measurements that were all released before (charged 0)."""
        return self.replayed or (bool(self.kept) and all(t is not None for t in self.kept))


@dataclass(frozen=True)
class Request:
    """One charge asked of ``reserve_many``: what ``reserve`` takes, but the analyst (one per batch)."""
    cost: Cost
    sql: str
    plan: str
    replay_key: str | None = None
    data_version: str | None = None
    fresh: bool = False
    releases: Iterable | None = None
    measured: Measured | None = None   # its measurements by identity: those released before replay free


class Ledger:
    """Persistent, crash-safe privacy budget records (see the module docstring).

    Thread-safe (one SQLite connection behind a lock) and process-safe (SQLite's write lock).
    A missing ledger file is created on the first charge or the first analyst, not before: reading a
    budget or explaining a query never creates files. Without ``policy`` the ledger's own newest
    recorded policy is used (the file must exist). A ``policy`` that differs from the ledger's newest
    is recorded as a change when it keeps every privacy unit and link (``record=False``: only checked),
    else refused (DP404; ``rebind``). See accounting/policies.py.
    """

    def __init__(self, path, policy: Policy | None = None, *, timeout: float | None = None, record: bool = True):
        self._lock = threading.RLock()
        self._kept = history.Kept()   # the history composed so far (see _spent)
        total = None if policy is None else Cost.of(policy.budget_epsilon, policy.budget_delta)
        self._store = Store(path, None if policy is None else policy_document(policy), total, timeout=timeout,
                            record=record)
        self.path = self._store.path

    @property
    def identity(self) -> str:
        """SHA-256 of the policy in force here (its budget and every table's declarations): part of
        every replay key, so an answer is replayed only under the policy it was computed under."""
        assert self._store.identity is not None
        return self._store.identity

    @property
    def total(self) -> Cost:
        """The total budget in force: the newest policy recorded in the ledger (or this policy's)."""
        with self._lock, self._store.errors("read"):
            return self._store.total(self._store.existing())

    @property
    def accountant(self) -> str:
        """The accountant in force: the newest recorded policy's (or this policy's)."""
        with self._lock, self._store.errors("read"):
            return self._store.in_force(self._store.existing())[1]

    def cost(self, plan) -> Cost:
        """What a plan is charged at: its own (epsilon, delta), the standalone guarantee of the query."""
        return Cost.of(plan.epsilon, plan.delta)

    def reserve(self, cost: Cost, *, sql: str, plan: str, replay_key: str | None = None,
                data_version: str | None = None, fresh: bool = False, analyst: str | None = None,
                releases=None) -> Ticket:
        """Charge ``cost`` durably, or hand back an earlier identical answer, or refuse.

        ``releases`` (mechanisms/releases.py; ``Plan.releases()``) is what the query releases, stored
        with the charge for the accountant to compose; None: composed as its (epsilon, delta).
        ``analyst`` (None: the owner) is charged against their own budget and the total, both checked
        by the accountant in force in one ``BEGIN IMMEDIATE`` transaction; replays come from their own
        earlier answers only.

        Raises:
            BudgetExceeded (DP402): it does not fit (``.budget`` says which); nothing is written.
            AuthError (DP407): the analyst is unknown or revoked; nothing is written.
            LedgerError (DP404-DP406): the ledger is foreign, locked or corrupt; nothing is spent.
        """
        request = Request(cost, sql, plan, replay_key, data_version, fresh, releases)
        return self.reserve_many([request], analyst=analyst)[0]

    def reserve_many(self, requests: Sequence[Request], *, analyst: str | None = None) -> list[Ticket]:
        """``reserve`` for a batch, all or nothing, in ONE ``BEGIN IMMEDIATE`` transaction: each request
        replays an earlier identical answer or is charged; the charged ones are checked together (the
        history composed with all of them: a composition only grows as charges join it, so if all fit,
        every prefix fits) and inserted as one row each, committed at once. A refusal (BudgetExceeded,
        AuthError, LedgerError) writes nothing, not even a replay's count. Tickets in the requests' order."""
        charges = [_charged(r) for r in requests]
        with self._lock, self._store.errors("charge"):
            db = self._store.ensure()
            self._catch_up(db, charges)
            with self._store.transaction(db):
                own = None if analyst is None else self._can_spend(db, analyst)
                tickets: list[Ticket | None] = [self._replayed(db, r, analyst) for r in requests]
                priced = [(r, None) if t is not None else self._priced(db, r, analyst) for r, t in zip(requests, tickets)]
                new = [(r, _charged(r), f) for (r, f), t in zip(priced, tickets) if t is None]
                if not new:
                    return [t for t in tickets if t is not None]
                total, name = self._store.in_force(db)
                accountant = self._accountant(name)
                charged = [c for _, c, _ in new]
                mine = None if own is None else self._fits(
                    db, accountant, charged, own, analyst, budget=f"analyst {analyst!r}",
                    hint="nothing was spent; ask for less, repeat an identical earlier query (free), "
                         "or ask the data owner for a top-up (dpsql analyst top-up)")
                after = self._fits(db, accountant, charged, total, None,
                                   budget=None if analyst is None else "the total (shared by every analyst)",
                                   hidden=analyst is not None)
                made = iter([self._insert(db, r, c, accountant.name, analyst, f) for r, c, f in new])
                done = [t if t is not None else next(made) for t in tickets]
            # Committed: what the checks composed is the kept history now (it was read up to these ids).
            self._kept.advance(max(t.id for t in done if not t.replayed), after, analyst, mine, len(new))
            return done

    def _replayed(self, db: sqlite3.Connection, request: Request, analyst: str | None) -> Ticket | None:
        """The analyst's newest released answer under ``request``'s replay key (its replay counted), or None."""
        if request.replay_key is None or request.fresh:
            return None
        row = db.execute("SELECT id, answer FROM charges WHERE replay_key = ? AND analyst IS ? AND "
                         "status = 'released' AND answer IS NOT NULL ORDER BY id DESC LIMIT 1",
                         [request.replay_key, analyst]).fetchone()
        if row is None:
            return None
        answer = self._store.decode_answer(row[1])
        db.execute("UPDATE charges SET replays = replays + 1 WHERE id = ?", [row[0]])
        return Ticket(row[0], answer)

    def _priced(self, db: sqlite3.Connection, request: Request, analyst: str | None):
        """A request of measurements at what it costs now (accounting/released.py ``find``): those the
        analyst has released replay free; with what it replays. Others as they are."""
        if request.measured is None:
            return request, None
        if request.fresh:
            return request, released.Found((None,) * len(request.measured.identities), request.cost, request.releases)
        found = released.find(db, request.measured, analyst, self._store.decode_answer, request.cost,
                              request.releases)
        return dataclasses.replace(request, cost=found.cost, releases=found.releases,
                                   plan=request.plan + found.note), found

    @staticmethod
    def _insert(db: sqlite3.Connection, request: Request, charge: Charged, composition: str,
                analyst: str | None, found: released.Found | None = None) -> Ticket:
        cursor = db.execute(
            "INSERT INTO charges (time, sql, plan, epsilon, delta, composition, status, replay_key, "
            "data_version, analyst, releases) VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?, ?, ?, ?)",
            [now(), recorded(request.sql), recorded(request.plan), str(request.cost.epsilon),
             str(request.cost.delta), composition, request.replay_key, request.data_version, analyst,
             history.encode(charge.releases)])
        assert cursor.lastrowid is not None
        if found is None or request.measured is None:
            return Ticket(cursor.lastrowid)
        return Ticket(cursor.lastrowid, identities=request.measured.identities, kept=found.kept)

    def release(self, ticket: Ticket, answer: pa.Table | None,
                measurements: Sequence[tuple[str, pa.Table]] = ()) -> None:
        """Mark a charge released and keep its answer for replay (None: keep none; a query over public
        tables only, charged nothing, has nothing to replay), with the ``measurements`` it drew
        ((identity, table) pairs: accounting/released.py), in one transaction.

        The spend is already on disk, so if this bookkeeping fails the answer is still released
        (with a warning): the charge stays ``reserved``, which counts as spent; only replay is lost.
        """
        self._finish(ticket, "released", None if answer is None else encode_answer(answer), measurements)

    def fail(self, ticket: Ticket) -> None:
        """Mark a charge failed (it stays spent). If that fails too, it stays ``reserved``: spent."""
        self._finish(ticket, "failed", None)

    def budget(self, analyst: str | None = None) -> Budget:
        """Total, spent, remaining and the history, read in one snapshot: the whole ledger's (None), or
        one analyst's own budget and only their own charges.

        Raises:
            AuthError (DP407): no such analyst.
        """
        def read(db, total: Cost, accountant: Accountant, mine: str, args: list) -> Budget:
            rows = [] if db is None else db.execute(
                "SELECT id, time, sql, plan, epsilon, delta, status, replays, composition, analyst "
                f"FROM charges {mine} ORDER BY id", args).fetchall()
            return self._figures(db, total, accountant, analyst, self._history(rows))
        return self._snapshot(analyst, read)

    def totals(self, analyst: str | None = None) -> Budget:
        """``budget(analyst)`` without the history: the kept composition of ``_spent`` and a count, so its
        cost does not grow with the history (the server reports it with every answer)."""
        def read(db, total: Cost, accountant: Accountant, mine: str, args: list) -> Budget:
            return self._figures(db, total, accountant, analyst, (), self._count(db, mine, args))
        return self._snapshot(analyst, read)

    def preview(self, cost: Cost, releases=None, analyst: str | None = None) -> tuple[Budget, bool]:
        """``totals(analyst)``, and whether a charge of ``cost`` releasing ``releases`` would fit now: the
        accountant's own check of the history with it (as ``reserve`` asks it, never a subtraction:
        zcdp's and pld's remaining budgets do not add) against the analyst's own budget (None: the
        total). What explain shows. Reads only: no write lock, nothing written, no file created."""
        charge = Charged(cost.epsilon, cost.delta, None if releases is None else tuple(releases))
        # The new releases' distributions first, outside the lock (pld: up to a second for a new one).
        warm = self._accountant(self.accountant)
        warm.compose(warm.empty(), [charge])

        def read(db, total: Cost, accountant: Accountant, mine: str, args: list) -> tuple[Budget, bool]:
            state = accountant.empty() if db is None else self._spent(db, accountant, analyst)
            revoked = db is not None and analyst is not None and self._state(db, analyst)[1]
            fits = not revoked and accountant.fits(accountant.compose(state, [charge]), total)
            return self._figures(db, total, accountant, analyst, (), self._count(db, mine, args)), fits
        return self._snapshot(analyst, read)

    def held(self, identities: Sequence[str], analyst: str | None = None) -> tuple[bool, ...]:
        """Whether the analyst has each measurement released (accounting/released.py): what a query of
        them would replay free. Reads only (explain)."""
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            return (False,) * len(identities) if db is None else released.held(db, identities, analyst)

    @staticmethod
    def _count(db, mine: str, args: list) -> int:
        return 0 if db is None else db.execute(f"SELECT COUNT(*) FROM charges {mine}", args).fetchone()[0]

    def _snapshot(self, analyst: str | None, read: Callable[..., T]) -> T:
        """``read(db, total, accountant, where, args)`` in one read transaction: the ledger's total and
        all charges (None), or the analyst's total and their charges only; the accountant in force.
        Without a file, ``read`` gets db None (nothing spent yet) and the policy's total."""
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            if db is None:
                if analyst is not None:
                    raise _no_analyst(analyst)
                total, name = self._store.in_force(None)
                return read(None, total, self._accountant(name), "", [])
            db.execute("BEGIN")
            try:
                total, name = self._store.in_force(db)
                if analyst is not None:
                    total = self._state(db, analyst)[0]
                return read(db, total, self._accountant(name), "" if analyst is None else "WHERE analyst = ?",
                            [] if analyst is None else [analyst])
            finally:
                db.execute("COMMIT")

    def _figures(self, db, total: Cost, accountant: Accountant, analyst: str | None, charges: tuple[Charge, ...],
                 queries: int | None = None) -> Budget:
        """The Budget of ``analyst`` (None: all) as the accountant reports it against ``total``."""
        state = accountant.empty() if db is None else self._spent(db, accountant, analyst)
        report = accountant.report(state, total)
        return Budget(float(total.epsilon), float(total.delta), report.spent[0], report.spent[1],
                      len(charges) if queries is None else queries, charges, self.path, analyst,
                      accountant=accountant.name, terms=report.terms,
                      remaining=report.remaining if report.at_delta else None)

    def answer(self, charge_id: int, analyst: str | None = None) -> pa.Table | None:
        """A released answer of ``analyst``'s own (None: the owner's), free; None for any other id,
        whether it exists or not, and for a revoked analyst."""
        if isinstance(charge_id, bool) or not isinstance(charge_id, int):
            return None
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            if db is None:
                return None
            if analyst is not None:
                try:
                    if self._state(db, analyst)[1]:
                        return None
                except AuthError:
                    return None
            row = db.execute("SELECT answer FROM charges WHERE id = ? AND analyst IS ? AND status = 'released' "
                             "AND answer IS NOT NULL", [charge_id, analyst]).fetchone()
            return None if row is None else self._store.decode_answer(row[0])

    # -- analysts (the owner's commands; see accounting/analysts.py) --

    def add_analyst(self, name: str, epsilon: float, delta: float = 0.0) -> str:
        """Add an analyst with a budget inside the total; returns their token, the only time it is shown.

        Raises:
            AnalystError (DP409): a bad or taken name, or more than the total; InvalidParameter (DP401).
        """
        name, budget = people.check_name(name), people.amount(epsilon, delta, positive=False)
        with self._lock, self._store.errors("add an analyst to", "nothing was recorded"):
            db = self._store.ensure()
            with self._store.transaction(db):
                return people.add(db, name, budget, self._store.total(db), now())

    def top_up(self, name: str, epsilon: float, delta: float = 0.0) -> Analyst:
        """Add to an analyst's budget (recorded); their budget stays within the total."""
        more = people.amount(epsilon, delta, positive=True)
        self._write(lambda db: people.top_up(db, people.check_name(name), more, self._store.total(db), now()))
        return self._one(name)

    def revoke_analyst(self, name: str) -> Analyst:
        """Revoke an analyst (recorded): their token stops working and they spend nothing more."""
        self._write(lambda db: people.revoke(db, people.check_name(name), now()))
        return self._one(name)

    def authenticate(self, token: str) -> str:
        """The name of the analyst holding ``token``; AuthError (DP407) for an unknown or revoked one."""
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            if db is None:
                raise _no_analyst(None)
            with self._corrupt_amounts():
                return people.authenticate(db, token)

    def analysts(self) -> list[Analyst]:
        """Every analyst, with their budget, spent, remaining and whether revoked."""
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            if db is None:
                return []
            db.execute("BEGIN")
            try:
                accountant = self._accountant(self._store.in_force(db)[1])
                counts = dict(db.execute("SELECT analyst, COUNT(*) FROM charges WHERE analyst IS NOT NULL "
                                         "GROUP BY analyst").fetchall())

                def spent(name: str, budget: Cost):
                    return accountant.report(self._spent(db, accountant, name), budget), counts.get(name, 0)
                with self._corrupt_amounts():
                    return people.listing(db, spent, accountant.name)
            finally:
                db.execute("COMMIT")

    def policy_history(self) -> list[policies.Recorded]:
        """Every policy this ledger was used with, oldest first; the newest is in force."""
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            if db is None:
                return []
            with self._corrupt_amounts():
                return policies.history(db)

    def rebind(self, policy: Policy) -> tuple[str, ...]:
        """Put ``policy`` in force even if it changes a privacy unit or a link: the owner's explicit
        decision that past spends count against the new units (recorded as ``rebound``). Returns the
        tables whose binding changed. Every other connection's next charge is refused (DP404) until it
        uses a policy with the new binding."""
        with self._lock, self._store.errors("record a policy in", "nothing was recorded"):
            return self._store.rebind(policy_document(policy), Cost.of(policy.budget_epsilon, policy.budget_delta))

    def close(self) -> None:
        with self._lock:
            self._store.close()

    # -- internals --

    def _write(self, change) -> None:
        with self._lock, self._store.errors("record an analyst change in", "nothing was recorded"):
            db = self._store.existing()
            if db is None:
                raise _no_analyst(None)
            with self._store.transaction(db), self._corrupt_amounts():
                change(db)

    def _one(self, name: str) -> Analyst:
        return next(a for a in self.analysts() if a.name == name)

    def _can_spend(self, db, analyst: str) -> Cost:
        own, revoked = self._state(db, analyst)
        if revoked:
            raise AuthError("DP407", f"analyst {analyst!r} is revoked or unknown; nothing was spent",
                            hint="ask the data owner for a token (dpsql analyst add)")
        return own

    def _state(self, db, analyst: str) -> tuple[Cost, bool]:
        with self._corrupt_amounts():
            return people.state(db, analyst)

    @contextlib.contextmanager
    def _corrupt_amounts(self):
        try:
            yield
        except (ArithmeticError, ValueError, TypeError, KeyError, InternalError):
            raise self._store.corrupt("a recorded amount or policy cannot be read") from None

    def _history(self, rows) -> tuple[Charge, ...]:
        corrupt = self._store.corrupt
        return tuple(Charge(id=r[0], time=r[1], sql=r[2], plan=r[3], epsilon=float(history.amount(r[4], corrupt)),
                            delta=float(history.amount(r[5], corrupt)), status=r[6], replays=r[7], composition=r[8],
                            analyst=r[9]) for r in rows)

    def _finish(self, ticket: Ticket, status: str, answer: bytes | None,
                measurements: Sequence[tuple[str, pa.Table]] = ()) -> None:
        try:
            with self._lock, self._store.errors("record the outcome in", f"charge {ticket.id} stays spent"):
                db = self._store.ensure()
                with self._store.transaction(db):   # the status and the kept measurements together, or neither
                    done = db.execute(
                        "UPDATE charges SET status = ?, answer = ?, released_at = ? WHERE id = ? AND "
                        "status = 'reserved'", [status, answer, now(), ticket.id]).rowcount
                    if done and measurements:
                        analyst = db.execute("SELECT analyst FROM charges WHERE id = ?", [ticket.id]).fetchone()[0]
                        released.keep(db, ticket.id, analyst, measurements)
        except LedgerError as err:
            warnings.warn(f"{err.message} (recorded as reserved: it counts as spent)", RuntimeWarning,
                          stacklevel=3)

    def _accountant(self, name: str) -> Accountant:
        found = ACCOUNTANTS.get(name)
        if found is None:
            raise self._store.corrupt(f"its policy in force names accountant {name!r}, unknown to this version "
                                      "of dpsql")
        return found

    def _catch_up(self, db: sqlite3.Connection, charges: list[Charged]) -> None:
        """Compose the history committed so far, and the new charge alone, before taking the write lock,
        so that the charge's ``BEGIN IMMEDIATE`` composes only what other writers committed since with
        the charge (a process's first pld charge imports dp-accounting, builds its releases' PLDs and
        composes the whole history: seconds that would hold every other writer's lock, up to DP405).
        Only speed depends on it: the check in the transaction reads every row past what is kept."""
        db.execute("BEGIN")
        try:
            accountant = self._accountant(self._store.in_force(db)[1])
            self._spent(db, accountant)
            accountant.compose(accountant.empty(), charges)
        finally:
            db.execute("COMMIT")

    def _spent(self, db: sqlite3.Connection, accountant: Accountant, analyst: str | None = None):
        """The history of all (None) or one analyst composed by ``accountant``, read inside the caller's
        transaction; composed once and kept between charges (accounting/history.py)."""
        self._kept, state = history.spent(self._kept, db, accountant, analyst, self._store.corrupt)
        return state

    def _fits(self, db: sqlite3.Connection, accountant: Accountant, charges: list[Charged], total: Cost,
              analyst: str | None, *, budget: str | None, hint: str = "", hidden: bool = False):
        """The history of ``analyst`` (None: all) with ``charges``, if the accountant finds it fits
        ``total``; else BudgetExceeded (nothing written), requesting their sum. ``hidden``: the total
        checked for an analyst, refused without its figures: what is left of it tells how much the
        other analysts spent."""
        state = self._spent(db, accountant, analyst)
        after = accountant.compose(state, charges)
        if accountant.fits(after, total):
            return after
        requested = (_summed([c.epsilon for c in charges]), _summed([c.delta for c in charges]))
        if hidden:
            raise BudgetExceeded(requested, None, budget=budget)
        now_ = accountant.report(state, total)
        if not now_.at_delta:    # sums: the exact remaining and difference, as ever
            raise BudgetExceeded(requested, total - state, budget=budget, hint=hint)
        would = accountant.report(after, total).spent[0]
        left = now_.remaining[0] if math.isfinite(now_.remaining[0]) else 0.0   # no epsilon left at that delta
        raise BudgetExceeded(
            requested, (Decimal(repr(left)), total.delta), budget=budget, hint=hint,
            composed=f"under {accountant.name} accounting the history with it would be epsilon={would:g} at "
                     f"delta={total.delta:g}, more than {total.epsilon:g}")


def _charged(request: Request) -> Charged:
    return Charged(request.cost.epsilon, request.cost.delta, None if request.releases is None else tuple(request.releases))


def _summed(amounts: list[Decimal]) -> Decimal:
    """A batch's amounts added exactly, written as typed (one amount as it is; 1.25 + 1.25 as 2.5, not 2.50)."""
    total = functools.reduce(operator.add, amounts)
    return total if len(amounts) == 1 or total == total.to_integral_value() else total.normalize()


def _no_analyst(analyst: str | None) -> AuthError:
    """No ledger file yet, so no analyst: the same refusal as an unknown one."""
    shown = "unknown or revoked analyst token" if analyst is None else f"there is no analyst {analyst!r} in this ledger"
    return AuthError("DP407", shown, hint="ask the data owner for a token (dpsql analyst add)")


__all__ = ["Ledger", "LedgerError", "Request", "Ticket", "Analyst", "default_ledger_path", "MEMORY"]
