"""The Spark engine: the exact stage on Spark, the noise and everything after it on the driver.

A lowered query is a program of stages (lower/program.py): its exact CTEs (row bounding, per-unit
pre-aggregation, the keyed choice of partitions, exact totals, leaf histograms) printed for Spark
(engines/spark_dialect.py) and run there, the heavy, deterministic part (no noise: a retried or
recomputed task gives the same rows); each exact CTE the driver reads (``__agg``, a tree's leaves, at
most one row per partition and leaf) collected to the driver as Arrow, one Spark job each; the rest of
the very query DuckDB would run (the noise UDF, partition selection, a top-k's choice, a quantile's
descent and rules, post-processing) run on an in-memory DuckDB in this process (the *driver DuckDB*, a
DuckDBEngine), with the Executor's samplers registered on it. Exact totals never leave this process and
noise is never in a Spark expression.

The driver DuckDB holds public data only, and one run's collected stages while it runs: the policy's public
tables (copied at connect: planning's reads of public keys, bounds and lookups are then DuckDB's own
code), the long key sets (mirrored to Spark as temp views, which the exact stage may join), the
released values of stages and replays. SQL lowered without a program of stages (a public-only query,
a public last stage, the post-processing of released measurements) runs there; it cannot reach a
private row, which only Spark holds.

What a Spark session can and cannot be locked against: the analyst's text never reaches Spark, only
the exact stage dpsql prints from validated nodes, reading the temp views made at connect (random
names; a stage reading anything else is refused, DP440); ANSI mode is set on. Spark itself is not
locked: whoever holds the session (the owner's process) can read files, change settings or replace a
view; the guarantees assume the session is dpsql's alone while connected, as a handed-over DuckDB
connection is the owner's.
"""
from __future__ import annotations

import contextlib
import dataclasses
import secrets
import threading
from typing import Any, Callable, Hashable, Iterable, Iterator

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from dpsql.engines.duckdb import DuckDBEngine, _started
from dpsql.engines.base import EngineError
from dpsql.engines.duckdb_schema import compared
from dpsql.engines.spark_dialect import spark_sql
from dpsql.errors import DeadlineExceeded, PolicyError, UnsupportedConstruct, first_line
from dpsql.limits import NO_DEADLINE, Deadline
from dpsql.lower.program import not_staged, split
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy
from dpsql.sql.compare import BARE

# Spark settings dpsql needs: ANSI semantics (an overflow or a bad cast is an error, never a silent
# wrap), which the printed exact stage's TRY_* functions turn into NULL where DuckDB's TRY does.
# Reserved keywords enforced: else Spark reads ``FROM t WHERE (x)`` as t aliased WHERE with a column list.
SETTINGS = (("spark.sql.ansi.enabled", "true"), ("spark.sql.ansi.enforceReservedKeywords", "true"))


@dataclasses.dataclass(frozen=True)
class SparkBound:
    """A query bound in stages: each collected exact stage's name and DataFrame (analysed: it bound), the
    driver stage's SQL over them, its parameters, and its columns' names and DuckDB types (read when it
    was bound over empty collected tables: engines/duckdb.py ``rows`` makes a table of released rows like
    them)."""
    exact: tuple[tuple[str, Any], ...]
    driver: str
    params: dict | None
    columns: list[str]
    types: list
    shared: tuple[Any, ...] = ()


