"""A query asked again is not planned again: its plan is kept per analyst. Fresh noise every time all
the same."""
import pytest
from sqlglot import exp

import dpsql
from dpsql import testing
from tests.support import sql_tree
from tests.support.tpch import POLICY, SMALL, database

COUNT = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


@pytest.fixture
def plannings(db):
    """The queries ``db`` ran its planning pipeline for."""
    with testing.plannings(db) as calls:
        yield calls


def test_the_same_call_is_planned_once_and_still_draws_fresh_noise(db, plannings):
    first = db.sql(COUNT, epsilon=0.5, fresh=True)
    second = db.sql(COUNT, epsilon=0.5, fresh=True)
    assert plannings == [COUNT]
    assert second.plan is first.plan
    assert first.fetchall() != second.fetchall(), "the plan is kept, never the noise"
    assert db.sql(COUNT, epsilon=0.5).replayed, "the replay key still matches"
    assert len(db.budget.history) == 2


@pytest.mark.parametrize("other", [dict(epsilon=0.25), dict(epsilon=0.5, ci=0.9), dict(epsilon=0.5, delta=1e-7),
                                   dict(epsilon=0.5, nonnegative=False)])
def test_another_option_is_another_plan(db, plannings, other):
    db.explain(COUNT, epsilon=0.5)
    assert db.explain(COUNT, **other) is not db.explain(COUNT, epsilon=0.5)
    assert len(plannings) == 2


def test_one_and_one_point_zero_are_different_calls(db, plannings):
    assert db.explain(COUNT, epsilon=1).epsilon == 1
    db.explain(COUNT, epsilon=1.0)
    assert len(plannings) == 2


def test_a_refused_query_is_refused_every_time(db, plannings):
    for _ in range(2):
        with pytest.raises(dpsql.DpsqlError):
            db.explain("SELECT ssn FROM people")
    assert len(plannings) == 2


def test_each_analyst_has_their_own_plans(db, plannings):
    """Whether B's query is found must not depend on what A asked: a timing channel between analysts."""
    testing.ledger(db).add_analyst("a", epsilon=10)
    testing.ledger(db).add_analyst("b", epsilon=10)
    a, b = db.analyst("a"), db.analyst("b")
    a.explain(COUNT, epsilon=0.5)
    a.sql(COUNT, epsilon=0.5)
    assert len(plannings) == 1
    b.explain(COUNT, epsilon=0.5)
    assert len(plannings) == 2
    db.explain(COUNT, epsilon=0.5)
    assert len(plannings) == 3, "the owner's own plans are apart too"


def test_each_analyst_keeps_a_bounded_number_of_plans(db, plannings):
    testing.keep_plans(db, per_analyst=3)
    queries = [f"SELECT COUNT(*) AS n FROM people WHERE age > {i}" for i in range(5)]
    for q in queries:
        db.explain(q)
    db.explain(queries[-1])
    assert len(plannings) == 5
    db.explain(queries[0])
    assert len(plannings) == 6, "the oldest was dropped"


BY_NATION = "SELECT n_name, COUNT(*) AS n FROM customer JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name"


def test_plans_over_a_public_tables_keys_are_kept_like_any_other():
    """The engine reads nation's names once per reader (engines/duckdb.py public_keys) either way."""
    db = dpsql.connect(database(**SMALL), policy=POLICY, ledger=":memory:")
    assert db.plan(BY_NATION) is db.plan(BY_NATION)   # explain's are copies with the budget left
    assert db.explain(BY_NATION) == db.plan(BY_NATION)


def test_a_first_and_a_second_analyst_see_the_same_planning_path():
    """Issue 20, finding 6: a public column's values were read once per connection, so the second
    analyst to group by it was planned without reading it (0.2 s sooner for 900,000 rows): their
    timing told them someone had asked. Each reader now reads it once for themselves."""
    db = dpsql.connect(database(**SMALL), policy=POLICY, ledger=":memory:")
    for name in ("a", "b"):
        testing.ledger(db).add_analyst(name, epsilon=10)
    a, b = db.analyst("a"), db.analyst("b")
    with testing.engine_reads(db) as first:
        a.explain(BY_NATION)
    with testing.engine_reads(db) as second:
        b.explain(BY_NATION)
    assert first == second and any(sql_tree.has(sql_tree.tree(sql), exp.Distinct) for sql in first)
    with testing.engine_reads(db) as again:
        a.explain(BY_NATION.replace("COUNT(*) AS n", "COUNT(*) AS m"))   # another plan, the same keys
        b.sql(BY_NATION)
    assert not [sql for sql in again if sql_tree.has(sql_tree.tree(sql), exp.Distinct)], "each reader keeps what they read"
