"""The DuckDB engine: a connection opened read-only (or handed over by the owner, or made in memory for
files and DataFrames), its sources read (engines/duckdb_sources.py), locked down, with the policy bound
to its catalog, the noise UDF registered, and one query run at a time: turns shared fairly between
analysts (engines/turns.py), each turn interrupted at its deadline."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import threading
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping

import duckdb
import numpy as np
import pyarrow as pa

from dpsql.engines import duckdb_sources as sources
from dpsql.engines.duckdb_names import expression_name
from dpsql.engines.duckdb_schema import KEY_LITERALS_MAX, bind_schema, check_referenced_keys, key_tables, \
    repeats_as_compared, table_schema
from dpsql.engines.turns import Turns
from dpsql.engines.versions import file_data_version
from dpsql.errors import DeadlineExceeded, PolicyError, UnsupportedConstruct, first_line
from dpsql.limits import NO_DEADLINE, Deadline
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy
from dpsql.policy.model import Source
from dpsql.policy.sources import format_of

# DuckDB settings of the connection that runs analysts' queries. top_n_window_elimination makes the
# per-unit `ROW_NUMBER() <= L` filter 1.6-3x slower and 2x hungrier (measured at 10M rows).
LOCKDOWN = (
    ("disabled_optimizers", "top_n_window_elimination"),
    ("enable_external_access", False),
    ("lock_configuration", True),
)
BIGINT = duckdb.sqltype("BIGINT")
BIGINTS = duckdb.list_type(BIGINT)
MAX_PUBLIC_KEYS = 1_000_000   # groups of one public column a query may release
BATCH_ROWS = 65_536           # rows per batch while counting a public-only answer's rows


class DuckDBEngine:
    """The Engine protocol (engines/base.py) over one DuckDB connection."""

    dialect = "duckdb"
    one_query = True   # the whole lowered query is one statement (lower/rewrite.py)

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None = None, *, handed_over: bool = False,
                 data: Mapping[str, Any] | None = None):
        self.con = con
        self.path = path                   # the database file opened read-only, if any
        self.run_lock = Turns()            # one query at a time, turns shared fairly (engines/turns.py)
        self.handed_over = handed_over     # the owner's connection: its own tables have no identity dpsql knows
        self.data = dict(data or {})       # table -> Source or DataFrame given to connect, read by read_sources
        self.opaque = False                # some table's data has no identity (file_data_version cannot name it)
        self._stats: dict = {}             # source files' stats before they were read
        self._tables: tuple[str, ...] = ()
        self._public_keys: dict = {}       # (reader, table, column) -> the column with its keys
        self._unique: dict = {}            # (reader, table, columns as compared) -> unique together
        self._extremes: dict = {}          # (reader, table, column) -> (MIN, MAX) of a public column

    @classmethod
    def open(cls, con_or_path, policy: Policy | None = None) -> "DuckDBEngine":
        """A connection object as handed over; None (every table from its source), a dict of tables,
        a DataFrame or a Parquet/CSV file (one table): a new in-memory connection; else a database
        file opened read-only (DP503)."""
        if isinstance(con_or_path, duckdb.DuckDBPyConnection):
            return cls(con_or_path, handed_over=True)
        if con_or_path is None:
            return cls(duckdb.connect())
        if isinstance(con_or_path, Mapping):
            return cls(duckdb.connect(), data=sources.given_tables(con_or_path, policy))
        if not isinstance(con_or_path, (str, os.PathLike)):
            return cls(duckdb.connect(), data={sources.one_table(policy, None): con_or_path})
        fmt = format_of(os.fspath(con_or_path))
        if fmt is not None:
            table = sources.one_table(policy, sources.stem_of(os.fspath(con_or_path)))
            return cls(duckdb.connect(), data={table: Source(path=os.fspath(con_or_path), format=fmt)})
        path = Path(con_or_path)
        if not path.exists():
            raise PolicyError("DP503", f"database file {str(path)!r} does not exist")
        try:
            return cls(duckdb.connect(str(path), read_only=True), path)
        except duckdb.Error as e:
            raise PolicyError("DP503", f"cannot open database {str(path)!r}: {e}") from None

    def read_sources(self, policy: Policy) -> dict[str, tuple[str, ...]]:
        """Copy every table the policy gives a ``source:``, or ``open`` was given, into a TEMP table,
        before the lock-down; return the files read, per table (for the data version).

        Raises:
            PolicyError: DP505 a source cannot be read; DP502 a table has two sources, or none.
        """
        read: dict[str, tuple[str, ...]] = {}
        sources.quiet(self.con)
        for name, table in policy.tables.items():
            given = self.data.get(name)
            if table.data_source is not None and given is not None:
                raise PolicyError("DP502", f"table {name!r} has a source in the policy "
                                           f"({table.data_source.describe()}) and was also given to connect()")
            origin = table.data_source if table.data_source is not None else given
            if origin is None:
                if not self.handed_over and self.path is None:
                    raise PolicyError("DP502", f"table {name!r} (tables.{name}) has no data: the policy gives it "
                                               "no source: and connect() was not given it")
                self.opaque |= self.handed_over   # the owner's connection's own table: no identity
                continue
            if table_schema(self.con, name):
                raise PolicyError("DP502", f"table {name!r} has a source, but the database holds a table {name!r} "
                                           "too", hint="remove the source: from the policy, or rename the table")
            if isinstance(origin, Source):
                read[name] = sources.source_files(self.con, name, origin)
                self._stats.update(sources.file_stats(read[name]))
                sources.read_source(self.con, name, origin, read[name])
            else:
                sources.read_object(self.con, name, origin)
                self.opaque = True   # a DataFrame has no identity: replays stay within the connection
        return read

    def check_unchanged(self) -> None:
        """The source files are as they were before dpsql read them (and computed their version)."""
        for f, before in self._stats.items():
            if sources.file_stats([f])[f] != before:
                raise PolicyError("DP505", f"the source file {f!r} changed while dpsql read it",
                                  hint="nothing was spent; connect again once it is written")

    def bind_policy(self, policy: Policy, prefix: str, data_version: str | None = None) -> Policy:
        """The policy bound to the catalog (DP502), its referenced keys unique in the data (DP504;
        checked once per data version: the caller's, else a database file's own when no source was read
        into it, else every time)."""
        if data_version is None and self.path is not None and not self._stats:
            data_version = file_data_version(self.path)   # read after the read-only open
        self._tables = tuple(policy.tables)
        origins = {name: t.data_source or self.data.get(name) for name, t in policy.tables.items()}
        try:
            bound = bind_schema(policy, self.con, {n: _describe(o) for n, o in origins.items() if o is not None})
            check_referenced_keys(bound, self.con, data_version)
            return key_tables(bound, self.con, prefix)
        except duckdb.Error as e:
            raise PolicyError("DP502", f"cannot read the database schema: {e}") from None

    def public_keys(self, table: str, column: ColumnPolicy, prefix: str, reader: Hashable = None,
                    deadline: float | None = None) -> ColumnPolicy:
        """A public table's column with its distinct values as keys (a long set in a TEMP table, as
        declared keys are). Public data: reading it leaks nothing. Read once per reader (the analyst
        asking; None: the owner), never shared between readers: whether it was read before must not
        depend on what another analyst asked (a first read of 900,000 rows takes 0.2 s, a kept one
        nothing; issue 20, finding 6). Memory: one copy per reader of each public column grouped by.
        The read is a turn of its own, interrupted after ``deadline`` seconds (DP425)."""
        key = (reader, table, column.public_source)
        if key not in self._public_keys:
            name, source = column.public_source
            with self.turn(reader, deadline) as clock, self._interrupted_at(clock):
                rows = self.con.execute(
                    f'SELECT DISTINCT "{source}" FROM "{name}" WHERE "{source}" IS NOT NULL ORDER BY 1 LIMIT ?',
                    [MAX_PUBLIC_KEYS + 1]).fetchall()
                if len(rows) > MAX_PUBLIC_KEYS:
                    raise UnsupportedConstruct("DP304", f"GROUP BY {name}.{source}: more than {MAX_PUBLIC_KEYS} groups")
                keyed = dataclasses.replace(column, keys=tuple(r[0] for r in rows))
                policy = Policy(0.0, 0.0, 0.0, 0.0, {"t": TablePolicy("t", "row", columns={"c": keyed})})
                self._public_keys[key] = key_tables(policy, self.con, f"{prefix}_{len(self._public_keys)}"
                                                    ).tables["t"].columns["c"]
        return dataclasses.replace(self._public_keys[key], name=column.name)

    def pruned_keys(self, read: str, reader: Hashable = None, deadline: float | None = None) -> tuple | None:
        """The keys a SELECT over public tables only returns (frontend/key_pruning.py: a public column's
        values where the query's public conditions hold), or None past ``KEY_LITERALS_MAX`` of them (the
        caller reads the column's own keys instead: a superset). Public data, read in a turn of its own
        interrupted after ``deadline`` seconds (DP425). Never kept: one read per distinct WHERE would
        grow without bound; the plan cache keeps the plans that used them, and short sets are literals,
        so no TEMP table is made per read."""
        with self.turn(reader, deadline) as clock, self._interrupted_at(clock), _public_read():
            rows = self.con.execute(f"SELECT * FROM ({read}) ORDER BY 1 LIMIT ?", [KEY_LITERALS_MAX + 1]).fetchall()
        return tuple(r[0] for r in rows) if len(rows) <= KEY_LITERALS_MAX else None

    def pruned_count(self, read: str, reader: Hashable = None, deadline: float | None = None) -> int:
        """How many rows a SELECT over public tables only returns (frontend/key_pruning.py ``joint_read``:
        the groups of a joint key set), read as ``pruned_keys`` reads: public data, a turn of its own
        interrupted after ``deadline`` seconds (DP425), never kept."""
        with self.turn(reader, deadline) as clock, self._interrupted_at(clock), _public_read():
            return int(self.con.execute(f"SELECT COUNT(*) FROM ({read})").fetchall()[0][0])

    def unique(self, table: str, columns, reader: Hashable = None, deadline: float | None = None) -> bool:
        """Are ``columns`` ((name, Form) pairs) unique together in a public ``table``, each in the form
        a join compares it (frontend/lookups.py)? A constraint DuckDB enforces answers when every form
        is exact. Public data; read once per reader, never shared (as ``public_keys``), in a turn of
        its own interrupted after ``deadline`` seconds (DP425)."""
        key = (reader, table, tuple(columns))
        if key not in self._unique:
            with self.turn(reader, deadline) as clock, self._interrupted_at(clock):
                self._unique[key] = not repeats_as_compared(self.con, table, list(columns))
        return self._unique[key]

    def public_bounds(self, table: str, column: str, reader: Hashable = None, deadline: float | None = None) -> tuple:
        """(MIN, MAX) of a public table's column, as DuckDB holds them (None, None: no value), the
        bounds of a column the policy leaves unbounded (frontend/public_bounds.py). Public data; read
        once per reader, never shared (as ``public_keys``), in a turn of its own interrupted after
        ``deadline`` seconds (DP425)."""
        key = (reader, table, column)
        if key not in self._extremes:
            with self.turn(reader, deadline) as clock, self._interrupted_at(clock):
                # fetchall: a result left unfinished (fetchone) would refuse the connection's next query
                self._extremes[key] = tuple(self.con.execute(
                    f'SELECT MIN("{column}"), MAX("{column}") FROM "{table}"').fetchall()[0])
        return self._extremes[key]

    @contextlib.contextmanager
    def holding(self, tables: Iterable[TablePolicy]) -> Iterator[None]:
        """Empty TEMP tables of a query's released values (frontend/correlated.py), created for its run
        (inside the caller's turn, so no other query sees them) and dropped after it, whatever happens.
        Their names are dpsql's own, which no analyst's SQL may name (DP201)."""
        made = []
        try:
            for table in tables:
                self.hold(table)
                made.append(table.name)
            yield
        finally:
            for name in made:
                self.con.execute(f"DROP TABLE IF EXISTS {sources.quoted(name)}")

    def hold(self, table: TablePolicy) -> None:
        """One empty TEMP table of released values, its columns in the policy's types (``holding``)."""
        columns = ", ".join(f"{sources.quoted(c.name)} {c.sql_type}" for c in table.columns.values())
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {sources.quoted(table.name)} ({columns})")

    @contextlib.contextmanager
    def rows(self, rows: pa.Table, like: duckdb.DuckDBPyRelation, name: str) -> Iterator[None]:
        """``rows`` (released values) in the TEMP table ``name`` of ``like``'s column names and types (a
        bound query, never run), for one run in the caller's turn, then dropped; its name is dpsql's own
        (DP201)."""
        columns = ", ".join(f"{sources.quoted(c)} {t}" for c, t in zip(like.columns, like.types))
        self.con.execute(f"CREATE TEMP TABLE {sources.quoted(name)} ({columns})")
        try:
            self._insert(name, rows)
            yield
        finally:
            self.con.execute(f"DROP TABLE IF EXISTS {sources.quoted(name)}")

    def fill(self, name: str, rows: pa.Table, keys) -> bool:
        """A held table filled with a stage's released rows (in its columns' order); whether ``keys``
        ((name, Form) pairs, as the query's lookup compares them) are unique together in it. Read every
        time, never kept: the table's rows are this run's."""
        self._insert(name, rows)
        return not repeats_as_compared(self.con, name, list(keys))

    def _insert(self, name: str, rows: pa.Table) -> None:
        """Arrow rows into a TEMP table of dpsql's, through a view registered for the statement only."""
        view = f"__dpsql_rows_{secrets.token_hex(6)}"
        self.con.register(view, rows)
        try:
            self.con.execute(f"INSERT INTO {sources.quoted(name)} SELECT * FROM {sources.quoted(view)}")
        finally:
            self.con.unregister(view)

    @contextlib.contextmanager
    def turn(self, who: Hashable = None, deadline: float | None = None) -> Iterator[Deadline]:
        """The engine for ``who`` (an analyst; None: the owner) until the block ends, given fairly
        (engines/turns.py), and the turn's deadline: ``deadline`` seconds from its start, which ``run``
        interrupts at. Waiting for the turn does not count: round robin bounds it, one turn (so one
        deadline) of each other analyst waiting; a request that waited still gets its whole time."""
        self.run_lock.acquire(who)
        try:
            yield Deadline(deadline)
        finally:
            self.run_lock.release()

    @contextlib.contextmanager
    def _interrupted_at(self, deadline: Deadline) -> Iterator[None]:
        """DuckDB interrupted (from a timer thread) if the block still runs at the deadline, and the
        interruption raised as DP425. The timer is disarmed before the turn ends, so it never
        interrupts the next turn's query (an interrupt that arrives between queries is ignored by
        DuckDB: tested)."""
        left = deadline.remaining()
        if left is None:
            yield
            return
        guard, state = threading.Lock(), {"armed": True, "fired": False}

        def fire() -> None:
            with guard:
                if state["armed"]:
                    state["fired"] = True
                    self.con.interrupt()
        timer = threading.Timer(max(left, 0.0), fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        except duckdb.InterruptException:
            if not state["fired"]:
                raise
            raise DeadlineExceeded("DP425", f"the query ran past its deadline of {deadline.seconds:g} s and was "
                                   "stopped", hint="ask for less (fewer rows or tables), or retry later") from None
        finally:
            with guard:
                state["armed"] = False
            timer.cancel()

    def lock_down(self) -> None:
        sources.quiet(self.con)
        for name, value in LOCKDOWN:
            current = self.con.execute("SELECT current_setting(?)", [name]).fetchall()[0][0]
            if str(current).lower() == str(value).lower():
                continue
            try:
                literal = "true" if value is True else "false" if value is False else repr(value)
                self.con.execute(f"SET {name} = {literal}")
            except duckdb.Error as e:
                raise PolicyError("DP503", f"cannot lock down the DuckDB connection ({name}): {e}") from None
        for table in self._tables:
            self._check_readable(table)

    def _check_readable(self, table: str) -> None:
        """A table the lock-down left unreadable (a view over files) is a set-up error now, not a DP311
        on every query."""
        try:
            self.con.execute(f"SELECT * FROM {sources.quoted(table)} LIMIT 0")
        except duckdb.Error as e:
            first = first_line(e)
            raise PolicyError("DP503", f"table {table!r} cannot be read once the connection is locked down: {first}",
                              hint=f"a view that reads files cannot run without file access: declare the file in "
                                   f"the policy (tables.{table}.source: data.parquet), pass it to dpsql.connect("
                                   f"{{{table!r}: 'data.parquet'}}, ...), or CREATE TABLE {table} AS ...") from None

    def register_noise(self, name: str, function: Callable[..., pa.Array]) -> None:
        # Registered after the lock-down: functions are not settings. side_effects: never folded or cached.
        self.con.create_function(name, function, [BIGINT] * 5, BIGINT, type="arrow", side_effects=True)

    def register_choice(self, name: str, function: Callable[..., pa.Array]) -> None:
        """A quantile rule's choice function: (cells, counts, arguments) lists in, a cell or NULL (PTR's
        "no answer") out; its inputs are never NULL (lower/histogram.py), so NULL handling is its own."""
        self.con.create_function(name, function, [BIGINTS] * 3, BIGINT, type="arrow", side_effects=True,
                                 null_handling="special")

    def register_top_k(self, name: str, choose: Callable[..., np.ndarray]) -> None:
        """The top-k choice function (lower/top_k.py), vectorised over rows of candidate lists: one row
        a query. A NULL list (no candidate) gives NULL, never a call. side_effects: never folded."""
        def udf(ids: pa.Array, utilities: pa.Array, k: pa.Array, a: pa.Array, b: pa.Array) -> pa.Array:
            rows = zip(ids.to_pylist(), utilities.to_pylist(), k.to_pylist(), a.to_pylist(), b.to_pylist())
            return pa.array([None if i is None or u is None else
                             choose(np.asarray(i, dtype=np.int64), np.asarray(u, dtype=np.int64), *args).tolist()
                             for i, u, *args in rows], type=pa.list_(pa.int64()))
        listed = duckdb.list_type(BIGINT)
        self.con.create_function(name, udf, [listed, listed, BIGINT, BIGINT, BIGINT], listed, type="arrow",
                                 side_effects=True)

    def expression_name(self, text: str) -> str | None:
        return expression_name(text)

    def bind(self, sql: str, params: dict | None = None, lowered=None) -> duckdb.DuckDBPyRelation:
        """Parse and bind before anything is spent (``params``: the values of the SQL's named parameters,
        dpsql's own; ``lowered``: unused, DuckDB runs the printed SQL as one statement). Parser and binder errors (a type mismatch, an expression too deep) depend only on
        the SQL and the schema, never on the rows, so their message is safe to show, and the query is
        refused for free."""
        try:
            with self.run_lock:
                return self.con.sql(sql, params=params)
        except duckdb.Error as e:
            first = first_line(e)
            raise UnsupportedConstruct("DP311", f"DuckDB cannot run this query: {first}", rule="engine_binds",
                                       hint="nothing was spent; check the types of the expressions") from None

    def run(self, bound: duckdb.DuckDBPyRelation, deadline: Deadline = NO_DEADLINE,
            max_rows: int | None = None) -> pa.Table:
        """Run a bound query to the end, interrupted at the deadline (DP425: the caller says whether
        anything was spent). ``max_rows``: count the rows as they stream and stop past it (DP315)."""
        with self.run_lock, self._interrupted_at(deadline):
            _started(deadline)
            return bound.to_arrow_table() if max_rows is None else _at_most(bound, max_rows)

    def drain(self, bound: duckdb.DuckDBPyRelation, deadline: Deadline = NO_DEADLINE) -> str | None:
        """Run a bound query to the end, its rows read in batches and dropped (a dry run: only whether it
        fails matters): the first line of DuckDB's error, or None; interrupted at the deadline (DP425)."""
        with self.run_lock, self._interrupted_at(deadline):
            _started(deadline)
            try:
                reader = bound.to_arrow_reader(BATCH_ROWS)
                try:
                    for _ in reader:
                        pass
                finally:
                    reader.close()
            except duckdb.InterruptException:
                raise
            except duckdb.Error as e:
                return first_line(e)
        return None

    def close(self) -> None:
        self.con.close()


@contextlib.contextmanager
def _public_read() -> Iterator[None]:
    """A read of public tables under the query's public conditions (frontend/key_pruning.py) that DuckDB
    cannot bind or run (``doctors LIKE 4``: no LIKE of an INTEGER) is refused DP311, before anything is
    spent; its message is safe to show: it depends on the SQL, the schema and public rows only."""
    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as e:
        raise UnsupportedConstruct("DP311", f"the query's conditions on public tables do not run in the engine: "
                                   f"{first_line(e)}", rule="engine_binds",
                                   hint="nothing was spent; check the types of the expressions") from None


def _started(deadline: Deadline) -> None:
    """DP425 for a query whose deadline passed before it ran (waiting for the engine's turn)."""
    if deadline.passed():
        raise DeadlineExceeded("DP425", f"the query reached its deadline of {deadline.seconds:g} s before it ran",
                               hint="retry later")


def _at_most(bound: duckdb.DuckDBPyRelation, max_rows: int) -> pa.Table:
    """The answer, read in batches and abandoned past ``max_rows`` rows (DP315)."""
    reader = bound.to_arrow_reader(BATCH_ROWS)
    batches, rows = [], 0
    try:
        for batch in reader:
            rows += batch.num_rows
            if rows > max_rows:
                raise UnsupportedConstruct("DP315", f"the answer has more than {max_rows} rows", rule="bounded_work",
                                           hint="add a LIMIT, or aggregate: GROUP BY with fewer groups")
            batches.append(batch)
    finally:
        reader.close()   # an open result would refuse the connection's next query
    return pa.Table.from_batches(batches, schema=reader.schema)


def _describe(origin) -> str:
    return origin.describe() if isinstance(origin, Source) else f"a {type(origin).__name__}"

