"""The metamorphic leak test (tests/properties/test_leaks.py) for a batch's shared scans
(dpsql/lower/shared.py): statements of one frame answered by one query must not tell neighbouring
databases apart either. For a generated query over the typed columns and a sibling of its frame (the
same FROM, WHERE and GROUP BY, other aggregates), with the noise off (``noise="zero"``) and
partitions chosen by hash:

1. the shared query bound on D binds on D' (binding depends on the schema only) and never fails in
   the engine on either side;
2. each statement's released table is identical on D and D', row for row and in order;
3. each statement's table is the one it releases alone (so properties 2 and 3 of the leak test, checked
   there for it alone, carry over).
"""
from __future__ import annotations

import duckdb
import pytest
import sqlglot
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import dpsql
from dpsql import testing
from dpsql.frontend.dialect import Dpsql
from dpsql.lower import shared
from tests.support.checks import COMMON, examples
from tests.support.leak_world import NEIGHBOUR_IDS, TypedWorlds
from tests.support.leaks import rows_of
from tests.support.queries.typed import typed_queries

SIBLINGS = ("COUNT(*)", "SUM(f64)", "AVG(i8)", "COUNT(txt)")


@pytest.fixture(scope="module")
def worlds():
    w = TypedWorlds()
    yield w
    w.close()


def sibling(sql: str, aggregate: str) -> str | None:
    """A statement of ``sql``'s frame: its keys and ``aggregate`` (no HAVING, ORDER BY or LIMIT: they may
    name its own aggregates); None for what is not one SELECT with a FROM."""
    try:
        tree = sqlglot.parse_one(sql, dialect=Dpsql)
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select) or not isinstance(tree.args.get("from_"), exp.From):
        return None
    keys = [e.copy() for e in tree.expressions if not e.find(exp.AggFunc)]
    tree.set("expressions", [*keys, exp.alias_(sqlglot.parse_one(aggregate, dialect=Dpsql), "sib")])
    for part in ("having", "order", "limit", "offset"):
        tree.set(part, None)
    return tree.sql(dialect=Dpsql)


def shared_on(db: dpsql.PrivateConnection, sqls: list[str]) -> list:
    return [rows_of(t) for t in testing.run_shared(db, sqls, 1.0, noise="zero")]


@settings(max_examples=examples(80), **COMMON)
@given(sql=typed_queries(), aggregate=st.sampled_from(SIBLINGS), neighbour=st.sampled_from(NEIGHBOUR_IDS))
@example(sql="SELECT clinic, SUM(CAST(f64 AS INT)) FROM visits GROUP BY clinic", aggregate="COUNT(txt)",
         neighbour=NEIGHBOUR_IDS[0])   # a finding: raw and clamped evaluations disagree on NULL-ness
@example(sql="SELECT grade, clinic, COUNT(*) FROM visits GROUP BY grade, clinic ORDER BY clinic", aggregate="AVG(i8)",
         neighbour=NEIGHBOUR_IDS[-1])   # a finding: row order revealing which public groups hold data
@example(sql="SELECT tier, COUNT(*) * 0 AS z FROM people GROUP BY tier ORDER BY z", aggregate="SUM(f64)",
         neighbour=NEIGHBOUR_IDS[1])
def test_shared_statements_do_not_tell_neighbours_apart(worlds, sql, aggregate, neighbour):
    check(worlds, sql, aggregate, neighbour)


@pytest.mark.slow
@settings(max_examples=examples(2000), **COMMON)
@given(sql=typed_queries(), aggregate=st.sampled_from(SIBLINGS), neighbour=st.sampled_from(NEIGHBOUR_IDS))
def test_shared_statements_slow(worlds, sql, aggregate, neighbour):
    check(worlds, sql, aggregate, neighbour)


def check(worlds, sql: str, aggregate: str, neighbour: str) -> None:
    """The properties of the module docstring for ``sql`` and its sibling, on D and the neighbour."""
    other = sibling(sql, aggregate)
    if other is None:
        event("not one SELECT")
        return
    batch = [sql, other]
    try:
        plans = [testing.lower(worlds.base, s, 1.0, noise="zero") for s in batch]
    except dpsql.DpsqlError:
        event("refused alone")
        return
    if shared.groups(plans) != [[0, 1]]:
        event("not shared")
        return
    try:   # db.sql binds a statement before its charge: one DuckDB's binder refuses is DP311, free
        for p in plans:
            testing.bind(worlds.base, p.rewritten_sql)
    except duckdb.Error:
        event("refused alone")
        return
    try:
        base = shared_on(worlds.base, batch)
    except duckdb.BinderException:   # api/batch.py _groups: a shared query that does not bind runs them alone
        event("shared query does not bind: alone")
        return
    event("shared")
    assert base == [rows_of(testing.run(worlds.base, s, 1.0, noise="zero").table) for s in batch]
    after = shared_on(worlds.neighbours[neighbour], batch)
    assert after == base, f"released rows differ on D'={neighbour} with zero noise for {batch!r}"
