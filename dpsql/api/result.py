"""A released answer, materialised once (``Result``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from dpsql.plan.model import Plan
    from dpsql.plan.public import PublicPlan


class Result:
    """A released answer, materialised once: reading it twice gives the same numbers.

    A lazy relation would re-run the query and redraw noise for free (an averaging attack), so
    the rows are fetched exactly once, when the budget is charged.
    """

    def __init__(self, table: pa.Table, plan: Plan | PublicPlan, replayed: bool = False):
        self._table = table
        self.plan = plan
        self.replayed = replayed   # an identical query's earlier answer, returned at no cost

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    def fetchall(self) -> list[tuple]:
        columns = [c.to_pylist() for c in self._table.columns]
        return list(zip(*columns)) if columns else []

    def arrow(self) -> pa.Table:
        return self._table

    def df(self):
        """The rows as a pandas DataFrame (needs pandas: ``pip install dpsql[pandas]``)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("Result.df() needs pandas: pip install 'dpsql[pandas]'") from None
        return self._table.to_pandas()

    def __repr__(self) -> str:
        return f"<dpsql.Result {len(self._table)} rows x {self._table.num_columns} columns: {self.columns}>"
