"""The Engine protocol: where the exact stage runs. An engine opens its data read-only, reads the
files and DataFrames the owner named (sources) before it locks itself down, binds the policy to its
catalog (types, key tables), registers the noise function, binds the lowered SQL before anything is
spent (a binder error is a free refusal: it depends on the SQL and the schema only) and runs it to
Arrow. DuckDB is the first (``engines/duckdb.py``); see docs/architecture.md, "How to add an engine"."""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable, Hashable, Iterable, Protocol

import numpy as np
import pyarrow as pa

from dpsql.limits import Deadline
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy


class Engine(Protocol):
    dialect: str   # the sqlglot dialect the lowering prints for

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

    def bind(self, sql: str, params: dict | None = None) -> Any:
        """The bound query, its named parameters given ``params``, ready to run (raises DP311 when it
        does not bind)."""
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
