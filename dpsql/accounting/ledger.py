"""The budget ledger: every spend is recorded durably in SQLite before the query runs.

Charge before release (docs/architecture.md, threat model 6). ``reserve`` runs in one ``BEGIN IMMEDIATE``
transaction: it sums every recorded charge, refuses with ``BudgetExceeded`` (nothing written) if
the new cost does not fit, else inserts a ``reserved`` row and commits (WAL, ``synchronous=FULL``:
on disk before DuckDB starts). SQLite lets one writer at a time into that transaction, so two
processes can never both pass a check only one of them fits. The row becomes ``released`` (with
the answer, for replay) or ``failed``; a crash leaves it ``reserved``. All three count as spent.
A charge for an analyst checks their own budget and the total in that same transaction.

Storage only: the SQL text and plan summary arrive as strings and are kept as given, up to
``RECORDED_CHARS`` characters each (``recorded``): a record's size is bounded whatever the query, so
free queries (public tables only, recorded at epsilon 0) cannot grow the file without bound. Where the file
lives and how it fails closed: ``accounting/store.py``; replay keys and data versions:
``api/replay.py`` and ``engines/versions.py``; analysts: ``accounting/analysts.py``; which policy changes keep the history:
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
dpsql.errors.BudgetExceeded: [DP402] privacy budget exceeded: requested epsilon=0.5, delta=0; remaining epsilon=0.25, delta=0; short by epsilon=0.25, delta=0
"""
from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import warnings
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import pyarrow as pa

