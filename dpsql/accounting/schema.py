"""The ledger file's schema, its formats, and the in-place upgrade of older ledgers.

Format 1 (``dpsql-ledger/1``) held the policy in ``meta`` (immutable) and the charges. Format 2 adds,
without changing a recorded row: ``charges.analyst`` (NULL: the owner), the analysts and their events
(add, top-up, revoke), the policy history (every policy the ledger was used with, its binding and
total budget) and a record of upgrades. Format 3 adds ``charges.releases`` (what each charge released,
in its mechanisms' own terms: mechanisms/releases.py, as JSON; NULL for a charge made before, which an
accountant composes as its recorded (epsilon, delta)) and ``policies.accountant`` (how the history
composes under that policy; ``basic`` for every older row, which is what they meant). Format 4 adds
``measurements``: each released noisy measurement of a charge, by identity (accounting/measurements.py),
its groups' keys and value as Arrow IPC, written with the charge's release in one transaction (a
charge of before has none: it replays only as a byte-identical query). A new ledger is
made as a format 1 file upgraded in the same transaction, so new and upgraded ledgers have one schema,
and every test exercises the upgrade.

Every table is append-only (triggers): what changes over time is a new row, never an edit. The one
edit is ``meta.format``, set once by the upgrade (the trigger is dropped and recreated in that
transaction) so that an older dpsql, which knows nothing of analysts, policy changes or accountants,
refuses an upgraded ledger instead of spending past an analyst's budget, an outdated total, or a
history it would compose otherwise.
"""
from __future__ import annotations

import json
import sqlite3
from decimal import Decimal

from dpsql.accounting import policies
from dpsql.accounting.budget import Cost
from dpsql.errors import DpsqlError

FORMAT_1 = "dpsql-ledger/1"
FORMAT_2 = "dpsql-ledger/2"
FORMAT_3 = "dpsql-ledger/3"
FORMAT = "dpsql-ledger/4"
FORMATS = (FORMAT_1, FORMAT_2, FORMAT_3, FORMAT)

_KEPT = "BEGIN SELECT RAISE(ABORT, 'dpsql ledger: {what} never change'); END"

