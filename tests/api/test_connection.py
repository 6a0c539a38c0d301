"""The Python interface and the threat model at the connection: materialised results, budget, lockdown."""
import math

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql import testing
from dpsql.errors import BudgetExceeded, ExecutionError, InvalidParameter
from tests.support import sql_tree
from tests.support.checks import refusal
from tests.support.fixture import POLICY, make_database


def test_result_has_duckdb_like_verbs_and_is_materialised_once(db):
    res = db.sql("SELECT state, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY state")
    assert res.columns == ["state", "n", "mean"]
    first = res.fetchall()
    assert res.fetchall() == first, "reading twice gives the same numbers"
    assert res.arrow().num_rows == 3
    assert list(res.df()["state"]) == ["CA", "NY", "TX"]
    assert res.plan.epsilon == 1.0 and "rewritten SQL" in str(res.plan)


def test_every_public_key_appears_even_when_empty(db):
    # WA is in the data but not declared: dropped. No row has an income above 10**6: still released.
    # (A WHERE on the key column itself prunes the keys it excludes: tests/frontend/test_keys_from_policy.py.)
    rows = db.sql("SELECT state, COUNT(*) FROM people WHERE income > 1000000 GROUP BY state").fetchall()
    assert [r[0] for r in rows] == ["CA", "NY", "TX"]


def test_cross_product_of_public_keys(db):
    rows = db.sql("SELECT sex, state, COUNT(*) FROM people GROUP BY sex, state").fetchall()
    assert {(s, t) for s, t, _ in rows} == {(s, t) for s in "FM" for t in ("CA", "NY", "TX")}


def test_budget_is_charged_per_query_and_refused_past_the_total(raw, policy):
    policy["budget"] = {"epsilon": 1.0}
    db = dpsql.connect(raw, ledger=":memory:", policy=policy)
    db.sql("SELECT COUNT(*) FROM people", epsilon=0.6)
    assert db.budget.spent_epsilon == 0.6
    with pytest.raises(BudgetExceeded) as info:
        db.sql("SELECT COUNT(*) FROM people", epsilon=0.5)
    err = info.value
    assert err.code == "DP402" and err.requested == (0.5, 0.0)
    assert math.isclose(err.remaining[0], 0.4) and math.isclose(err.difference[0], 0.1)
    assert "requested epsilon=0.5" in err.message and "remaining epsilon=0.4" in err.message
    assert db.budget.spent_epsilon == 0.6, "a refused query spends nothing"
    db.sql("SELECT COUNT(*) FROM people", epsilon=0.4)
    assert db.budget.remaining_epsilon == 0


def test_explain_spends_nothing(db):
    plan = db.explain("SELECT COUNT(*) FROM people", epsilon=0.3)
    assert db.budget.spent_epsilon == 0
    assert plan.measurements[0].epsilon == 0.3


@pytest.mark.parametrize("accountant", ["basic", "zcdp", "pld"])
def test_explain_shows_the_remaining_budget_and_the_accountants_own_fit(raw, policy, accountant):
    """The owner's explain: the total's remaining budget as (epsilon, delta) and in the accountant's
    terms, and whether the query would fit by the accountant's own check (what the charge then finds);
    an analyst's explain: their own budget. The plan itself, and the cached one, are unchanged."""
    policy["budget"] = {"epsilon": 1.0, "delta": 1e-6, "accountant": accountant}
    db = dpsql.connect(raw, ledger=":memory:", policy=policy)
    db.sql("SELECT COUNT(*) FROM people", epsilon=0.5)
    left = db.budget.remaining_epsilon
    fits = db.explain("SELECT COUNT(*) FROM people", epsilon=0.25)
    text = str(fits)
    assert f"remaining before this query: epsilon {left:.6g}" in text and "this query would fit: yes" in text
    assert {"zcdp": "its own terms: rho ", "pld": "its own terms: delta at total epsilon ",
            "basic": "(basic: the total less the sum spent)"}[accountant] in text, text
    assert fits == db.plan("SELECT COUNT(*) FROM people", epsilon=0.25) and db.plan(
        "SELECT COUNT(*) FROM people", epsilon=0.25).budget_note is None
    assert "would fit: no: running it would be refused (DP402" in str(db.explain("SELECT COUNT(*) FROM people",
                                                                                  epsilon=0.75))
    with pytest.raises(BudgetExceeded):
        db.sql("SELECT COUNT(*) FROM people", epsilon=0.75)
    db.sql("SELECT COUNT(*) FROM people", epsilon=0.25)
    testing.ledger(db).add_analyst("ann", 0.125)
    own = str(db.analyst("ann").explain("SELECT COUNT(*) FROM people", epsilon=0.25))
    assert "remaining before this query: your epsilon 0.125" in own and "would fit: no" in own, own


