"""The lowered query as a typed program of stages, for an engine that runs them apart (engines/spark.py).

The one query lower/rewrite.py builds is a chain of CTEs (Plan.lowered). Each CTE is placed by what it
does, never by its name (the next mechanism's CTEs are placed by the same rules):

* **driver**: it draws (a call of a function the engine registered, ``system.main.<f>(...)``: the noise,
  a quantile rule's choice, a top-k's choice; lower/noise.py ``noise_call``), or reads a driver CTE
  (a value derived from a draw is released data, handled only where the noise is); or it reads no
  private table and no CTE of the exact stage that holds more than one row per partition (a level of a
  quantile tree summed from its collected leaves, lower/quantile.py): post-processing-sized work,
  done where the totals are.
* **exact**: the rest. Deterministic and noise-free (an engine may recompute it, a retried task gives
  the same rows), it reads the private tables: row bounding, per-unit pre-aggregation, the keyed choice
  of L partitions, exact totals, leaf histograms.

An exact CTE that the driver reads is **collected**: computed by the engine of the data and handed to
the driver as a table of its name. It must hold at most one row per partition (and leaf): a grouping
that never groups by the unit (or one row), or such tables joined on their keys; else the query is
refused (DP440), so the collected size is bounded by partitions x leaves, never by rows or units.

>>> import sqlglot
>>> q = sqlglot.parse_one("WITH __rows AS (SELECT 1 AS x FROM t), __agg AS (SELECT COUNT(*) AS v FROM __rows), "
...                       "__noisy AS (SELECT system.main.f(v) AS m FROM __agg) SELECT m FROM __noisy")
>>> p = split(q, private={"t"})
>>> [(name, stage.sql()) for name, stage in p.collected]
[('__agg', 'WITH "__rows" AS (SELECT 1 AS x FROM t), "__agg" AS (SELECT COUNT(*) AS v FROM __rows) SELECT * FROM "__agg"')]
>>> p.driver.sql()
'WITH __noisy AS (SELECT system.main.f(v) AS m FROM __agg) SELECT m FROM __noisy'
>>> p.places
{'__rows': 'exact', '__agg': 'exact', '__noisy': 'driver'}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.build import ident

AGG = "__agg"   # the exact totals per partition (lower/bounding.py)
UNIT = "__unit"   # the column lower/bounding.py gives each row's privacy unit
EXACT, DRIVER = "exact", "driver"
NOT_STAGED = "DP440"   # lower/program.py, engines/spark.py: a plan this engine cannot run in stages yet


@dataclass(frozen=True)
class Program:
    """``collected``: (name, a SELECT of that exact CTE's rows with the exact CTEs it reads), in the
    order of the query; ``driver``: the rest of the query, reading each collected CTE as a table;
    ``places``: every CTE's place (exact or driver); ``shared``: the exact CTEs the lowering computes once
    (MATERIALIZED) that several collected stages read, each as a SELECT of its rows, for an engine that
    would otherwise compute them once per collected stage (engines/spark.py caches them for a run)."""
    collected: tuple[tuple[str, exp.Select], ...]
    driver: exp.Select
    places: dict[str, str]
    shared: tuple[tuple[str, exp.Select], ...] = ()


def split(query: exp.Select, private: Collection[str]) -> Program:
    """The lowered query (Plan.lowered) as a program of stages (a copy: the plan's tree is never changed);
    ``private``: the tables only the engine of the data holds.

    Raises:
        UnsupportedConstruct: DP440 the driver would read per-row data (a private table, or an exact CTE of
        more than one row per partition), or the query is not one chain of CTEs.
    """
    query = query.copy()
    withs = list(query.find_all(exp.With))
    if len(withs) != 1 or not isinstance(query, exp.Select):
        raise not_staged("the query is not one chain of stages")
    ctes = {cte.alias: cte for cte in withs[0].expressions}
    places, grouped = _places(ctes, set(private))
    body = {t.name for t in _tables(query) if not t.find_ancestor(exp.CTE)}
    wanted = set().union(*(_reads(cte) for name, cte in ctes.items() if places[name] == DRIVER), body)
    for name in sorted(wanted):
        if name in private:
            raise not_staged(f"the driver stage would read the private table {name!r} row by row")
        if places.get(name) == EXACT and not grouped[name]:
            raise not_staged(f"the driver stage would read {name} row by row: it holds more than one row per "
                             "partition, which only the engine of the data may hold")
    collected = tuple((name, _stage(name, ctes, places)) for name in ctes if name in wanted and places[name] == EXACT)
    readers = [_needed(name, ctes, places) for name, _ in collected]
    once = [name for name, cte in ctes.items() if cte.args.get("materialized") and sum(name in r for r in readers) > 1]
    # the outermost of them only: one computed from another's rows needs no copy of its own
    outer = [n for n in once if not any(n in _needed(m, ctes, places) for m in once if m != n)]
    shared = tuple((name, _stage(name, ctes, places)) for name in outer)
    rest = [cte for name, cte in ctes.items() if places[name] == DRIVER]
    if rest:
        withs[0].set("expressions", rest)
    else:
        withs[0].pop()
    return Program(collected, query, places, shared)


def _places(ctes: dict[str, exp.CTE], private: set[str]) -> tuple[dict[str, str], dict[str, bool]]:
    """Each CTE's place (module docstring), in order (a CTE reads earlier ones only), and whether it holds
    at most one row per partition and leaf."""
    places: dict[str, str] = {}
    grouped: dict[str, bool] = {}
    for name, cte in ctes.items():
        reads = _reads(cte)
        heavy = reads & private or {r for r in reads if places.get(r) == EXACT and not grouped[r]}
        # A draw (or a value derived from one) never runs where a task may be retried or recomputed:
        # a second draw of the same noise, seen beside the first, would average it away.
        tainted = draws(cte) or any(places.get(r) == DRIVER for r in reads)
        places[name] = EXACT if heavy and not tainted else DRIVER
        grouped[name] = per_partition(cte.this, grouped)
    return places, grouped


def draws(node: exp.Expression) -> bool:
    """Whether ``node`` calls a function the engine registered (``system.main.<f>(...)``: lower/noise.py
    ``noise_call``, the quantile rules' and top-k's choice calls) or a random function: a draw, which
    never runs in the exact stage.

    >>> import sqlglot
    >>> draws(sqlglot.parse_one("SELECT system.main.noise(x, 1, 2, 0, 0)", read="duckdb")), draws(sqlglot.parse_one("SELECT ABS(x)"))
    (True, False)
    """
    for dot in node.find_all(exp.Dot):
        qualifier = dot.this
        if isinstance(dot.expression, exp.Func) and isinstance(qualifier, exp.Dot) and \
                qualifier.this.name.lower() == "system" and qualifier.expression.name.lower() == "main":
            return True
    return node.find(exp.Rand) is not None


def per_partition(node: exp.Expression, grouped: dict[str, bool]) -> bool:
    """Whether a CTE's query holds at most one row per partition (and leaf): grouped by anything but the
    unit, one aggregate row, or a select of such tables (``grouped``: the CTEs known to be) joined on
    their keys, each union branch likewise. No UNNEST: it makes rows of a list.

    >>> import sqlglot
    >>> [per_partition(sqlglot.parse_one(s), {"a": True, "u": False}) for s in ("SELECT k, COUNT(*) FROM r GROUP BY k",
    ...  "SELECT __unit, k FROM r GROUP BY __unit, k", "SELECT a.*, b.x FROM a LEFT JOIN (SELECT COUNT(*) AS x FROM r) AS b ON TRUE",
    ...  "SELECT * FROM u", "SELECT k FROM a JOIN a AS b ON a.k = b.j")]
    [True, False, True, False, False]
    """
    if isinstance(node, exp.Union):
        return per_partition(node.this, grouped) and per_partition(node.expression, grouped)
    if not isinstance(node, exp.Select) or any(e.find(exp.Unnest) for e in node.expressions):
        return False
    group = node.args.get("group")
    if group is not None:
        return not any(c.name == UNIT for c in group.find_all(exp.Column))
    if any(e.find(exp.AggFunc) and not e.find(exp.Window) for e in node.expressions) and not node.args.get("joins"):
        return True
    sources = [node.args.get("from_").this] if node.args.get("from_") else []
    sources += [j.this for j in node.args.get("joins") or []]
    return bool(sources) and all(_grouped_source(s, grouped) for s in sources) and \
        all(_on_keys(j.args.get("on")) for j in node.args.get("joins") or [])


def _grouped_source(source: exp.Expression, grouped: dict[str, bool]) -> bool:
    if isinstance(source, exp.Subquery):
        return per_partition(source.this, grouped)
    return isinstance(source, exp.Table) and grouped.get(source.name, False)


def _on_keys(on: exp.Expression | None) -> bool:
    """A join on keys: TRUE, or equalities of one column name on both sides (the partition keys)."""
    if on is None:   # a cross join multiplies rows
        return False
    if isinstance(on, exp.Boolean):
        return bool(on.this)
    parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    return all(isinstance(p, (exp.EQ, exp.NullSafeEQ)) and isinstance(p.this, exp.Column) and
               isinstance(p.expression, exp.Column) and p.this.name == p.expression.name != UNIT for p in parts)


def _tables(node: exp.Expression) -> list[exp.Table]:
    return [t for t in node.find_all(exp.Table) if not t.args.get("db")]


def _reads(cte: exp.Expression) -> set[str]:
    return {t.name for t in _tables(cte)}


def _needed(name: str, ctes: dict[str, exp.CTE], places: dict[str, str]) -> set[str]:
    """``name`` and the exact CTEs it reads, directly or not."""
    needed, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in needed:
            needed.add(current)
            todo += [r for r in _reads(ctes[current]) if r in ctes and places[r] == EXACT]
    return needed


def _stage(name: str, ctes: dict[str, exp.CTE], places: dict[str, str]) -> exp.Select:
    """``SELECT * FROM name`` with the exact CTEs it reads, directly or not, in the query's order."""
    needed = _needed(name, ctes, places)
    head = exp.select(exp.Star()).from_(exp.Table(this=ident(name)), copy=False)
    for cte_name, cte in ctes.items():
        if cte_name in needed:
            head = head.with_(ident(cte_name), as_=cte.this.copy(), materialized=cte.args.get("materialized"), copy=False)
    return head


def not_staged(why: str) -> UnsupportedConstruct:
    """DP440: this plan cannot run on an engine of stages yet (refused before anything is spent)."""
    return UnsupportedConstruct(NOT_STAGED, f"not on Spark yet: {why}", rule="engine_stages",
                                hint="nothing was spent; run it on DuckDB (dpsql.connect on a file, a DuckDB "
                                     "connection or DataFrames), or ask for COUNT, SUM, AVG, VAR or STDDEV only")
