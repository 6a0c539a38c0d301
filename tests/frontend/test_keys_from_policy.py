"""Keys and bounds that follow from the policy (issue 14, item 4).

* Numeric keys imply bounds: ``married: {keys: [0, 1]}`` clamps to [0, 1], so ``AVG(married)`` runs.
* A ``CASE`` (or ``IF``) GROUP BY item whose branches are all literals has those literals as its
  public groups (NULL too when no ELSE), whatever columns its conditions read.
* ``keys: {range: [first, last]}`` (and ``step``) declares a range of integer keys.
* ``WHERE key IN (...)`` / ``key = ...`` on a public-key column releases only the groups it can
  reach: computed from the declared keys and the literals, never from the data.
* Literals that cast cleanly are written in the column's type (``educ = '8'``, ``int_col = TRUE``),
  and ``COUNT(<privacy unit>)`` is a row count.
* SmartNoise's dialect: ``TOP n``, ``VAR``, ``STD``, schema-qualified ``PUMS.PUMS``.
"""
import copy

import duckdb
import pytest

import dpsql
from dpsql import testing
from dpsql.policy import load_policy
from dpsql.policy.bounds import MAX_KEY_RANGE
from tests.support.checks import refusal

PUMS = {
    "budget": {"epsilon": 1e6, "delta": 1e-3},
    "tables": {"pums": {
        "privacy_unit": "pid",
        "columns": {
            "age": {"type": "int", "lower": 0, "upper": 100},
            "income": {"type": "float", "lower": 0, "upper": 500000},
            "sex": {"keys": [0, 1]},
            "educ": {"keys": {"range": [1, 16]}},
            "married": {"keys": [0, 1]},
            "label": {"keys": ["1", "2"]},          # numbers as text: no bounds follow
            "note": {},
        }}},
}


def pums_database() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("""
        CREATE TABLE pums AS SELECT range AS pid, 18 + (range * 37) % 76 AS age, range % 2 AS sex,
            1 + (range * 7) % 16 AS educ, ((range * 3) % 5 < 3)::INTEGER AS married,
            ((range * 7919) % 421)::DOUBLE * 1000 AS income, ['1', '2'][1 + range % 2] AS label,
            'n' || (range % 7) AS note
        FROM range(1000)""")
    return con


@pytest.fixture
def pums():
    return dpsql.connect(pums_database(), ledger=":memory:", policy=copy.deepcopy(PUMS))


def exact(db, sql, **kw):
    return testing.run(db, sql, noise="identity", **kw).rows


def plain(sql):
    return sorted(pums_database().execute(sql).fetchall(), key=repr)


# --- numeric keys imply bounds ------------------------------------------------------------------

def test_numeric_keys_make_a_column_summable(pums):
    [(mean, total)] = exact(pums, "SELECT AVG(married), SUM(married) FROM pums")
    [(true_mean, true_total)] = plain("SELECT AVG(married), SUM(married) FROM pums")
    assert total == true_total and mean == pytest.approx(true_mean, abs=1e-6)
    assert "clamped to [0, 1]" in str(pums.explain("SELECT AVG(married) FROM pums"))


def test_values_outside_the_keys_are_clamped_to_them():
    con = pums_database()
    con.execute("UPDATE pums SET married = 7 WHERE pid = 0")
    db = dpsql.connect(con, ledger=":memory:", policy=copy.deepcopy(PUMS))
    [(total,)] = exact(db, "SELECT SUM(married) FROM pums")
    assert con.execute("SELECT SUM(married) FROM pums").fetchone()[0] == 606
    assert total == 600   # the 7 counts as 1, the largest key


def test_declared_bounds_win_over_keys():
    policy = copy.deepcopy(PUMS)
    policy["tables"]["pums"]["columns"]["married"] = {"keys": [0, 1], "lower": 0, "upper": 0.5}
    db = dpsql.connect(pums_database(), ledger=":memory:", policy=policy)
    assert "clamp to [0, 0.5]" in str(db.explain("SELECT SUM(married) FROM pums"))


def test_keys_that_are_not_numbers_imply_no_bounds(pums):
    assert refusal(pums, "SELECT AVG(label) FROM pums").code == "DP302"


