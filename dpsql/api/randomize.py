"""Randomized response applied to a table, by its owner (``dpsql.randomize``, ``dpsql randomize``).

The table is read as ``connect`` reads data (a Parquet or CSV file, a table of a DuckDB database file
or connection, a pandas/polars DataFrame or Arrow table: engines/duckdb_sources.py), into a private
in-memory DuckDB; each chosen column is replaced by its randomized reports
(mechanisms/randomized_response.py), every other column kept as it was; the result is written as a
new Parquet file, the parameters in its key-value metadata (``dpsql.randomized``), or as a new table
of a DuckDB database, the parameters in the table ``dpsql_randomized`` beside it.

The domain of a column is public: the caller's ``domains``, else the policy's keys of the column,
else {false, true} for a BOOLEAN column; never the values that occur in the data (which values occur
is private: a rare category would tell who holds it), so a domain that is missing is refused (DP511)
and so is a value outside it (DP512). NULL is not a category: a column holding NULL is refused
(DP512), because a missing answer is an answer the randomization must hide too; map it to a category
first (``COALESCE(col, 'unknown')``, the category in the domain). An output that exists is not
replaced (DP513): two randomizations of the same answers together cost both epsilons.

>>> import pyarrow as pa, tempfile, os
>>> out = os.path.join(tempfile.mkdtemp(), "survey.parquet")
>>> done = randomize(pa.table({"smoker": [True, False, True]}), ["smoker"], 1.0, out)
>>> done["smoker"].mechanism, read_parameters(out)["smoker"]["domain"]
('Warner randomized response', [False, True])
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpsql.engines import duckdb_sources as sources
from dpsql.engines.duckdb_schema import cast_keys
from dpsql.errors import RandomizeError
from dpsql.mechanisms import randomness
from dpsql.mechanisms.randomized_response import MAX_CATEGORIES, RandomizedResponse
from dpsql.policy.loading import load_policy
from dpsql.policy.model import Policy, Source, TablePolicy
from dpsql.policy.sources import format_of
from dpsql.sql.literals import key_text

METADATA_KEY = "dpsql.randomized"     # the Parquet file's key-value metadata entry
SIDE_TABLE = "dpsql_randomized"       # a DuckDB database's table of parameters, one row per column


@dataclass(frozen=True)
class RandomizedColumn:
    """What one column's reports were drawn with: its mechanism, epsilon, type, domain and p_keep."""
    name: str
    sql_type: str
    epsilon: float
    domain: tuple
    p_keep: Fraction

    @property
    def mechanism(self) -> str:
        return RandomizedResponse(self.epsilon, len(self.domain)).name

    def to_json(self) -> dict:
        """The parameters as JSON values (a domain value JSON cannot hold exactly as its text)."""
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, "type": self.sql_type,
                "domain": [_json_value(v) for v in self.domain], "categories": len(self.domain),
                "p_keep": f"{self.p_keep.numerator}/{self.p_keep.denominator}"}


def _json_value(value: Any) -> Any:
    if isinstance(value, (bool, int, str)) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return key_text(value)


def _refuse(code: str, message: str, hint: str = "") -> RandomizeError:
    return RandomizeError(code, message, hint=hint, rule="randomize")


def randomize(source, columns: Sequence[str], epsilon: float | Mapping[str, float], output, *,
              table: str | None = None, domains: Mapping[str, Sequence] | None = None,
              policy: str | Path | Mapping | Policy | None = None, output_table: str | None = None,
              rng: np.random.Generator | randomness.RandomSource | None = None) -> dict[str, RandomizedColumn]:
    """Apply randomized response to ``columns`` of a table and write the result with its parameters.

    Args:
        source: a Parquet or CSV file, a DuckDB database file or connection (with ``table``), or a
            pandas/polars DataFrame or Arrow table.
        columns: the columns to randomize (the others are copied unchanged).
        epsilon: each column's epsilon per respondent, one number for all or a mapping by column; a
            respondent's reports in several columns together cost the sum.
        output: a ``.parquet`` path, or a DuckDB database file or connection (a new table in it,
            ``output_table``, default the source's table name).
        table: the source's table in a DuckDB database, and the policy's table (default: the file's name).
        domains: each column's public categories (a list); default the policy's keys of the column,
            else {false, true} for a BOOLEAN column.
        policy: the owner's policy (its keys are the domains not given in ``domains``).
        rng: tests only: a seeded numpy Generator; default the OS CSPRNG.
    Returns:
        The parameters of each randomized column, by name.
    Raises:
        RandomizeError: DP510 (an unknown column, a bad output), DP511 (no public domain, or a domain
            that does not fit the column), DP512 (a value outside the domain, or NULL), DP513 (the
            output exists); InvalidParameter DP401 (epsilon <= 0); PolicyError DP505 (unreadable source).
    Example:
        >>> dpsql.randomize("survey.csv", ["smoker", "region"], 1.0, "survey_rr.parquet",
        ...                 domains={"region": ["N", "S", "E", "W"]})  # doctest: +SKIP
    """
    name = table or _stem(source)
    owner = _policy_table(policy, name)
    con = sources.quiet(duckdb.connect())
    try:
        _load(con, source, name)
        types = {row[0].lower(): (row[0], row[1]) for row in con.execute(f"DESCRIBE {sources.quoted(name)}").fetchall()}
        plan = [_column(con, c, types, _epsilon(epsilon, c), domains or {}, owner) for c in _chosen(columns, types)]
        data = con.table(sources.quoted(name)).to_arrow_table()
    finally:
        con.close()
    data = _randomized(data, plan, randomness.as_random_source(rng))
    _write(data, plan, output, output_table or name)
    return {c.name: c for c, _ in plan}