from dpsql.accounting import analysts as people
from dpsql.accounting import policies
from dpsql.accounting.analysts import Analyst
from dpsql.accounting.budget import BASIC, COMPOSITIONS, Budget, Charge, Cost, check_fits
from dpsql.accounting.identity import policy_document
from dpsql.accounting.store import MEMORY, LedgerError, Store, default_ledger_path, encode_answer, now
from dpsql.errors import AuthError, InternalError
from dpsql.policy.model import Policy


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
    """What ``reserve`` hands back: a new charge to run, or an earlier answer to replay at no cost."""
    id: int
    answer: pa.Table | None = None

    @property
    def replayed(self) -> bool:
        return self.answer is not None


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
        self.composition = BASIC
        self._lock = threading.RLock()
        self._sums = _Sums()   # what the charges read so far add up to (see _spent)
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

    def cost(self, plan) -> Cost:
        return self.composition.cost(plan)

    def reserve(self, cost: Cost, *, sql: str, plan: str, replay_key: str | None = None,
                data_version: str | None = None, fresh: bool = False, analyst: str | None = None) -> Ticket:
        """Charge ``cost`` durably, or hand back an earlier identical answer, or refuse.

        ``analyst`` (None: the owner) is charged against their own budget and the total, both checked
        in one ``BEGIN IMMEDIATE`` transaction; replays come from their own earlier answers only.

        Raises:
            BudgetExceeded (DP402): it does not fit (``.budget`` says which); nothing is written.
            AuthError (DP407): the analyst is unknown or revoked; nothing is written.
            LedgerError (DP404-DP406): the ledger is foreign, locked or corrupt; nothing is spent.
        """
        with self._lock, self._store.errors("charge"):
            db = self._store.ensure()
            with self._store.transaction(db):
                own = None if analyst is None else self._can_spend(db, analyst)
                if replay_key is not None and not fresh:
                    row = db.execute("SELECT id, answer FROM charges WHERE replay_key = ? AND analyst IS ? AND "
                                     "status = 'released' AND answer IS NOT NULL ORDER BY id DESC LIMIT 1",
                                     [replay_key, analyst]).fetchone()
                    if row is not None:
                        answer = self._store.decode_answer(row[1])
                        db.execute("UPDATE charges SET replays = replays + 1 WHERE id = ?", [row[0]])
                        return Ticket(row[0], answer)
                if own is not None:
                    check_fits(self._spent(db, analyst), cost, own, budget=f"analyst {analyst!r}",
                               hint="nothing was spent; ask for less, repeat an identical earlier query (free), "
                                    "or ask the data owner for a top-up (dpsql analyst top-up)")
                check_fits(self._spent(db), cost, self._store.total(db),
                           budget=None if analyst is None else "the total (shared by every analyst)")
                cursor = db.execute(
                    "INSERT INTO charges (time, sql, plan, epsilon, delta, composition, status, replay_key, "
                    "data_version, analyst) VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?, ?, ?)",
                    [now(), recorded(sql), recorded(plan), str(cost.epsilon), str(cost.delta),
                     self.composition.name, replay_key, data_version, analyst])
                return Ticket(cursor.lastrowid)

    def release(self, ticket: Ticket, answer: pa.Table | None) -> None:
        """Mark a charge released and keep its answer for replay (None: keep none; a query over public
        tables only, charged nothing, has nothing to replay).

        The spend is already on disk, so if this bookkeeping fails the answer is still released
        (with a warning): the charge stays ``reserved``, which counts as spent; only replay is lost.
        """
        self._finish(ticket, "released", None if answer is None else encode_answer(answer))

    def fail(self, ticket: Ticket) -> None:
        """Mark a charge failed (it stays spent). If that fails too, it stays ``reserved``: spent."""
        self._finish(ticket, "failed", None)

    def budget(self, analyst: str | None = None) -> Budget:
        """Total, spent, remaining and the history, read in one snapshot: the whole ledger's (None), or
        one analyst's own budget and only their own charges.

        Raises:
            AuthError (DP407): no such analyst.
        """
        def read(db, total: Cost, mine: str, args: list) -> Budget:
            rows = db.execute("SELECT id, time, sql, plan, epsilon, delta, status, replays, composition, analyst "
                              f"FROM charges {mine} ORDER BY id", args).fetchall()
            return self._budget(total, rows, analyst)
        return self._snapshot(analyst, read)

    def totals(self, analyst: str | None = None) -> Budget:
        """``budget(analyst)`` without the history: the kept sums of ``_spent`` and a count, so its cost
        does not grow with the history (the server reports it with every answer)."""
        def read(db, total: Cost, mine: str, args: list) -> Budget:
            spent = self._spent(db, analyst)
            queries = db.execute(f"SELECT COUNT(*) FROM charges {mine}", args).fetchone()[0]
            return Budget(float(total.epsilon), float(total.delta), float(spent.epsilon), float(spent.delta),
                          queries, (), self.path, analyst)
        return self._snapshot(analyst, read)

    def _snapshot(self, analyst: str | None, read) -> Budget:
        """``read(db, total, where, args)`` in one read transaction: the ledger's total and all charges
        (None), or the analyst's total and their charges only."""
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            if db is None:
                if analyst is not None:
                    raise _no_analyst(analyst)
                return self._budget(self._store.total(None), [], None)
            db.execute("BEGIN")
            try:
                total = self._store.total(db) if analyst is None else self._state(db, analyst)[0]
                return read(db, total, "" if analyst is None else "WHERE analyst = ?", [] if analyst is None else [analyst])
            finally:
                db.execute("COMMIT")

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
            spent_by: dict[str, tuple[Cost, int]] = {}
            rows = db.execute("SELECT analyst, epsilon, delta, composition FROM charges "
                              "WHERE analyst IS NOT NULL ORDER BY id").fetchall()
            for name in {r[0] for r in rows}:
                mine = [r[1:] for r in rows if r[0] == name]
                spent_by[name] = (self._compose(mine), len(mine))
            with self._corrupt_amounts():
                return people.listing(db, spent_by)

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

    def _budget(self, total: Cost, rows, analyst: str | None) -> Budget:
        history = tuple(Charge(id=r[0], time=r[1], sql=r[2], plan=r[3], epsilon=float(self._amount(r[4])),
                               delta=float(self._amount(r[5])), status=r[6], replays=r[7], composition=r[8],
                               analyst=r[9]) for r in rows)
        spent = self._compose((r[4], r[5], r[8]) for r in rows)
        return Budget(float(total.epsilon), float(total.delta), float(spent.epsilon), float(spent.delta),
                      len(history), history, self.path, analyst)

    def _finish(self, ticket: Ticket, status: str, answer: bytes | None) -> None:
        try:
            with self._lock, self._store.errors("record the outcome in", f"charge {ticket.id} stays spent"):
                self._store.ensure().execute(
                    "UPDATE charges SET status = ?, answer = ?, released_at = ? WHERE id = ? AND status = 'reserved'",
                    [status, answer, now(), ticket.id])
        except LedgerError as err:
            warnings.warn(f"{err.message} (recorded as reserved: it counts as spent)", RuntimeWarning,
                          stacklevel=3)

    def _spent(self, db: sqlite3.Connection, analyst: str | None = None) -> Cost:
        """What was spent in all (None) or by one analyst, read inside the caller's transaction.

        Charges are append-only and their amounts never change (triggers), so the sums are kept and
        only charges committed since are read: a charge costs the same at 10,000 charges as at 10. The
        number of charges and the newest id are checked on every call; any other state of the file
        sums everything again.
        """
        count, top = db.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM charges").fetchone()
        if count < self._sums.count or top < self._sums.seen:
            self._sums = _Sums()
        new = db.execute("SELECT id, epsilon, delta, composition, analyst FROM charges WHERE id > ? ORDER BY id",
                         [self._sums.seen]).fetchall()
        if new:
            mine: dict[str, list] = {}
            for row in new:
                if row[4] is not None:
                    mine.setdefault(row[4], []).append(row[1:4])
            self._sums.add(new[-1][0], len(new), self._compose(r[1:4] for r in new),
                           {name: self._compose(rows) for name, rows in mine.items()})
        if self._sums.count != count:            # not the file these sums were read from
            self._sums = _Sums()
            return self._spent(db, analyst)
        return self._sums.of(analyst)

    def _compose(self, rows) -> Cost:
        amounts = []
        for eps, dlt, composition in rows:
            if composition not in COMPOSITIONS:
                raise self._store.corrupt(f"a charge was made under composition {composition!r}, unknown to "
                                          "this version of dpsql")
            amounts.append((self._amount(eps), self._amount(dlt)))
        return self.composition.compose_amounts(amounts)

    def _amount(self, text) -> Decimal:
        try:
            value = Decimal(text) if isinstance(text, str) else None
        except InvalidOperation:
            value = None
        if value is None or not value.is_finite() or value < 0:
            raise self._store.corrupt(f"a recorded amount {text!r} is not a number >= 0")
        return value


class _Sums:
    """Exact running totals of the charges read so far: all of them, and per analyst."""

    def __init__(self):
        self.seen, self.count = 0, 0
        self.total = BASIC.compose(())
        self.by: dict[str, Cost] = {}

    def add(self, last_id: int, charges: int, total: Cost, by: dict[str, Cost]) -> None:
        self.seen, self.count = last_id, self.count + charges
        self.total = self.total + total
        for analyst, cost in by.items():
            self.by[analyst] = self.by.get(analyst, BASIC.compose(())) + cost

    def of(self, analyst: str | None) -> Cost:
        return self.total if analyst is None else self.by.get(analyst, BASIC.compose(()))


def _no_analyst(analyst: str | None) -> AuthError:
    """No ledger file yet, so no analyst: the same refusal as an unknown one."""
    shown = "unknown or revoked analyst token" if analyst is None else f"there is no analyst {analyst!r} in this ledger"
    return AuthError("DP407", shown, hint="ask the data owner for a token (dpsql analyst add)")


__all__ = ["Ledger", "LedgerError", "Ticket", "Analyst", "default_ledger_path", "MEMORY"]