SCHEMA_1 = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE charges (
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
)""",
    "CREATE INDEX charges_by_replay_key ON charges (replay_key, status)",
    "CREATE TRIGGER meta_is_fixed BEFORE UPDATE ON meta BEGIN SELECT RAISE(ABORT, 'dpsql ledger: meta never changes'); END",
    "CREATE TRIGGER meta_is_kept BEFORE DELETE ON meta BEGIN SELECT RAISE(ABORT, 'dpsql ledger: meta never changes'); END",
    "CREATE TRIGGER charges_are_kept BEFORE DELETE ON charges "
    "BEGIN SELECT RAISE(ABORT, 'dpsql ledger: charges are never deleted'); END",
    "CREATE TRIGGER charges_are_fixed "
    "BEFORE UPDATE OF id, time, sql, plan, epsilon, delta, composition, replay_key, data_version ON charges "
    "BEGIN SELECT RAISE(ABORT, 'dpsql ledger: a charge never changes'); END",
    "CREATE TRIGGER status_moves_on_once BEFORE UPDATE OF status ON charges "
    "WHEN OLD.status <> 'reserved' AND NEW.status <> OLD.status "
    "BEGIN SELECT RAISE(ABORT, 'dpsql ledger: only a reserved charge changes status'); END",
)

_APPEND_ONLY = ("analysts", "analyst_events", "policies", "upgrades")

SCHEMA_2 = (
    "ALTER TABLE charges ADD COLUMN analyst TEXT",   # NULL: the owner
    "DROP TRIGGER charges_are_fixed",
    "CREATE TRIGGER charges_are_fixed "
    "BEFORE UPDATE OF id, time, sql, plan, epsilon, delta, composition, replay_key, data_version, analyst "
    "ON charges BEGIN SELECT RAISE(ABORT, 'dpsql ledger: a charge never changes'); END",
    "CREATE INDEX charges_by_analyst ON charges (analyst)",
    # The token only as its SHA-256: the file never holds a usable token.
    "CREATE TABLE analysts (name TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, created TEXT NOT NULL)",
    """CREATE TABLE analyst_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    analyst TEXT NOT NULL REFERENCES analysts (name),
    kind TEXT NOT NULL CHECK (kind IN ('add', 'top-up', 'revoke')),
    epsilon TEXT NOT NULL,
    delta TEXT NOT NULL
)""",
    # Every policy the ledger was used with; the newest row is in force (its total budget, its binding).
    """CREATE TABLE policies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('created', 'changed', 'rebound')),
    identity TEXT NOT NULL,
    document TEXT NOT NULL,
    binding TEXT NOT NULL,
    total_epsilon TEXT NOT NULL,
    total_delta TEXT NOT NULL,
    changes TEXT NOT NULL
)""",
    "CREATE TABLE upgrades (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, "
    "from_format TEXT NOT NULL, to_format TEXT NOT NULL)",
    *(f"CREATE TRIGGER {t}_are_fixed BEFORE UPDATE ON {t} {_KEPT.format(what=t)}" for t in _APPEND_ONLY),
    *(f"CREATE TRIGGER {t}_are_kept BEFORE DELETE ON {t} {_KEPT.format(what=t)}" for t in _APPEND_ONLY),
)

SCHEMA_3 = (
    "ALTER TABLE charges ADD COLUMN releases TEXT",   # NULL: charged before releases were recorded
    "DROP TRIGGER charges_are_fixed",
    "CREATE TRIGGER charges_are_fixed "
    "BEFORE UPDATE OF id, time, sql, plan, epsilon, delta, composition, replay_key, data_version, analyst, "
    "releases ON charges BEGIN SELECT RAISE(ABORT, 'dpsql ledger: a charge never changes'); END",
    "ALTER TABLE policies ADD COLUMN accountant TEXT NOT NULL DEFAULT 'basic'",
)

SCHEMA_4 = (
    """CREATE TABLE measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    charge INTEGER NOT NULL REFERENCES charges (id),
    identity TEXT NOT NULL,
    analyst TEXT,
    released BLOB NOT NULL
)""",
    "CREATE INDEX measurements_by_identity ON measurements (identity, analyst)",
    f"CREATE TRIGGER measurements_are_fixed BEFORE UPDATE ON measurements {_KEPT.format(what='measurements')}",
    f"CREATE TRIGGER measurements_are_kept BEFORE DELETE ON measurements {_KEPT.format(what='measurements')}",
)

# The columns each table must have: a file without them is not a (readable) dpsql ledger.
COLUMNS = {
    "charges": "id, time, sql, plan, epsilon, delta, composition, status, replay_key, data_version, answer, "
               "released_at, replays, analyst, releases",
    "analysts": "name, token_hash, created",
    "analyst_events": "id, time, analyst, kind, epsilon, delta",
    "policies": "id, time, kind, identity, document, binding, total_epsilon, total_delta, changes, accountant",
    "measurements": "id, charge, identity, analyst, released",
}


def run(db: sqlite3.Connection, statements) -> None:
    """Run statements inside the caller's transaction (``executescript`` would commit it)."""
    for statement in statements:
        db.execute(statement)


def set_format(db: sqlite3.Connection, fmt: str) -> None:
    """The one edit of ``meta``: its format, when the file is upgraded (inside that transaction)."""
    run(db, ("DROP TRIGGER meta_is_fixed",))
    db.execute("UPDATE meta SET value = ? WHERE key = 'format'", [fmt])
    run(db, (SCHEMA_1[3],))


def check_columns(db: sqlite3.Connection) -> None:
    """Raise sqlite3.OperationalError ("no such ...") unless every table has its columns."""
    for table, columns in COLUMNS.items():
        db.execute(f"SELECT {columns} FROM {table} LIMIT 0")


def upgrade(db: sqlite3.Connection, time: str, corrupt) -> None:
    """Format 1, 2 or 3 to 4, in place, inside the caller's ``BEGIN IMMEDIATE``: every row kept (a format 1
    policy becomes the first entry of the policy history), one row in ``upgrades``. Of several
    processes upgrading at once, the first does it; the others find it done (the format is re-read
    under the write lock)."""
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    found = meta.get("format")
    if found not in (FORMAT_1, FORMAT_2, FORMAT_3):
        return
    first = None
    if found == FORMAT_1:
        try:
            document = json.loads(meta["policy"])
            first = (document, Cost(Decimal(meta["total_epsilon"]), Decimal(meta["total_delta"])),
                     policies.binding(document))
        except (KeyError, ValueError, AttributeError, ArithmeticError, DpsqlError):
            raise corrupt("its format 1 policy record cannot be read") from None
        run(db, SCHEMA_2)
    if found != FORMAT_3:
        run(db, SCHEMA_3)
    run(db, SCHEMA_4)
    set_format(db, FORMAT)
    db.execute("INSERT INTO upgrades (time, from_format, to_format) VALUES (?, ?, ?)", [time, found, FORMAT])
    if first is not None:
        policies.record(db, meta.get("created", time), "created", first[0], first[2], first[1], None)
