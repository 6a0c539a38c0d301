"""What dpsql tells the analyst besides the numbers: typo suggestions drawn from the policy only, a
hint on every DP402, warnings when the noise swamps the answer or partition selection withheld
groups, and the kind of each error (refused, set-up, failed) that the CLI's exit code follows."""
import dataclasses
import re

import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

import dpsql
from dpsql import testing
from dpsql import Result
from dpsql.api.advice import plan_warnings, result_warnings
from dpsql.errors import EXIT_CODES, BudgetExceeded, DpsqlError, error_kind
from tests.support.checks import refusal
from tests.support.fixture import make_database


# --- did you mean ----------------------------------------------------------------------------------

def test_a_column_typo_gets_the_closest_declared_column(db):
    err = refusal(db, "SELECT AVG(incme) FROM people")
    assert err.code == "DP202" and "declared nowhere in the policy" in err.message
    assert "did you mean 'income'?" in err.hint and err.format().count("^") == len("incme")


def test_a_column_of_another_table_says_where_it_is_declared(db):
    err = refusal(db, "SELECT SUM(cost) FROM people")
    assert err.code == "DP202"
    assert "the policy declares it in table 'visits', not in this one" in err.message
    assert "join visits" in err.hint
    err = refusal(db, "SELECT COUNT(*) FROM people WHERE clinic = 'a'")
    assert "declares it in tables 'clinics' and 'visits'" in err.message


def test_suggestions_never_name_identifiers_or_undeclared_columns(db):
    err = refusal(db, "SELECT COUNT(*) FROM people WHERE ssm = 'x'")   # ssn is an identifier
    assert "ssn" not in err.hint and "ssn" not in err.message
    err = refusal(db, "SELECT COUNT(*) FROM people WHERE idd = 1")      # id exists in the data, undeclared
    assert "'id'" not in err.hint and "declared nowhere in the policy" in err.message


def test_a_column_a_subquery_does_not_select_gets_the_closest_it_does(db):
    err = refusal(db, "SELECT COUNT(*) FROM (SELECT age, income FROM people) WHERE agee > 3")
    assert err.code == "DP202" and err.hint == "did you mean 'age'?"
    err = refusal(db, "SELECT COUNT(*) FROM (SELECT age, income FROM people) WHERE sex = 'F'")
    assert err.hint == "it selects age, income"


def test_a_table_typo_gets_the_closest_table(db):
    for sql in ("SELECT COUNT(*) FROM peple",
                "SELECT COUNT(*) FROM visits v JOIN peple p ON v.person_id = p.id"):
        err = refusal(db, sql)
        assert err.code == "DP201" and "did you mean 'people'?" in err.hint, sql
    err = refusal(db, "SELECT COUNT(*) FROM nothing_like_it")
    assert "did you mean" not in err.hint and "tables you may query: clinics, people" in err.hint


# --- DP402 ---------------------------------------------------------------------------------------------

def test_dp402_always_has_a_hint(policy):
    policy["budget"]["epsilon"] = 1.0
    db = dpsql.connect(make_database(), policy=policy, ledger=":memory:", rng=np.random.default_rng(1))
    err = refusal(db, "SELECT COUNT(*) FROM people", epsilon=2)
    assert err.code == "DP402" and "epsilon <= 1" in err.hint and "nothing was spent" in err.hint
    db.sql("SELECT COUNT(*) FROM people", epsilon=1)
    err = refusal(db, "SELECT COUNT(*) AS n FROM people", epsilon=0.5)
    assert err.code == "DP402" and "used up" in err.hint
    assert BudgetExceeded((1, 0), (0.5, 0), hint="mine").hint == "mine"   # a raiser's own hint stays


# --- kinds and exit codes ----------------------------------------------------------------------------

@pytest.mark.parametrize("code, kind", [
    ("DP100", "refused"), ("DP202", "refused"), ("DP304", "refused"), ("DP401", "refused"), ("DP402", "refused"),
    ("DP501", "setup"), ("DP502", "setup"), ("DP503", "setup"), ("DP504", "setup"),
    ("DP403", "setup"), ("DP404", "setup"), ("DP405", "setup"), ("DP406", "setup"),
    ("DP900", "failed"), ("DP999", "failed")])
def test_every_code_has_one_kind(code, kind):
    assert error_kind(code) == kind
    assert DpsqlError(code, "x").exit_code == EXIT_CODES[kind] == {"refused": 2, "setup": 3, "failed": 1}[kind]


# --- warnings ----------------------------------------------------------------------------------------

def test_every_code_of_the_table_has_a_hint_and_sites_keep_their_own():
    """Issue 25 item 9: a code whose site says nothing still says the fix or the reason (dpsql/hints.py)."""
    from dpsql.hints import HINTS
    from tests.support.paths import GRAMMAR
    table = set(re.findall(r"^\| (DP\d{3}) \|", (GRAMMAR / "README.md").read_text(), re.M))
    assert len(table) > 50 and table == set(HINTS)
    assert DpsqlError("DP203", "x").hint == HINTS["DP203"] and DpsqlError("DP203", "x", hint="mine").hint == "mine"


