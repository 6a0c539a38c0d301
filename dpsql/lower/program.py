"""The lowered query as a program of two stages, for an engine that runs them apart (engines/spark.py).

The one query lower/rewrite.py builds is a chain of CTEs. Up to and including ``__agg`` it is exact and
deterministic: rows filtered and clamped (``__rows``), a unit's contribution bounded (``__units``,
``__cut``, ``__bounded``; the L partitions ranked by a keyed hash, never ``random()``), the exact
integer totals per partition (``__agg``). From ``__noisy`` on it reads ``__agg`` (and public key
tables) only: the noise, partition selection, a top-k's choice and post-processing. ``split`` cuts the
tree there, by the CTEs' names (lower/names.py's, never the analyst's): the exact stage is the heavy,
distributable part; the driver stage is the very SQL DuckDB runs, with ``__agg`` a table the engine
hands it. Noise is never in the exact stage, so an engine may recompute it (a retried task) freely.

>>> import sqlglot
>>> q = sqlglot.parse_one("WITH __rows AS (SELECT 1 AS x FROM t), __agg AS (SELECT COUNT(*) AS v FROM __rows), "
...                       "__noisy AS (SELECT f(v) AS m FROM __agg) SELECT m FROM __noisy")
>>> p = split(q)
>>> p.exact.sql()
'WITH __rows AS (SELECT 1 AS x FROM t), __agg AS (SELECT COUNT(*) AS v FROM __rows) SELECT * FROM "__agg"'
>>> p.driver.sql()
'WITH __noisy AS (SELECT F(v) AS m FROM __agg) SELECT m FROM __noisy'
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.build import ident

AGG = "__agg"   # the exact stage's result: exact integer totals per partition
EXACT = ("__rows", "__units", "__cut", "__bounded", AGG)   # lower/bounding.py's CTEs
DRIVER = ("__noisy", "__cand", "__top", "__out")           # lower/noise.py, lower/top_k.py, rewrite.py __out
NOT_STAGED = "DP440"   # lower/program.py, engines/spark.py: a plan this engine cannot run in two stages yet


@dataclass(frozen=True)
class Program:
    """``exact``: a SELECT of ``__agg``'s rows (deterministic, no noise); ``driver``: the rest of the query,
    reading ``__agg`` as a table."""
    exact: exp.Select
    driver: exp.Select


def split(query: exp.Select) -> Program:
    """The lowered query (Plan.lowered) cut after ``__agg`` (a copy: the plan's tree is never changed).

    Raises:
        UnsupportedConstruct: DP440 the query has stages that read per-unit rows after the exact totals
        (a quantile, COUNT(DISTINCT), a looked-up public row), which do not split there.
    """
    query = query.copy()
    with_ = query.args.get("with_")
    names = [cte.alias for cte in with_.expressions] if isinstance(with_, exp.With) else []
    unknown = [n for n in names if n not in EXACT + DRIVER]
    if AGG not in names or unknown or not isinstance(query, exp.Select):
        raise not_staged("the query has a stage that reads rows after the exact totals "
                         f"({', '.join(unknown) or 'no __agg'})")
    exact = [cte for cte in with_.expressions if cte.alias in EXACT]
    driver = [cte for cte in with_.expressions if cte.alias not in EXACT]
    read = {t.name for cte in driver for t in cte.find_all(exp.Table)}
    read |= {t.name for t in query.find_all(exp.Table) if not t.find_ancestor(exp.CTE)}
    if read & (set(EXACT) - {AGG}):
        raise not_staged("a later stage reads the bounded rows, not only the exact totals")
    head = exp.select(exp.Star()).from_(exp.Table(this=ident(AGG)), copy=False)
    for cte in exact:
        head = head.with_(cte.args["alias"].this, as_=cte.this, materialized=cte.args.get("materialized"), copy=False)
    query.set("with_", exp.With(expressions=driver) if driver else None)
    return Program(head, query)


def not_staged(why: str) -> UnsupportedConstruct:
    """DP440: this plan cannot run on an engine of two stages yet (refused before anything is spent)."""
    return UnsupportedConstruct(NOT_STAGED, f"not on Spark yet: {why}", rule="engine_stages",
                                hint="nothing was spent; run it on DuckDB (dpsql.connect on a file, a DuckDB "
                                     "connection or DataFrames), or ask for COUNT, SUM, AVG, VAR or STDDEV only")
