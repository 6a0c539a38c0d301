"""The budget ledger: every spend is recorded durably in SQLite before the query runs.

Charge before release (docs/architecture.md, threat model 6). ``reserve`` runs in one ``BEGIN IMMEDIATE``
transaction: it sums every recorded charge, refuses with ``BudgetExceeded`` (nothing written) if
the new cost does not fit, else inserts a ``reserved`` row and commits (WAL, ``synchronous=FULL``:
on disk before DuckDB starts). SQLite lets one writer at a time into that transaction, so two
processes can never both pass a check only one of them fits. The row becomes ``released`` (with
the answer, for replay) or ``failed``; a crash leaves it ``reserved``. All three count as spent.

Storage only: the SQL text and plan summary arrive as strings and are kept as given. Where the file
lives and how it fails closed: ``accounting/store.py``; replay keys and data versions:
``accounting/replay.py``; the policy identity: ``accounting/identity.py``.

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
import sqlite3
import threading
import warnings
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import pyarrow as pa

from dpsql.accounting.budget import BASIC, COMPOSITIONS, Budget, Charge, Cost, check_fits
from dpsql.accounting.identity import policy_document, policy_identity
from dpsql.accounting.store import MEMORY, LedgerError, Store, default_ledger_path, encode_answer, now
from dpsql.policy import Policy


@dataclass(frozen=True)
class Ticket:
    """What ``reserve`` hands back: a new charge to run, or an earlier answer to replay at no cost."""
    id: int
    answer: pa.Table | None = None

    @property
    def replayed(self) -> bool:
        return self.answer is not None


class Ledger:
    """Persistent, crash-safe privacy budget records for one policy (see the module docstring).

    Thread-safe (one SQLite connection behind a lock) and process-safe (SQLite's write lock).
    A missing ledger file is created on the first charge, not before: reading a budget or
    explaining a query never creates files.
    """

    def __init__(self, path, policy: Policy, *, timeout: float | None = None):
        self.identity = policy_identity(policy)
        self.total = Cost.of(policy.budget_epsilon, policy.budget_delta)
        self.composition = BASIC
        self._lock = threading.RLock()
        self._store = Store(path, self.identity, policy_document(policy), self.total, timeout=timeout)
        self.path = self._store.path

    def cost(self, plan) -> Cost:
        return self.composition.cost(plan)

    def reserve(self, cost: Cost, *, sql: str, plan: str, replay_key: str | None = None,
                data_version: str | None = None, fresh: bool = False) -> Ticket:
        """Charge ``cost`` durably, or hand back an earlier identical answer, or refuse.

        Raises:
            BudgetExceeded (DP402): it does not fit; nothing is written.
            LedgerError (DP404-DP406): the ledger is foreign, locked or corrupt; nothing is spent.
        """
        with self._lock, self._store.errors("charge"):
            db = self._store.ensure()
            db.execute("BEGIN IMMEDIATE")
            try:
                if replay_key is not None and not fresh:
                    row = db.execute("SELECT id, answer FROM charges WHERE replay_key = ? AND "
                                     "status = 'released' AND answer IS NOT NULL ORDER BY id DESC LIMIT 1",
                                     [replay_key]).fetchone()
                    if row is not None:
                        answer = self._store.decode_answer(row[1])
                        db.execute("UPDATE charges SET replays = replays + 1 WHERE id = ?", [row[0]])
                        db.execute("COMMIT")
                        return Ticket(row[0], answer)
                check_fits(self._spent(db), cost, self.total)
                cursor = db.execute(
                    "INSERT INTO charges (time, sql, plan, epsilon, delta, composition, status, replay_key, "
                    "data_version) VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?, ?)",
                    [now(), sql, plan, str(cost.epsilon), str(cost.delta), self.composition.name,
                     replay_key, data_version])
                db.execute("COMMIT")
                return Ticket(cursor.lastrowid)
            finally:
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")

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

    def budget(self) -> Budget:
        """Total, spent, remaining and the history, read in one snapshot."""
        with self._lock, self._store.errors("read"):
            db = self._store.existing()
            rows = []
            if db is not None:
                db.execute("BEGIN")
                try:
                    rows = db.execute(
                        "SELECT id, time, sql, plan, epsilon, delta, status, replays, composition "
                        "FROM charges ORDER BY id").fetchall()
                finally:
                    db.execute("COMMIT")
            history = tuple(Charge(id=r[0], time=r[1], sql=r[2], plan=r[3], epsilon=float(self._amount(r[4])),
                                   delta=float(self._amount(r[5])), status=r[6], replays=r[7],
                                   composition=r[8]) for r in rows)
            spent = self._compose((r[4], r[5], r[8]) for r in rows)
            return Budget(float(self.total.epsilon), float(self.total.delta), float(spent.epsilon),
                          float(spent.delta), len(history), history, self.path)

    def close(self) -> None:
        with self._lock:
            self._store.close()

    def _finish(self, ticket: Ticket, status: str, answer: bytes | None) -> None:
        try:
            with self._lock, self._store.errors("record the outcome in", f"charge {ticket.id} stays spent"):
                self._store.ensure().execute(
                    "UPDATE charges SET status = ?, answer = ?, released_at = ? WHERE id = ? AND status = 'reserved'",
                    [status, answer, now(), ticket.id])
        except LedgerError as err:
            warnings.warn(f"{err.message} (recorded as reserved: it counts as spent)", RuntimeWarning,
                          stacklevel=3)

    def _spent(self, db: sqlite3.Connection) -> Cost:
        return self._compose(db.execute("SELECT epsilon, delta, composition FROM charges"))

    def _compose(self, rows) -> Cost:
        costs = []
        for eps, dlt, composition in rows:
            if composition not in COMPOSITIONS:
                raise self._store.corrupt(f"a charge was made under composition {composition!r}, unknown to "
                                          "this version of dpsql")
            costs.append(Cost(self._amount(eps), self._amount(dlt)))
        return self.composition.compose(costs)

    def _amount(self, text) -> Decimal:
        try:
            value = Decimal(text) if isinstance(text, str) else None
        except InvalidOperation:
            value = None
        if value is None or not value.is_finite() or value < 0:
            raise self._store.corrupt(f"a recorded amount {text!r} is not a number >= 0")
        return value


__all__ = ["Ledger", "LedgerError", "Ticket", "default_ledger_path", "MEMORY"]
