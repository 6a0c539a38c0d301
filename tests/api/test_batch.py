"""A batch of statements under one budget (issue 26, item 1): planned together, allocated once,
reserved in one ledger transaction (all or nothing), run one by one, each released."""
import functools
import json
import os
import sqlite3
import subprocess
import sys
import threading
from decimal import Decimal

import duckdb
import numpy as np
import pytest
import yaml

import dpsql
from dpsql import Statement, testing
from dpsql.errors import BudgetExceeded, DpsqlError, ExecutionError, InvalidParameter, UnsupportedConstruct
from tests.support.fixture import POLICY, make_database
from tests.support.paths import ROOT

COUNT = "SELECT COUNT(*) AS n FROM people"
BY_SEX = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"
INCOME = "SELECT state, AVG(income) AS mean FROM people GROUP BY state"


def policy_with(epsilon=10.0, delta=1e-6, accountant=None):
    policy = json.loads(json.dumps(POLICY))
    policy["budget"] = {"epsilon": epsilon, "delta": delta, **({"accountant": accountant} if accountant else {})}
    return policy


def connect(ledger, epsilon=10.0, accountant=None, seed=7):
    return dpsql.connect(make_database(), policy=policy_with(epsilon, accountant=accountant), ledger=str(ledger),
                         rng=np.random.default_rng(seed), data_version="fixture")


def rows(ledger):
    """Every charge as the file holds it, replays counted: what all-or-nothing must leave untouched."""
    if not os.path.exists(ledger):
        return []
    with sqlite3.connect(ledger) as con:
        return con.execute("SELECT id, status, epsilon, delta, replays, analyst, sql FROM charges ORDER BY id").fetchall()


# --- all or nothing --------------------------------------------------------------------------------

@pytest.mark.parametrize("accountant", ["basic", "zcdp"])
def test_a_batch_past_the_budget_spends_nothing(tmp_path, accountant):
    ledger = tmp_path / "l.sqlite"
    db = connect(ledger, epsilon=1.0, accountant=accountant)
    db.sql(COUNT, epsilon=0.5, delta=1e-7)
    before = rows(ledger)
    # Its first statements fit on their own and one replays: the batch as a whole does not fit.
    with pytest.raises(BudgetExceeded):
        db.sql_batch([Statement(COUNT, epsilon=0.5, delta=1e-7), Statement(BY_SEX, epsilon=2.0, delta=1e-7),
                      Statement(INCOME, epsilon=2.0, delta=1e-7)], epsilon=4.5, delta=3e-7)
    assert rows(ledger) == before, "no charge, no replay counted: the ledger as it was"
    # What does fit is charged whole, in one go.
    answers = db.sql_batch([Statement(COUNT, epsilon=0.5, delta=1e-7), Statement(BY_SEX, epsilon=0.1, delta=1e-7)],
                           epsilon=0.6, delta=2e-7)
    assert answers[str(1)].replayed and not answers["2"].replayed
    assert [r[1:3] for r in rows(ledger)] == [("released", "0.5"), ("released", "0.1")]


def test_an_analyst_batch_past_their_own_budget_spends_nothing(tmp_path):
    ledger = tmp_path / "l.sqlite"
    db = connect(ledger)
    testing.ledger(db).add_analyst("ana", 1.0)
    ana = db.analyst("ana")
    ana.sql(COUNT, epsilon=0.25)
    before = rows(ledger)
    with pytest.raises(BudgetExceeded) as info:
        ana.sql_batch([COUNT, BY_SEX, INCOME], epsilon=0.9)
    assert float(info.value.requested[0]) == pytest.approx(0.9)
    assert rows(ledger) == before
    ana.sql_batch([BY_SEX, INCOME], epsilon=0.75)
    assert ana.budget.spent_epsilon == pytest.approx(1.0) and [r[5] for r in rows(ledger)] == ["ana"] * 3


