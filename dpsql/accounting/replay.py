"""Replay: what makes two queries the same release, so an identical query gets the answer already
paid for.

Repeated queries. An identical query (same normalised SQL and output names, epsilon, delta, policy
and data version) is answered with the answer already released, at no cost, so averaging repeated
answers gains nothing; ``fresh=True`` / ``--fresh`` draws anew and pays. The data version of a
database file is the (device, inode, size, mtime_ns) of the file and of its ``.wal``, read after
dpsql opened it read-only: DuckDB's file lock keeps writers out while dpsql holds it, and any write
between sessions changes mtime (a copy or replace changes the inode). For a connection object the
caller names it with ``connect(..., data_version="...")``; otherwise it is a random token, so
answers are replayed only within that connection. A stale replay is never a privacy problem: it
repeats an answer already paid for.
"""
from __future__ import annotations

from enum import Enum

import hashlib
import os
import secrets
from dpsql.accounting.budget import Cost
from dpsql.accounting.identity import FORMAT, canonical
from dpsql.frontend.parse import DIALECT, parse
from dpsql.plan.model import Plan


def file_data_version(db_path) -> str:
    """The version of a database file's data: (device, inode, size, mtime_ns) of it and its WAL."""
    parts = []
    for path in (os.fspath(db_path), os.fspath(db_path) + ".wal"):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            parts.append("-")
            continue
        parts.append(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    return "file:" + "/".join(parts)


def connection_data_version() -> str:
    """A fresh token per connection object: no replay across connections whose data may differ."""
    return "connection:" + secrets.token_hex(16)


def normalise_sql(sql: str) -> tuple[str, tuple[str, ...]]:
    """The query as sqlglot prints it (keywords, spacing, identifier case, comments normalised), and its
    output names as typed (they name the result's columns).

    Printed in the dpsql dialect, so the ``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)`` clause and the
    per-aggregate ``contribution_bounds_per_group/_per_row`` stay in the history and the replay key.

    >>> normalise_sql("select  Sex AS N, count(*)  -- hi\\n FROM people group by sex")
    ('SELECT sex AS n, COUNT(*) FROM people GROUP BY sex', ('N', '*'))
    >>> normalise_sql("select with differential_privacy options(epsilon=1) sum(x, contribution_bounds_per_row=>(0,5)) from t")[0]
    'SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1) SUM(x, contribution_bounds_per_row => (0, 5)) FROM t'
    """
    statement = parse(sql)
    try:
        text = statement.sql(dialect=DIALECT, normalize=True, comments=False)
    except Exception:  # noqa: BLE001 - a node the generator cannot print: match the text exactly
        text = " ".join(sql.split())
    names = tuple(e.alias_or_name for e in getattr(statement, "expressions", None) or ())
    return text, names


def replay_key(normalised: tuple[str, tuple[str, ...]], cost: Cost, identity: str, data_version: str) -> str:
    """SHA-256 over everything that makes two queries the same release."""
    text, names = normalised
    doc = [FORMAT, identity, data_version, text, list(names), str(cost.epsilon), str(cost.delta)]
    return hashlib.sha256(canonical(doc).encode()).hexdigest()


def plan_summary(plan) -> str:
    """One line for the history: table, measurements, composition."""
    measurements = ", ".join(f"{m.label} eps {m.epsilon:.4g}" for m in plan.measurements)
    text = (f"{plan.table.name}: sequential over {len(plan.measurements)} measurement(s) "
            f"[{measurements}]")
    if plan.group_keys:
        # Private keys: how many groups partition selection releases is not known before the run.
        groups = ("the groups released by partition selection" if plan.partitions is None
                  else f"{plan.partitions} partition(s)")
        text += f"; parallel over {groups}, each unit in <= {plan.max_groups}"
    return text


def plan_signature(plan: Plan) -> str:
    """Everything about a plan that shapes what it releases, beyond its SQL text."""
    # Every field of every measurement (the argument as SQL text: a tree's repr can be enormous).
    parts = [repr(tuple(m.argument.sql() if name == "argument" and m.argument is not None else
                        value.value if isinstance(value, Enum) else value   # as the strings they replaced
                        for name, value in vars(m).items())) for m in plan.measurements]
    parts += [repr((o.name, o.kind.value, o.column, o.measurements, o.key_index, o.lower, o.upper, o.hidden,
                    o.expression.sql() if o.expression is not None else None, o.quantile)) for o in plan.outputs]
    parts += [k.expression.sql() for k in plan.group_keys]
    parts += [f"L={plan.max_groups}", f"C={plan.max_rows}", f"selection={plan.selection}",
              f"ci={plan.confidence}", f"nonnegative={plan.nonnegative}"]
    return ";".join(parts)
