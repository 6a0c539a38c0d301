"""Replay at the level of measurements (issue 26, item 2): a query whose noisy measurements the analyst
has all released is post-processing of them and costs nothing; one that lacks some pays only for those;
anything that changes what was measured or how it was noised pays again."""
import io
import json
import math
import sqlite3

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpsql
from dpsql import Statement, testing
from tests.support.checks import COMMON, examples
from tests.support.fixture import POLICY, make_database

EXAMPLE = "SELECT sex, AVG(income) AS inc, COUNT(*) AS n FROM people GROUP BY sex"


def connect(ledger, data_version="fixture", seed=3, epsilon=100.0):
    policy = json.loads(json.dumps(POLICY))
    policy["budget"] = {"epsilon": epsilon, "delta": 1e-5}
    return dpsql.connect(make_database(), policy=policy, ledger=str(ledger), rng=np.random.default_rng(seed),
                         data_version=data_version)


@pytest.fixture
def db(tmp_path):
    return connect(tmp_path / "l.sqlite")


def spent(db):
    return db.budget.spent_epsilon


def by(rows, key=0):
    return {r[key]: r for r in rows}


# --- the issue's example -------------------------------------------------------------------------------

def test_the_issues_example_costs_its_epsilon_once(db):
    first = db.sql(EXAMPLE, epsilon=2)
    released = by(first.fetchall())
    again = db.sql("SELECT sex AS s, ROUND(AVG(income), 0) AS mean, COUNT(*) AS people FROM people GROUP BY sex "
                   "ORDER BY people LIMIT 1", epsilon=2)
    assert spent(db) == 2.0 and again.replayed
    (row,) = again.fetchall()
    fewest = min(released.values(), key=lambda r: (r[2], r[0]))
    assert row == (fewest[0], round(fewest[1]), fewest[2]), "post-processing of the first release, exactly"
    assert again.columns == ["s", "mean", "people"]


# --- each kind of post-processing is free and a function of the first release --------------------------

POST = [
    ("SELECT sex AS who, AVG(income) AS a, COUNT(*) AS b FROM people GROUP BY sex",
     lambda r: sorted((s, a, n) for s, a, n in r)),
    ("SELECT sex, ROUND(AVG(income), 1) AS inc, COUNT(*) AS n FROM people GROUP BY sex",
     lambda r: sorted((s, round(a, 1), n) for s, a, n in r)),
    ("SELECT sex, AVG(income) AS inc, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n DESC",
     lambda r: sorted(r, key=lambda x: (-x[2], x[0]))),
    ("SELECT sex, AVG(income) AS inc, COUNT(*) AS n FROM people GROUP BY sex ORDER BY inc LIMIT 1",
     lambda r: sorted(r, key=lambda x: (x[1], x[0]))[:1]),
    ("SELECT sex, AVG(income) AS inc, COUNT(*) AS n FROM people GROUP BY sex HAVING COUNT(*) > 500",
     lambda r: sorted(x for x in r if x[2] > 500)),
    ("SELECT sex, COUNT(*) * 2 + 1 AS twice, AVG(income) - 1 AS less FROM people GROUP BY sex",
     lambda r: sorted((s, n * 2 + 1, a - 1) for s, a, n in r)),
    ("SELECT COUNT(*) AS n, sex, AVG(income) AS a FROM people GROUP BY sex",
     lambda r: sorted((n, s, a) for s, a, n in r)),
]


@pytest.mark.parametrize("sql, expected", POST, ids=range(len(POST)))
def test_post_processing_of_released_measurements_is_free(db, sql, expected):
    first = db.sql(EXAMPLE, epsilon=2).fetchall()
    answer = db.sql(sql, epsilon=2)
    assert answer.replayed and spent(db) == 2.0
    got = answer.fetchall()
    want = expected(first)
    assert (got if "ORDER BY" in sql else sorted(got)) == pytest.approx(want)


def test_another_confidence_level_is_free_and_its_interval_surrounds_the_same_value(db):
    first = db.sql(EXAMPLE, epsilon=2, ci=0.9).df().set_index("sex")
    wider = db.sql(EXAMPLE, epsilon=2, ci=0.99)
    assert wider.replayed and spent(db) == 2.0
    got = wider.df().set_index("sex")
    assert got[["inc", "n"]].equals(first[["inc", "n"]]), "the same released values"
    assert (got["n_ci_high"] - got["n_ci_low"] > first["n_ci_high"] - first["n_ci_low"]).all()


# --- partial reuse: only the new measurements are paid for ---------------------------------------------

