"""The ratio rule (issue 24, item 4; plan/outputs.py ``ratios``, grammar/README.md "Ratios of released
values"): a division of released values is NULL where its divisor's released value is 0, or <= 0 where
the divisor is never negative in truth; never NaN nor infinite; the Result's warnings count the NULLs."""
import math

import numpy as np
import pytest
from sqlglot import exp

import dpsql
from dpsql.api.advice import result_warnings
from dpsql.testing import run
from tests.support import sql_tree
from tests.support.fixture import POLICY, make_database

RATIO = "SELECT FLOOR(age / 10) AS decade, SUM(income) AS s, COUNT(*) AS n, SUM(income) / COUNT(*) AS r " \
        "FROM people GROUP BY FLOOR(age / 10)"


@pytest.fixture(scope="module")
def db():
    con = dpsql.connect(make_database(), policy=POLICY, ledger=":memory:", rng=np.random.default_rng(24))
    yield con
    con.close()


def test_a_ratio_of_zeros_is_null_not_nan(db):
    exact = run(db, RATIO, noise="zero")
    rows = exact.rows
    assert rows and all(r[3] is None for r in rows)   # 0 / 0: DuckDB's NaN without the rule
    warnings = result_warnings(exact.plan, exact.table)
    assert any(f"no answer (NULL) for r in {len(rows)} of {len(rows)} row(s)" in w for w in warnings), warnings


def test_without_noise_the_ratio_is_duckdbs(db):
    exact = run(db, RATIO)
    assert exact.rows and all(r[3] == pytest.approx(r[1] / r[2]) for r in exact.rows if r[2] > 0)
    empty = [r for r in exact.rows if r[2] == 0]   # decades 90 and 100: nobody is that old
    assert len(empty) == 2 and all(r[3] is None for r in empty)
    assert any(f"no answer (NULL) for r in 2 of {len(exact.rows)} row(s)" in w
               for w in result_warnings(exact.plan, exact.table))


def test_a_count_released_below_zero_nulls_its_ratio(db):
    """nonnegative=False keeps a count's noisy value below 0: a ratio by it has the wrong sign, so NULL."""
    rows = db.sql(RATIO, epsilon=0.002, nonnegative=False, fresh=True).fetchall()
    assert any(r[2] <= 0 for r in rows) and any(r[2] > 0 for r in rows), rows   # seeded: both occur
    for decade, s, n, r in rows:
        assert (r is None) if n <= 0 else r == pytest.approx(s / n), (decade, s, n, r)


def test_a_signed_divisor_is_nulled_at_zero_only(db):
    """SUM(age - 50) can be negative in truth: only its 0 is nulled (NULLIF), a negative one kept."""
    plan = run(db, "SELECT SUM(income) / SUM(age - 50) AS r FROM people", noise="zero").plan
    divisions = list(sql_tree.tree(plan.rewritten_sql).find_all(exp.Div))
    assert any(isinstance(d.expression, exp.Nullif) for d in divisions)
    assert run(db, "SELECT SUM(income) / SUM(age - 50) AS r FROM people", noise="zero").rows == [(None,)]
    value = run(db, "SELECT SUM(income) / SUM(age - 50) AS r FROM people").rows[0][0]
    assert value is not None and math.isfinite(value)


def test_having_on_a_ratio_of_zeros_keeps_no_row(db):
    """0 / 0 is NaN, which DuckDB orders above every number: without the rule this HAVING passes."""
    sql = "SELECT state, COUNT(*) AS n FROM people GROUP BY state HAVING SUM(income) / COUNT(*) > 0.5"
    assert run(db, sql, noise="zero").rows == []
    assert len(run(db, sql).rows) == 3


def test_a_literal_divisor_is_left_alone(db):
    plan = run(db, "SELECT SUM(income) / 2 AS half FROM people", noise="zero").plan
    divisors = [d.expression for d in sql_tree.tree(plan.rewritten_sql).find_all(exp.Div)]
    assert any(isinstance(d, exp.Literal) and d.this == "2" for d in divisors), divisors
    assert run(db, "SELECT SUM(income) / 2 AS half FROM people", noise="zero").rows == [(0.0,)]
