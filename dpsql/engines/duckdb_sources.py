"""Data that dpsql reads itself, before the lock-down: a policy table's ``source:`` (Parquet or CSV
files, globs, hive partitions, a table of another DuckDB database), a Parquet/CSV file given as the
database, and in-memory objects handed to ``connect`` (pandas or polars DataFrames, Arrow tables).

Each is copied once into a TEMP table named as the policy's table (TEMP: a read-only database can
hold it, and it never writes to the owner's file). Why a copy, not a view: after the lock-down
(``enable_external_access = false``) a view over ``read_parquet`` cannot read its file, and letting it
(``allowed_paths``) would let a query's own table function read the file too if the allowlist ever
missed one. Measured on 5M rows x 4 columns (2 shared cores): the copy takes 0.8 s from Parquet
(28 MB), 2.3 s from CSV (87 MB), about 180 MB of DuckDB memory; a query then runs 1.44 s against
1.58 s over a Parquet view and 1.74 s against 2.65 s over a CSV view. Data larger than memory belongs
in a DuckDB database file.

A connection that can no longer read files (a second connection in this process to a database file
already open, whose DuckDB instance is shared and locked down; a handed-over connection the owner
locked) reads through a private in-memory DuckDB and hands the rows over as Arrow (2.1 s for the
Parquet above, 4.7 s for the CSV).
"""
from __future__ import annotations

import contextlib
import decimal
import os
import secrets
from pathlib import Path
from typing import Any, Iterator, Mapping

import duckdb
import numpy as np
import pyarrow as pa

from dpsql.errors import PolicyError, first_line
from dpsql.policy.model import Policy
from dpsql.policy.model import Source
from dpsql.policy.sources import format_of

READERS = {"parquet": "read_parquet", "csv": "read_csv"}
OPTIONS = (("hive_partitioning", "hive_partitioning"), ("union_by_name", "union_by_name"),
           ("header", "header"), ("delimiter", "delim"), ("types", "types"))   # Source field -> reader parameter
# What pandas may infer for an object column that DuckDB reads faithfully; anything else (mixed
# types, arbitrary objects) would turn into text silently.
PANDAS_OBJECTS = {"string", "empty", "boolean", "integer", "floating", "mixed-integer-float", "decimal",
                  "date", "datetime", "datetime64", "time", "bytes", "categorical"}


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def unreadable(table: str, what: str, message: str, hint: str = "") -> PolicyError:
    return PolicyError("DP505", f"table {table!r}: cannot read {what}: {message}",
                       hint=hint or "nothing was spent; fix the source and connect again")


def one_table(policy: Policy, stem: str | None) -> str:
    """The policy table a single file or DataFrame holds: the one table without a ``source:``, else
    the one named like the file (``people.parquet`` -> people).

    Raises:
        PolicyError (DP502): no such table, or several without a source and none named like the file.
    """
    free = [name for name, t in policy.tables.items() if t.data_source is None]
    if len(free) == 1:
        return free[0]
    if stem is not None and stem.lower() in free:
        return stem.lower()
    named = f" and none is named {stem.lower()!r}" if stem is not None else ""
    raise PolicyError("DP502", f"a single file or DataFrame holds one table, but the policy has {len(free)} "
                               f"tables without a source ({', '.join(free) or 'none'}){named}",
                      hint="name the file after its table, give the other tables a source: in the policy, "
                           "or pass a dict of tables: dpsql.connect({'people': df, ...}, ...)")


def stem_of(path: str) -> str:
    return Path(path).name.split(".")[0]


def given_tables(data: Mapping, policy: Policy) -> dict[str, Any]:
    """``connect({"people": df, "visits": "visits.parquet"})``: each name a table of the policy, each
    value a DataFrame, an Arrow table, or a Parquet/CSV path (read as a source)."""
    out: dict[str, Any] = {}
    for name, value in data.items():
        if not isinstance(name, str) or name.lower() not in policy.tables:
            raise PolicyError("DP502", f"connect() was given data for {name!r}, which is not a table of the policy "
                                       f"(its tables: {', '.join(policy.tables)})")
        out[name.lower()] = file_source(name.lower(), value) if isinstance(value, (str, os.PathLike)) else value
    return out


