"""No generated output alias equals a column of what its SELECT reads (issue 27, item 2): an engine (or
a transpiler) that substitutes select aliases into QUALIFY or a window, as sqlglot's Spark output does
and DuckDB might, would read the new value where the old was meant (the quantile descent's next
``rank`` computed from the previous one changed every quantile). Checked on the lowered SQL of the
whole accept corpus."""
import pytest
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from dpsql.plan.public import PublicPlan
from tests.support.paths import GRAMMAR

ACCEPT = sorted((GRAMMAR / "accept").glob("*.sql"))


def rewritten(plan) -> list[str]:
    """Every rewritten SQL of a plan: its stages', its own (a public plan has none of its own)."""
    texts = [t for s in getattr(plan, "stages", ()) for t in rewritten(s.plan)]
    own = getattr(plan, "rewritten_sql", None)
    return texts + ([own] if own and not isinstance(plan, PublicPlan) else [])


def shadowing(sql: str, tables: dict[str, set[str]]) -> list[str]:
    """The aliases of ``sql``'s SELECTs that equal a column of what that SELECT reads while the SELECT
    also names that column outside the aliased expression (in WHERE, GROUP BY, HAVING, QUALIFY, a
    window, ORDER BY or another output): there an engine may read either. ``SUM("v_m0") AS "v_m0"``
    alone is not ambiguous, nor ``"k0" AS "k0"``."""
    found = []
    for scope in traverse_scope(sqlglot.parse_one(sql, read="duckdb")):
        inputs: set[str] = set()
        for source in scope.sources.values():
            if isinstance(source, Scope):
                inputs |= {n.lower() for n in source.expression.named_selects}
            elif isinstance(source, exp.Table):
                inputs |= tables.get(source.name.lower(), set())
        for projection in scope.expression.expressions if isinstance(scope.expression, exp.Select) else []:
            if not isinstance(projection, exp.Alias):
                continue
            name, value = projection.alias.lower(), projection.this
            if name not in inputs or (isinstance(value, exp.Column) and value.name.lower() == name):
                continue
            elsewhere = [c for c in scope.expression.find_all(exp.Column) if c.name.lower() == name
                         and not _inside(c, projection) and _own(c, scope.expression)]
            if elsewhere:
                found.append(f"{projection.alias} = {value.sql('duckdb')[:60]}, beside a read of column {name}")
    return found


def _inside(node: exp.Expression, ancestor: exp.Expression) -> bool:
    while node is not None and node is not ancestor:
        node = node.parent
    return node is ancestor


def _own(column: exp.Column, select: exp.Expression) -> bool:
    """Whether ``column`` belongs to ``select`` itself, not to a subquery inside it."""
    return column.find_ancestor(exp.Select) is select


@pytest.mark.parametrize("path", ACCEPT, ids=lambda p: p.stem)
def test_no_generated_alias_shadows_a_column_it_reads(db, raw, path):
    tables: dict[str, set[str]] = {}
    for table, column in raw.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall():
        tables.setdefault(table.lower(), set()).add(column.lower())
    for sql in rewritten(db.explain(path.read_text())):
        assert shadowing(sql, tables) == [], path.name


def test_the_check_finds_a_shadowing_alias():
    sql = "WITH a AS (SELECT 1 AS rank, 2 AS x) SELECT rank + 1 AS rank, x AS x FROM a QUALIFY rank > 0"
    assert shadowing(sql, {}) == ["rank = rank + 1, beside a read of column rank"]
    assert shadowing("SELECT SUM(v) AS v FROM t GROUP BY k", {"t": {"v", "k"}}) == []


# A table whose columns carry the names the lowering invented before issue 27 (keys k0.., a row's value
# c_<label> and v_<measurement>) and the names of later stages (quantile cells, ranks, outputs,
# measurements). What the lowering writes over the table starts with __ (lower/names.py): a column
# whose own name starts with __ (__unit, __k0) is the one case left (a policy could reserve the prefix).
NAMED_LIKE_OURS = ["k0", "k1", "c_v", "v_m0", "v_m1", "unit", "one", "n", "rank", "total", "leaf", "node", "o0", "m0"]


@pytest.fixture(scope="module")
def named_like_ours():
    import duckdb

    import dpsql
    con = duckdb.connect()
    columns = ", ".join(f'"{c}" DOUBLE' for c in NAMED_LIKE_OURS)
    con.execute(f"CREATE TABLE t (pid INTEGER, g VARCHAR, v DOUBLE, {columns})")
    con.execute("INSERT INTO t SELECT i % 50, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, i, "
                + ", ".join("i" for _ in NAMED_LIKE_OURS) + " FROM range(200) r(i)")
    bounded = {"type": "float", "lower": 0, "upper": 200}
    policy = {"version": 1, "budget": {"epsilon": 1e6, "delta": 1e-3},
              "tables": {"t": {"privacy_unit": "pid", "max_groups_per_unit": 2, "max_rows_per_unit": 4,
                               "columns": {"pid": {"identifier": True}, "g": {"keys": ["a", "b"]}, "v": bounded,
                                           **{c: bounded for c in NAMED_LIKE_OURS}}}}}
    return con, dpsql.connect(con, policy=policy, ledger=":memory:")


WHERE = " AND ".join(f'"{c}" >= 0' for c in NAMED_LIKE_OURS)


@pytest.mark.parametrize("sql", [
    f"SELECT g, COUNT(*), SUM(v), AVG(v) FROM t WHERE {WHERE} GROUP BY g",
    f"SELECT g, MEDIAN(v), QUANTILE_CONT(v, 0.9) FROM t WHERE {WHERE} GROUP BY g",
    f"SELECT v_m0, COUNT(*) FROM t WHERE {WHERE} GROUP BY v_m0",
    f"SELECT g, SUM(k0 + rank), COUNT(DISTINCT g) FROM t WHERE {WHERE} GROUP BY g",
])
def test_columns_named_like_generated_names_are_never_shadowed(named_like_ours, sql):
    con, db = named_like_ours
    tables = {"t": {c.lower() for c in ["pid", "g", "v", *NAMED_LIKE_OURS]}}
    for text in rewritten(db.explain(sql, delta=1e-5)):
        assert shadowing(text, tables) == [], sql