# --- CASE bands ------------------------------------------------------------------------------------

BANDS = "CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END"


def test_case_bands_are_public_groups_without_delta(pums):
    sql = f"SELECT {BANDS} AS band, COUNT(*) AS n FROM pums GROUP BY band ORDER BY band"
    rows = exact(pums, sql, delta=0)
    truth = dict(plain(f"SELECT {BANDS}, COUNT(*) FROM pums GROUP BY 1"))
    assert [r[0] for r in rows] == ["adult", "child", "senior"]   # 'child' holds no row: released anyway
    assert {k: n for k, n in rows} == {"child": 0, **truth}
    assert "public keys: the values of its branches, 'child', 'adult', 'senior'" in str(pums.explain(sql))


def test_a_case_without_else_has_a_null_group(pums):
    rows = exact(pums, "SELECT CASE WHEN income > 300000 THEN 'rich' END AS g, COUNT(*) FROM pums GROUP BY g")
    assert sorted(rows, key=repr) == plain("SELECT CASE WHEN income > 300000 THEN 'rich' END, COUNT(*) FROM pums "
                                           "GROUP BY 1")


def test_an_if_over_a_column_without_keys_or_bounds(pums):
    rows = exact(pums, "SELECT IF(note = 'n3', 1.5, 2) AS g, AVG(age) AS a FROM pums GROUP BY g ORDER BY g")
    truth = plain("SELECT IF(note = 'n3', 1.5, 2), AVG(age) FROM pums GROUP BY 1")
    assert [r[0] for r in rows] == [r[0] for r in truth]
    assert [r[1] for r in rows] == pytest.approx([r[1] for r in truth], abs=1e-3)


def test_a_case_returning_a_column_stays_private(pums):
    err = refusal(pums, "SELECT CASE WHEN age < 18 THEN note ELSE 'adult' END AS g, COUNT(*) FROM pums GROUP BY g",
                  delta=0)
    assert err.code == "DP304"


# --- key ranges --------------------------------------------------------------------------------------

def test_a_range_of_keys_is_every_integer_in_it():
    columns = load_policy(PUMS).tables["pums"].columns
    assert columns["educ"].keys == tuple(range(1, 17))
    stepped = copy.deepcopy(PUMS)
    stepped["tables"]["pums"]["columns"]["age"] = {"keys": {"range": [0, 100], "step": 10}}
    assert load_policy(stepped).tables["pums"].columns["age"].keys == tuple(range(0, 101, 10))


@pytest.mark.parametrize("keys, path", [
    ({"range": [5, 1]}, "keys.range"),
    ({"range": [0, MAX_KEY_RANGE]}, "keys.range"),
    ({"range": [0.5, 3]}, "keys.range[0]"),
    ({"range": [0]}, "keys.range"),
    ({"range": [0, 3], "step": 0}, "keys.step"),
    ({"rng": [0, 3]}, "keys.rng"),
])
def test_a_bad_range_names_its_entry(keys, path):
    policy = copy.deepcopy(PUMS)
    policy["tables"]["pums"]["columns"]["educ"] = {"keys": keys}
    with pytest.raises(dpsql.DpsqlError) as info:
        load_policy(policy)
    assert info.value.code == "DP501" and f"tables.pums.columns.educ.{path}:" in str(info.value)


# --- WHERE prunes public groups --------------------------------------------------------------------

def test_where_in_releases_only_the_groups_it_names(pums):
    sql = "SELECT educ, COUNT(*) AS n FROM pums WHERE educ IN (2, 3) AND age > 30 GROUP BY educ"
    assert exact(pums, sql) == plain("SELECT educ, COUNT(*) FROM pums WHERE educ IN (2, 3) AND age > 30 GROUP BY 1")
    assert "only those where educ IN (2, 3)" in str(pums.explain(sql))


