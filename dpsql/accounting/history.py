"""A ledger's charges as its accountant composes them, kept composed between charges.

Charges are append-only and what they cost never changes (triggers), so the composed history (all of
it, and each analyst's) is kept and only charges committed since are read: a charge costs about the
same at 10,000 charges as at 10 (for pld: one composition with the new release, not 10,000). The
number of charges and the newest id are checked on every read; any other state of the file (a file
replaced under the same path), or another accountant in force, composes everything again. A charge
this process commits advances the kept state with what its check composed, so it is not composed twice.

Each row is read strictly: an amount that is not a number >= 0, an unknown accountant or mechanism,
or releases that do not parse make the ledger corrupt (DP406), never cheaper.
"""
from __future__ import annotations

import functools
import json
import sqlite3
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

from dpsql.accounting.accountants import ACCOUNTANTS, Accountant
from dpsql.accounting.composition import Charged
from dpsql.mechanisms.base import PRIVACY_MAPS
from dpsql.mechanisms.releases import Release

# Each charge row as read for composing: its cost, the accountant that charged it, what it released.
COLUMNS = "epsilon, delta, composition, releases"


def amount(text: Any, corrupt: Callable[[str], Exception]) -> Decimal:
    try:
        value = Decimal(text) if isinstance(text, str) else None
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value < 0:
        raise corrupt(f"a recorded amount {text!r} is not a number >= 0")
    return value


def charged(row, corrupt: Callable[[str], Exception]) -> Charged:
    """A row (``COLUMNS``) as a charge to compose."""
    epsilon, delta, composition, releases = row
    if composition not in ACCOUNTANTS:
        raise corrupt(f"a charge was made under accountant {composition!r}, unknown to this version of dpsql")
    made = None
    if releases is not None:
        try:
            made = _parsed(releases)
        except (ValueError, TypeError, KeyError, ArithmeticError, AttributeError):
            raise corrupt("a charge's releases cannot be read") from None
        unknown = sorted({r.mechanism for r in made} - set(PRIVACY_MAPS))
        if unknown:
            raise corrupt(f"a charge released by mechanism {unknown[0]!r}, unknown to this version of dpsql")
    return Charged(amount(epsilon, corrupt), amount(delta, corrupt), made)


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[Release, ...]:
    """A charge's stored releases (the same query's charges store the same text: parsed once; a
    Release is ~1 ms of exact fractions, 10,000 charges were 10 s)."""
    return tuple(Release.from_json(doc) for doc in json.loads(text))


def encode(releases) -> str | None:
    """A charge's releases as the ledger stores them (None: not known, composed as its cost)."""
    return None if releases is None else json.dumps([r.to_json() for r in releases], separators=(",", ":"))


class Kept:
    """The composed history read so far: all of it, and per analyst, under one accountant."""

    def __init__(self, accountant: Accountant | None = None):
        self.accountant = accountant
        self.seen, self.count = 0, 0
        self.total: Any = None if accountant is None else accountant.empty()
        self.by: dict[str, Any] = {}

    def of(self, analyst: str | None) -> Any:
        assert self.accountant is not None
        return self.total if analyst is None else self.by.get(analyst, self.accountant.empty())

    def advance(self, last_id: int, total: Any, analyst: str | None, own: Any, charges: int = 1) -> None:
        """``charges`` committed by this process in one transaction (the newest id ``last_id``), composed
        into ``total`` (and ``own``)."""
        self.seen, self.count, self.total = last_id, self.count + charges, total
        if analyst is not None:
            self.by[analyst] = own


def spent(kept: Kept, db: sqlite3.Connection, accountant: Accountant, analyst: str | None,
          corrupt: Callable[[str], Exception]) -> tuple[Kept, Any]:
    """What was spent in all (None) or by one analyst, composed by ``accountant``, read inside the
    caller's transaction; returns the kept state to keep, and the composed state asked for."""
    count, top = db.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM charges").fetchone()
    if kept.accountant is not accountant or count < kept.count or top < kept.seen:
        kept = Kept(accountant)
    new = db.execute(f"SELECT id, analyst, {COLUMNS} FROM charges WHERE id > ? ORDER BY id", [kept.seen]).fetchall()
    if new:
        charges = [(row[1], charged(row[2:], corrupt)) for row in new]
        mine: dict[str, list[Charged]] = {}
        for name, charge in charges:
            if name is not None:
                mine.setdefault(name, []).append(charge)
        total = accountant.compose(kept.total, [c for _, c in charges])
        by = {name: accountant.compose(kept.of(name), theirs) for name, theirs in mine.items()}
        kept.total, kept.seen, kept.count = total, new[-1][0], kept.count + len(new)
        kept.by.update(by)
    if kept.count != count:            # not the file these states were read from
        return spent(Kept(accountant), db, accountant, analyst, corrupt)
    return kept, kept.of(analyst)
