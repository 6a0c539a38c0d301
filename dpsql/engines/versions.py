"""Data versions: which data an answer was computed on, so a query is replayed only against the same
data (api/replay.py puts the version in the replay key).

The data version of a database file is the (device, inode, size, mtime_ns) of the file and of its
``.wal``, read after dpsql opened it read-only: DuckDB's file lock keeps writers out while dpsql
holds it, and any write between sessions changes mtime (a copy or replace changes the inode). For a
connection object the caller names it with ``connect(..., data_version="...")``; otherwise it is a
random token, so answers are replayed only within that connection. Files dpsql reads itself (a
policy's ``source:``, a Parquet/CSV file as the database) add their identities
(``file_data_version``), so a query is replayed only against the same files; a DataFrame has none (a
per-connection token unless the owner names it).

>>> connection_data_version("nightly-2024-05-01")
'nightly-2024-05-01'
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
from typing import Mapping, Sequence

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
    # Strings only: this is the ledger's canonical JSON of it, byte for byte (versions already
    # recorded in ledgers stay equal).
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sources:" + hashlib.sha256(text.encode()).hexdigest()


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
