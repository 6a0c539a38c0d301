"""What an unknown table or column message says: where the name is declared, or what it may be a typo of.

Suggestions come from the policy alone (its tables and declared columns, which the analyst may know),
never from the database or its rows.

>>> from dpsql.policy import load_policy
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {
...     "people": {"privacy_unit": "row", "columns": {"age": {"lower": 0, "upper": 9}, "ssn": {"identifier": True}}},
...     "visits": {"privacy_unit": "pid", "columns": {"clinic": {"keys": ["a"]}}}}})
>>> unknown_column("agee", p.tables["people"], p)
("unknown column 'agee' in table 'people': declared nowhere in the policy", "did you mean 'age'? columns of people: age")
>>> unknown_column("clinic", p.tables["people"], p)[0]
"unknown column 'clinic' in table 'people': the policy declares it in table 'visits', not in this one"
>>> unknown_table("peple", p)
("table 'peple' is not a table of the policy", "did you mean 'people'? tables you may query: people, visits")
"""
from __future__ import annotations

import difflib
from typing import Iterable

from dpsql.policy.model import Policy, TablePolicy


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``did you mean 'x'?`` for the closest names (difflib's ratio >= 0.6), else empty."""
    close = difflib.get_close_matches(name.lower(), sorted(set(candidates)), n=3, cutoff=0.6)
    if not close:
        return ""
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown_table(name: str, policy: Policy, *, public_only: bool = False) -> tuple[str, str]:
    """(message, hint) for a FROM or JOIN name that is not a (public) table of the policy."""
    tables = sorted(policy.public_tables if public_only else policy.tables)
    kind = "a public table" if public_only else "a table"
    listing = f"{'a query over public tables only may read' if public_only else 'tables you may query'}: " \
              + ", ".join(tables)
    guess = did_you_mean(name, tables)
    if public_only and name.lower() in policy.tables:
        guess = ""   # a private table in a query that reads no other: the DP pipeline takes it
    return f"table {name!r} is not {kind} of the policy", f"{guess} {listing}".strip()


def unknown_column(name: str, table: TablePolicy, policy: Policy) -> tuple[str, str]:
    """(message, hint) for a column that ``table`` does not declare: declared in another table of the
    policy, or nowhere (then the closest usable names of this table)."""
    usable = sorted(c for c, col in table.columns.items() if not col.identifier)
    elsewhere = sorted(t for t, tp in policy.tables.items()
                       if t != table.name and name.lower() in tp.columns and not tp.columns[name.lower()].identifier)
    if elsewhere:
        where = " and ".join(repr(t) for t in elsewhere)
        return (f"unknown column {name!r} in table {table.name!r}: the policy declares it in table{'s' if len(elsewhere) > 1 else ''} "
                f"{where}, not in this one", f"join {elsewhere[0]} (along the links the policy declares), or use a "
                                             f"column of {table.name}: {', '.join(usable)}")
    guess = did_you_mean(name, usable)
    listing = f"columns of {table.name}: {', '.join(usable)}" if usable else \
        f"table {table.name} declares no column you may use"
    return (f"unknown column {name!r} in table {table.name!r}: declared nowhere in the policy",
            f"{guess} {listing}".strip() if guess else
            f"only columns the data owner declared in the policy may be used; {listing}")