def test_a_query_lacking_some_measurements_pays_only_for_those(db):
    counts = by(db.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", epsilon=1).fetchall())
    both = db.sql("SELECT sex, COUNT(*) AS n, SUM(income) AS total FROM people GROUP BY sex", epsilon=2)
    assert not both.replayed and spent(db) == 2.0, "the count replays: 1 for the sum alone"
    for sex, n, _ in both.fetchall():
        assert n == counts[sex][1], "the count is the released one"
    history = db.budget.history
    assert [c.epsilon for c in history] == [1.0, 1.0] and "replayed free" in history[-1].plan
    # Now both are released: the pair again, under other names, is free.
    assert db.sql("SELECT sex, SUM(income) AS t, COUNT(*) AS c FROM people GROUP BY sex", epsilon=2).replayed
    assert spent(db) == 2.0


def test_measurements_of_several_queries_answer_one_free(db):
    counts = by(db.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=1).fetchall())
    sums = by(db.sql("SELECT state, SUM(income) AS s FROM people GROUP BY state", epsilon=1).fetchall())
    ratio = db.sql("SELECT state, SUM(income) / COUNT(*) AS mean, COUNT(*) AS n FROM people GROUP BY state",
                   epsilon=2)
    assert ratio.replayed and spent(db) == 2.0
    for state, mean, n in ratio.fetchall():
        assert n == counts[state][1] and mean == pytest.approx(sums[state][1] / n, rel=1e-12)


# --- what pays again -----------------------------------------------------------------------------------

def test_another_epsilon_mechanism_bound_or_fresh_pays_again(db):
    db.sql(EXAMPLE, epsilon=2)
    assert not db.sql(EXAMPLE, epsilon=3).replayed and spent(db) == 5.0
    assert not db.sql(EXAMPLE, epsilon=2, delta=1e-6, mechanism="gaussian").replayed
    after = spent(db)
    bounded = EXAMPLE.replace("AVG(income)", "AVG(income, contribution_bounds_per_row => (0, 500))")
    # Other bounds on AVG's argument: its centred sum is new; its COUNT(income) and COUNT(*), which the
    # bounds do not change, replay: a third of the query's epsilon is charged.
    assert not db.sql(bounded, epsilon=2).replayed and spent(db) == pytest.approx(after + 2 / 3)
    assert not db.sql(EXAMPLE.replace("people GROUP", "people WHERE age > 3 GROUP"), epsilon=2).replayed
    fresh = db.sql(EXAMPLE, epsilon=2, fresh=True)
    assert not fresh.replayed and spent(db) == pytest.approx(after + 2 / 3 + 4)


def test_another_analyst_or_another_data_version_pays_again(tmp_path):
    ledger = tmp_path / "l.sqlite"
    owner = connect(ledger)
    first = owner.sql(EXAMPLE, epsilon=2)
    testing.ledger(owner).add_analyst("ana", 10.0)
    theirs = owner.sql(EXAMPLE, epsilon=2, analyst="ana")
    assert not theirs.replayed and owner.budget.spent_epsilon == 4.0
    assert owner.sql("SELECT sex, COUNT(*) AS c, AVG(income) AS a FROM people GROUP BY sex", epsilon=2,
                     analyst="ana").replayed, "their own releases replay for them"
    other = connect(ledger, data_version="tomorrow", seed=4)
    assert not other.sql(EXAMPLE, epsilon=2).replayed and other.budget.spent_epsilon == 6.0
    same = connect(ledger, seed=5)   # the same data version, another connection: replayed from the file
    renamed = same.sql(EXAMPLE.replace("AS n", "AS m"), epsilon=2)
    assert renamed.replayed and renamed.fetchall() == first.fetchall()


def test_a_data_change_changes_every_identity(tmp_path):
    path = tmp_path / "people.duckdb"
    con = make_database()
    con.execute(f"ATTACH '{path}' AS f; COPY FROM DATABASE memory TO f; DETACH f")
    con.close()
    policy = json.loads(json.dumps(POLICY))
    first = dpsql.connect(path, policy=policy, ledger=str(tmp_path / "l.sqlite"))
    first.sql(EXAMPLE, epsilon=2)
    first.close()
    import duckdb
    with duckdb.connect(str(path)) as w:
        w.execute("INSERT INTO people SELECT * FROM people LIMIT 1")
    again = dpsql.connect(path, policy=policy, ledger=str(tmp_path / "l.sqlite"))
    assert not again.sql(EXAMPLE.replace("AS n", "AS m"), epsilon=2).replayed
    assert again.budget.spent_epsilon == 4.0


# --- partition selection: the released groups are part of the release ---------------------------------

SELECTED = "SELECT zip, COUNT(*) AS n FROM people GROUP BY zip"


def test_selected_groups_replay_whole_and_a_new_measurement_pays_all(db):
    first = db.sql(SELECTED, epsilon=1, delta=1e-6)
    again = db.sql("SELECT zip AS z, COUNT(*) AS c FROM people GROUP BY zip ORDER BY c DESC", epsilon=1, delta=1e-6)
    assert again.replayed and spent(db) == 1.0
    assert sorted(again.fetchall()) == sorted(first.fetchall()), "the same groups, the same values"
    more = db.sql("SELECT zip, COUNT(*) AS n, SUM(income) AS s FROM people GROUP BY zip", epsilon=2, delta=1e-6)
    assert not more.replayed and spent(db) == 3.0, "with selection it is all or nothing"


