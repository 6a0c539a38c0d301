"""The errors an engine raises while running a query: DuckDB's own, and EngineError (engines/base.py),
which the other engines raise. api/ catches these without importing an engine (the failure of a charged
query is recorded, its detail hidden: it may depend on the data)."""
from __future__ import annotations

import duckdb

from dpsql.engines.base import EngineError

ENGINE_ERRORS: tuple[type[BaseException], ...] = (duckdb.Error, EngineError)