class Unbindable:
    """The connection's executor, for which DuckDB's binder refuses one statement (DP311, free)."""

    def __init__(self, real, sql):
        self.real, self.sql = real, sql

    def __getattr__(self, name):
        return getattr(self.real, name)

    def check(self, plan, clock):
        if plan.sql == self.sql:
            raise UnsupportedConstruct("DP311", "DuckDB cannot run this query")
        return self.real.check(plan, clock)


def test_one_refusal_refuses_the_batch_before_anything_is_spent(tmp_path):
    ledger = tmp_path / "l.sqlite"
    db = connect(ledger)
    with pytest.raises(DpsqlError) as info:
        db.sql_batch([COUNT, Statement("SELECT ssn FROM people", name="leaky"), BY_SEX], epsilon=1.0)
    err = info.value
    assert err.code.startswith("DP2"), err
    assert err.statement == "leaky" and "statement 'leaky'" in err.message
    assert err.line == 1 and err.col is not None, "the caret still points into that statement's SQL"
    # A refusal only DuckDB's binder finds (after planning) refuses the batch too, free.
    with testing.injected(db, executor=Unbindable(testing.executor(db), BY_SEX)), pytest.raises(DpsqlError) as bound:
        db.sql_batch([COUNT, BY_SEX], epsilon=1.0)
    assert bound.value.statement == "2" and bound.value.code == "DP311"
    assert rows(ledger) == []


# --- allocation -------------------------------------------------------------------------------------

def test_weights_split_the_budget(tmp_path):
    db = connect(tmp_path / "l.sqlite")
    answers = db.sql_batch([Statement(COUNT, name="total"), Statement(BY_SEX, name="sex", weight=3)],
                           epsilon=1.0, delta=1e-6, mechanism="gaussian")   # Gaussian noise spends its delta
    assert [answers[n].plan.epsilon for n in answers] == [0.25, 0.75]
    assert [answers[n].plan.delta for n in answers] == [2.5e-7, 7.5e-7]
    mixed = db.sql_batch([Statement(COUNT, epsilon=0.5), Statement(BY_SEX, weight=1), Statement(INCOME, weight=2)],
                         epsilon=2.0, fresh=True)
    assert [mixed[n].plan.epsilon for n in mixed] == [0.5, 0.5, 1.0]


@pytest.mark.parametrize("n", [3, 11])   # 11: each share rounds up (1/11 as a float is above it)
def test_shares_never_add_up_past_the_batch_budget(tmp_path, n):
    db = connect(tmp_path / "l.sqlite", epsilon=1.0)
    answers = db.sql_batch([Statement(f"SELECT COUNT(*) AS n{i} FROM people") for i in range(n)], epsilon=1.0)
    shares = [Decimal(repr(answers[k].plan.epsilon)) for k in answers]
    assert sum(shares) <= 1 and max(shares) - min(shares) < Decimal("1e-15")
    assert db.budget.spent_epsilon <= 1.0


@pytest.mark.parametrize("batch, epsilon, words", [
    ([Statement(COUNT, weight=2)], None, "none was given"),
    ([Statement(COUNT, epsilon=0.6), Statement(BY_SEX, epsilon=0.6)], 1.0, "more than the batch's"),
    ([Statement(COUNT, epsilon=1.0), Statement(BY_SEX)], 1.0, "nothing of the batch's epsilon is left for '2'"),
    ([Statement(COUNT, name="a"), Statement(BY_SEX, name="a")], 1.0, "names statement 'a' twice"),
    ([Statement(COUNT, weight=0)], 1.0, "weight 0"),
    ([Statement(COUNT, weight=float("nan"))], 1.0, "weight nan"),
    ([Statement(COUNT, weight=1, epsilon=0.5)], 1.0, "both a weight and an epsilon"),
    ([], 1.0, "non-empty list"),
    (COUNT, 1.0, "non-empty list"),
])
def test_an_allocation_that_cannot_be_made_is_refused_free(tmp_path, batch, epsilon, words):
    ledger = tmp_path / "l.sqlite"
    db = connect(ledger)
    with pytest.raises(InvalidParameter) as info:
        db.sql_batch(batch, epsilon=epsilon)
    assert info.value.code == "DP426" and words in info.value.message and info.value.hint
    assert rows(ledger) == []


