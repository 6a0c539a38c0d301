"""Analysts: named holders of a token and of a budget inside the ledger's total.

The data owner adds an analyst with a budget; dpsql makes a random token, shows it once, and keeps
only its SHA-256 (the ledger file never holds a usable token). Every add, top-up and revoke is an
event in the append-only ``analyst_events`` table, so an analyst's budget is the sum of their add and
top-up events, and a revoked analyst stays revoked. Their spends are the charges that name them.

These functions run inside the caller's transaction (``Ledger`` holds the lock and the ``BEGIN``).
"""
from __future__ import annotations

import hashlib
import hmac
import math
import numbers
import re
import secrets
import sqlite3
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable

from dpsql.accounting.budget import Cost, Figures, add_all
from dpsql.accounting.composition import Report
from dpsql.errors import AuthError, DpsqlError, InvalidParameter

TOKEN_PREFIX = "dpsql_"          # recognisable in a config file or a leaked-secret scan
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_MAX_TOKEN = 256                 # longer is not a dpsql token: refused before hashing


class AnalystError(DpsqlError):
    """The owner's analyst command cannot be done: a bad, duplicate or unknown name, a revoked analyst,
    or a budget larger than the total (DP409). Nothing is recorded."""
    code = "DP409"


@dataclass(frozen=True)
class Analyst(Figures):
    """One analyst's budget (every add and top-up), what they spent, and whether they were revoked;
    spent and remaining as the accountant in force reports them (accounting/budget.py ``Budget``)."""
    name: str
    total_epsilon: float
    total_delta: float
    spent_epsilon: float
    spent_delta: float
    queries: int
    revoked: bool
    created: str
    accountant: str = "basic"
    terms: dict = field(default_factory=dict)
    remaining: tuple[float, float] | None = None   # None: total - spent, exactly (basic)

    def as_dict(self) -> dict:
        return {"name": self.name, "created": self.created, "revoked": self.revoked, "queries": self.queries,
                **self.figures()}


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        shown = repr(name)[:70]
        raise AnalystError("DP409", f"analyst name {shown} is not allowed",
                           hint="1 to 64 letters, digits and _ . @ -, starting with a letter or digit")
    return name


def amount(epsilon, delta, *, positive: bool) -> Cost:
    """An analyst's budget (or a top-up) as an exact Cost; finite and >= 0 (a top-up: not both 0)."""
    for label, value in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
            raise InvalidParameter("DP401", f"analyst budget {label}={value!r} must be a finite number >= 0")
    if delta >= 1:
        raise InvalidParameter("DP401", f"analyst budget delta={delta!r} must be below 1")
    cost = Cost.of(epsilon, delta)
    if positive and cost.epsilon == 0 and cost.delta == 0:
        raise InvalidParameter("DP401", "a top-up of epsilon=0 and delta=0 changes nothing")
    return cost


def add(db: sqlite3.Connection, name: str, budget: Cost, total: Cost, time: str) -> str:
    """Record a new analyst and return their token (the only time it exists in clear)."""
    if db.execute("SELECT 1 FROM analysts WHERE name = ?", [name]).fetchone() is not None:
        raise AnalystError("DP409", f"analyst {name!r} already exists",
                           hint="pick another name; top-up adds budget, revoke ends an analyst")
    _within_total(name, budget, total)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    db.execute("INSERT INTO analysts (name, token_hash, created) VALUES (?, ?, ?)", [name, token_hash(token), time])
    _event(db, name, "add", budget, time)
    return token


def top_up(db: sqlite3.Connection, name: str, more: Cost, total: Cost, time: str) -> Cost:
    """Add to an analyst's budget; returns their new budget (never above the ledger's total)."""
    current, revoked = state(db, name)
    if revoked:
        raise AnalystError("DP409", f"analyst {name!r} is revoked", hint="add a new analyst instead")
    after = current + more
    _within_total(name, after, total)
    _event(db, name, "top-up", more, time)
    return after


def revoke(db: sqlite3.Connection, name: str, time: str) -> None:
    _current, revoked = state(db, name)
    if revoked:
        raise AnalystError("DP409", f"analyst {name!r} is already revoked")
    _event(db, name, "revoke", Cost.of(0, 0), time)


def authenticate(db: sqlite3.Connection, token) -> str:
    """The analyst a token belongs to. Unknown and revoked tokens raise the same AuthError.

    The lookup is by the token's SHA-256 (a timing difference in the index says nothing about a
    token without its hash's preimage); the stored hash is compared in constant time all the same.
    """
    wanted = token_hash(token) if isinstance(token, str) and 0 < len(token) <= _MAX_TOKEN else ""
    row = db.execute("SELECT name, token_hash FROM analysts WHERE token_hash = ?", [wanted]).fetchone()
    if row is None or not hmac.compare_digest(row[1], wanted) or state(db, row[0])[1]:
        raise AuthError("DP407", "unknown or revoked analyst token",
                        hint="ask the data owner for a token (dpsql analyst add)")
    return row[0]


def state(db: sqlite3.Connection, name: str) -> tuple[Cost, bool]:
    """An analyst's budget (their add and top-up events) and whether they are revoked; AuthError if
    there is no such analyst (a server passes authenticated names only)."""
    rows = db.execute("SELECT kind, epsilon, delta FROM analyst_events WHERE analyst = ? ORDER BY id",
                      [name]).fetchall()
    if not rows:
        raise AuthError("DP407", f"there is no analyst {name!r} in this ledger",
                        hint="dpsql analyst list shows the analysts")
    budget = add_all((Decimal(e), Decimal(d)) for kind, e, d in rows if kind != "revoke")
    return budget, any(kind == "revoke" for kind, _, _ in rows)


def listing(db: sqlite3.Connection, spent: Callable[[str, Cost], tuple[Report, int]], accountant: str) -> list[Analyst]:
    """Every analyst, oldest first, with what ``spent(name, their budget)`` reports they spent (and how
    many queries) under ``accountant``."""
    out = []
    for name, created in db.execute("SELECT name, created FROM analysts ORDER BY created, name").fetchall():
        budget, revoked = state(db, name)
        report, queries = spent(name, budget)
        out.append(Analyst(name, float(budget.epsilon), float(budget.delta), report.spent[0], report.spent[1],
                           queries, revoked, created, accountant, report.terms,
                           report.remaining if report.at_delta else None))
    return out


def _within_total(name: str, budget: Cost, total: Cost) -> None:
    if not budget.fits_within(total):
        raise AnalystError(
            "DP409", f"analyst {name!r} would have epsilon={budget.epsilon:g}, delta={budget.delta:g}, more than "
                     f"the total budget (epsilon={total.epsilon:g}, delta={total.delta:g})",
            hint="give the analyst at most the total; raise the total in the policy first if needed")


def _event(db: sqlite3.Connection, name: str, kind: str, cost: Cost, time: str) -> None:
    db.execute("INSERT INTO analyst_events (time, analyst, kind, epsilon, delta) VALUES (?, ?, ?, ?, ?)",
               [time, name, kind, str(cost.epsilon), str(cost.delta)])
