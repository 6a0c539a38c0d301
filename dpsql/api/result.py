"""A released answer, materialised once (``Result``), with DuckDB's verbs for reading it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import duckdb
import numpy as np
import pyarrow as pa

from dpsql.api import advice, clipping, display
from dpsql.plan.model import Plan

if TYPE_CHECKING:
    from dpsql.plan.local import LocalPlan
    from dpsql.plan.public import PublicPlan


class Result:
    """A released answer, materialised once: reading it twice gives the same numbers.

    A lazy result (a DuckDBPyRelation) would re-run the query and redraw noise for free (an averaging attack), so
    the rows are fetched exactly once, when the budget is charged. The verbs are DuckDB's
    (``fetchall``, ``fetchone``, ``df``, ``pl``, ``arrow``, ``show``, ``write_parquet``, ...); each
    reads the same rows. ``print(res)`` shows a table; Jupyter shows it as HTML.

    Example:
        >>> res = db.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", ci=0.95)  # doctest: +SKIP
        >>> res.show(); res.pl(); res.write_parquet("counts.parquet")  # doctest: +SKIP
    """

    def __init__(self, table: pa.Table, plan: Plan | PublicPlan | LocalPlan, replayed: bool = False,
                 warnings: list[str] | None = None):
        # The clipping report's counts (plan/clipping.py) come after the answer's columns: kept apart.
        self._table, self._clipped = clipping.split(table) if clipping.shape(plan) is not None else (table, None)
        self.plan = plan
        self.replayed = replayed   # an identical query's earlier answer, returned at no cost
        self._cursor = 0           # fetchone/fetchmany read on from here
        self._warnings = warnings  # a remote result's: the server's, made from its Plan (client/remote.py)

    # --- shape ------------------------------------------------------------------------------------

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    @property
    def types(self) -> list[str]:
        """DuckDB's name of each column's type (``BIGINT``, ``DOUBLE``, ``VARCHAR``, ...)."""
        return display.column_types(self._table)

    dtypes = types

    @property
    def shape(self) -> tuple[int, int]:
        return (self._table.num_rows, self._table.num_columns)

    def __len__(self) -> int:
        return self._table.num_rows

    @property
    def warnings(self) -> list[str]:
        """What to know before trusting the numbers: noise larger than the answers, groups withheld by
        partition selection (post-processing of the plan and the release: free, and about no one)."""
        if self._warnings is None:
            self._warnings = (advice.result_warnings(self.plan, self._table, self.clipping)
                              if isinstance(self.plan, Plan) else [])
        return list(self._warnings)

    @property
    def clipping(self) -> pa.Table | None:
        """The clipping report, when the query asked for it (``report_clipping``): per released row,
        its keys, the noisy count of people whose rows or values bounding cut (``clipped``), of its
        people (``people``), their ratio (``fraction``), each with a 95% interval (the fraction's from
        both counts' intervals, api/clipping.py); None without it. Released with the answer, paid for
        by its epsilon (explain says how much)."""
        found = clipping.shape(self.plan)
        if found is None or self._clipped is None:
            return None
        return clipping.report(self._table, self._clipped, found.keys, found.errors)

    def released(self) -> pa.Table:
        """The table as released and recorded: the answer's columns, then the clipping report's counts
        (the server sends this, and the client takes the report off again)."""
        if self._clipped is None:
            return self._table
        return pa.Table.from_arrays([*self._table.columns, *self._clipped.columns],
                                    names=[*self._table.column_names, *self._clipped.column_names])

    # --- rows -------------------------------------------------------------------------------------

    def _rows(self, start: int = 0, stop: int | None = None) -> list[tuple]:
        part = self._table.slice(start, None if stop is None else max(stop - start, 0))
        columns = [c.to_pylist() for c in part.columns]
        return list(zip(*columns)) if columns else []

    def fetchall(self) -> list[tuple]:
        """Every row not yet read by fetchone/fetchmany (all of them if neither was called); then the
        cursor starts over, as a DuckDBPyRelation's does, so a second fetchall gives every row again."""
        rows = self._rows(self._cursor)
        self._cursor = 0
        return rows

    def fetchone(self) -> tuple | None:
        """The next row, or None after the last."""
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int = 1) -> list[tuple]:
        """The next ``size`` rows (fewer at the end, none after it)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"fetchmany size must be a non-negative integer, got {size!r}")
        rows = self._rows(self._cursor, self._cursor + size)
        self._cursor += len(rows)
        return rows

    def __iter__(self) -> Iterator[tuple]:
        """Every row, from the first (the fetchone cursor is not moved)."""
        return iter(self._rows())

    # --- other libraries ---------------------------------------------------------------------------

    def arrow(self) -> pa.Table:
        return self._table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream: polars, DuckDB, pandas and others read the Result directly."""
        return self._table.__arrow_c_stream__(requested_schema)

    def df(self):
        """The rows as a pandas DataFrame (needs pandas: ``pip install dpsql[pandas]``)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("Result.df() needs pandas: pip install 'dpsql[pandas]'") from None
        return self._table.to_pandas()

    def pl(self):
        """The rows as a polars DataFrame (needs polars: ``pip install polars``)."""
        try:
            import polars
        except ImportError:
            raise ImportError("Result.pl() needs polars: pip install polars") from None
        return polars.from_arrow(self._table)

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        """Column name -> NumPy array, as DuckDB gives it (masked where a value is NULL)."""
        out = {}
        for name, column in zip(self.columns, self._table.columns):
            values = column.to_numpy(zero_copy_only=False)
            if column.null_count:
                mask = column.is_null().to_numpy(zero_copy_only=False)
                values = np.ma.masked_array(values, mask=mask)
            out[name] = values
        return out

    # --- files and display -------------------------------------------------------------------------

    def write_csv(self, file_name: str, **options: Any) -> None:
        """Write the rows as CSV (DuckDB's writer and options: ``sep``, ``header``, ``na_rep``, ...)."""
        self._in_duckdb().write_csv(str(file_name), **options)

    def write_parquet(self, file_name: str, **options: Any) -> None:
        """Write the rows as Parquet (DuckDB's writer and options: ``compression``, ...)."""
        self._in_duckdb().write_parquet(str(file_name), **options)

    def show(self, max_rows: int | None = 40, max_width: int | None = None) -> None:
        """Print the table (the first and last rows past ``max_rows``; None prints every row), its middle
        columns left out past ``max_width`` characters, as DuckDB's ``show`` does."""
        print(display.box_table(self._shown(), max_rows, max_width))

    def __str__(self) -> str:
        return display.box_table(self._shown())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return display.html_table(self._shown())

    def _shown(self) -> display.Released:
        return display.Released(self._table, self.plan, self.replayed, self.warnings, self.clipping)

    def _in_duckdb(self) -> duckdb.DuckDBPyRelation:
        """The released rows in DuckDB, a DuckDBPyRelation of their own, on a private in-memory connection:
        it reads nothing but these rows (never the database), so writing files from it is safe."""
        con = duckdb.connect()
        return con.from_arrow(self._table)