# --- the ledger ------------------------------------------------------------------------------------

@pytest.mark.parametrize("accountant", ["basic", "zcdp", "pld"])
def test_a_batch_is_charged_as_its_statements_would_be_one_by_one(tmp_path, accountant):
    """N charges, one row each (its own SQL, answer, replay key and outcome), committed together; the
    accountant composes them exactly as N queries asked one by one."""
    batch = [Statement(COUNT, epsilon=0.3, delta=1e-7), Statement(BY_SEX, epsilon=0.2, delta=1e-7),
             Statement(INCOME, epsilon=0.5, delta=2e-7)]
    together = connect(tmp_path / "a.sqlite", accountant=accountant)
    together.sql_batch(batch, epsilon=1.0, delta=4e-7)
    apart = connect(tmp_path / "b.sqlite", accountant=accountant)
    for s in batch:
        apart.sql(s.sql, epsilon=s.epsilon, delta=s.delta)
    assert [r[1:4] + r[6:] for r in rows(tmp_path / "a.sqlite")] == [r[1:4] + r[6:] for r in rows(tmp_path / "b.sqlite")]
    assert together.budget.spent_epsilon == apart.budget.spent_epsilon
    assert together.budget.spent_delta == apart.budget.spent_delta


STAGED = "SELECT COUNT(*) AS n FROM people WHERE income > (SELECT AVG(income) FROM people)"
PUBLIC = "SELECT region, COUNT(*) AS n FROM clinics GROUP BY region"


def test_a_batch_answers_as_its_statements_asked_one_by_one(tmp_path):
    """The batch path is the one-query path's parts in another order: under the same seed, the same
    statements (a plain query, a quantile, one of stages, a public-only one) give the same answers,
    the same noise drawn in the same order, and the same charges. The leak and differential tests
    check those parts through ``sql``."""
    batch = [Statement(BY_SEX, epsilon=0.5), Statement("SELECT MEDIAN(age) AS m FROM people", epsilon=0.5),
             Statement(STAGED, epsilon=0.5), Statement(PUBLIC)]
    together = connect(tmp_path / "a.sqlite", seed=11).sql_batch(batch)
    apart = connect(tmp_path / "b.sqlite", seed=11)
    for s, name in zip(batch, together):
        one = apart.sql(s.sql, epsilon=s.epsilon)
        assert together[name].fetchall() == one.fetchall() and together[name].columns == one.columns, s.sql
    assert [r[1:4] for r in rows(tmp_path / "a.sqlite")] == [r[1:4] for r in rows(tmp_path / "b.sqlite")]


def test_a_statement_identical_to_an_answered_one_replays_free(tmp_path):
    ledger = tmp_path / "l.sqlite"
    db = connect(ledger)
    first = db.sql_batch([Statement(BY_SEX, epsilon=0.5), Statement(BY_SEX, epsilon=0.5), Statement(COUNT, epsilon=0.5)])
    assert [first[n].replayed for n in first] == [False, True, False], "a repeat inside the batch replays"
    assert first["1"].fetchall() == first["2"].fetchall()
    assert [r[1:3] for r in rows(ledger)] == [("released", "0.5")] * 2
    # Later: one query, or a batch, identical to an answered statement replays it (today's key).
    assert db.sql(BY_SEX, epsilon=0.5).fetchall() == first["1"].fetchall()
    again = db.sql_batch([Statement(COUNT, epsilon=0.5), Statement(INCOME, epsilon=0.5)])
    assert again["1"].replayed and again["1"].fetchall() == first["3"].fetchall() and not again["2"].replayed
    assert len(rows(ledger)) == 3
    fresh = db.sql_batch([Statement(COUNT, epsilon=0.5), Statement(COUNT, epsilon=0.5)], fresh=True)
    assert not any(fresh[n].replayed for n in fresh) and len(rows(ledger)) == 5