# --- what the ledger keeps is what was released ---------------------------------------------------------

def test_the_kept_values_are_the_released_ones(tmp_path):
    ledger = tmp_path / "l.sqlite"
    db = connect(ledger)
    answer = by(db.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", epsilon=1).fetchall())
    with sqlite3.connect(ledger) as con:
        (blob,), = con.execute("SELECT released FROM measurements").fetchall()
    kept = pa.ipc.open_stream(io.BytesIO(blob)).read_all().to_pylist()
    assert {r["__k0"]: r["__value"] for r in kept} == {s: n for s, (_, n) in answer.items()}
    with sqlite3.connect(ledger) as con, pytest.raises(sqlite3.IntegrityError):
        con.execute("UPDATE measurements SET identity = 'x'")   # append-only, as every table of the ledger
    # A free replay is in the history at 0, without its answer (a free request grows the file by its
    # record only) and without measurements of its own.
    assert db.sql("SELECT sex AS s, COUNT(*) AS c FROM people GROUP BY sex", epsilon=1).replayed
    with sqlite3.connect(ledger) as con:
        assert con.execute("SELECT epsilon, answer IS NULL FROM charges ORDER BY id").fetchall() == [
            ("1", 0), ("0", 1)]
        assert con.execute("SELECT COUNT(*) FROM measurements").fetchone() == (1,)


def test_the_batch_path_replays_measurements_too(db):
    db.sql(EXAMPLE, epsilon=2)
    answers = db.sql_batch([Statement("SELECT sex, COUNT(*) AS c, AVG(income) AS a FROM people GROUP BY sex",
                                      epsilon=2), Statement("SELECT COUNT(*) AS n FROM people", epsilon=1)],
                           epsilon=3)
    assert answers["1"].replayed and not answers["2"].replayed and spent(db) == 3.0


def test_explain_says_what_replays(db):
    db.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", epsilon=1)
    text = str(db.explain("SELECT sex, COUNT(*) AS n, SUM(income) AS s FROM people GROUP BY sex", epsilon=2))
    assert "replay free (released before): m0 COUNT(*)" in text and "charged: epsilon 1" in text
    # A noisy top-k (the choice, by default here) over released values: explain shows the plan that
    # runs, ORDER BY ... LIMIT over the values, replayed free.
    db.sql(EXAMPLE, epsilon=2)
    top = EXAMPLE + " ORDER BY n LIMIT 1"
    assert testing.planner(db).planned(top, 2, None, None, True, None, None).plan.top_k is not None
    text = str(db.explain(top, epsilon=2))
    assert "charged: epsilon 0" in text and "top-k" not in text, text


# --- the property: a replayed answer is post-processing of the first release ---------------------------

@settings(max_examples=examples(15), **COMMON)
@given(order=st.sampled_from(["", "ORDER BY n", "ORDER BY n DESC", "ORDER BY t", "ORDER BY t DESC"]),
       limit=st.sampled_from([None, 1, 2, 3]), threshold=st.one_of(st.none(), st.integers(0, 400)),
       scale=st.integers(-3, 3))
def test_a_replayed_answer_is_the_first_release_post_processed(tmp_path_factory, order, limit, threshold, scale):
    db = connect(tmp_path_factory.mktemp("p") / "l.sqlite")
    first = db.sql("SELECT state, COUNT(*) AS n, SUM(income) AS t FROM people GROUP BY state", epsilon=1).fetchall()
    having = "" if threshold is None else f" HAVING COUNT(*) > {threshold}"
    tail = f" {order}" + ("" if limit is None else f" LIMIT {limit}")
    sql = f"SELECT state, COUNT(*) AS n, SUM(income) * {scale} AS t FROM people GROUP BY state{having}{tail}"
    answer = db.sql(sql, epsilon=1)
    assert answer.replayed and db.budget.spent_epsilon == 1.0
    rows = [(s, n, t * scale) for s, n, t in first if threshold is None or n > threshold]
    if order:
        column = 1 if " n" in order else 2
        rows.sort(key=lambda r: ((-r[column] if "DESC" in order else r[column]), r[0]))
    else:
        rows.sort()
    got = answer.fetchall()
    assert same(got if order else sorted(got), rows[:limit] if limit else rows)


def same(got, want):
    """Rows equal, numbers to 1e-9 relative (a sum times a factor, computed in the engine or here)."""
    return len(got) == len(want) and all(
        len(g) == len(w) and all(a == b if isinstance(a, str) else math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
                                 for a, b in zip(g, w)) for g, w in zip(got, want))
