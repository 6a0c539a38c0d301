"""A policy's document as the ledger keeps it (its budget and every table's declarations), its SHA-256
(part of every replay key: an answer is replayed only under the policy it was computed under), and
the differences between two documents. What binds a ledger is narrower: ``accounting/policies.py``."""
from __future__ import annotations

import hashlib
import json
from typing import Any
from dpsql.policy.model import BASIC, Policy

FORMAT = "dpsql-ledger/1"   # the replay keys' scheme (named after the ledger format that began it)


def _scalar(value: Any) -> str:
    # YAML may give dates as keys; tag the type so "2020-01-01" the string stays distinct.
    return f"{type(value).__name__}:{value.isoformat() if hasattr(value, 'isoformat') else value}"


def canonical(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=_scalar, allow_nan=False)


def policy_document(policy: Policy) -> dict:
    """The part of a policy a ledger is bound to: the budget and every table's declarations (a linked
    table's ``privacy_unit`` as its link, a public table as ``public`` and its columns).

    Named fields only (not ``dataclasses.asdict``), so a new policy field does not orphan old ledgers.
    """
    tables = {}
    for name, t in policy.tables.items():
        columns = {}
        for cname, c in t.columns.items():
            keys = None if c.keys is None else sorted(c.keys, key=canonical)
            # Date bounds take the numbers' place (tagged "date:1992-01-01"): a policy without them
            # keeps its document, byte for byte.
            lower, upper = c.dates if c.dates is not None else (c.lower, c.upper)
            columns[cname] = {"identifier": c.identifier, "type": c.type, "lower": lower,
                              "upper": upper, "keys": keys}
            if c.randomized is not None:   # only when declared: older documents stay byte for byte
                columns[cname]["randomized"] = c.randomized
        if t.public:
            tables[name] = {"public": True, "columns": columns}
            continue
        # A table without a link keeps the form of a one-table policy, byte for byte (old ledgers).
        unit: Any = t.privacy_unit if t.link is None else {
            "via": t.link.column, "references": f"{t.link.references_table}.{t.link.references_column}"}
        tables[name] = {"privacy_unit": unit, "max_groups_per_unit": t.max_groups_per_unit,
                        "max_rows_per_unit": t.max_rows_per_unit, "columns": columns}
        if t.local_model:   # its rows declared public (frontend/local.py): a change the history records
            tables[name]["local_model"] = True
    # Plain floats: JSON prints them as Python's shortest repr, stable across versions.
    budget: dict[str, Any] = {"epsilon": float(policy.budget_epsilon), "delta": float(policy.budget_delta)}
    if policy.accountant != BASIC:   # basic, what every older ledger means, keeps their documents byte for byte
        budget["accountant"] = policy.accountant
    return {"version": policy.version, "tables": tables, "budget": budget}


def accountant_of(document: dict) -> str:
    """The accountant a recorded policy document names (basic when it names none: older documents)."""
    return document.get("budget", {}).get("accountant", BASIC)


def policy_identity(policy: Policy) -> str:
    """SHA-256 of the policy's budget and tables (hex).

    >>> from dpsql.policy import load_policy
    >>> p = {"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row"}}}
    >>> policy_identity(load_policy(p)) == policy_identity(load_policy({**p, "default_epsilon": 0.5}))
    True
    """
    return hashlib.sha256(canonical(policy_document(policy)).encode()).hexdigest()


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        return out
    return [] if a == b else [path]
