"""The DuckDB engine: a connection opened read-only (or handed over by the owner), locked down,
with the policy bound to its catalog, the noise UDF registered, and one query run at a time."""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Callable

import duckdb
import pyarrow as pa

from dpsql.accounting.replay import file_data_version
from dpsql.engines.duckdb_schema import bind_schema, check_referenced_keys, key_tables
from dpsql.errors import PolicyError, UnsupportedConstruct
from dpsql.policy import ColumnPolicy, Policy, TablePolicy

# DuckDB settings of the connection that runs analysts' queries. top_n_window_elimination makes the
# per-unit `ROW_NUMBER() <= L` filter 1.6-3x slower and 2x hungrier (measured at 10M rows).
LOCKDOWN = (
    ("disabled_optimizers", "top_n_window_elimination"),
    ("enable_external_access", False),
    ("lock_configuration", True),
)
BIGINT = duckdb.sqltype("BIGINT")
MAX_PUBLIC_KEYS = 1_000_000   # groups of one public column a query may release


class DuckDBEngine:
    """The Engine protocol (engines/base.py) over one DuckDB connection."""

    dialect = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None = None):
        self.con = con
        self.path = path                   # the database file opened read-only, if any
        self.run_lock = threading.Lock()   # one DuckDB connection runs one query at a time

    @classmethod
    def open(cls, con_or_path) -> "DuckDBEngine":
        """A connection object as handed over, or a database file opened read-only (DP503)."""
        if isinstance(con_or_path, duckdb.DuckDBPyConnection):
            return cls(con_or_path)
        path = Path(con_or_path)
        if not path.exists():
            raise PolicyError("DP503", f"database file {str(path)!r} does not exist")
        try:
            return cls(duckdb.connect(str(path), read_only=True), path)
        except duckdb.Error as e:
            raise PolicyError("DP503", f"cannot open database {str(path)!r}: {e}") from None

    def bind_policy(self, policy: Policy, prefix: str, data_version: str | None = None) -> Policy:
        """The policy bound to the catalog (DP502), its referenced keys unique in the data (DP504;
        checked once per data version: the caller's, else a database file's own, else every time)."""
        if data_version is None and self.path is not None:
            data_version = file_data_version(self.path)   # read after the read-only open
        try:
            bound = bind_schema(policy, self.con)
            check_referenced_keys(bound, self.con, data_version)
            return key_tables(bound, self.con, prefix)
        except duckdb.Error as e:
            raise PolicyError("DP502", f"cannot read the database schema: {e}") from None

    def public_keys(self, table: str, column: ColumnPolicy, prefix: str) -> ColumnPolicy:
        """A public table's column with its distinct values as keys (read once per connection; a
        long set in a TEMP table, as declared keys are). Public data: reading it leaks nothing."""
        cache = self.__dict__.setdefault("_public_keys", {})
        key = (table, column.public_source)
        if key not in cache:
            name, source = column.public_source
            with self.run_lock:
                rows = self.con.execute(
                    f'SELECT DISTINCT "{source}" FROM "{name}" WHERE "{source}" IS NOT NULL ORDER BY 1 LIMIT ?',
                    [MAX_PUBLIC_KEYS + 1]).fetchall()
            if len(rows) > MAX_PUBLIC_KEYS:
                raise UnsupportedConstruct("DP304", f"GROUP BY {name}.{source}: more than {MAX_PUBLIC_KEYS} groups")
            keyed = dataclasses.replace(column, keys=tuple(r[0] for r in rows))
            policy = Policy(0.0, 0.0, 0.0, 0.0, {"t": TablePolicy("t", "row", columns={"c": keyed})})
            cache[key] = key_tables(policy, self.con, f"{prefix}_{len(cache)}").tables["t"].columns["c"]
        return dataclasses.replace(cache[key], name=column.name)

    def lock_down(self) -> None:
        for name, value in LOCKDOWN:
            current = self.con.execute("SELECT current_setting(?)", [name]).fetchall()[0][0]
            if str(current).lower() == str(value).lower():
                continue
            try:
                literal = "true" if value is True else "false" if value is False else repr(value)
                self.con.execute(f"SET {name} = {literal}")
            except duckdb.Error as e:
                raise PolicyError("DP503", f"cannot lock down the DuckDB connection ({name}): {e}") from None

    def register_noise(self, name: str, function: Callable[..., pa.Array]) -> None:
        # Registered after the lock-down: functions are not settings. side_effects: never folded or cached.
        self.con.create_function(name, function, [BIGINT, BIGINT, BIGINT], BIGINT, type="arrow", side_effects=True)

    def bind(self, sql: str) -> duckdb.DuckDBPyRelation:
        """Parse and bind before anything is spent. Parser and binder errors (a type mismatch, an
        expression too deep) depend only on the SQL and the schema, never on the rows, so their
        message is safe to show, and the query is refused for free."""
        try:
            with self.run_lock:
                return self.con.sql(sql)
        except duckdb.Error as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UnsupportedConstruct("DP311", f"DuckDB cannot run this query: {first}", rule="engine_binds",
                                       hint="nothing was spent; check the types of the expressions") from None

    def run(self, bound: duckdb.DuckDBPyRelation) -> pa.Table:
        with self.run_lock:
            return bound.to_arrow_table()

    def close(self) -> None:
        self.con.close()
