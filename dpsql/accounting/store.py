"""The ledger's SQLite file: where it lives, its schema, how it is created, opened and checked.

Where it lives: ``ledger="budget.sqlite"`` / ``--ledger FILE``; by default beside the database file
as ``<db file>.dpsql-ledger.sqlite``; in memory (this connection only) only when the caller passes
``ledger=":memory:"``. A DuckDB connection object has no file to put the ledger beside, so
``dpsql.connect(con, ...)`` without ``ledger=`` is refused (DP403).

The file fails closed: a corrupt file, a file that is not a dpsql ledger, or an empty one is never
recreated (DP406); a ledger held locked by another process for longer than ``BUSY_TIMEOUT`` seconds
is DP405; a ledger made for another policy is DP404. Its identity is the SHA-256 of the policy's
budget and tables (``accounting/identity.py``), so any change to them, raising the total budget
included, needs a new ledger path: a new ledger is a new budget, the owner's decision. A new ledger
file is built under a temporary name and hard-linked into place, so a ledger file that exists is
always complete, even when many processes create it at once.
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

from dpsql.accounting.budget import Cost
from dpsql.accounting.identity import FORMAT, canonical, differences
from dpsql.errors import DpsqlError

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

    Not locked itself: the Ledger's lock serialises every use of its one SQLite connection.
    """

    def __init__(self, path, identity: str, document: dict, total: Cost, *, timeout: float | None = None):
        self.identity = identity
        self._document = document
        self.total = total
        self.timeout = BUSY_TIMEOUT if timeout is None else timeout
        self.memory = isinstance(path, str) and path == MEMORY
        self.path = MEMORY if self.memory else os.path.abspath(os.fspath(path))
        self._db: sqlite3.Connection | None = None
        with self.errors("open"):
            if self.memory:
                self._db = sqlite3.connect(MEMORY, isolation_level=None, check_same_thread=False)
                self._db.executescript(SCHEMA)
                self._write_meta(self._db)
            elif os.path.lexists(self.path):
                self._db = self._open_existing()

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

    # -- the file --

    def _connect(self, path: str, mode: str) -> sqlite3.Connection:
        uri = f"file:{urllib.parse.quote(path)}?mode={mode}"
        return sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None,
                               check_same_thread=False)

    def _write_meta(self, db: sqlite3.Connection) -> None:
        meta = {"format": FORMAT, "policy_identity": self.identity, "policy": canonical(self._document),
                "total_epsilon": str(self.total.epsilon), "total_delta": str(self.total.delta),
                "created": now()}
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
        """Open and check a ledger file; nothing is written to a file that fails a check."""
        if os.path.isdir(self.path):
            raise LedgerError("DP406", f"budget ledger {self.path} is a directory, not a ledger file",
                              path=self.path, hint=_IO_HINT)
        db = self._connect(self.path, "rw")
        try:
            db.execute("PRAGMA synchronous=FULL")
            if db.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
                raise self.corrupt("SQLite's integrity check failed")
            try:
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                db.execute("SELECT id, time, sql, plan, epsilon, delta, composition, status, replay_key, "
                           "data_version, answer, released_at, replays FROM charges LIMIT 0")
            except sqlite3.OperationalError as e:
                if "no such" not in str(e):
                    raise
                raise self.corrupt("it has no dpsql tables (an empty file, or another program's database)") \
                    from None
            if meta.get("format") != FORMAT:
                raise self.corrupt(f"its format is {meta.get('format')!r}, expected {FORMAT!r}")
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


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
