"""The ledger's SQLite file: where it lives, its schema, how it is created, opened and checked.

Where it lives: ``ledger="budget.sqlite"`` / ``--ledger FILE``; by default beside the database file
as ``<db file>.dpsql-ledger.sqlite``; in memory (this connection only) only when the caller passes
``ledger=":memory:"``. A DuckDB connection object has no file to put the ledger beside, so
``dpsql.connect(con, ...)`` without ``ledger=`` is refused (DP403).

The file fails closed: a corrupt file, a file that is not a dpsql ledger, or an empty one is never
recreated (DP406); a ledger held locked by another process for longer than ``BUSY_TIMEOUT`` seconds
is DP405. A policy may change (its bounds, keys, tables, total budget): the change is recorded and
the newest total is in force; a policy that changes a privacy unit or a link is refused (DP404) until
the owner rebinds (``accounting/policies.py``). A format 1 or 2 ledger is upgraded in place, in one
transaction (``accounting/schema.py``). A new ledger file is built under a temporary name and
hard-linked into place, so a ledger file that exists is always complete, even when many processes
create it at once.
"""
from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import secrets
import sqlite3
import urllib.parse

import pyarrow as pa

from dpsql.accounting import policies, schema
from dpsql.accounting.budget import Cost
from dpsql.accounting.identity import accountant_of
from dpsql.errors import DpsqlError

