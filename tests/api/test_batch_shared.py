"""Shared scans (issue 26, item 3): a batch's statements that read one frame (table, WHERE, GROUP BY
keys, L, C) run as one engine query (dpsql/lower/shared.py), each with exactly the release it gets
alone; a statement the sharing cannot take runs alone as before."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpsql
from dpsql import Statement, testing
from dpsql.errors import DpsqlError, ExecutionError, UnsupportedConstruct
from dpsql.lower import shared
from tests.support.checks import COMMON, examples
from tests.support.fixture import POLICY, make_database

# Frames of the fixture: a row-level table, a user-level one (L = 2 of 3 clinics: partitions sampled),
# a relation (prescriptions through visits), each with and without a WHERE and keys.
FRAMES = [
    ("people", "", ("sex",)),
    ("people", "WHERE age >= 30 AND income < 800", ("sex", "state")),
    ("people", "", ()),
    ("visits", "", ("clinic",)),
    ("visits", "WHERE cost > 10", ()),
    ("prescriptions p JOIN visits v ON p.visit_id = v.visit_id", "", ("drug",)),
]
AGGREGATES = {
    "people": ["COUNT(*)", "COUNT(income)", "SUM(income)", "AVG(income)", "AVG(age)", "SUM(age)", "VAR_POP(age)",
               "STDDEV(income)", "COUNT_IF(active)", "SUM(age + 1)", "AVG(income / 2)",
               # one argument a COUNT reads as written and a SUM clamped (income <= 1000): 48 vs 0 for F
               "COUNT(CASE WHEN income > 1000 THEN 1 END)", "SUM(CASE WHEN income > 1000 THEN 1 END)"],
    "visits": ["COUNT(*)", "SUM(cost)", "AVG(cost)", "COUNT(cost)"],
    # A relation's frame is its joined SELECT, which lists the columns its statement reads: these read one.
    "prescriptions p JOIN visits v ON p.visit_id = v.visit_id": ["SUM(dose)", "AVG(dose)", "COUNT(dose)", "STDDEV(dose)"],
}
# ORDER BY an aggregate with a LIMIT is a noisy top-k (plan/top_k.py): it runs alone, tested below.
TAILS = ["", " ORDER BY a0 DESC", " HAVING a0 > 0", " ORDER BY {key} DESC LIMIT 1 OFFSET 1", " HAVING a0 < 100 ORDER BY a0"]


def connect(ledger=":memory:", seed=7):
    policy = json.loads(json.dumps(POLICY))
    return dpsql.connect(make_database(), policy=policy, ledger=str(ledger), rng=np.random.default_rng(seed),
                         data_version="fixture")


@pytest.fixture(scope="module")
def db():
    return connect()


def statement(source: str, where: str, keys: tuple, aggregates: list[str], tail: str) -> str:
    items = [*keys, *[f"{a} AS a{i}" for i, a in enumerate(aggregates)]]
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    return f"SELECT {', '.join(items)} FROM {source} {where}{group}{tail.format(key=keys[-1]) if keys else ''}"


@st.composite
def frame_batches(draw):
    source, where, keys = draw(st.sampled_from(FRAMES))
    pool = AGGREGATES.get(source) or AGGREGATES[source.split()[0]]
    n = draw(st.integers(2, 4))
    return [statement(source, where, keys, draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3)),
                      draw(st.sampled_from(TAILS))) for _ in range(n)]


@settings(max_examples=examples(25), **COMMON)
@given(frame_batches(), st.sampled_from(["identity", "zero"]))
def test_a_shared_query_releases_what_each_statement_releases_alone(db, sqls, noise):
    """Noise off (identity: the bounded exact values; zero: every draw 0) and partitions chosen by hash:
    each statement's table from the shared query equals its table alone, rows, order, names and types."""
    together = testing.run_shared(db, sqls, 1.0, noise=noise)
    for sql, got in zip(sqls, together):
        alone = testing.run(db, sql, 1.0, noise=noise).table
        assert got.schema == alone.schema, sql
        assert got.to_pylist() == alone.to_pylist(), sql


