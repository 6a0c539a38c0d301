"""The guard: what the dialect accepts, and what it refuses with which code and where."""
import pytest

import dpsql
from conftest import refusal

ACCEPTED = [
    "SELECT COUNT(*) FROM people",
    "select count(*) from PEOPLE",
    'SELECT COUNT(*) FROM "people"',
    "SELECT COUNT(income), SUM(income), AVG(income) FROM people",
    "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex",
    "SELECT sex, state, AVG(age) FROM people GROUP BY sex, state",
    "SELECT p.sex, COUNT(*) FROM people AS p GROUP BY p.sex",
    "SELECT sex, COUNT(*) FROM people GROUP BY 1",
    "SELECT COUNT(*) FROM people WHERE age >= 18 AND (income < 500 OR sex = 'F') AND NOT state IN ('CA', 'NY')",
    "SELECT COUNT(*) FROM people WHERE age BETWEEN 20 AND 30 AND income IS NOT NULL",
    "SELECT COUNT(*) FROM people WHERE income > -1.5 AND zip = '00042'",
    "SELECT COUNT(*) FROM people WHERE joined > '2020-06-01'",
    "SELECT COUNT(*) FROM people WHERE active",
    "SELECT COUNT(*) FROM people WHERE active = TRUE AND zip IS NULL",
    "SELECT state, COUNT(*) AS n FROM people GROUP BY state HAVING COUNT(*) > 10 ORDER BY n DESC LIMIT 2",
    "SELECT state, SUM(income) AS s FROM people GROUP BY state ORDER BY AVG(age) LIMIT 2 OFFSET 1",
    "SELECT state, COUNT(*) FROM people GROUP BY state HAVING state <> 'TX'",
    "SELECT COUNT(*), COUNT(*) FROM people",
    "SELECT clinic, COUNT(*), AVG(cost) FROM visits GROUP BY clinic",
    "SELECT SUM(cost) FROM visits WHERE clinic = 'a'",
    # Scalar expressions: evaluated under TRY(), so no row can make the query fail.
    "SELECT COUNT(*) FROM people WHERE age + 1 > 30 AND income * 2 < 1000",
    "SELECT COUNT(*) FROM people WHERE CAST(zip AS INTEGER) > 10",
    "SELECT COUNT(*) FROM people WHERE income / (age - age) > 1",
    "SELECT COUNT(*) FROM people WHERE age * 9223372036854775807 > 0",
    "SELECT COUNT(*) FROM people WHERE age // 0 = 1 OR age % 0 = 1",
    "SELECT COUNT(*) FROM people WHERE regexp_matches(zip, '(')",
    "SELECT COUNT(*) FROM people WHERE lower(state) LIKE 'c%' AND length(zip) = 5",
    "SELECT COUNT(*) FROM people WHERE year(joined) = 2021 AND month(joined) BETWEEN 1 AND 6",
    "SELECT COUNT(*) FROM people WHERE COALESCE(income, 0) > 10 AND abs(age - 50) < 10",
    "SELECT COUNT(*) FROM people WHERE CASE WHEN age > 60 THEN income ELSE 0 END > 100",
    "SELECT CASE WHEN state IN ('CA', 'NY') THEN 'coast' ELSE 'other' END AS region, COUNT(*) FROM people GROUP BY region",
    "SELECT upper(sex) AS s, COUNT(*) FROM people GROUP BY upper(sex)",
    "SELECT COUNT(*) * 2 AS twice, ROUND(AVG(income), 1) AS mean FROM people",
    "SELECT state, SUM(income) / COUNT(*) AS per_person FROM people GROUP BY state",
    "SELECT 1 AS one, COUNT(*) FROM people",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_accepted_queries_are_answered(db, sql):
    result = db.sql(sql)
    assert result.fetchall(), sql


REFUSED = [
    # (sql, code, text under the caret)
    ("SELEC COUNT(*) FROM people", "DP100", None),
    ("SELECT COUNT(*) FROM people; SELECT 1", "DP101", None),
    ("DROP TABLE people", "DP101", None),
    ("INSERT INTO people VALUES (1)", "DP101", None),
    ("PRAGMA database_list", "DP101", None),
    ("SET threads = 1", "DP101", None),
    ("COPY people TO 'out.csv'", "DP101", None),
    ("SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people", "DP101", None),
    ("SELECT DISTINCT sex FROM people", "DP102", None),
    ("SELECT COUNT(*) FROM read_csv('/etc/passwd')", "DP103", "read_csv('/etc/passwd'"),
    ("SELECT COUNT(*) FROM people WHERE random() > 0.5", "DP103", None),
    ("SELECT setseed(0.5)", "DP103", None),
    ("SELECT COUNT(*) FROM people WHERE current_setting('threads') = '1'", "DP103", None),
    ("SELECT COUNT(*) FROM '/etc/passwd'", "DP201", "'/etc/passwd'"),
    ("SELECT COUNT(*) FROM information_schema.tables", "DP201", None),
    ("SELECT COUNT(*) FROM main.people", "DP201", None),
    ("SELECT COUNT(*) FROM secrets", "DP201", "secrets"),
    ("SELECT COUNT(*)", "DP201", None),
    ("SELECT COUNT(height) FROM people", "DP202", "height"),
    ("SELECT COUNT(x.age) FROM people AS p", "DP202", "x.age"),
    ("SELECT COUNT(*) FROM people WHERE ssn = '1'", "DP203", "ssn"),
    ("SELECT COUNT(*) FROM people WHERE SSN <> '1'", "DP203", "SSN"),
    ('SELECT COUNT(*) FROM people WHERE "Ssn" IS NULL', "DP203", None),
    ("SELECT COUNT(ssn) FROM people", "DP203", "ssn"),
    ("SELECT COUNT(*) FROM visits WHERE person_id = 3", "DP203", "person_id"),
    ("SELECT COUNT(*) FROM people GROUP BY ssn", "DP203", "ssn"),
    ("SELECT COUNT(*) FROM people p JOIN visits v ON p.id = v.person_id", "DP204", None),
    ("SELECT * FROM people", "DP301", "*"),
    ("SELECT age FROM people", "DP301", "age"),
    ("SELECT age, COUNT(*) FROM people GROUP BY sex", "DP301", "age"),
    ("SELECT state, COUNT(*) FROM people GROUP BY state ORDER BY age", "DP301", "age"),
    ("SELECT SUM(zip) FROM people", "DP302", None),
    ("SELECT SUM(age + 1) FROM people", "DP302", None),
    ("SELECT MAX(age) FROM people", "DP303", None),
    ("SELECT COUNT(DISTINCT age) FROM people", "DP303", None),
    ("SELECT COUNT(*) FROM people WHERE COUNT(*) > 1", "DP305", None),
    ("SELECT SUM(COUNT(*)) FROM people", "DP305", None),
    ("SELECT zip, COUNT(*) FROM people GROUP BY zip", "DP304", "zip"),
    ("SELECT COUNT(*) FROM people GROUP BY age + 1", "DP304", "age + 1"),
    ("SELECT COUNT(*) FROM people WHERE zip = 42", "DP306", None),
    ("SELECT COUNT(*) FROM people WHERE age = '42'", "DP306", None),
    ("SELECT COUNT(*) FROM people WHERE age = zip", "DP306", None),
    ("SELECT COUNT(*) FROM people WHERE zip", "DP306", "zip"),
    ("SELECT COUNT(*) FROM people LIMIT age", "DP307", None),
    ("SELECT COUNT(*) FROM people WHERE age IN (SELECT age FROM people)", "DP102", None),
    ("WITH t AS (SELECT * FROM people) SELECT COUNT(*) FROM t", "DP102", None),
    ("SELECT COUNT(*) OVER () FROM people", "DP102", None),
    ("SELECT COUNT(*) FROM people WHERE repeat(zip, 1000000) = ''", "DP103", None),
    ("SELECT COUNT(*) FROM people WHERE now() > joined", "DP103", None),
    ("SELECT COUNT(*) FROM people WHERE getenv('HOME') = ''", "DP103", None),
    ("SELECT COUNT(*) FROM people WHERE nextval('s') > 0", "DP103", None),
    ("SELECT COUNT(*) FROM people WHERE uuid() IS NULL", "DP103", None),
    ("SELECT COUNT(*) FROM people WHERE CAST(zip AS INTEGER[]) IS NULL", "DP102", None),
    ("SELECT CASE WHEN zip = '1' THEN 1 ELSE 0 END AS z, COUNT(*) FROM people GROUP BY z", "DP304", None),
    ("SELECT age + 1, COUNT(*) FROM people", "DP301", "age"),
    ("SELECT lower(ssn) AS s, COUNT(*) FROM people GROUP BY s", "DP203", "ssn"),
    ("SELECT state, COUNT(*) FROM people GROUP BY state HAVING age > 3", "DP301", "age"),
]


@pytest.mark.parametrize("sql, code, caret", REFUSED)
def test_refused_queries_name_a_code_and_a_position(db, sql, code, caret):
    before = db.budget.spent_epsilon
    err = refusal(db, sql)
    assert err.code == code, err.format()
    assert db.budget.spent_epsilon == before, "a refused query spends nothing"
    if caret is not None:
        assert sql[err.start:err.end + 1] == caret, err.format()
        assert "^" * len(caret) in err.format()


def test_error_format_has_line_column_and_caret(db):
    err = refusal(db, "SELECT COUNT(*)\nFROM people\nWHERE ssn = 'x'")
    text = err.format()
    assert text.startswith("error[DP203]: column 'ssn' identifies a person")
    assert "--> line 3, column 7" in text
    assert "3 | WHERE ssn = 'x'" in text
    assert (err.line, err.col) == (3, 7)


def test_private_key_refusal_says_what_to_do(db):
    err = refusal(db, "SELECT zip, COUNT(*) FROM people GROUP BY zip")
    assert "declare `keys`" in err.hint and "delta" in err.hint


def test_unbounded_sum_says_what_to_do(db):
    err = refusal(db, "SELECT SUM(zip) FROM people")
    assert "lower and upper" in err.hint


def test_every_refusal_is_a_dpsql_error_subclass(db):
    for sql, _, _ in REFUSED:
        with pytest.raises(dpsql.DpsqlError):
            db.sql(sql)


def test_an_expression_key_releases_its_values_over_the_public_keys(db):
    rows = db.sql("SELECT CASE WHEN state IN ('CA', 'NY') THEN 'coast' ELSE 'other' END AS region, "
                  "COUNT(*) AS n FROM people GROUP BY region").fetchall()
    assert [r[0] for r in rows] == ["coast", "other"]


def test_expressions_that_fail_on_some_rows_are_null_there_not_errors(db):
    plan = db.explain("SELECT COUNT(*) FROM people WHERE CAST(zip AS INTEGER) > 10")
    assert "TRY(" in plan.rewritten_sql
    # zip values are digits here, but a row failing the cast would only be left out.
    assert db.sql("SELECT COUNT(*) FROM people WHERE CAST(state AS INTEGER) > 10").fetchall()


def test_post_processing_uses_the_released_values(db):
    res = db.sql("SELECT COUNT(*) AS n, COUNT(*) * 2 AS twice FROM people")
    (n, twice), = res.fetchall()
    assert twice == 2 * n
    assert len(res.plan.measurements) == 1, "the same COUNT(*) is measured once"