def test_explain_says_when_the_ledger_cannot_be_read(db, monkeypatch):
    from dpsql.accounting.ledger import LedgerError

    def locked(*args, **kwargs):
        raise LedgerError("DP405", "budget ledger /secret/path.sqlite is locked", path="/secret/path.sqlite")
    monkeypatch.setattr(testing.ledger(db), "preview", locked)
    text = str(db.explain("SELECT COUNT(*) FROM people"))
    assert "remaining budget: could not be read now (DP405: the ledger is locked by another process)" in text
    assert "rewritten SQL" in text and "/secret" not in text


@pytest.mark.parametrize("epsilon, delta", [(0, 0), (-1, 0), (float("nan"), 0), (float("inf"), 0),
                                            (1, -0.1), (1, 1.0), ("1", 0), (True, 0)])
def test_bad_epsilon_or_delta_is_refused(db, epsilon, delta):
    with pytest.raises(InvalidParameter):
        db.sql("SELECT COUNT(*) FROM people", epsilon=epsilon, delta=delta)
    assert db.budget.spent_epsilon == 0


def test_failure_after_the_spend_stays_spent_and_reveals_nothing(raw, policy):
    class FailingSource:   # the query fails inside DuckDB, after the charge
        def below(self, n):
            raise RuntimeError("secret detail 123")
    db = dpsql.connect(raw, ledger=":memory:", policy=policy, rng=FailingSource())
    with pytest.raises(ExecutionError) as info:
        db.sql("SELECT COUNT(*) FROM people", epsilon=0.25)
    assert info.value.code == "DP900" and "123" not in info.value.message
    assert db.budget.spent_epsilon == 0.25


def test_a_query_duckdb_cannot_bind_is_refused_before_the_spend(raw, policy):
    db = dpsql.connect(raw, ledger=":memory:", policy=policy)
    raw.execute("DROP TABLE people")   # the owner changes the schema under the analyst
    err = refusal(db, "SELECT COUNT(*) FROM people", epsilon=0.25)
    assert err.code == "DP311" and db.budget.spent_epsilon == 0


def test_connection_is_locked_down(db):
    con = testing.duckdb_connection(db)
    setting = lambda name: con.execute("SELECT current_setting(?)", [name]).fetchone()[0]
    assert setting("enable_external_access") is False
    assert setting("lock_configuration") is True
    assert "top_n_window_elimination" in setting("disabled_optimizers")
    with pytest.raises(duckdb.Error):
        con.execute("SET enable_external_access = true")
    with pytest.raises(duckdb.Error):
        con.execute("SELECT * FROM read_csv('/etc/passwd')")


def test_noise_function_is_called_qualified_and_once_per_group(db):
    plan = db.explain("SELECT state, COUNT(*), SUM(income) FROM people GROUP BY state")
    name = testing.noise_function(db)
    noise = sql_tree.calls(sql_tree.tree(plan), name)
    assert len(noise) == 2 and all(call.parent.this.sql() == "system.main" for call in noise)
    noisy = sql_tree.stages(plan)["__noisy"]
    assert noisy.args.get("materialized") and len(sql_tree.calls(noisy, name)) == 2, \
        "noise is drawn only in the per-group __noisy step, materialised once"


def test_a_temp_macro_cannot_shadow_the_noise():
    # Defence in depth: even if an analyst could create a macro with the UDF's bare name, the
    # rewritten SQL calls system.main.<name>, which a temp macro does not shadow.
    con = make_database()
    db = dpsql.connect(con, ledger=":memory:", policy=POLICY)
    con.execute(f"CREATE TEMP MACRO {testing.noise_function(db)}(x, n, k) AS x")
    # Five fresh draws at scale 20 all exactly 0 would have probability below 1e-7.
    counts = [db.sql("SELECT COUNT(*) FROM people", epsilon=0.05, fresh=True).fetchall()[0][0] for _ in range(5)]
    assert counts != [1000] * 5, "noise still added"