def test_an_argument_two_statements_evaluate_otherwise_is_evaluated_for_each(db):
    """COUNT reads its argument as written, SUM with its columns clamped (lower/bounding.py
    row_arguments): sharing one evaluation would make the COUNT see the clamped income (none > 1000)."""
    argument = "CASE WHEN income > 1000 THEN 1 END"
    sqls = [f"SELECT sex, COUNT({argument}) AS n FROM people GROUP BY sex",
            f"SELECT sex, SUM({argument}) AS s FROM people GROUP BY sex"]
    for batch in (sqls, sqls[::-1]):
        together = testing.run_shared(db, batch, 1.0)
        assert [t.to_pylist() for t in together] == [testing.run(db, sql, 1.0).table.to_pylist() for sql in batch]
    assert [r["n"] for r in testing.run(db, sqls[0], 1.0).table.to_pylist()] == [48, 98]


AGAIN = ["SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", "SELECT sex, AVG(income) AS a FROM people GROUP BY sex",
         "SELECT sex, SUM(age) AS s FROM people GROUP BY sex ORDER BY s DESC"]


def runs_of(db, batch, **options):
    """The batch's answers and how many queries the engine ran for them."""
    ran: list[int] = []
    with testing.before_run(db, lambda: ran.append(1)):
        answers = db.sql_batch(batch, **options)
    return answers, len(ran)


def test_statements_of_one_frame_run_as_one_query_charged_as_alone(tmp_path):
    batch = [*AGAIN, "SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic",
             "SELECT clinic, AVG(cost) AS c FROM visits GROUP BY clinic", "SELECT MEDIAN(age) AS m FROM people",
             "SELECT state, COUNT(*) AS n FROM people GROUP BY state"]
    together, apart = connect(tmp_path / "a.sqlite"), connect(tmp_path / "b.sqlite")
    got, ran = runs_of(together, batch, epsilon=3.5)
    alone, ran_alone = runs_of(apart, batch, epsilon=3.5, shared_scans=False)
    # alone, a statement of scalar measurements runs in two engine queries (drawn, then its outputs: api/
    # executor.py measured); the median in one
    assert (ran, ran_alone) == (5, 13), "people by sex x3 and visits x2 shared; the median and by state alone"
    for name in got:
        assert got[name].columns == alone[name].columns and got[name].arrow().schema == alone[name].arrow().schema
        assert len(got[name].fetchall()) == len(alone[name].fetchall())
        assert got[name].plan == alone[name].plan, "the same plan: the same calibration, epsilon and delta"
    assert [(c.epsilon, c.delta) for c in together.budget.history] == [(c.epsilon, c.delta) for c in apart.budget.history]


def test_each_statement_draws_its_own_noise():
    """Two statements measuring the same count in one shared query: their draws are independent (were a
    draw shared, they would always agree)."""
    db = connect(seed=3)
    batch = ["SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", "SELECT sex, COUNT(*) AS m FROM people GROUP BY sex"]
    same = 0
    for _ in range(10):
        answers, ran = runs_of(db, batch, epsilon=0.2, fresh=True)
        assert ran == 1
        same += answers["1"].fetchall() == answers["2"].fetchall()
    assert same <= 2, "noise at scale 10 on each of 2 groups: equal in 2 of 10 batches at most (p < 1e-3)"


def test_a_statement_the_sharing_cannot_take_runs_alone(db):
    """Quantiles, stages, private keys with partition selection, a top-k, a clipping report: each its own
    query, as before, beside statements of the same frame that do share."""
    plain = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"
    alone = ["SELECT sex, MEDIAN(age) AS m FROM people GROUP BY sex",
             "SELECT sex, COUNT(*) AS n FROM people WHERE income > (SELECT AVG(income) FROM people) GROUP BY sex",
             "SELECT zip, COUNT(*) AS n FROM people GROUP BY zip",
             "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'exponential') sex, COUNT(*) AS n FROM people "
             "GROUP BY sex ORDER BY n DESC LIMIT 1",
             "SELECT sex, COUNT(DISTINCT zip) AS d FROM people GROUP BY sex"]
    plans = [db.explain(sql, 1.0, 1e-7) for sql in [plain, plain.replace(" n ", " n2 "), *alone]]
    assert shared.groups(plans) == [[0, 1]]
    assert not any(shared.shareable(p) for p in plans[2:])


class NoSharedBind:
    """The connection's executor, whose binder refuses every shared query (DP311)."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def bind_shared(self, sql):
        raise UnsupportedConstruct("DP311", "DuckDB cannot run this query")


class SharedFails(NoSharedBind):
    """The connection's executor, whose shared queries bind but fail in the engine (after the charge)."""

    def bind_shared(self, sql):
        return self.real.bind_shared(sql)

    def run_shared(self, bound, clock):
        import duckdb
        raise duckdb.InvalidInputException("the engine failed")