class FailsOn:
    """The connection's executor, whose run of one statement fails inside the engine (after its charge)."""

    def __init__(self, real, sql):
        self.real, self.sql = real, sql

    def __getattr__(self, name):
        return getattr(self.real, name)

    def run(self, plan, bound, clock, replan, *kept):
        if plan.sql == self.sql:
            raise duckdb.InvalidInputException("the engine failed on this one")
        return self.real.run(plan, bound, clock, replan, *kept)


def test_a_statement_that_fails_while_running_stays_spent_and_the_others_answer(tmp_path):
    ledger = tmp_path / "l.sqlite"
    db = connect(ledger)
    with testing.injected(db, executor=FailsOn(testing.executor(db), BY_SEX)):
        answers = db.sql_batch([COUNT, BY_SEX, INCOME], epsilon=0.9)
    assert list(answers) == ["1", "2", "3"] and set(answers.results) == {"1", "3"}
    assert answers["3"].fetchall() and answers["1"].fetchall()
    with pytest.raises(ExecutionError) as info:
        answers["2"]
    assert info.value.code == "DP900" and info.value.statement == "2"
    assert [r[1] for r in rows(ledger)] == ["released", "failed", "released"]
    assert db.budget.spent_epsilon == pytest.approx(0.9), "the failed statement's spend stays recorded"


# --- concurrency and crashes -------------------------------------------------------------------------

def race(*calls) -> list[str]:
    """Each call in its own thread, started together: 'answered' or 'refused' (BudgetExceeded) for each."""
    start, outcomes = threading.Barrier(len(calls)), [""] * len(calls)

    def ask(i, call):
        start.wait()
        try:
            call()
            outcomes[i] = "answered"
        except BudgetExceeded:
            outcomes[i] = "refused"
    threads = [threading.Thread(target=ask, args=(i, call)) for i, call in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return outcomes


def test_a_batch_and_another_analysts_query_never_both_pass_a_check_only_one_fits(tmp_path):
    """The total fits the batch or the other query, not both: the ledger's one transaction lets one in."""
    for attempt in range(4):
        ledger = tmp_path / f"l{attempt}.sqlite"
        owner = connect(ledger, epsilon=1.0)
        for name in ("ana", "ben"):
            testing.ledger(owner).add_analyst(name, 1.0)
        ana, ben = owner.analyst("ana"), connect(ledger, epsilon=1.0).analyst("ben")
        outcomes = race(functools.partial(ana.sql_batch, [COUNT, BY_SEX], epsilon=0.6),
                        functools.partial(ben.sql, INCOME, epsilon=0.6))
        assert sorted(outcomes) == ["answered", "refused"], outcomes
        charged = [r[5] for r in rows(ledger)]
        assert charged == (["ana", "ana"] if outcomes[0] == "answered" else ["ben"]), charged
        assert owner.budget.spent_epsilon == pytest.approx(0.6)


CHILD = """
import os, sys
import numpy as np
import dpsql
from dpsql import Statement, testing
from tests.support.fixture import make_database
policy, ledger = sys.argv[1], sys.argv[2]
db = dpsql.connect(make_database(), policy=policy, ledger=ledger, data_version="fixture")
with testing.before_run(db, lambda: os._exit(9)):   # dies once the batch is charged, before anything runs
    db.sql_batch([Statement("SELECT COUNT(*) FROM people", epsilon=0.25),
                  Statement("SELECT sex, COUNT(*) FROM people GROUP BY sex", epsilon=0.5)])
"""


def test_a_batch_whose_process_dies_before_release_stays_spent(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(policy_with(epsilon=1.0)))
    ledger = tmp_path / "l.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run([sys.executable, "-c", CHILD, str(policy), str(ledger)], env=env, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == 9, child.stderr[-2000:]
    # As a single query's: every charge committed before the run, 'reserved', counted as spent.
    assert [r[1:3] for r in rows(ledger)] == [("reserved", "0.25"), ("reserved", "0.5")]
    db = connect(ledger, epsilon=1.0)
    assert db.budget.spent_epsilon == 0.75
    with pytest.raises(BudgetExceeded):   # nothing to replay (no answer was kept): asking again pays again
        db.sql_batch([Statement(COUNT, epsilon=0.25), Statement(BY_SEX, epsilon=0.5)])
