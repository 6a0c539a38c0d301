"""Replay: what makes two queries the same release, so an identical query gets the answer already
paid for.

Repeated queries. An identical query (same normalised SQL and output names, epsilon, delta, policy
and data version) is answered with the answer already released, at no cost, so averaging repeated
answers gains nothing; ``fresh=True`` / ``--fresh`` draws anew and pays. The data version of a
database file is the (device, inode, size, mtime_ns) of the file and of its ``.wal``, read after
dpsql opened it read-only: DuckDB's file lock keeps writers out while dpsql holds it, and any write
between sessions changes mtime (a copy or replace changes the inode). For a connection object the
caller names it with ``connect(..., data_version="...")``; otherwise it is a random token, so
answers are replayed only within that connection. Files dpsql reads itself (a policy's ``source:``, a
Parquet/CSV file as the database) add their identities (``file_data_version``), so a query is replayed
only against the same files; a DataFrame has none (a per-connection token unless the owner names it).
A stale replay is never a privacy problem: it
repeats an answer already paid for.
"""
from __future__ import annotations

from enum import Enum
from typing import Mapping, Sequence

import hashlib
import os
import secrets
from dpsql.accounting.budget import Cost
from dpsql.accounting.identity import FORMAT, canonical
from dpsql.frontend.parse import DIALECT, parse
from dpsql.plan.model import Plan


SMALL_FILE = 64 << 20   # source files up to this size are known by their content (SHA-256 at ~1.5 GB/s)


def file_data_version(db_path=None, sources: Mapping[str, Sequence[str]] | None = None) -> str:
    """The version of a database file's data, (device, inode, size, mtime_ns) of it and its WAL, and of
    the source files dpsql read into its tables (``sources``: table -> files; ``_sources_version``)."""
    parts = []
    if db_path is not None:
        stats = []
        for path in (os.fspath(db_path), os.fspath(db_path) + ".wal"):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                stats.append("-")
                continue
            stats.append(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
        parts.append("file:" + "/".join(stats))
    if sources or db_path is None:
        parts.append(_sources_version(sources or {}))
    return "|".join(parts)


def connection_data_version(named: str | None = None, sources: Mapping[str, Sequence[str]] | None = None) -> str:
    """The owner's name for a connection's data, else a fresh token per connection (no replay across
    connections whose data may differ); then the identities of the source files read into it."""
    base = named if named is not None else "connection:" + secrets.token_hex(16)
    return base + ("|" + _sources_version(sources) if sources else "")


def _sources_version(sources: Mapping[str, Sequence[str]]) -> str:
    """SHA-256 over each table's files: path and content hash for a small file (exact: a file rewritten
    with the same bytes keeps its version; an edit that keeps size and mtime, as ``cp -p``, ``rsync -t``
    or a coarse clock can, does not); (device, inode, size, mtime_ns) for a large one, as for a database
    file (hashing gigabytes at every connect would cost seconds)."""
    doc = {table: [_file_identity(f) for f in files] for table, files in sources.items()}
    return "sources:" + hashlib.sha256(canonical(doc).encode()).hexdigest()


def _file_identity(path: str) -> str:
    path = os.path.abspath(path)   # the same file named from another folder is the same data
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path}=-"
    if st.st_size > SMALL_FILE:
        return f"{path}={st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{path}=sha256:{digest.hexdigest()}"


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
