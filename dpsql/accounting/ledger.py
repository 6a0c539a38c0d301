"""The budget ledger: every spend is recorded durably in SQLite before the query runs.

Where it lives: ``ledger="budget.sqlite"`` / ``--ledger FILE``; by default beside the database file
as ``<db file>.dpsql-ledger.sqlite``; in memory (this connection only) only when the caller passes
``ledger=":memory:"``. A DuckDB connection object has no file to put the ledger beside, so
``dpsql.connect(con, ...)`` without ``ledger=`` is refused (DP403).

Charge before release (docs/architecture.md, threat model 6). ``reserve`` runs in one ``BEGIN IMMEDIATE``
transaction: it sums every recorded charge, refuses with ``BudgetExceeded`` (nothing written) if
the new cost does not fit, else inserts a ``reserved`` row and commits (WAL, ``synchronous=FULL``:
on disk before DuckDB starts). SQLite lets one writer at a time into that transaction, so two
processes can never both pass a check only one of them fits. The row becomes ``released`` (with
the answer, for replay) or ``failed``; a crash leaves it ``reserved``. All three count as spent.

The file fails closed: a corrupt file, a file that is not a dpsql ledger, or an empty one is never
recreated (DP406); a ledger held locked by another process for longer than ``BUSY_TIMEOUT`` seconds
is DP405; a ledger made for another policy is DP404. Its identity is the SHA-256 of the policy's
budget and tables (privacy units, L, C, columns, bounds, keys), so any change to them, raising the
total budget included, needs a new ledger path: a new ledger is a new budget, the owner's decision.
A new ledger file is built under a temporary name and hard-linked into place, so a ledger file that
exists is always complete, even when many processes create it at once.

Replay keys and data versions: ``accounting/replay.py``; the policy identity: ``accounting/identity.py``.

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
import datetime
import io
import json
import os
import secrets
import sqlite3
import threading
import urllib.parse
import warnings
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import pyarrow as pa

from dpsql.accounting.budget import BASIC, COMPOSITIONS, Budget, Charge, Cost, check_fits
from dpsql.errors import DpsqlError
from dpsql.policy import Policy
from dpsql.accounting.identity import FORMAT, canonical, differences, policy_document, policy_identity

SUFFIX = ".dpsql-ledger.sqlite"
MEMORY = ":memory:"
BUSY_TIMEOUT = 5.0          # seconds to wait for another process's transaction before DP405

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    sql TEXT NOT NULL,
    plan TEXT NOT NULL,
    epsilon TEXT NOT NULL,
    delta TEXT NOT NULL,
    composition TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'released', 'failed')),
    replay_key TEXT,
    data_version TEXT,
    answer BLOB,
    released_at TEXT,
    replays INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX charges_by_replay_key ON charges (replay_key, status);
CREATE TRIGGER meta_is_fixed BEFORE UPDATE ON meta
    BEGIN SELECT RAISE(ABORT, 'dpsql ledger: meta never changes'); END;
CREATE TRIGGER meta_is_kept BEFORE DELETE ON meta
    BEGIN SELECT RAISE(ABORT, 'dpsql ledger: meta never changes'); END;
CREATE TRIGGER charges_are_kept BEFORE DELETE ON charges
    BEGIN SELECT RAISE(ABORT, 'dpsql ledger: charges are never deleted'); END;
CREATE TRIGGER charges_are_fixed
    BEFORE UPDATE OF id, time, sql, plan, epsilon, delta, composition, replay_key, data_version ON charges
    BEGIN SELECT RAISE(ABORT, 'dpsql ledger: a charge never changes'); END;
CREATE TRIGGER status_moves_on_once BEFORE UPDATE OF status ON charges
    WHEN OLD.status <> 'reserved' AND NEW.status <> OLD.status
    BEGIN SELECT RAISE(ABORT, 'dpsql ledger: only a reserved charge changes status'); END;
"""


class LedgerError(DpsqlError):
    """The ledger cannot be used safely; dpsql fails closed and nothing is spent (DP403-DP406).

    Attributes:
        path: the ledger file (or None).
        ledger_identity, policy_identity, differences: for DP404, which policy entries differ.
    """
    code = "DP406"

    def __init__(self, code: str, message: str, *, path: str | None = None, hint: str = "",
                 ledger_identity: str | None = None, policy_identity: str | None = None,
                 differences: tuple[str, ...] = ()):
        self.path = path
        self.ledger_identity = ledger_identity
        self.policy_identity = policy_identity
        self.differences = differences
        super().__init__(code, message, hint=hint)