class SparkEngine:
    """The Engine protocol (engines/base.py) over a SparkSession, with a driver DuckDB (see above)."""

    dialect = "spark"
    one_query = False   # a lowered query runs as a program of stages: no shared scans (lower/shared.py)

    def __init__(self, spark: Any):
        self.spark = spark
        self.driver = DuckDBEngine(duckdb.connect())   # public data, released values, one run's collected stages
        # One turn for the engine, its driver DuckDB included (one query at a time per engine, the turns
        # shared round robin between analysts, engines/turns.py): a query's turn spans its Spark job and
        # its driver stage, and planning's reads of public data (the driver's own turns) and the driver's
        # tables a query holds (``holding``) wait for it. With a turn each, a read would use the driver's
        # DuckDB connection (not thread-safe) while a query held its tables, and a key set mirrored to
        # Spark would change the session's views under a running job.
        self.run_lock = self.driver.run_lock
        self.path = None
        self.handed_over = True   # the owner's session: dpsql never stops it
        self.opaque = True        # a session's tables have no identity dpsql can name (a per-connection version)
        self.views: dict[str, str] = {}   # a policy table (or key table) -> its temp view in Spark
        self.private: set[str] = set()    # the policy's private tables: read by exact stages only
        self._prefix = f"__dpsql_{secrets.token_hex(6)}"
        for key, value in SETTINGS:
            spark.conf.set(key, value)

    def read_sources(self, policy: Policy) -> dict[str, tuple[str, ...]]:
        """Each policy table as a temp view of a random name: its ``source:`` read by Spark, else the
        session's own table or view of its name (DP502 when it has none; DP505 a source Spark cannot
        read). Public tables are copied to the driver DuckDB as well (public data: planning reads them)."""
        for name, table in policy.tables.items():
            frame = self._frame(name, table)
            view = f"{self._prefix}_{len(self.views)}"
            frame.createOrReplaceTempView(view)
            self.views[name] = view
            if not table.public:
                self.private.add(name)
            if table.public:
                self.driver.con.register(f"__dpsql_public_{name}", frame.toArrow())
                self.driver.con.execute(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM "__dpsql_public_{name}"')
                self.driver.con.unregister(f"__dpsql_public_{name}")
        return {}

    def _frame(self, name: str, table: TablePolicy) -> Any:
        source = table.data_source
        try:
            if source is None:
                return self.spark.table(name)
            if source.format not in ("parquet", "csv"):
                raise PolicyError("DP505", f"table {name!r}: Spark cannot read a {source.format} source",
                                  hint="give Spark a Parquet or CSV source, or the session's own table")
            reader = self.spark.read
            if source.format == "csv":
                reader = reader.option("header", source.header is not False).option("inferSchema", True)
                if source.delimiter:
                    reader = reader.option("sep", source.delimiter)
            return reader.format(source.format).load(source.path)
        except PolicyError:
            raise
        except Exception as e:   # pyspark's AnalysisException: no such table, file or column
            what = f"its source {source.describe()}" if source is not None else "the session's table of that name"
            raise PolicyError("DP502" if source is None else "DP505", f"table {name!r}: Spark cannot read {what}: "
                              f"{first_line(e)}", hint="register the table in the session, or give it a source:") \
                from None

    def check_unchanged(self) -> None:
        """Spark reads its sources at every query: no file dpsql read itself to re-check."""

    def bind_policy(self, policy: Policy, prefix: str, data_version: str | None = None) -> Policy:
        """The policy bound to the Spark views' types, as DuckDB binds them (an empty copy of each
        private view's schema on the driver, dropped after), its referenced keys unique in Spark (DP504),
        long key sets as key tables on the driver mirrored to Spark."""
        empty = [n for n, t in policy.tables.items() if not t.public]
        for name in empty:
            schema = arrow_schema(self.spark.table(self.views[name]).schema)
            self.driver.con.register(f"__dpsql_empty_{name}", schema.empty_table())
            self.driver.con.execute(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM "__dpsql_empty_{name}"')
            self.driver.con.unregister(f"__dpsql_empty_{name}")
        try:
            bound = self.driver.bind_policy(policy, prefix)   # its key check reads the empty copies: Spark's below
        finally:
            for name in empty:
                self.driver.con.execute(f'DROP TABLE "{name}"')
        self.driver._tables = tuple(n for n, t in policy.tables.items() if t.public)   # what its lock-down reads
        self._check_keys(bound)
        self._mirror_keys(bound)
        return bound

    def _check_keys(self, policy: Policy) -> None:
        """Every key a link references is unique in Spark as the link compares it (DP504), as
        engines/duckdb_schema.py ``check_referenced_keys`` checks it in DuckDB."""
        from dpsql.engines.duckdb_schema import _not_unique
        from dpsql.sql.compare import key_form
        for link in policy.links:
            via = policy.tables[link.table].columns[link.column].sql_type
            form = key_form(policy.tables[link.references_table].columns[link.references_column].sql_type, via)
            key = exp.column(link.references_column, quoted=True) if form == BARE else \
                exp.maybe_parse(compared(form, link.references_column), dialect="duckdb")
            read = exp.select(exp.Literal.number(1)).from_(exp.Table(this=exp.to_identifier(
                self.views[link.references_table], quoted=True))).where(exp.Not(this=exp.Is(
                    this=key.copy(), expression=exp.Null()))).group_by(key.copy()).having(
                exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1))).limit(1)
            if self.spark.sql(spark_sql(read)).take(1):
                raise _not_unique(link, form, via)

    def _mirror_keys(self, policy: Policy) -> None:
        """Each key table of the driver (a long key set) as a Spark temp view of the same name."""
        for table in policy.tables.values():
            for column in table.columns.values():
                if column.key_table is not None and column.key_table not in self.views:
                    self._mirror(column.key_table)

    def _mirror(self, name: str) -> None:
        """The driver's table ``name`` (public: a key set or released values) as a Spark temp view of that
        name, its rows copied as Arrow (types kept, an empty table's too)."""
        rows = self.driver.con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
        self.spark.createDataFrame(rows).createOrReplaceTempView(name)
        self.views[name] = name

    def public_keys(self, table: str, column: ColumnPolicy, prefix: str, reader: Hashable = None,
                    deadline: float | None = None) -> ColumnPolicy:
        """As DuckDB's, read from the driver's copy of the public table; a long set mirrored to Spark, in
        the same turn."""
        with self.turn(reader):
            keyed = self.driver.public_keys(table, column, prefix, reader, deadline)
            if keyed.key_table is not None and keyed.key_table not in self.views:
                self._mirror(keyed.key_table)
        return keyed

    def pruned_keys(self, read: str, reader: Hashable = None, deadline: float | None = None) -> tuple | None:
        return self.driver.pruned_keys(read, reader, deadline)

    def pruned_count(self, read: str, reader: Hashable = None, deadline: float | None = None) -> int:
        return self.driver.pruned_count(read, reader, deadline)

    def unique(self, table: str, columns, reader: Hashable = None, deadline: float | None = None) -> bool:
        return self.driver.unique(table, columns, reader, deadline)

    def public_bounds(self, table: str, column: str, reader: Hashable = None, deadline: float | None = None) -> tuple:
        return self.driver.public_bounds(table, column, reader, deadline)

    def expression_name(self, text: str) -> str | None:
        return self.driver.expression_name(text)

    @contextlib.contextmanager
    def holding(self, tables: Iterable[TablePolicy]) -> Iterator[None]:
        """The driver's TEMP tables of a query's released values (frontend/correlated.py), each mirrored to
        Spark as a temp view of its name (an exact stage joins it as a public lookup), dropped after."""
        tables = list(tables)
        with self.driver.holding(tables):
            try:
                for table in tables:
                    self._mirror(table.name)
                yield
            finally:
                for table in tables:
                    self.views.pop(table.name, None)
                    with contextlib.suppress(Exception):
                        self.spark.catalog.dropTempView(table.name)

    def hold(self, table: TablePolicy) -> None:
        self.driver.hold(table)
        self._mirror(table.name)

    def fill(self, name: str, rows: pa.Table, keys) -> bool:
        """A held table filled (``DuckDBEngine.fill``) and mirrored again: the released values are constants
        in Spark, the same rows at every recomputation. The executor binds the stage that reads them after
        (api/executor.py ``_run_stages``), so its Spark plan reads the filled view."""
        unique = self.driver.fill(name, rows, keys)
        self._mirror(name)
        return unique

    def rows(self, rows: pa.Table, like: Any, name: str) -> contextlib.AbstractContextManager[None]:
        """Released rows in a driver table shaped as ``like`` (a bound query of either stage)."""
        return self.driver.rows(rows, like, name)

    def turn(self, who: Hashable = None, deadline: float | None = None) -> contextlib.AbstractContextManager[Deadline]:
        """The driver's turn, which is the engine's (see ``__init__``)."""
        return self.driver.turn(who, deadline)

    def lock_down(self) -> None:
        """The driver DuckDB locked down as any DuckDB engine; Spark cannot be (see the module docstring)."""
        self.driver.lock_down()

    def register_noise(self, name: str, function: Callable[..., pa.Array]) -> None:
        self.driver.register_noise(name, function)

    def register_choice(self, name: str, function: Callable[..., pa.Array]) -> None:
        self.driver.register_choice(name, function)

    def register_top_k(self, name: str, choose: Callable[..., np.ndarray]) -> None:
        self.driver.register_top_k(name, choose)

    def bind(self, sql: str, params: dict | None = None, lowered: exp.Select | None = None) -> Any:
        """A lowered query bound as a program of stages (``SparkBound``, lower/program.py): each exact CTE the
        driver reads printed for Spark and analysed there (an AnalysisException is DP311, free: it depends on
        the SQL and the schema), the driver stage bound on the driver DuckDB over empty tables of their types.
        Without ``lowered``: SQL over public data and released values, bound on the driver DuckDB.

        Raises:
            UnsupportedConstruct: DP440 the plan does not split, or an exact stage has no Spark form or
            reads what Spark does not hold; DP311 Spark or DuckDB cannot bind it.
        """
        if lowered is None:
            return self.driver.bind(sql, params)
        program = split(lowered, self.private)
        frames = tuple((name, self._analysed(stage, params)) for name, stage in program.collected)
        shared = tuple(self._analysed(stage, params) for _, stage in program.shared)
        driver = program.driver.sql(dialect="duckdb")
        wanted = {p.name for p in program.driver.find_all(exp.Placeholder)}
        driver_params = {k: v for k, v in (params or {}).items() if k in wanted} or None
        empty = {name: arrow_schema(frame.schema).empty_table() for name, frame in frames}
        with self._collected(empty):
            like = self.driver.bind(driver, driver_params)
            return SparkBound(frames, driver, driver_params, like.columns, like.types, shared)

    def _analysed(self, stage: exp.Select, params: dict | None) -> Any:
        """One exact stage on Spark's views, printed for Spark and analysed (nothing runs)."""
        exact = self._on_views(stage)
        text = spark_sql(exact)
        salted = {p.name for p in exact.find_all(exp.Placeholder)}
        try:
            with self.run_lock:
                frame = self.spark.sql(text, args={k: v for k, v in (params or {}).items() if k in salted} or None)
                _ = frame.schema   # analysed here: nothing runs
        except Exception as e:   # pyspark's AnalysisException, ParseException
            raise UnsupportedConstruct("DP311", f"Spark cannot run this query: {spark_message(e)}", rule="engine_binds",
                                       hint="nothing was spent; check the types of the expressions") from None
        return frame

    def _on_views(self, stage: exp.Select) -> exp.Select:
        """The exact stage with every table read by its Spark view; one Spark does not hold (a stage's
        released values) is DP440."""
        ctes = {cte.alias for cte in stage.find_all(exp.CTE)}
        for table in stage.find_all(exp.Table):
            if table.name in ctes and not table.db:
                continue
            name = table.name
            view = self.views.get(name)
            if view is None or table.db or table.catalog:
                raise not_staged(f"the exact stage reads {name!r}, which Spark does not hold")
            table.set("this", exp.to_identifier(view, quoted=True))
            if not table.alias and view != name:   # columns qualified by the table's name still resolve
                table.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
        return stage

    @contextlib.contextmanager
    def _collected(self, tables: dict[str, pa.Table]) -> Iterator[None]:
        """The collected exact stages as the driver's tables of their CTEs' names, for one statement (the
        caller holds the driver's turn)."""
        with self.driver.run_lock:
            try:
                for name, rows in tables.items():
                    self.driver.con.register(name, rows)
                yield
            finally:
                for name in tables:
                    self.driver.con.unregister(name)

    def run(self, bound: Any, deadline: Deadline = NO_DEADLINE, max_rows: int | None = None) -> pa.Table:
        """The exact stage run on Spark to Arrow (cancelled at the deadline: DP425), then the driver stage
        over it; a driver-only query as DuckDB runs it."""
        if not isinstance(bound, SparkBound):
            return self.driver.run(bound, deadline, max_rows)
        with self.run_lock:
            _started(deadline)
            # one Spark job per collected stage, each under the query's one deadline (DP425)
            with _cached(bound.shared):
                totals = {name: self._collect(frame, deadline) for name, frame in bound.exact}
            with self._collected(totals):
                return self.driver.run(self.driver.con.sql(bound.driver, params=bound.params), deadline, max_rows)

    def _collect(self, frame: Any, deadline: Deadline) -> pa.Table:
        """``frame.toArrow()`` in a Spark job group that a timer cancels at the deadline (DP425). The query's
        one deadline covers every collected stage and the driver stage: a stage reached past it never
        starts, and one whose timer fired before its job was submitted (cancelling nothing) is late too."""
        context = self.spark.sparkContext
        group = f"dpsql-{secrets.token_hex(6)}"
        fired = threading.Event()
        left = deadline.remaining()
        if left is not None and left <= 0:
            raise _late(deadline)
        timer = None
        if left is not None:
            def cancel() -> None:
                fired.set()
                context.cancelJobGroup(group)
            timer = threading.Timer(left, cancel)
            timer.daemon = True
        context.setJobGroup(group, "dpsql exact stage", interruptOnCancel=True)
        try:
            if timer is not None:
                timer.start()
            rows = frame.toArrow()
        except Exception as e:
            if fired.is_set():
                raise _late(deadline) from None
            raise EngineError(f"Spark failed: {spark_message(e)}") from None
        finally:
            if timer is not None:
                timer.cancel()
            context.setLocalProperty("spark.jobGroup.id", None)
        if fired.is_set():
            raise _late(deadline)
        return rows

    def drain(self, bound: Any, deadline: Deadline = NO_DEADLINE) -> str | None:
        """Run a bound query, its rows dropped: its error's first line, or None (DP425 at the deadline)."""
        if not isinstance(bound, SparkBound):
            return self.driver.drain(bound, deadline)
        try:
            self.run(bound, deadline)
        except DeadlineExceeded:
            raise
        except Exception as e:
            return first_line(e)
        return None

    def close(self) -> None:
        """Drop dpsql's temp views and close the driver DuckDB; the session stays the owner's."""
        for view in self.views.values():
            with contextlib.suppress(Exception):
                self.spark.catalog.dropTempView(view)
        self.driver.close()