def test_pruning_reads_the_keys_not_the_data():
    # Key 16 holds no row: it is still released when the WHERE admits it, and rows of key 2 do not
    # make it appear when the WHERE does not.
    con = pums_database()
    con.execute("DELETE FROM pums WHERE educ = 16")
    db = dpsql.connect(con, ledger=":memory:", policy=copy.deepcopy(PUMS))
    fifteen = plain("SELECT COUNT(*) FROM pums WHERE educ = 15")[0][0]
    for where in ("educ = 16 OR educ = 15", "educ BETWEEN 15 AND 16", "educ IN (15, 16, 17)"):
        rows = exact(db, f"SELECT educ, COUNT(*) FROM pums WHERE {where} GROUP BY educ")
        assert rows == [(15, fifteen), (16, 0)], where
    rows = exact(db, "SELECT educ, COUNT(*) FROM pums WHERE educ = 2 OR age > 90 GROUP BY educ")
    assert [r[0] for r in rows] == list(range(1, 17))   # the condition reads more than the key: no pruning


def test_an_expression_of_two_key_columns_is_pruned_by_each(pums):
    rows = exact(pums, "SELECT educ + sex AS e, COUNT(*) FROM pums WHERE educ = 4 AND sex = 1 GROUP BY e")
    assert [r[0] for r in rows] == [5]


# --- literals that cast cleanly, COUNT(unit) -------------------------------------------------------

@pytest.mark.parametrize("condition", ["educ = '8'", "educ IN ('8', ' 9 ')", "'8' = educ", "married = TRUE",
                                       "married > FALSE", "income < '250000.5'", "educ BETWEEN '2' AND 4"])
def test_literals_in_the_columns_type_answer_as_duckdb(pums, condition):
    [(n,)] = exact(pums, f"SELECT COUNT(*) FROM pums WHERE {condition}")
    assert n == plain(f"SELECT COUNT(*) FROM pums WHERE {condition}")[0][0]


@pytest.mark.parametrize("condition", ["educ = '8.5'", "educ = 'eight'", "educ = '99999999999999999999'",
                                       "note = 3", "label = 1"])
def test_literals_that_could_fail_are_still_refused(pums, condition):
    assert refusal(pums, f"SELECT COUNT(*) FROM pums WHERE {condition}").code == "DP306"


def test_count_of_the_unit_is_a_row_count(pums):
    res = exact(pums, "SELECT COUNT(pid), COUNT(*) AS n FROM pums")
    assert res == [(1000, 1000)]
    assert pums.sql("SELECT COUNT(pid) FROM pums").columns == ["count(pid)"]


def test_count_distinct_and_other_uses_of_the_unit_are_unchanged(pums):
    assert exact(pums, "SELECT COUNT(DISTINCT pid) FROM pums") == [(1000,)]
    assert refusal(pums, "SELECT SUM(pid) FROM pums").code == "DP203"
    assert refusal(pums, "SELECT COUNT(*) FROM pums WHERE pid > 3").code == "DP203"


# --- SmartNoise's dialect ----------------------------------------------------------------------------

def test_top_var_std_and_a_schema_qualified_table(pums):
    rows = exact(pums, "SELECT TOP 2 educ, VAR(age) AS v, STD(age) AS s FROM PUMS.PUMS GROUP BY educ")
    truth = plain("SELECT educ, VAR_SAMP(age), STDDEV_SAMP(age) FROM pums GROUP BY educ ORDER BY educ LIMIT 2")
    assert [r[0] for r in rows] == [1, 2]
    assert [v for r in rows for v in r[1:]] == pytest.approx([v for r in truth for v in r[1:]], rel=1e-3)


@pytest.mark.parametrize("table", ["main.pums", "memory.main.pums", "temp.pums", "system.main.pums"])
def test_names_that_say_where_duckdb_looks_stay_refused(pums, table):
    assert refusal(pums, f"SELECT COUNT(*) FROM {table}").code == "DP201"


def test_a_column_named_top_still_parses():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range % 2 AS top FROM range(10)")
    db = dpsql.connect(con, ledger=":memory:", policy={"budget": {"epsilon": 10}, "tables": {"t": {
        "privacy_unit": "row", "columns": {"top": {"keys": [0, 1]}}}}})
    assert exact(db, "SELECT top, COUNT(*) FROM t GROUP BY top") == [(0, 5), (1, 5)]