@dataclass(frozen=True)
class Ticket:
    """What ``reserve`` hands back: a new charge to run, or an earlier answer to replay at no cost."""
    id: int
    answer: pa.Table | None = None

    @property
    def replayed(self) -> bool:
        return self.answer is not None


# --- identities and keys -------------------------------------------------------------------------


def default_ledger_path(db_path) -> str:
    """Where a database file's ledger lives unless told otherwise.

    >>> default_ledger_path("data/people.duckdb")
    'data/people.duckdb.dpsql-ledger.sqlite'
    """
    return os.fspath(db_path) + SUFFIX


_IO_HINT = ("check the path, its directory and their permissions; dpsql never recreates a ledger "
            "(that would reset the budget)")

# SQLite primary result codes (sqlite3 names them only from Python 3.11).
_BUSY_CODES = {5, 6}                     # SQLITE_BUSY, SQLITE_LOCKED
_IO_CODES = {3, 8, 10, 13, 14}           # PERM, READONLY, IOERR, FULL, CANTOPEN


def _error_kind(e: sqlite3.Error) -> str:
    """busy (another process holds the lock), io (cannot read/write the file) or corrupt."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        primary = code & 0xFF
        return "busy" if primary in _BUSY_CODES else "io" if primary in _IO_CODES else "corrupt"
    text = str(e).lower()
    if "locked" in text or "busy" in text:
        return "busy"
    if any(w in text for w in ("unable to open", "readonly", "disk i/o", "is full", "permission")):
        return "io"
    return "corrupt"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _encode(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _decode(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(io.BytesIO(blob)).read_all()


# --- the ledger ----------------------------------------------------------------------------------

class Ledger:
    """Persistent, crash-safe privacy budget records for one policy (see the module docstring).

    Thread-safe (one SQLite connection behind a lock) and process-safe (SQLite's write lock).
    A missing ledger file is created on the first charge, not before: reading a budget or
    explaining a query never creates files.
    """

    def __init__(self, path, policy: Policy, *, timeout: float | None = None):
        self.identity = policy_identity(policy)
        self._document = policy_document(policy)
        self.total = Cost.of(policy.budget_epsilon, policy.budget_delta)
        self.composition = BASIC
        self.timeout = BUSY_TIMEOUT if timeout is None else timeout
        self.memory = isinstance(path, str) and path == MEMORY
        self.path = MEMORY if self.memory else os.path.abspath(os.fspath(path))
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        with self._lock, self._sqlite_errors("open"):
            if self.memory:
                self._db = sqlite3.connect(MEMORY, isolation_level=None, check_same_thread=False)
                self._db.executescript(SCHEMA)
                self._write_meta(self._db)
            elif os.path.lexists(self.path):
                self._db = self._open_existing()

    # -- public operations --

    def cost(self, plan) -> Cost:
        return self.composition.cost(plan)

    def reserve(self, cost: Cost, *, sql: str, plan: str, replay_key: str | None = None,
                data_version: str | None = None, fresh: bool = False) -> Ticket:
        """Charge ``cost`` durably, or hand back an earlier identical answer, or refuse.

        Raises:
            BudgetExceeded (DP402): it does not fit; nothing is written.
            LedgerError (DP404-DP406): the ledger is foreign, locked or corrupt; nothing is spent.
        """
        with self._lock, self._sqlite_errors("charge"):
            db = self._ensure()
            db.execute("BEGIN IMMEDIATE")
            try:
                if replay_key is not None and not fresh:
                    row = db.execute("SELECT id, answer FROM charges WHERE replay_key = ? AND "
                                     "status = 'released' AND answer IS NOT NULL ORDER BY id DESC LIMIT 1",
                                     [replay_key]).fetchone()
                    if row is not None:
                        answer = self._decode(row[1])
                        db.execute("UPDATE charges SET replays = replays + 1 WHERE id = ?", [row[0]])
                        db.execute("COMMIT")
                        return Ticket(row[0], answer)
                check_fits(self._spent(db), cost, self.total)
                cursor = db.execute(
                    "INSERT INTO charges (time, sql, plan, epsilon, delta, composition, status, replay_key, "
                    "data_version) VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?, ?)",
                    [_now(), sql, plan, str(cost.epsilon), str(cost.delta), self.composition.name,
                     replay_key, data_version])
                db.execute("COMMIT")
                return Ticket(cursor.lastrowid)
            finally:
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")

    def release(self, ticket: Ticket, answer: pa.Table) -> None:
        """Mark a charge released and keep its answer for replay.

        The spend is already on disk, so if this bookkeeping fails the answer is still released
        (with a warning): the charge stays ``reserved``, which counts as spent; only replay is lost.
        """
        self._finish(ticket, "released", _encode(answer))

    def fail(self, ticket: Ticket) -> None:
        """Mark a charge failed (it stays spent). If that fails too, it stays ``reserved``: spent."""
        self._finish(ticket, "failed", None)

    def budget(self) -> Budget:
        """Total, spent, remaining and the history, read in one snapshot."""
        with self._lock, self._sqlite_errors("read"):
            if self._db is None and (self.memory or os.path.lexists(self.path)):
                self._ensure()
            rows = []
            if self._db is not None:
                self._db.execute("BEGIN")
                try:
                    rows = self._db.execute(
                        "SELECT id, time, sql, plan, epsilon, delta, status, replays, composition "
                        "FROM charges ORDER BY id").fetchall()
                finally:
                    self._db.execute("COMMIT")
            history = tuple(Charge(id=r[0], time=r[1], sql=r[2], plan=r[3], epsilon=float(self._amount(r[4])),
                                   delta=float(self._amount(r[5])), status=r[6], replays=r[7],
                                   composition=r[8]) for r in rows)
            spent = self._compose((r[4], r[5], r[8]) for r in rows)
            return Budget(float(self.total.epsilon), float(self.total.delta), float(spent.epsilon),
                          float(spent.delta), len(history), history, self.path)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- internals --

    def _finish(self, ticket: Ticket, status: str, answer: bytes | None) -> None:
        try:
            with self._lock, self._sqlite_errors("record the outcome in", f"charge {ticket.id} stays spent"):
                self._ensure().execute(
                    "UPDATE charges SET status = ?, answer = ?, released_at = ? WHERE id = ? AND status = 'reserved'",
                    [status, answer, _now(), ticket.id])
        except LedgerError as err:
            warnings.warn(f"{err.message} (recorded as reserved: it counts as spent)", RuntimeWarning,
                          stacklevel=3)

    def _spent(self, db: sqlite3.Connection) -> Cost:
        return self._compose(db.execute("SELECT epsilon, delta, composition FROM charges"))

    def _compose(self, rows) -> Cost:
        costs = []
        for eps, dlt, composition in rows:
            if composition not in COMPOSITIONS:
                raise self._corrupt(f"a charge was made under composition {composition!r}, unknown to this "
                                    "version of dpsql")
            costs.append(Cost(self._amount(eps), self._amount(dlt)))
        return self.composition.compose(costs)

    def _amount(self, text) -> Decimal:
        try:
            value = Decimal(text) if isinstance(text, str) else None
        except InvalidOperation:
            value = None
        if value is None or not value.is_finite() or value < 0:
            raise self._corrupt(f"a recorded amount {text!r} is not a number >= 0")
        return value

    def _decode(self, blob) -> pa.Table:
        try:
            return _decode(blob)
        except (pa.ArrowException, TypeError, ValueError):
            raise self._corrupt("a released answer cannot be read back") from None

    def _corrupt(self, problem: str) -> LedgerError:
        return LedgerError(
            "DP406", f"budget ledger {self.path} is corrupt or not a dpsql ledger: {problem}", path=self.path,
            hint="dpsql never recreates a ledger (that would reset the budget): restore it from a backup, "
                 "or, if the data owner decides to start a new budget, pass a new ledger path")

    @contextlib.contextmanager
    def _sqlite_errors(self, doing: str, note: str = "nothing was spent"):
        """Every SQLite or file error becomes a LedgerError: locked (DP405) or unusable (DP406)."""
        try:
            yield
        except sqlite3.Error as e:
            kind = _error_kind(e)
            if kind == "busy":
                raise LedgerError(
                    "DP405", f"budget ledger {self.path} is locked by another process (waited {self.timeout:g} s); "
                             f"{note}", path=self.path,
                    hint="try again; if it stays locked, find the process holding the ledger") from None
            if kind == "io":
                raise LedgerError("DP406", f"cannot {doing} budget ledger {self.path}: {e}; {note}",
                                  path=self.path, hint=_IO_HINT) from None
            raise self._corrupt(f"{e}; {note}") from None
        except OSError as e:
            raise LedgerError("DP406", f"cannot {doing} budget ledger {self.path}: {e.strerror or e}; {note}",
                              path=self.path, hint=_IO_HINT) from None

    def _ensure(self) -> sqlite3.Connection:
        if self._db is None and self.memory:
            raise LedgerError("DP406", "the in-memory budget ledger was closed; connect again")
        if self._db is None:
            if not os.path.lexists(self.path):
                self._create()
            self._db = self._open_existing()
        return self._db

    def _connect(self, path: str, mode: str) -> sqlite3.Connection:
        uri = f"file:{urllib.parse.quote(path)}?mode={mode}"
        return sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None,
                               check_same_thread=False)

    def _write_meta(self, db: sqlite3.Connection) -> None:
        meta = {"format": FORMAT, "policy_identity": self.identity, "policy": canonical(self._document),
                "total_epsilon": str(self.total.epsilon), "total_delta": str(self.total.delta),
                "created": _now()}
        db.execute("BEGIN")
        db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
        db.execute("COMMIT")

    def _create(self) -> None:
        """Build a complete ledger under a temporary name, then link it into place atomically.

        Hard-linking fails if the path exists, so of many processes creating it at once exactly one
        wins and the rest open the winner's file; no process ever sees a half-written ledger.
        """
        tmp = f"{self.path}.new-{secrets.token_hex(6)}"
        try:
            db = self._connect(tmp, "rwc")
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
                db.executescript("BEGIN;" + SCHEMA + "COMMIT;")
                self._write_meta(db)
            finally:
                db.close()   # checkpoints the WAL into the file
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass         # another process created it first: we open theirs
            directory = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        finally:
            for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)

    def _open_existing(self) -> sqlite3.Connection:
        """Open and check a ledger file; nothing is written to a file that fails a check."""
        if os.path.isdir(self.path):
            raise LedgerError("DP406", f"budget ledger {self.path} is a directory, not a ledger file",
                              path=self.path, hint=_IO_HINT)
        db = self._connect(self.path, "rw")
        try:
            db.execute("PRAGMA synchronous=FULL")
            if db.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
                raise self._corrupt("SQLite's integrity check failed")
            try:
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                db.execute("SELECT id, time, sql, plan, epsilon, delta, composition, status, replay_key, "
                           "data_version, answer, released_at, replays FROM charges LIMIT 0")
            except sqlite3.OperationalError as e:
                if "no such" not in str(e):
                    raise
                raise self._corrupt("it has no dpsql tables (an empty file, or another program's database)") \
                    from None
            if meta.get("format") != FORMAT:
                raise self._corrupt(f"its format is {meta.get('format')!r}, expected {FORMAT!r}")
            self._check_identity(meta)
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return db
        except BaseException:
            db.close()
            raise

    def _check_identity(self, meta: dict) -> None:
        found = meta.get("policy_identity")
        if found == self.identity:
            return
        try:
            theirs = json.loads(meta.get("policy", "{}"))
        except ValueError:
            theirs = {}
        changed = tuple(differences(theirs, json.loads(canonical(self._document)))) or ("(unknown)",)
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        raise LedgerError(
            "DP404", f"budget ledger {self.path} belongs to another policy (ledger policy {str(found)[:12]}, "
                     f"this policy {self.identity[:12]}; they differ in: {shown}); nothing was spent",
            path=self.path, ledger_identity=found, policy_identity=self.identity, differences=changed,
            hint="use the policy this ledger was created with, or pass a new ledger path (a new ledger "
                 "starts a new budget: the data owner's decision)")


__all__ = ["Ledger", "LedgerError", "Ticket", "default_ledger_path"]