@contextlib.contextmanager
def _cached(frames: tuple[Any, ...]) -> Iterator[None]:
    """The exact CTEs several collected stages read (lower/program.py ``shared``), cached by Spark for one
    run: Spark's cache manager reads them in place of the same plan inside each stage, so the bounding
    they hold runs once, not once per stage. Deterministic rows (no noise), held by the executors that
    computed them anyway, released after the run whatever happens."""
    from pyspark import StorageLevel
    try:
        for frame in frames:
            frame.persist(StorageLevel.MEMORY_AND_DISK)
        yield
    finally:
        for frame in frames:
            frame.unpersist()


def _late(deadline: Deadline) -> DeadlineExceeded:
    return DeadlineExceeded("DP425", f"the query ran past its deadline of {deadline.seconds:g} s and was stopped",
                            hint="ask for less (fewer rows or tables), or retry later")


def arrow_schema(schema: Any) -> pa.Schema:
    """A Spark schema as Arrow's, a TIMESTAMP as a timestamp without a time zone (DuckDB's TIMESTAMP, as
    the lowering types it: Spark compares it with literals in the session's time zone; pyspark's own
    conversion asks for a zone and would make it DuckDB's TIMESTAMPTZ)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    arrow = to_arrow_schema(schema, timezone="UTC")
    return pa.schema([f.with_type(pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) else f for f in arrow])


def spark_message(error: BaseException) -> str:
    """The line of a Spark error that names it (``[ERROR_CLASS] ...``), not py4j's "An error occurred
    while calling o29.sql" nor the Java stack."""
    lines = str(error).splitlines()
    named = [line.split("Exception: ", 1)[-1] for line in lines if "[" in line and "]" in line]
    return (named or lines or [type(error).__name__])[0].strip()