def file_source(table: str, path) -> Source:
    location = os.fspath(path)
    fmt = format_of(location)
    if fmt is None:
        raise unreadable(table, repr(location), "the file's name says neither Parquet nor CSV (.parquet, .csv, .tsv)",
                         hint="rename it, or declare it in the policy: source: {path: ..., format: csv}")
    return Source(path=location, format=fmt)


def source_files(con: duckdb.DuckDBPyConnection, table: str, source: Source) -> tuple[str, ...]:
    """The files a source reads, in order (DuckDB's own glob, so exactly those its reader would read);
    a DuckDB database with its WAL."""
    if source.format == "duckdb":
        if not os.path.isfile(source.path):
            raise unreadable(table, source.describe(), "the database file does not exist")
        return (source.path, source.path + ".wal")
    if os.path.isdir(source.path):
        raise unreadable(table, source.path, "it is a folder",
                         hint=f"give a glob: {os.path.join(source.path, '**', '*.' + source.format)}")
    with file_reader(con) as reader:
        found = reader.execute("SELECT file FROM glob(?) ORDER BY file", [source.path]).fetchall()
    files = tuple(f for (f,) in found if os.path.isfile(f))
    if not files:
        what = "no file matches the glob" if source.is_glob else "the file does not exist"
        raise unreadable(table, source.path, what)
    return files


def read_source(con: duckdb.DuckDBPyConnection, table: str, source: Source, files: tuple[str, ...]) -> None:
    """Copy the source's rows into TEMP table ``table`` (raises DP505 naming the table and source)."""
    try:
        if source.format == "duckdb":
            # Its own instance: con's catalog never sees the attached file.
            with quiet(duckdb.connect()) as reader:
                reader.execute(f"ATTACH '{source.path.replace(chr(39), chr(39) * 2)}' AS src (READ_ONLY)")
                _copy(con, table, reader.sql(f"SELECT * FROM src.main.{quoted(source.table or table)}").to_arrow_table())
            return
        args = [(param, getattr(source, field)) for field, param in OPTIONS if getattr(source, field) is not None]
        sql = f"SELECT * FROM {READERS[source.format]}(?{''.join(f', {param} = ?' for param, _ in args)})"
        params = [list(files)] + [dict(value) if param == "types" else value for param, value in args]
        with file_reader(con) as reader:
            if reader is con:
                con.execute(f"CREATE TEMP TABLE {quoted(table)} AS {sql}", params)
            else:
                _copy(con, table, reader.sql(sql, params=params).to_arrow_table())
    except duckdb.Error as e:
        first = first_line(e)
        if source.format == "duckdb":
            raise unreadable(table, source.describe(), first) from None
        other = "csv" if source.format == "parquet" else "parquet"
        raise unreadable(table, f"{source.describe()} as {source.format.upper()}", first,
                         hint=f"check the file; if it is not {source.format.upper()}, say so in the policy: "
                              f"source: {{path: ..., format: {other}}}") from None


def quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """No progress bar: DuckDB writes it to stdout once a query passes 2 s, into the CLI's output
    (json, csv). Best effort: an owner's connection may have its configuration locked already."""
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error:
        pass
    return con