def _stem(source) -> str:
    return sources.stem_of(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else "data"


def _policy_table(policy, name: str) -> TablePolicy | None:
    if policy is None:
        return None
    loaded = policy if isinstance(policy, Policy) else load_policy(policy)
    if name.lower() not in loaded.tables:
        raise _refuse("DP510", f"the policy has no table {name!r} (its tables: {', '.join(loaded.tables)})",
                      hint="name the table with table=... (--table)")
    return loaded.tables[name.lower()]


def _load(con: duckdb.DuckDBPyConnection, source, name: str) -> None:
    """The source's rows into TEMP table ``name`` (DP505 when it cannot be read)."""
    if isinstance(source, duckdb.DuckDBPyConnection) or not isinstance(source, (str, os.PathLike)):
        if isinstance(source, duckdb.DuckDBPyConnection):
            source = source.table(sources.quoted(name)).to_arrow_table()
        sources.read_object(con, name, source)
        return
    path = os.fspath(source)
    fmt = format_of(path)
    origin = Source(path=path, format=fmt) if fmt is not None else Source(path=path, format="duckdb", table=name)
    sources.read_source(con, name, origin, sources.source_files(con, name, origin))


def _epsilon(epsilon, column: str) -> float:
    if isinstance(epsilon, Mapping):
        found = {k.lower(): v for k, v in epsilon.items()}
        if column.lower() not in found:
            raise _refuse("DP510", f"no epsilon for column {column!r}", hint="give one epsilon, or one per column")
        return found[column.lower()]
    return epsilon


def _chosen(columns: Sequence[str], types: Mapping[str, tuple[str, str]]) -> list[str]:
    if isinstance(columns, str) or not columns:
        raise _refuse("DP510", "name the columns to randomize (a list of names)",
                      hint="columns=['smoker', 'region'] (dpsql randomize -c smoker -c region)")
    names = [c.lower() for c in columns]
    for c in columns:
        if c.lower() not in types:
            raise _refuse("DP510", f"the table has no column {c!r} (its columns: "
                                   f"{', '.join(n for n, _ in types.values())})",
                          hint="name columns of the table (names are case-insensitive)")
    if len(set(names)) != len(names):
        raise _refuse("DP510", "a column is named twice", hint="each column is randomized once")
    return names


def _column(con, column: str, types, epsilon, domains: Mapping, owner: TablePolicy | None):
    """One column's parameters and its domain as an Arrow array of the column's type."""
    name, sql_type = types[column]
    given = {k.lower(): v for k, v in domains.items()}
    declared = owner.columns.get(column) if owner is not None else None
    if column in given:
        domain = list(given[column])
    elif declared is not None and declared.keys is not None:
        domain = list(declared.keys)
    elif sql_type == "BOOLEAN":
        domain = [False, True]
    else:
        raise _refuse("DP511", f"column {name!r} has no public domain: the categories must be declared, never read "
                               "from the data (which values occur there is private)",
                      hint=f"give its categories: domains={{'{name}': [...]}} (--domain {name}=A,B,...), "
                           "or declare them as the column's keys in the policy")
    if not 2 <= len(domain) <= MAX_CATEGORIES:
        raise _refuse("DP511", f"the domain of {name!r} has {len(domain)} categories; randomized response needs 2 to "
                               f"{MAX_CATEGORIES}",
                      hint="list every category an answer can take (a finer domain costs accuracy: its variance "
                           "grows with the number of categories)")
    try:
        values = con.sql(cast_keys(sql_type), params=[[key_text(v) for v in domain]]).to_arrow_table().column(0)
    except duckdb.Error:
        raise _refuse("DP511", f"the domain of {name!r} ({domain!r}) does not convert to its type {sql_type}",
                      hint=f"give categories that are values of {sql_type}") from None
    if pc.count_distinct(values).as_py() != len(domain) or values.null_count:
        raise _refuse("DP511", f"the domain of {name!r} repeats a category (as {sql_type})",
                      hint="list each category once")
    rr = RandomizedResponse(epsilon, len(domain))
    return RandomizedColumn(name, sql_type, float(epsilon), tuple(values.to_pylist()), rr.p_keep), values


def _randomized(data: pa.Table, plan, source: randomness.RandomSource) -> pa.Table:
    """Each chosen column replaced by its reports (DP512 if a value is outside the domain or NULL)."""
    for column, values in plan:
        at = data.column_names.index(column.name)
        answers = data.column(at)
        index = pc.index_in(answers, value_set=values)
        if index.null_count:
            first = pc.filter(answers, pc.is_null(index)).slice(0, 1).to_pylist()[0]
            what = "NULL, which is not a category" if first is None else f"{first!r}, outside its domain"
            raise _refuse("DP512", f"column {column.name!r} holds {what}",
                          hint="map it to a category of the domain first (COALESCE(col, 'unknown')), or add "
                               "the category to the domain")
        rr = RandomizedResponse(column.epsilon, len(column.domain))
        reports = rr.sample(source, index.to_numpy(zero_copy_only=False).astype(np.int64))
        data = data.set_column(at, data.field(at), pc.take(values, pa.array(reports)).cast(answers.type))
    return data


def _write(data: pa.Table, plan, output, table: str) -> None:
    done = [c for c, _ in plan]
    if isinstance(output, (str, os.PathLike)) and format_of(os.fspath(output)) == "parquet":
        if os.path.exists(output):
            raise _exists(os.fspath(output))
        meta = {**(data.schema.metadata or {}), METADATA_KEY.encode(): json.dumps(
            {"version": 1, "columns": {c.name: c.to_json() for c in done}}).encode()}
        pq.write_table(data.replace_schema_metadata(meta), os.fspath(output))
        return
    if isinstance(output, (str, os.PathLike)) and format_of(os.fspath(output)) is not None:
        raise _refuse("DP510", f"{os.fspath(output)!r} cannot hold the parameters of the randomization",
                      hint="write a .parquet file, or a table of a DuckDB database")
    con = output if isinstance(output, duckdb.DuckDBPyConnection) else duckdb.connect(os.fspath(output))
    try:
        _write_table(con, data, done, table)
    finally:
        if con is not output:
            con.close()


def _exists(what: str) -> RandomizeError:
    return _refuse("DP513", f"{what} exists already: it is not replaced",
                   hint="write to a new name; two randomizations of the same answers, both kept, cost both epsilons")


def _write_table(con: duckdb.DuckDBPyConnection, data: pa.Table, done: list[RandomizedColumn], table: str) -> None:
    """The table and its rows of ``dpsql_randomized``, in one transaction."""
    if con.execute("SELECT count(*) FROM duckdb_tables() WHERE lower(table_name) = lower(?)", [table]).fetchall()[0][0]:
        raise _exists(f"table {table!r}")
    view = "__dpsql_randomized_rows"
    con.register(view, data)
    try:
        con.execute("BEGIN")
        con.execute(f"CREATE TABLE {sources.quoted(table)} AS SELECT * FROM {view}")
        con.execute(f"CREATE TABLE IF NOT EXISTS {SIDE_TABLE} (table_name VARCHAR, column_name VARCHAR, "
                    "parameters VARCHAR)")
        con.execute(f"DELETE FROM {SIDE_TABLE} WHERE lower(table_name) = lower(?)", [table])
        con.executemany(f"INSERT INTO {SIDE_TABLE} VALUES (?, ?, ?)",
                        [[table, c.name, json.dumps(c.to_json())] for c in done])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister(view)


def read_parameters(target, table: str | None = None) -> dict[str, dict]:
    """The parameters a randomization wrote: of a Parquet file's metadata, or of ``table`` of a DuckDB
    database (file or connection); {} when there are none.

    >>> read_parameters(pa.table({"x": [1]}))
    {}
    """
    if isinstance(target, pa.Table):
        raw = (target.schema.metadata or {}).get(METADATA_KEY.encode())
        return json.loads(raw)["columns"] if raw else {}
    if isinstance(target, (str, os.PathLike)) and format_of(os.fspath(target)) == "parquet":
        return read_parameters(pq.read_schema(os.fspath(target)).empty_table())
    con = target if isinstance(target, duckdb.DuckDBPyConnection) else duckdb.connect(os.fspath(target), read_only=True)
    try:
        if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [SIDE_TABLE]).fetchall()[0][0]:
            return {}
        rows = con.execute(f"SELECT column_name, parameters FROM {SIDE_TABLE} WHERE lower(table_name) = lower(?)",
                           [table or ""]).fetchall()
    finally:
        if con is not target:
            con.close()
    return {name: json.loads(text) for name, text in rows}


def policy_columns(parameters: Mapping[str, Mapping]) -> dict[str, dict]:
    """The policy's entries for randomized columns (``columns:`` of a ``local_model: true`` table).

    >>> policy_columns({"smoker": {"epsilon": 1.0, "domain": [False, True]}})
    {'smoker': {'randomized': {'epsilon': 1.0, 'domain': [False, True]}}}
    """
    return {name: {"randomized": {"epsilon": p["epsilon"], "domain": list(p["domain"])}}
            for name, p in parameters.items()}
