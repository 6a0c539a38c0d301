"""A plan's exact stages run on a small table ``t (u BIGINT, grp VARCHAR, v DOUBLE)`` with the noise off:
the per-partition measurements the rewritten SQL computes, or any of its stages (``__rows``,
``__bounded``, a quantile tree's levels). tests/properties/test_sensitivity.py checks the sensitivities on
them; tests/lower/test_quantile.py the quantile tree's counts."""
import functools

import duckdb
import pyarrow as pa
import sqlglot
from hypothesis import strategies as st
from sqlglot import exp

import dpsql
from dpsql.lower.names import choice_function, top_k_function
from tests.support import sql_tree

KEYS = ["a", "b", "c"]
VALUES = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.floats(min_value=-100, max_value=100),
    st.integers(min_value=-50, max_value=50).map(float),
)
ROW = st.tuples(st.integers(0, 6), st.sampled_from(KEYS + ["zz", None]), VALUES)


def exact_sql(plan, final: str = "SELECT * FROM __noisy") -> str:
    """The plan's rewritten SQL with noise off: the per-partition exact measurements (__noisy).

    Partition sampling keys on a hash of (unit, key) instead of random(): the bound must hold for any
    choice a unit makes about its own rows, and a fixed rule couples D and D' on the other units.
    """
    return _exact_sql(plan.rewritten_sql, len(plan.group_keys), final)


@functools.lru_cache(maxsize=64)
def _exact_sql(rewritten_sql: str, keys: int, final: str) -> str:
    return _with_final(_coupled(rewritten_sql, keys), final)


@functools.lru_cache(maxsize=8)   # an example's plan on D and D': a few parsed trees, not a run's worth
def _coupled(rewritten_sql: str, keys: int) -> exp.Select:
    """Parsing the rewritten SQL took most of a property example's time (a quantile tree's: 0.2 s), and an
    example asks for one plan's SQL on D and on D' and for its stages: parsed once per text."""
    tree = sqlglot.parse_one(rewritten_sql, read="duckdb")

    def coupled(node):
        if isinstance(node, exp.Alias) and node.alias == "__r":
            columns = [exp.column(f"__k{i}", quoted=True) for i in range(keys)]
            key = exp.Anonymous(this="hash", expressions=[exp.column("__unit", quoted=True), *columns])
            return exp.alias_(exp.Mod(this=key, expression=exp.Literal.number(2 ** 53)), "__r")
        return node

    return tree.transform(coupled)


@functools.lru_cache(maxsize=64)
def _udfs(rewritten_sql: str, keys: int) -> frozenset:
    return frozenset(sql_tree.qualified_calls(_coupled(rewritten_sql, keys), "system.main"))


def stage_names(plan) -> set:
    """The names of the plan's stages (its CTEs), from the parse exact_sql keeps."""
    return {cte.alias for cte in _coupled(plan.rewritten_sql, len(plan.group_keys)).find_all(exp.CTE)}


def _with_final(tree: exp.Select, final: str) -> str:
    query = sqlglot.parse_one(final, read="duckdb")
    query.set("with_", tree.args["with_"])
    return query.sql("duckdb")


def noiseless(rows, plan) -> duckdb.DuckDBPyConnection:
    """Table t holding ``rows``, with the plan's noise function registered as the identity (and a
    quantile rule's choice function, if it calls one, answering cell 0; a top-k's choice function as the
    first candidates by number: lower/top_k.py)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u BIGINT, grp VARCHAR, v DOUBLE)")
    if rows:   # through Arrow: executemany took a tenth of a second per example
        u, grp, v = zip(*rows)
        con.register("__rows_in", pa.table({"u": pa.array(u, pa.int64()), "grp": pa.array(grp, pa.string()),
                                            "v": pa.array(v, pa.float64())}))
        con.execute("INSERT INTO t SELECT * FROM __rows_in")
        con.unregister("__rows_in")
    big = duckdb.sqltype("BIGINT")
    listed = duckdb.list_type(big)
    for name in _udfs(plan.rewritten_sql, len(plan.group_keys)):
        if name == choice_function(name.removesuffix("_choice")) and name.endswith("_choice"):
            con.create_function(name, lambda cells, counts, given: pa.array([0] * len(cells), type=pa.int64()),
                                [listed] * 3, big, type="arrow", side_effects=True)
        elif name == top_k_function(name.removesuffix("_top_k")) and name.endswith("_top_k"):
            con.create_function(name, lambda ids, u, k, a, b: sorted(ids)[:k], [listed, listed] + [big] * 3,
                                listed, side_effects=True)
        else:
            con.create_function(name, lambda x, code, a, b, c: x, [big] * 5, big, type="arrow", side_effects=True)
    return con


def plan_for(unit, L, C, lower, upper, sql):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u BIGINT, grp VARCHAR, v DOUBLE)")
    policy = {"budget": {"epsilon": 10}, "tables": {"t": {
        "privacy_unit": unit, "max_groups_per_unit": L, "max_rows_per_unit": C,
        "columns": {"grp": {"keys": KEYS}, "v": {"lower": lower, "upper": upper}}}}}
    return dpsql.connect(con, ledger=":memory:", policy=policy).explain(sql, epsilon=1.0, delta=1e-5)


bounds = st.tuples(st.floats(-1000, 1000), st.floats(-1000, 1000)).map(sorted)
