"""A ledger's policy history: every policy it was used with, the newest in force.

A spend is about people: the privacy units and how each private table reaches one. That is the
ledger's *binding* (``binding``): per table, its unit column (a root), its link (a linked table), or
``public``. Bounds, keys, columns, L and C, new tables and the total budget shape future queries only,
so changing them keeps the history; each change is a new row of ``policies`` (time, the whole new
document, the paths that differ from the previous one), and the newest row's total is the budget in
force. A change to the binding would re-interpret past spends (epsilon spent about one unit counted
against another), so it is refused (DP404, naming what differs) unless the owner rebinds explicitly
(``dpsql ledger rebind``), which is recorded too. A table dropped from the policy keeps its binding,
so it cannot come back bound differently without a rebind.

The accountant (``budget.accountant``: basic, zcdp or pld; accounting/composition.py) says how the
history composes into what was spent. It is recorded with each policy (column ``accountant``, in the
document when it is not basic), and the newest row's is in force: every charge composes the whole
history with it, read in the charge's transaction, as it reads the total. A change of accountant is a
recorded change like the total's, in every direction (basic -> pld, pld -> zcdp, back to basic), and
recomposes the whole history under the new one. It never makes a past answer cheaper than what it was
promised at: each accountant composes a charge as what it released (its releases, each by its
mechanism's own privacy map, a valid bound on that release's privacy loss) or, for a charge recorded
without them, as the (epsilon, delta) guarantee it was charged at, the most it was promised to cost,
never as a cheaper mechanism guessed for it. A move to a tighter accountant frees budget because the
same releases are bounded more tightly, not because any is forgotten; a move to a looser one may find
the history already past the total, and then nothing more is charged.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from decimal import Decimal

from dpsql.accounting.budget import Cost
from dpsql.accounting.identity import accountant_of, canonical, differences


@dataclass(frozen=True)
class Recorded:
    """One row of the policy history."""
    id: int
    time: str
    kind: str                  # created, changed or rebound
    identity: str              # SHA-256 of the document
    document: dict             # accounting/identity.py policy_document
    binding: dict
    total: Cost
    changes: tuple[str, ...]   # paths that differ from the previous row's document

    @property
    def accountant(self) -> str:
        return accountant_of(self.document)

    def as_dict(self) -> dict:
        return {"id": self.id, "time": self.time, "kind": self.kind, "identity": self.identity,
                "total": {"epsilon": float(self.total.epsilon), "delta": float(self.total.delta)},
                "accountant": self.accountant, "changes": list(self.changes), "document": self.document}


def document_identity(document: dict) -> str:
    return hashlib.sha256(canonical(document).encode()).hexdigest()


def binding(document: dict) -> dict:
    """What a spend under ``document`` is about: each table's unit, link, or ``public``.

    >>> binding({"tables": {"t": {"privacy_unit": "pid", "columns": {}}, "n": {"public": True}}})
    {'n': 'public', 't': {'privacy_unit': 'pid'}}
    """
    out: dict = {}
    for name, table in sorted(document.get("tables", {}).items()):
        out[name] = "public" if table.get("public") else {"privacy_unit": table.get("privacy_unit")}
    return out


def merge(old: dict, new: dict) -> tuple[dict, tuple[str, ...]]:
    """The binding after a change, and the tables whose binding the change would alter (empty: allowed).

    Tables only in ``old`` stay bound (a dropped table cannot return bound differently); tables only
    in ``new`` are added.
    """
    conflicts = tuple(f"tables.{p}" for name in sorted(set(old) & set(new))
                      for p in differences(old[name], new[name], name))
    return {**new, **old}, conflicts


_COLUMNS = "id, time, kind, identity, document, binding, total_epsilon, total_delta, changes"


def newest(db: sqlite3.Connection) -> Recorded | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM policies ORDER BY id DESC LIMIT 1").fetchone()
    return None if row is None else _recorded(row)


def in_force(db: sqlite3.Connection) -> tuple[Cost, dict, str] | None:
    """The newest recorded total, binding and accountant (what every charge checks, without the whole
    document)."""
    row = db.execute("SELECT total_epsilon, total_delta, binding, accountant FROM policies "
                     "ORDER BY id DESC LIMIT 1").fetchone()
    return None if row is None else (Cost(Decimal(row[0]), Decimal(row[1])), json.loads(row[2]), row[3])


def history(db: sqlite3.Connection) -> list[Recorded]:
    return [_recorded(r) for r in db.execute(f"SELECT {_COLUMNS} FROM policies ORDER BY id")]


def record(db: sqlite3.Connection, time: str, kind: str, document: dict, bound: dict, total: Cost,
           previous: Recorded | None) -> None:
    """Append a policy to the history (inside the caller's transaction)."""
    changes = ["(created)"] if previous is None else differences(previous.document, document)
    db.execute(f"INSERT INTO policies ({_COLUMNS.replace('id, ', '', 1)}, accountant) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               [time, kind, document_identity(document), canonical(document), canonical(bound),
                str(total.epsilon), str(total.delta), json.dumps(changes), accountant_of(document)])


def _recorded(row) -> Recorded:
    # Malformed JSON or amounts raise ValueError/decimal errors: the caller reports a corrupt ledger.
    return Recorded(row[0], row[1], row[2], row[3], json.loads(row[4]), json.loads(row[5]),
                    Cost(Decimal(row[6]), Decimal(row[7])), tuple(json.loads(row[8])))