def test_a_shared_query_that_does_not_bind_runs_its_statements_alone(tmp_path):
    db = connect(tmp_path / "l.sqlite")
    with testing.injected(db, executor=NoSharedBind(testing.executor(db))):
        answers, ran = runs_of(db, AGAIN, epsilon=0.9)
    assert ran == 6 and all(answers[n].fetchall() for n in answers), "each alone, in two engine queries"
    assert db.budget.spent_epsilon == pytest.approx(0.9)


def test_a_shared_query_that_fails_fails_its_statements_and_they_stay_spent(tmp_path):
    db = connect(tmp_path / "l.sqlite")
    batch = [*AGAIN, "SELECT state, COUNT(*) AS n FROM people GROUP BY state"]
    with testing.injected(db, executor=SharedFails(testing.executor(db))):
        answers = db.sql_batch(batch, epsilon=1.2)
    assert set(answers.failed) == {"1", "2", "3"} and answers["4"].fetchall()
    for name in ("1", "2", "3"):
        with pytest.raises(ExecutionError) as info:
            answers[name]
        assert info.value.code == "DP900" and info.value.statement == name
    assert [c.status for c in db.budget.history] == ["failed"] * 3 + ["released"]
    assert db.budget.spent_epsilon == pytest.approx(1.2)


def test_a_replayed_statement_leaves_the_rest_of_its_frame_shared(tmp_path):
    db = connect(tmp_path / "l.sqlite")
    first = db.sql(AGAIN[0], epsilon=0.3)
    answers, ran = runs_of(db, [Statement(s, epsilon=0.3) for s in AGAIN])
    assert answers["1"].replayed and answers["1"].fetchall() == first.fetchall()
    assert ran == 1 and not answers["2"].replayed and not answers["3"].replayed


def test_a_statement_replaying_kept_measurements_runs_alone_from_them(tmp_path):
    """A statement whose measurements were released before (accounting/released.py) is charged 0 (or only
    its new ones): it must be answered from the kept values, never from a shared query's fresh draws of
    them, which nothing would pay for. Its frame's other statements still share."""
    db = connect(tmp_path / "l.sqlite")
    first = db.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", epsilon=0.3)
    renamed = "SELECT sex, COUNT(*) AS people FROM people GROUP BY sex ORDER BY sex"   # post-processing only
    for _ in range(3):
        answers, _ = runs_of(db, [Statement(renamed, epsilon=0.3), *[Statement(s, epsilon=0.3) for s in AGAIN[1:]]])
        assert answers["1"].replayed and answers["1"].fetchall() == sorted(first.fetchall())
    assert [c.epsilon for c in db.budget.history if c.epsilon] == [0.3] * 3, "later batches replay every one"


def test_shared_scans_is_a_boolean(db):
    with pytest.raises(DpsqlError) as info:
        db.sql_batch(AGAIN, epsilon=1.0, shared_scans="yes")
    assert info.value.code == "DP401"


def test_a_shared_query_stays_bounded(db, monkeypatch):
    """At most MAX_SHARED statements, and MAX_CELLS cells of padded answer counted from public bounds
    (a plan here: 2 partitions x (3 x 2 outputs + 1) columns)."""
    plans = [db.explain(f"SELECT sex, COUNT(*) AS n{i} FROM people GROUP BY sex", 1.0) for i in range(40)]
    assert [len(g) for g in shared.groups(plans)] == [32, 8]
    monkeypatch.setattr(shared, "MAX_CELLS", (2 + 2) * (7 + 7))   # two statements fit, three do not
    assert shared.groups(plans[:5]) == [[0, 1], [2, 3]]


@pytest.mark.parametrize("a, b", [
    ("WHERE zip = 'a0001' GROUP BY sex", "WHERE zip = 'A0001' GROUP BY sex"),   # a literal's case
    ("WHERE age > 30 GROUP BY sex", "WHERE age >= 30 GROUP BY sex"),
    ("GROUP BY sex", "GROUP BY state"),
    ("WHERE sex = 'F' GROUP BY CASE WHEN state = 'CA' THEN 'w' END", "WHERE sex = 'F' GROUP BY CASE WHEN state = 'ca' THEN 'w' END"),
])
def test_statements_that_read_other_rows_or_keys_do_not_share(db, a, b):
    plans = [db.explain(f"SELECT COUNT(*) AS n FROM people {tail}", 1.0) for tail in (a, b)]
    assert shared.groups(plans) == []
    assert shared.groups(plans[:1] * 2) == [[0, 1]]
