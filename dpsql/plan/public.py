"""The plan of a query over public tables only (frontend/public.py): no noise, no bounds, epsilon 0.

>>> print(PublicPlan("select n_name from nation", ("nation",), "SELECT n_name FROM nation"))
dpsql plan for: select n_name from nation
public tables only (nation): answered exactly, epsilon 0
budget: epsilon 0, delta 0 (no person's data is read: no noise, no contribution bounds)
ORDER BY and LIMIT as written; without ORDER BY, rows in DuckDB's order
rewritten SQL:
  SELECT
    n_name
  FROM nation
"""
from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from dpsql.frontend.public import check_public
from dpsql.plan.text import heading
from dpsql.policy.model import Policy


@dataclass(frozen=True)
class PublicPlan:
    """A query answered exactly: ``rewritten_sql`` is the query as DuckDB SQL (printed from its tree);
    ``str(plan)`` is the explain text. It spends nothing: ``epsilon`` and ``delta`` are 0."""
    sql: str
    tables: tuple[str, ...]        # the public tables it reads
    rewritten_sql: str
    epsilon: float = 0.0
    delta: float = 0.0

    @property
    def summary(self) -> str:
        """One line for the ledger's history."""
        return f"public tables only ({', '.join(self.tables)}): answered exactly, epsilon 0"

    def __str__(self) -> str:
        lines = [heading(self.sql),
                 self.summary,
                 "budget: epsilon 0, delta 0 (no person's data is read: no noise, no contribution bounds)",
                 "ORDER BY and LIMIT as written; without ORDER BY, rows in DuckDB's order",
                 "rewritten SQL:"]
        pretty = sqlglot.transpile(self.rewritten_sql, read="duckdb", write="duckdb", pretty=True)[0]
        return "\n".join(lines + ["  " + line for line in pretty.splitlines()])


def public_plan(statement: exp.Expression, sql: str, policy: Policy) -> PublicPlan:
    """The plan of a query that ``frontend.public.public_only`` accepted, checked by ``check_public``."""
    rewritten, tables = check_public(statement, sql, policy)
    return PublicPlan(sql, tables, rewritten)
