"""A policy table's ``source:``: the files (or the table of another DuckDB database) that dpsql reads
itself, before the lock-down, into the table the policy names (engines/duckdb_sources.py).

The owner writes it (trusted); an analyst's SQL can still never name a file. Relative paths are
relative to the policy file's folder (a dict policy: the working directory).

>>> parse_source("data/people/*.parquet", "tables.people.source").format
'parquet'
>>> parse_source({"path": "visits.tsv", "delimiter": "\\t"}, "tables.visits.source").format
'csv'
>>> parse_source({"database": "ref.duckdb", "table": "clinics"}, "tables.c.source").describe()
'ref.duckdb (table clinics)'
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from dpsql.policy.model import Source, invalid as _fail

FORMATS = ("parquet", "csv")
# How a file's name ends -> its format (compressed CSV is read as such by DuckDB).
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet",
            ".csv": "csv", ".tsv": "csv", ".txt": "csv"}
COMPRESSION = (".gz", ".zst")
FILE_KEYS = {"path", "format", "hive_partitioning", "union_by_name", "header", "delimiter", "types"}
DATABASE_KEYS = {"database", "table"}


def format_of(path: str) -> str | None:
    """The format a file's name says (``people.csv.gz`` -> csv), or None.

    >>> format_of("a/b.PARQUET"), format_of("x.tsv.gz"), format_of("db.duckdb")
    ('parquet', 'csv', None)
    """
    name = path.lower()
    for ending in COMPRESSION:
        name = name.removesuffix(ending)
    return SUFFIXES.get(os.path.splitext(name)[1])


def _flag(spec: Mapping, key: str, path: str) -> bool | None:
    value = spec.get(key)
    if value is not None and not isinstance(value, bool):
        raise _fail(f"{path}.{key}", "must be true or false")
    return value


def _text(spec: Mapping, key: str, path: str) -> str | None:
    value = spec.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise _fail(f"{path}.{key}", "must be a non-empty string")
    return value


def _file_source(spec: Mapping, path: str) -> Source:
    location = _text(spec, "path", path)
    if location is None:
        raise _fail(f"{path}.path", "is required (a file or glob: data/people/*.parquet)")
    fmt = _text(spec, "format", path) or format_of(location)
    if fmt is None:
        raise _fail(f"{path}.format", f"cannot tell the format of {location!r} from its name: "
                                      f"add format: {' or '.join(FORMATS)}")
    if fmt not in FORMATS:
        raise _fail(f"{path}.format", f"must be one of: {', '.join(FORMATS)}")
    header, delimiter, types = _flag(spec, "header", path), _text(spec, "delimiter", path), _types(spec, path)
    if fmt != "csv" and (header is not None or delimiter is not None or types is not None):
        raise _fail(path, "header, delimiter and types are CSV options")
    return Source(path=location, format=fmt, hive_partitioning=_flag(spec, "hive_partitioning", path),
                  union_by_name=_flag(spec, "union_by_name", path), header=header, delimiter=delimiter, types=types)


def _types(spec: Mapping, path: str) -> tuple[tuple[str, str], ...] | None:
    """``types: {sex: VARCHAR}``: a CSV column's type as given, not sniffed (a column of F alone reads
    as BOOLEAN)."""
    if "types" not in spec:
        return None
    types = spec["types"]
    if not isinstance(types, Mapping) or not types or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in types.items()):
        raise _fail(f"{path}.types", "must map column names to DuckDB types ({sex: VARCHAR, age: INTEGER})")
    return tuple(types.items())


def parse_source(spec: Any, path: str) -> Source:
    """A ``source:`` entry: a path or glob (format from its name), ``{path, format, hive_partitioning,
    union_by_name, header, delimiter}``, or ``{database: file.duckdb, table: name}``.

    Raises:
        PolicyError (DP501): naming the bad entry's path.
    """
    if isinstance(spec, str):
        spec = {"path": spec}
    if not isinstance(spec, Mapping):
        raise _fail(path, "must be a path or glob, or a mapping ({path: ..., format: ...} or {database: ..., table: ...})")
    allowed = DATABASE_KEYS if "database" in spec else FILE_KEYS
    for key in spec:
        if key not in allowed:
            raise _fail(f"{path}.{key}", f"unknown entry (expected one of: {', '.join(sorted(allowed))})")
    if "database" not in spec:
        return _file_source(spec, path)
    database = _text(spec, "database", path)
    if database is None:
        raise _fail(f"{path}.database", "must be a DuckDB database file")
    table = _text(spec, "table", path)
    return Source(path=database, format="duckdb", table=table.lower() if table else None)


def rebase_sources(tables: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """Relative source paths made relative to ``folder`` (the policy file's), ``~`` expanded."""
    out = dict(tables)
    for name, table in tables.items():
        source = table.data_source
        if source is not None:
            location = os.path.expanduser(source.path)
            if not os.path.isabs(location):
                location = os.path.join(folder, location)
            out[name] = dataclasses.replace(table, data_source=dataclasses.replace(source, path=location))
    return out
