"""A release's files, each written whole or not at all: under a temporary name beside it, flushed to
disk, then renamed into place (``os.replace`` is atomic on one file system), so a crash never leaves a
half-written table or manifest for a reader to take as the release.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> atomic_bytes(d / "a.txt", b"hi"); (d / "a.txt").read_bytes(), sorted(p.name for p in d.iterdir())
(b'hi', ['a.txt'])
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dpsql.errors import ReleaseError
from dpsql.publish.spec import NAME

FORMATS = ("parquet", "csv", "duckdb")
DUCKDB_FILE = "release.duckdb"   # --format duckdb: every statistic a table of this one file


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ReleaseError("DP528", f"unknown release format {fmt!r} (parquet, csv or duckdb)")
    return fmt


def output_dir(out: str | os.PathLike, fmt: str) -> Path:
    """The release's directory, made if missing, checked writable: DP528 before anything is spent."""
    check_format(fmt)
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise ReleaseError("DP528", f"cannot write the release to {str(path)!r}: {e.strerror or e}") from None
    return path


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target``; renamed onto it when the block ends, removed if it fails."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def atomic_bytes(target: Path, data: bytes) -> None:
    with _replacing(target) as temporary:
        temporary.write_bytes(data)


def _plain(table: pa.Table) -> pa.Table:
    """The table alone: one chunk, no schema metadata, so a replayed answer writes the same bytes."""
    return table.replace_schema_metadata(None).combine_chunks()


WRITERS: dict[str, Callable[[pa.Table, Path], None]] = {
    "parquet": lambda table, path: pq.write_table(_plain(table), path),
    "csv": lambda table, path: pacsv.write_csv(_plain(table), path),
}


def remove_stale(directory: Path, previous: dict | None, kept: set[str]) -> list[str]:
    """The files an earlier release in ``directory`` wrote (its manifest names them) that this one did
    not write again (``kept``), removed: the directory holds one release. Only a plain ``NAME.parquet``
    or ``NAME.csv`` is touched, never another path a manifest could name."""
    removed = []
    for entry in (previous or {}).get("statistics", []):
        name, file = (entry.get("name"), entry.get("file")) if isinstance(entry, dict) else (None, None)
        plain = isinstance(name, str) and NAME.fullmatch(name) and file in (f"{name}.parquet", f"{name}.csv")
        if plain and file not in kept and (directory / file).is_file():
            (directory / file).unlink()
            removed.append(file)
    return removed


def write_tables(directory: Path, fmt: str, tables: dict[str, pa.Table]) -> dict[str, str]:
    """Each table to ``directory/NAME.fmt``, or all to the tables of one DuckDB file; what each is
    called in the manifest (a file name, or ``release.duckdb:NAME``)."""
    if fmt == "duckdb":
        with _replacing(directory / DUCKDB_FILE) as temporary:
            temporary.unlink()   # DuckDB makes the file itself
            con = duckdb.connect(str(temporary))
            try:
                for name, table in tables.items():
                    con.register("__released", _plain(table))
                    con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM __released')   # names: spec.NAME
                    con.unregister("__released")
            finally:
                con.close()
        return {name: f"{DUCKDB_FILE}:{name}" for name in tables}
    names = {}
    for name, table in tables.items():
        with _replacing(directory / f"{name}.{fmt}") as temporary:
            WRITERS[fmt](table, temporary)
        names[name] = f"{name}.{fmt}"
    return names