def test_two_private_connections_on_one_duckdb_connection_have_separate_noise(raw, policy):
    a = dpsql.connect(raw, ledger=":memory:", policy=policy, rng=np.random.default_rng(1))
    b = dpsql.connect(raw, ledger=":memory:", policy=policy, rng=np.random.default_rng(1))
    assert testing.noise_function(a) != testing.noise_function(b)
    assert a.sql("SELECT COUNT(*) FROM people").fetchall() == b.sql("SELECT COUNT(*) FROM people").fetchall()


def test_null_nan_and_infinity_in_the_data_never_reach_the_output():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (g VARCHAR, v DOUBLE)")
    con.execute("INSERT INTO t VALUES ('a', NULL), ('a', 'nan'), ('a', 'inf'), ('a', '-inf'), (NULL, 1), ('b', 'nan')")
    policy = {"budget": {"epsilon": 100}, "tables": {"t": {"privacy_unit": "row",
              "columns": {"g": {"keys": ["a", "b", "c"]}, "v": {"lower": -5, "upper": 5}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy)
    rows = db.sql("SELECT g, COUNT(*), COUNT(v), SUM(v), AVG(v) FROM t GROUP BY g").fetchall()
    assert [r[0] for r in rows] == ["a", "b", "c"]
    for row in rows:
        assert all(x is not None and math.isfinite(x) for x in row[1:]), row
        assert -5 <= row[4] <= 5


def test_an_empty_table_gets_noisy_answers_not_errors():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u INTEGER, v DOUBLE)")
    policy = {"budget": {"epsilon": 10}, "tables": {"t": {"privacy_unit": "u", "columns": {"v": {"lower": 0, "upper": 1}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy)
    (count, total, mean), = db.sql("SELECT COUNT(*), SUM(v), AVG(v) FROM t").fetchall()
    assert isinstance(count, int) and math.isfinite(total) and 0 <= mean <= 1


def test_having_order_and_limit_act_on_noisy_values(db):
    res = db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n DESC LIMIT 2", epsilon=5)
    rows = res.fetchall()
    assert len(rows) == 2 and rows[0][1] >= rows[1][1]
    res = db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state HAVING COUNT(*) > 1000000")
    assert res.fetchall() == []


def test_hidden_aggregates_for_having_are_charged(db):
    plan = db.explain("SELECT state, COUNT(*) FROM people GROUP BY state HAVING AVG(age) > 10")
    assert [m.label for m in plan.measurements] == ["COUNT(*)", "SUM(age - 50)", "COUNT(age)"]
    assert math.isclose(sum(m.epsilon for m in plan.measurements), plan.epsilon)


def test_duplicate_output_names_are_made_unique(db):
    assert db.sql("SELECT COUNT(*), COUNT(*) FROM people").columns == ["count_star()", "count_star()_1"]


def test_user_level_contribution_is_bounded(raw, policy):
    """One person with 1000 visits in every clinic moves the exact bounded counts by at most L*C = 6."""
    db = dpsql.connect(raw, ledger=":memory:", policy=policy)
    plan = db.explain("SELECT clinic, COUNT(*) FROM visits GROUP BY clinic")
    assert plan.measurements[0].sensitivity.l1 == 6
    sql = _without_noise(plan, db)
    before = sum(n for _, n in raw.execute(sql, testing.params(sql)).fetchall())
    raw.execute("INSERT INTO visits SELECT 424242, ['a','b','c'][1 + range % 3], 1.0, 10000 + range FROM range(3000)")
    after = sum(n for _, n in raw.execute(sql, testing.params(sql)).fetchall())
    assert 0 < after - before <= 6


def _without_noise(plan, db):
    """The rewritten SQL with the noise call replaced by its first argument."""
    import sqlglot
    from sqlglot import exp
    tree = sqlglot.parse_one(plan.rewritten_sql, read="duckdb")

    def strip(node):
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous) \
                and node.expression.name == testing.noise_function(db):
            return node.expression.expressions[0]
        return node
    return tree.transform(strip).sql("duckdb")
