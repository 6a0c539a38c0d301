"""The rewritten SQL as a tree: tests find a stage (a CTE), a node and its arguments in it, instead of
searching the SQL's text, which changes with every printing detail. The golden files (tools/golden.py)
are the one place that pins the text; tests/contracts/test_suite_rules.py keeps it so.

>>> t = tree("WITH __rows AS (SELECT TRY(CAST(z AS INT)) AS v FROM t) SELECT COUNT(*) FROM __rows")
>>> list(stages(t)), has(stage(t, "__rows"), exp.Try), contains(t, "CAST(z AS INT)")
(['__rows'], True, True)
"""
from __future__ import annotations

import sqlglot
from sqlglot import exp


def tree(sql) -> exp.Expression:
    """``sql`` parsed as DuckDB's: SQL text, or a plan (its rewritten SQL)."""
    return sqlglot.parse_one(getattr(sql, "rewritten_sql", sql), read="duckdb")


def stages(sql) -> dict[str, exp.CTE]:
    """The CTEs of the rewritten SQL by name, in the order they are written: the lowering's stages
    (``__rows``, ``__units``, ``__bounded``, ``__agg``, ``__noisy``, ``__out``, ...)."""
    node = sql if isinstance(sql, exp.Expression) else tree(sql)
    return {cte.alias: cte for cte in node.find_all(exp.CTE)}


def stage(sql, name: str) -> exp.Expression:
    """The query of the stage (CTE) ``name``."""
    found = stages(sql)
    assert name in found, f"no stage {name}: {list(found)}"
    return found[name].this


def before(sql, name: str) -> list[exp.Expression]:
    """The queries of the stages written before ``name`` (the per-row stages before ``__units``)."""
    found = stages(sql)
    assert name in found, f"no stage {name}: {list(found)}"
    names = list(found)
    return [found[n].this for n in names[:names.index(name)]]


def _under(node) -> list[exp.Expression]:
    return node if isinstance(node, list) else [node]


def has(node, kind: type[exp.Expression], where=lambda found: True) -> bool:
    """Whether a node of ``kind`` (for which ``where`` holds) occurs under ``node`` (or a list of nodes)."""
    return any(where(found) for n in _under(node) for found in n.find_all(kind))


def contains(node, fragment: str) -> bool:
    """Whether an expression equal to ``fragment`` (parsed as DuckDB's: quoted names stay quoted)
    occurs under ``node`` (or a list of nodes)."""
    wanted = sqlglot.parse_one(fragment, read="duckdb")
    return has(node, type(wanted), lambda found: found == wanted)


def joins(node, table: str) -> list[tuple[str, str]]:
    """(side, alias) of each join of ``table`` under ``node``: ``[("LEFT", "__path1")]``."""
    return [(j.side, j.this.alias) for j in node.find_all(exp.Join)
            if isinstance(j.this, exp.Table) and j.this.name == table]


def calls(node, name: str) -> list[exp.Anonymous]:
    """The calls of the function ``name`` that sqlglot has no class for (``hash``, a UDF), any case."""
    return [f for f in node.find_all(exp.Anonymous) if f.name.lower() == name.lower()]


def qualified_calls(node, schema: str) -> set[str]:
    """The names of the functions called as ``schema.name(...)`` under ``node``: the noise UDF is
    called as ``system.main.<name>`` (a temp macro cannot shadow it)."""
    return {dot.expression.name for dot in node.find_all(exp.Dot)
            if isinstance(dot.expression, exp.Anonymous) and dot.this.sql() == schema}


def string_literals(node) -> set[str]:
    """Every string literal's value under ``node`` (or a list of nodes)."""
    return {lit.this for n in _under(node) for lit in n.find_all(exp.Literal) if lit.is_string}