@pytest.mark.parametrize("sql, said", [
    ("SELECT COUNT(*) FROM people WHERE EXISTS (SELECT 1 FROM visits v WHERE v.person_id = people.person_id "
     "GROUP BY v.clinic)", "not use GROUP BY"),
    ("SELECT COUNT(*) FROM people WHERE EXISTS (SELECT 1 FROM visits v WHERE v.person_id = people.person_id "
     "ORDER BY v.cost)", "not use ORDER BY")])
def test_a_refused_clause_is_named_whole(db, sql, said):
    err = refusal(db, sql)
    assert err.code == "DP204" and err.message.endswith(said), err.message


def test_a_comparison_with_an_unknown_type_says_the_type_is_unknown():
    from dpsql.sql.compare import compare
    with pytest.raises(DpsqlError) as info:
        compare(exp.EQ, exp.column("a"), "BIGINT", exp.column("b"), None)
    assert info.value.code == "DP306" and "the type of b is not known" in info.value.hint


def test_a_tiny_epsilon_warns_that_the_answer_is_noise(db):
    res = db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=1e-12)
    [warning] = res.warnings
    assert "epsilon 1e-12 is so small that the noise dwarfs any plausible answer" in warning and "n (+-3e+12)" in warning
    assert "warning: epsilon 1e-12" in str(res)
    # The rule: noise above what 10^10 units could contribute at most; epsilon 1e-6 is not flagged by it.
    res = db.sql("SELECT COUNT(*) AS n FROM people", epsilon=1e-6)
    assert not any("dwarfs" in w for w in res.warnings)


def _noiseless(db, sql, **kw) -> Result:
    """The released rows as they would be with the noise at 0 (dpsql.testing): the rules below
    compare values with their noise, so the test must not depend on the draw."""
    exact = testing.run(db, sql, **kw)
    return Result(exact.table, exact.plan)


def test_an_ordinary_epsilon_on_large_groups_warns_nothing(db):
    res = _noiseless(db, "SELECT sex, COUNT(*) AS n, AVG(income) AS a FROM people GROUP BY sex", epsilon=1, ci=0.9)
    assert res.warnings == []


def test_counts_within_their_noise_warn(db):
    # 1,000 people, ages (7 i) % 90: 11 of age 42, about 3 per state; epsilon 0.05 gives noise +-60.
    res = _noiseless(db, "SELECT state, COUNT(*) AS n FROM people WHERE age = 42 GROUP BY state", epsilon=0.05)
    assert 0 < max(res.arrow().column("n").to_pylist()) <= 11
    assert any("noise of n (+-60)" in w and "cannot be told from 0" in w for w in res.warnings)
    res = _noiseless(db, "SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=0.05)
    assert res.warnings == []   # about 250 a state: above the noise


def test_an_interval_that_is_the_whole_bounds_warns(db):
    res = _noiseless(db, "SELECT state, AVG(income) AS a FROM people WHERE age = 42 GROUP BY state", epsilon=0.01,
                     ci=0.95)
    assert any("interval of a covers the whole of its bounds" in w for w in res.warnings)


def test_partition_selection_says_groups_are_suppressed_without_a_number(db):
    res = db.sql("SELECT zip, COUNT(*) AS n FROM people GROUP BY zip", epsilon=1, delta=1e-6)
    [warning] = res.warnings
    assert "groups with few people are suppressed" in warning and "how many were withheld is not released" in warning
    assert not any(ch.isdigit() for ch in warning.replace(str(res.plan.selection.threshold), ""))


def test_with_public_candidates_the_number_withheld_is_given(db):
    """Candidates from the policy (a public domain): candidates minus released rows is public."""
    plan = db.explain("SELECT zip, COUNT(*) AS n FROM people GROUP BY zip", epsilon=1, delta=1e-6)
    key = plan.group_keys[0]
    public = dataclasses.replace(key, columns=(dataclasses.replace(key.columns[0], keys=tuple(range(6))),))
    plan = dataclasses.replace(plan, group_keys=(public,))
    released = pa.table({"zip": ["00001", "00002"], "n": [40, 41]})
    assert plan_warnings(plan) == []
    assert "withheld 4 of 6 possible groups" in " ".join(result_warnings(plan, released))
    with_having = dataclasses.replace(plan, having=exp.true())
    assert "withheld 4" not in " ".join(result_warnings(with_having, released))


def test_explain_carries_the_plan_warnings(db):
    plan = db.explain("SELECT COUNT(*) AS n FROM people", epsilon=1e-12)
    assert plan_warnings(plan) and "dwarfs any plausible answer" in plan_warnings(plan)[0]
    assert Result(pa.table({"n": [0]}), plan).warnings[0] == plan_warnings(plan)[0]
