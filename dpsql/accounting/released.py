"""The released measurements a ledger keeps, by identity (accounting/measurements.py): written with their
charge's release, found again for a later charge of the same analyst (storage only; the ledger's
transaction is the one place that decides what a charge costs).

A kept measurement is an Arrow table: its groups' keys, then ``__value``, the released noisy value in
grid steps, one row per group released (every public group; with partition selection, the groups it
released only: the others' values were never covered by its guarantee and are not kept). Measurements
used together must have the same groups (compared here): a request whose found measurements disagree
finds none.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa

from dpsql.accounting.budget import ZERO, Cost
from dpsql.accounting.store import encode_answer

VALUE = "__value"
# The charge (cost, releases) of drawing only the measurements at these positions; None: all or nothing.
Price = Callable[[tuple[int, ...]], tuple[Cost, tuple]]


@dataclass(frozen=True)
class Measured:
    """A request's measurements: their identities and labels (for the history), in the plan's order."""
    identities: tuple[str, ...]
    labels: tuple[str, ...]
    price: Price | None = None


@dataclass(frozen=True)
class Found:
    """What a charge replays: per measurement the kept table (None: drawn by this charge), and its cost."""
    kept: tuple[pa.Table | None, ...]
    cost: Cost
    releases: tuple | None
    note: str = ""


def find(db: sqlite3.Connection, measured: Measured, analyst: str | None, decode, cost: Cost,
         releases) -> Found:
    """The analyst's newest kept value of each measurement, and what the request then costs: nothing if
    all are kept; the new ones' price if some are and the request may pay for part; else all drawn."""
    kept = tuple(_newest(db, identity, analyst, decode) for identity in measured.identities)
    if not _same_groups([t for t in kept if t is not None]):
        kept = (None,) * len(kept)
    new = tuple(i for i, t in enumerate(kept) if t is None)
    if not new:
        return Found(kept, ZERO, (), "; every measurement replayed (released before): free")
    if len(new) == len(kept) or measured.price is None:
        return Found((None,) * len(kept), cost, releases)
    price, paid = measured.price(new)
    replayed = ", ".join(measured.labels[i] for i, t in enumerate(kept) if t is not None)
    return Found(kept, price, paid, f"; replayed free (released before): {replayed}")


def keep(db: sqlite3.Connection, charge: int, analyst: str | None, tables: Sequence[tuple[str, pa.Table]]) -> None:
    """Each measurement a charge drew, with its groups, inside the caller's transaction."""
    db.executemany("INSERT INTO measurements (charge, identity, analyst, released) VALUES (?, ?, ?, ?)",
                   [(charge, identity, analyst, encode_answer(table)) for identity, table in tables])


def held(db: sqlite3.Connection, identities: Sequence[str], analyst: str | None) -> tuple[bool, ...]:
    """Whether each identity is kept for the analyst (explain's note; reads only)."""
    return tuple(db.execute("SELECT 1 FROM measurements m JOIN charges c ON c.id = m.charge WHERE m.identity = ? "
                            "AND m.analyst IS ? AND c.status = 'released' LIMIT 1", [i, analyst]).fetchone()
                 is not None for i in identities)


def _newest(db: sqlite3.Connection, identity: str, analyst: str | None, decode) -> pa.Table | None:
    row = db.execute("SELECT m.released FROM measurements m JOIN charges c ON c.id = m.charge WHERE m.identity = ? "
                     "AND m.analyst IS ? AND c.status = 'released' ORDER BY m.id DESC LIMIT 1",
                     [identity, analyst]).fetchone()
    return None if row is None else decode(row[0])


def _same_groups(tables: list[pa.Table]) -> bool:
    """Whether the kept tables hold the same groups, in the same order (their keys: all but the value)."""
    keys = [t.drop_columns([VALUE]) for t in tables]
    return all(k.equals(keys[0]) for k in keys[1:])
