"""The Engine protocol: where the exact stage runs. An engine opens its data read-only, reads the
files and DataFrames the owner named (sources) before it locks itself down, binds the policy to its
catalog (types, key tables), registers the noise function, binds the lowered SQL before anything is
spent (a binder error is a free refusal: it depends on the SQL and the schema only) and runs it to
Arrow. DuckDB is the first (``engines/duckdb.py``), Spark the second (``engines/spark.py``: the exact
stage on Spark, the rest on the driver); ``engines/open.py`` picks one for ``connect``. ``api/`` knows
engines through this protocol only; see docs/architecture.md, "How to add an engine"."""
from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Protocol

import numpy as np
import pyarrow as pa
from sqlglot import exp

from dpsql.limits import Deadline
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy


class EngineError(Exception):
    """An engine's failure while running a query (its detail may depend on the data: never shown for a
    private query). DuckDB's own errors are ``duckdb.Error``; engines/failures.py lists both."""


class Engine(Protocol):
    dialect: str   # the sqlglot dialect the lowering prints for
    one_query: bool   # runs a whole lowered query as one statement (else in stages: no shared scans)
    path: Path | None   # the database file opened read-only, if any (its data version)
    handed_over: bool   # the owner's connection or session: dpsql does not close it on a failed connect
    opaque: bool        # some table's data has no identity (a per-connection data version)

    def read_sources(self, policy: Policy) -> dict[str, tuple[str, ...]]:
        """Before the lock-down: read every table the policy gives a ``source:`` (or the data handed to
        ``connect``) into the engine; the files read, per table, for the data version (DP505)."""
        ...

    def check_unchanged(self) -> None:
        """The files read are unchanged since before the read (DP505 otherwise)."""
        ...

    def bind_policy(self, policy: Policy, prefix: str, data_version: str | None = None) -> Policy:
        """The policy with the catalog's column types and key tables (prefix: their random name),
        every key a link references checked unique in the data (once per data version)."""
        ...

    def public_keys(self, table: str, column: ColumnPolicy, prefix: str, reader: Hashable = None,
                    deadline: float | None = None) -> ColumnPolicy:
        """A joined public table's column with its distinct values as keys (public data), read once per
        reader (an analyst): never a cache one analyst's timing could tell another's queries by."""
        ...

    def turn(self, who: Hashable = None, deadline: float | None = None) -> AbstractContextManager[Deadline]:
        """The engine for ``who`` until the block ends, shared fairly between analysts, and the turn's
        deadline (``deadline`` seconds from its start)."""
        ...

    def lock_down(self) -> None:
        """No file, network, setting or extension is reachable from a query after this."""
        ...

    def register_noise(self, name: str, function: Callable[..., pa.Array]) -> None:
        """A vectorised noise function f(exact BIGINT, mechanism code, a, b, c BIGINT) -> BIGINT."""
        ...

    def register_top_k(self, name: str, choose: Callable[..., np.ndarray]) -> None:
        """A top-k choice function f(ids LIST(BIGINT), utilities LIST(BIGINT), k, a, b BIGINT) ->
        LIST(BIGINT), each row answered by ``choose(ids, utilities, k, a, b)`` on numpy arrays."""
        ...

    def holding(self, tables: Iterable[TablePolicy]) -> AbstractContextManager[None]:
        """Empty tables of a query's released values (frontend/correlated.py), made for its run inside
        the caller's turn and dropped after it, whatever happens."""
        ...

    def fill(self, name: str, rows: pa.Table, keys) -> bool:
        """A held table filled with a stage's released rows; whether ``keys`` ((name, Form) pairs, as the
        query's lookup compares them) are unique together in it (read every time, never kept)."""
        ...

    def bind(self, sql: str, params: dict | None = None, lowered: exp.Select | None = None) -> Any:
        """The bound query, its named parameters given ``params``, ready to run (raises DP311 when it
        does not bind). ``lowered``: the tree ``sql`` was printed from (Plan.lowered), for an engine that
        prints it itself or runs it in stages (lower/program.py); None: SQL over public data and
        released values only."""
        ...

    def rows(self, rows: pa.Table, like: Any, name: str) -> AbstractContextManager[None]:
        """``rows`` (released values) in a table ``name`` of ``like``'s (a bound query's) columns, for one
        run in the caller's turn, then dropped."""
        ...

    def register_choice(self, name: str, function: Callable[..., pa.Array]) -> None:
        """A quantile rule's choice function: (cells, counts, arguments) lists in, a cell or NULL out."""
        ...

    def pruned_keys(self, read: str, reader: Hashable = None, deadline: float | None = None) -> tuple | None:
        """The keys a SELECT over public tables returns, or None past a limit (the caller reads more)."""
        ...

    def pruned_count(self, read: str, reader: Hashable = None, deadline: float | None = None) -> int:
        """How many rows a SELECT over public tables returns."""
        ...

    def unique(self, table: str, columns, reader: Hashable = None, deadline: float | None = None) -> bool:
        """Are ``columns`` ((name, Form) pairs) unique together in a public ``table`` as compared?"""
        ...

    def public_bounds(self, table: str, column: str, reader: Hashable = None, deadline: float | None = None) -> tuple:
        """(MIN, MAX) of a public table's column."""
        ...

    def expression_name(self, text: str) -> str | None:
        """The name plain DuckDB gives an output expression (engines/duckdb_names.py): outputs are named
        alike on every engine."""
        ...

    def run(self, bound: Any, deadline: Deadline = ..., max_rows: int | None = None) -> pa.Table:
        """Run a bound query to the end, stopped at the deadline (DP425) or past ``max_rows`` rows
        (DP315); engine errors propagate (the caller hides their detail)."""
        ...

    def drain(self, bound: Any, deadline: Deadline = ...) -> str | None:
        """Run a bound query to the end, its rows dropped (a dry run): its error's first line, or None;
        stopped at the deadline (DP425)."""
        ...

    def close(self) -> None:
        ...
