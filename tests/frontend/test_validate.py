"""The guard, beyond the corpora in grammar/ (tests/contracts/test_grammar.py): messages, hints, semantics."""
import pytest
from sqlglot import exp

from tests.support import sql_tree
from tests.support.checks import refusal
from tests.support.fixture import make_database


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
    err = refusal(db, "SELECT SUM(income / age) FROM people")
    assert "lower and upper" in err.hint


def test_an_expression_key_releases_its_values_over_the_public_keys(db):
    rows = db.sql("SELECT CASE WHEN state IN ('CA', 'NY') THEN 'coast' ELSE 'other' END AS region, "
                  "COUNT(*) AS n FROM people GROUP BY region").fetchall()
    assert [r[0] for r in rows] == ["coast", "other"]


def test_expressions_that_fail_on_some_rows_are_null_there_not_errors(db):
    plan = db.explain("SELECT COUNT(*) FROM people WHERE CAST(zip AS INTEGER) > 10")
    assert sql_tree.has(sql_tree.tree(plan), exp.TryCast)
    # zip values are digits here, but a row failing the cast would only be left out.
    assert db.sql("SELECT COUNT(*) FROM people WHERE CAST(state AS INTEGER) > 10").fetchall()


@pytest.mark.parametrize("where, guarded", [
    ("age > 30", False),                                   # numbers with numbers: cannot fail
    ("age BETWEEN -5 AND 30 AND NOT (income <= 2.5)", False),
    ("state IN ('CA', 'NY') OR sex = 'F' OR zip IS NULL", False),
    ("active = true", False),
    ("CAST(state AS INTEGER) > 5", True),                  # a cast: fails on 'CA'
    ("age > 99999999999999999999", True),                  # a literal too large for the column
    ("age + 1 > 30", True),                                # arithmetic can overflow
    ("ABS(age) > 3", True),                                # ABS of the smallest BIGINT overflows
    ("LENGTH(zip) > 3", False),                            # a string's length: cannot fail (issue 27)
    ("FLOOR(income / 10) * 10 > 3 AND age // 7 = 2", False),   # DOUBLE arithmetic, // by a literal
])
def test_where_is_guarded_by_try_unless_no_row_can_make_it_fail(db, where, guarded):
    sql = f"SELECT COUNT(*) FROM people WHERE {where}"
    plan = db.explain(sql)
    written = sql_tree.tree(plan)   # a failing operation is guarded alone: TRY(op) or TRY_CAST
    assert (sql_tree.has(written, exp.Try) or sql_tree.has(written, exp.TryCast)) is guarded
    # Unguarded, the filter selects the rows DuckDB's own WHERE selects (noise 0 but for e^-100).
    if not guarded:
        (n,), = db.sql(sql, epsilon=100).fetchall()
        assert n == make_database().execute(sql).fetchall()[0][0]


def test_post_processing_uses_the_released_values(db):
    res = db.sql("SELECT COUNT(*) AS n, COUNT(*) * 2 AS twice FROM people")
    (n, twice), = res.fetchall()
    assert twice == 2 * n
    assert len(res.plan.measurements) == 1, "the same COUNT(*) is measured once"


@pytest.mark.parametrize("having, guarded", [
    ("COUNT(*) > 10", False),                 # a released number compared with a number: cannot fail
    ("AVG(age) / COUNT(*) > 0.5", False),     # the ratio rule's divisor is NULL where it is <= 0
    ("state <> 'TX'", False),                 # a key column's value with a string of its type
    ("state > 5", True),                      # a string key compared with a number: DuckDB casts, may fail
])
def test_having_over_released_values_is_guarded_per_operation(db, having, guarded):
    """HAVING and expressions over outputs read released values, typed by their slots (lower/post.py
    slot_types): what cannot fail runs bare, as a WHERE's total parts do."""
    plan = db.explain(f"SELECT state, COUNT(*) AS n FROM people GROUP BY state HAVING {having}")
    final = sql_tree.tree(plan)
    where = final.args["where"].this
    assert (where.find(exp.Try) is not None or where.find(exp.TryCast) is not None) is guarded, where.sql()