@contextlib.contextmanager
def file_reader(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """``con`` itself while it may read files; else a private in-memory DuckDB, closed after."""
    if con.execute("SELECT current_setting('enable_external_access')").fetchall()[0][0]:
        yield con
        return
    with quiet(duckdb.connect()) as reader:
        yield reader


def _copy(con: duckdb.DuckDBPyConnection, table: str, value: Any) -> None:
    """A DataFrame or Arrow table copied into TEMP table ``table`` (DuckDB reads it in place)."""
    view = f"__dpsql_object_{secrets.token_hex(6)}"
    try:
        con.register(view, value)
        con.execute(f"CREATE TEMP TABLE {quoted(table)} AS SELECT * FROM {quoted(view)}")
    finally:
        try:
            con.unregister(view)
        except duckdb.Error:
            pass


def read_object(con: duckdb.DuckDBPyConnection, table: str, value: Any) -> None:
    """Copy a DataFrame (pandas, polars) or Arrow table into TEMP table ``table`` (DP505 when DuckDB
    cannot read it, or a pandas column holds Python objects of mixed types)."""
    what = f"the {type(value).__module__.split('.')[0]}.{type(value).__name__} given for it"
    mixed = _mixed_object_columns(value)
    if mixed:
        column, kinds = mixed[0]
        numbers = all(_is_number(v) for v in value[column].dropna())
        raise unreadable(table, what, f"column {column!r} holds Python objects of mixed types ({kinds})",
                         hint=f"convert it to one type, df[{column!r}] = " + (
                             f"pd.to_numeric(df[{column!r}]) or .astype(float)" if numbers else
                             f"df[{column!r}].astype(str)") + ", or drop it; nothing was spent")
    try:
        _copy(con, table, value)
    except (duckdb.Error, TypeError, ValueError, NotImplementedError, pa.ArrowException) as e:
        first = first_line(e)
        column = _unreadable_column(con, value)
        hint = (f"convert column {column!r} to a plain type (numbers, text, dates: df[{column!r}].astype(float) "
                "or .astype(str)) or drop it; nothing was spent") if column else \
            "pass a pandas or polars DataFrame, an Arrow table, or a Parquet/CSV path, with columns of plain types"
        raise unreadable(table, what, f"column {column!r}: {first}" if column else first, hint=hint) from None


def _unreadable_column(con: duckdb.DuckDBPyConnection, value: Any) -> str | None:
    """The first column DuckDB cannot read alone, to name it (a pandas DataFrame's; None otherwise)."""
    if not type(value).__module__.startswith("pandas") or not hasattr(value, "columns"):
        return None
    for column in value.columns:
        view = f"__dpsql_column_{secrets.token_hex(6)}"
        try:
            con.register(view, value[[column]])
            con.execute(f"SELECT * FROM {quoted(view)} LIMIT 0").fetchall()
        except Exception:  # noqa: BLE001 - any failure names the column; the caller raises DP505
            return str(column)
        finally:
            with contextlib.suppress(duckdb.Error):
                con.unregister(view)
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, decimal.Decimal, np.number)) and not isinstance(value, bool)


def _mixed_object_columns(value: Any) -> list[tuple[str, str]]:
    """A pandas DataFrame's columns of Python objects of mixed types, with what pandas infers them to be.
    Only NumPy object columns: an Arrow-backed column (``pd.ArrowDtype``, ``dtype_backend="pyarrow"``)
    has one Arrow type, and pandas cannot infer some (``string_view``: NotImplementedError)."""
    if not type(value).__module__.startswith("pandas") or not hasattr(value, "dtypes"):
        return []
    from pandas.api.types import infer_dtype
    found = [(str(c), infer_dtype(value[c], skipna=True)) for c, dtype in value.dtypes.items()
             if isinstance(dtype, np.dtype) and dtype.kind == "O"]
    return [(c, kinds) for c, kinds in found if kinds not in PANDAS_OBJECTS]


def file_stats(files) -> dict[str, tuple[int, int, int, int] | None]:
    """(device, inode, size, mtime_ns) of each file, None when missing: compared before and after a read."""
    out: dict[str, tuple[int, int, int, int] | None] = {}
    for f in files:
        try:
            st = os.stat(f)
            out[f] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            out[f] = None
    return out