SUFFIX = ".dpsql-ledger.sqlite"
MEMORY = ":memory:"
BUSY_TIMEOUT = 5.0          # seconds to wait for another process's transaction before DP405



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


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def encode_answer(table: pa.Table) -> bytes:
    """A released answer as stored for replay: an Arrow IPC stream, so it reads back exactly."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


class Store:
    """One ledger file (or in-memory database), opened and checked lazily, created on first write.

    ``document`` is the caller's policy (accounting/identity.py ``policy_document``) and ``total`` its
    budget; without them the store adopts the policy the ledger recorded last (and a missing file is
    an error: there is nothing to create it from). Not locked itself: the Ledger's lock serialises
    every use of its one SQLite connection.
    """

    def __init__(self, path, document: dict | None, total: Cost | None, *, timeout: float | None = None,
                 record: bool = True):
        self._document = document
        self._record = record          # False: a changed policy is checked, not recorded (read-only uses)
        self._total = total
        self.identity = None if document is None else policies.document_identity(document)
        self.timeout = BUSY_TIMEOUT if timeout is None else timeout
        self.memory = isinstance(path, str) and path == MEMORY
        self.path = MEMORY if self.memory else os.path.abspath(os.fspath(path))
        self._db: sqlite3.Connection | None = None
        if self.memory and document is None:
            raise LedgerError("DP403", "an in-memory budget ledger needs a policy", path=self.path)
        with self.errors("open"):
            if self.memory:
                self._db = sqlite3.connect(MEMORY, isolation_level=None, check_same_thread=False)
                self._build(self._db)
            elif os.path.lexists(self.path):
                self._db = self._open_existing()
            elif document is None:
                raise LedgerError("DP406", f"there is no budget ledger at {self.path}", path=self.path,
                                  hint="check the path; a new ledger is made from a policy (pass --policy)")

    def ensure(self) -> sqlite3.Connection:
        """The connection, creating the file if it does not exist yet (a charge is about to be written)."""
        if self._db is None and self.memory:
            raise LedgerError("DP406", "the in-memory budget ledger was closed; connect again")
        if self._db is None:
            if not os.path.lexists(self.path):
                self._create()
            self._db = self._open_existing()
        return self._db

    def existing(self) -> sqlite3.Connection | None:
        """The connection if there is a ledger to read; reading never creates a file."""
        if self._db is None and (self.memory or os.path.lexists(self.path)):
            self.ensure()
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    @property
    def document(self) -> dict:
        """The policy document in force for this store (the caller's, or the ledger's newest)."""
        assert self._document is not None   # set by __init__ or by opening the file
        return self._document

    def total(self, db: sqlite3.Connection | None) -> Cost:
        """The total budget in force: the newest recorded policy's (read inside the caller's transaction)."""
        return self.in_force(db)[0]

    def in_force(self, db: sqlite3.Connection | None) -> tuple[Cost, str]:
        """The total budget and the accountant in force: the newest recorded policy's (read inside the
        caller's transaction), or the caller's policy's while there is no file."""
        if db is None:
            assert self._total is not None   # a missing file is only allowed with a policy
            return self._total, accountant_of(self.document)
        return self.check_bound(db)

    def newest(self, db: sqlite3.Connection) -> policies.Recorded:
        return self._policy(policies.newest, db)

    def _policy(self, read, db: sqlite3.Connection):
        """What ``read`` finds in the policy history; a ledger without a readable one is corrupt."""
        try:
            found = read(db)
        except (ValueError, ArithmeticError, TypeError, KeyError, DpsqlError):
            raise self.corrupt("its policy history cannot be read") from None
        if found is None:
            raise self.corrupt("it records no policy")
        return found

    def decode_answer(self, blob) -> pa.Table:
        try:
            return pa.ipc.open_stream(io.BytesIO(blob)).read_all()
        except (pa.ArrowException, TypeError, ValueError):
            raise self.corrupt("a released answer cannot be read back") from None

    def corrupt(self, problem: str) -> LedgerError:
        return LedgerError(
            "DP406", f"budget ledger {self.path} is corrupt or not a dpsql ledger: {problem}", path=self.path,
            hint="dpsql never recreates a ledger (that would reset the budget): restore it from a backup, "
                 "or, if the data owner decides to start a new budget, pass a new ledger path")

    @contextlib.contextmanager
    def errors(self, doing: str, note: str = "nothing was spent"):
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
            raise self.corrupt(f"{e}; {note}") from None
        except OSError as e:
            raise LedgerError("DP406", f"cannot {doing} budget ledger {self.path}: {e.strerror or e}; {note}",
                              path=self.path, hint=_IO_HINT) from None

    @contextlib.contextmanager
    def transaction(self, db: sqlite3.Connection):
        """``BEGIN IMMEDIATE`` (SQLite's one writer) ... ``COMMIT``; rolled back on any error."""
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")

    # -- the file --

    def _connect(self, path: str, mode: str) -> sqlite3.Connection:
        uri = f"file:{urllib.parse.quote(path)}?mode={mode}"
        return sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None,
                               check_same_thread=False)

    def _build(self, db: sqlite3.Connection) -> None:
        """A new ledger: the schema, its format, and the policy it starts with, in one transaction."""
        with self.transaction(db):
            schema.run(db, schema.SCHEMA_1 + schema.SCHEMA_2 + schema.SCHEMA_3 + schema.SCHEMA_4)
            db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                           [("format", schema.FORMAT), ("created", now())])
            policies.record(db, now(), "created", self.document, policies.binding(self.document),
                            self.total(None), None)

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
                self._build(db)
            finally:
                db.close()   # checkpoints the WAL into the file
            _fsync(tmp)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass         # another process created it first: we open theirs
            _fsync(os.path.dirname(self.path) or ".")
        finally:
            for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)

    def _open_existing(self) -> sqlite3.Connection:
        """Open, check, upgrade (format 1) and adopt a ledger file; a file that fails a check is not written."""
        if os.path.isdir(self.path):
            raise LedgerError("DP406", f"budget ledger {self.path} is a directory, not a ledger file",
                              path=self.path, hint=_IO_HINT)
        db = self._connect(self.path, "rw")
        try:
            db.execute("PRAGMA synchronous=FULL")
            if db.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
                raise self.corrupt("SQLite's integrity check failed")
            meta = self._meta(db)
            if meta.get("format") not in schema.FORMATS:
                raise self.corrupt(f"its format is {meta.get('format')!r}, expected {schema.FORMAT!r}")
            if meta.get("format") != schema.FORMAT:
                self._check_before_upgrade(db, meta)
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            if meta.get("format") != schema.FORMAT:
                with self.transaction(db):
                    schema.upgrade(db, now(), self.corrupt)
            self._columns(db)
            self._adopt(db)
            return db
        except BaseException:
            db.close()
            raise

    def _meta(self, db: sqlite3.Connection) -> dict:
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            db.execute("SELECT id, time, sql, plan, epsilon, delta, composition, status, replay_key, "
                       "data_version, answer, released_at, replays FROM charges LIMIT 0")
            return meta
        except sqlite3.OperationalError as e:
            if "no such" not in str(e):
                raise
            raise self.corrupt("it has no dpsql tables (an empty file, or another program's database)") from None

    def _columns(self, db: sqlite3.Connection) -> None:
        try:
            schema.check_columns(db)
        except sqlite3.OperationalError as e:
            if "no such" not in str(e):
                raise
            raise self.corrupt(f"its tables are not a {schema.FORMAT} ledger's ({e})") from None

    def _check_before_upgrade(self, db: sqlite3.Connection, meta: dict) -> None:
        """An older ledger of an incompatible policy is refused before anything is written."""
        if self._document is None:
            return
        if meta.get("format") in (schema.FORMAT_2, schema.FORMAT_3):   # a policy history to check against
            self._check_binding(self.newest(db).binding)
            return
        try:
            theirs = policies.binding(json.loads(meta.get("policy", "{}")))
        except (ValueError, AttributeError):
            raise self.corrupt("its format 1 policy record cannot be read") from None
        self._check_binding(theirs)

    def _adopt(self, db: sqlite3.Connection) -> None:
        """Take the policy in force from the ledger (no policy given), or check the caller's against it
        and record it if it changed (accounting/policies.py: what may change, what needs a rebind)."""
        found = self.newest(db)
        if self._document is None:
            self._document, self.identity = found.document, found.identity
        elif found.identity != self.identity:
            self._check_binding(found.binding)
            if self._record:
                self.record(db, "changed")

    def record(self, db: sqlite3.Connection, kind: str) -> tuple[str, ...]:
        """Record this store's policy as the one in force (kind ``changed`` or ``rebound``), checked
        again under the write lock; returns the tables whose binding it changes (a rebind's)."""
        with self.transaction(db):
            found = self.newest(db)
            new = policies.binding(self.document)
            merged, conflicts = policies.merge(found.binding, new)
            kind = kind if conflicts else "changed"     # a rebind that changes no unit is a plain change
            if kind == "changed":
                if found.identity == self.identity:
                    return ()    # nothing new (another process may have recorded the same change first)
                self._check_binding(found.binding)
            bound = merged if kind == "changed" else {**found.binding, **new}   # a rebind: the new one wins
            policies.record(db, now(), kind, self.document, bound, self.total(None), found)
            return conflicts

    def rebind(self, document: dict, total: Cost) -> tuple[str, ...]:
        """The owner's explicit decision: ``document`` is in force and its units bind past spends."""
        self._document, self._total = document, total
        self.identity = policies.document_identity(document)
        return self.record(self.ensure(), "rebound")

    def check_bound(self, db: sqlite3.Connection) -> tuple[Cost, str]:
        """The total and the accountant in force, after checking that no rebind since this store opened
        changed what this policy's spends are about (read inside the caller's charge transaction)."""
        total, bound, accountant = self._policy(policies.in_force, db)
        if self._total is not None:   # a caller's policy: its spends must still mean what they meant
            self._check_binding(bound)
        return total, accountant

    def _check_binding(self, theirs: dict) -> None:
        _merged, conflicts = policies.merge(theirs, policies.binding(self.document))
        if not conflicts:
            return
        shown = ", ".join(conflicts[:4]) + (f" and {len(conflicts) - 4} more" if len(conflicts) > 4 else "")
        raise LedgerError(
            "DP404", f"budget ledger {self.path} was spent under another privacy unit: this policy changes "
                     f"{shown}, which would re-interpret past spends; nothing was spent",
            path=self.path, policy_identity=self.identity, differences=conflicts,
            hint="use a policy with the ledger's privacy units and links; or, if the data owner decides that "
                 "past spends count against the new units, record it: dpsql ledger rebind --ledger FILE "
                 "--policy FILE; or pass a new ledger path (a new budget)")


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
