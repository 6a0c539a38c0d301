"""Totality by construction (dpsql/sql/totality.py): what runs bare cannot fail on any row, what can
fail runs under TRY() and TRY() catches it, strings cannot grow without bound, and literals never
drag a column into a DECIMAL that overflows."""
import itertools

import duckdb
import pytest
from sqlglot import exp

import dpsql
from dpsql.sql.totality import literals_as_doubles, is_total, narrow_dates, string_length, string_too_long
from tests.support import sql_tree
from tests.support.adversarial import COLUMNS, FUNCTIONS, TYPES, adversarial_table, parse

@pytest.fixture(scope="module")
def con():
    return adversarial_table()


def runs_on_every_row(con, text, wrap_try):
    """Evaluate on every adversarial row; binder errors (free refusals, data-independent) skip."""
    node = literals_as_doubles(parse(text))
    expression = f"TRY({node.sql('duckdb')})" if wrap_try else node.sql("duckdb")
    try:
        relation = con.sql(f"SELECT {expression} FROM t")
    except duckdb.Error:
        return None   # refused while binding: the same for every database
    relation.fetchall()
    return True


LITERALS = ["0", "1", "-1", "0.5", "0.0000000000000000000000000000000001", "1e300", "-1e300",
            "99999999999999999999", "-9223372036854775808", "99999999", "999999999", "-12345678.5", "'x'", "''",
            "TRUE", "NULL",
            "DATE '2020-01-01'", "DATE '0001-01-01'", "DATE '9999-12-31'", "TIMESTAMP '2020-01-01 10:00:00'",
            "TIMESTAMP '0001-01-01 00:00:00'", "TIMESTAMP '9999-12-31 23:59:59.999999'"]
COMPARISONS = ["=", "<>", "<", ">=", "<=", ">"]


def total_candidates():
    for c, op, lit in itertools.product(COLUMNS, COMPARISONS, LITERALS):
        yield f"{c} {op} {lit}"
    for a, b in itertools.combinations(COLUMNS, 2):
        yield f"{a} < {b}"
        # choices (issue 27): total when their operands are of one kind, whose common type cannot fail
        yield f"CASE WHEN b THEN {a} ELSE {b} END > 0"
        yield f"CASE WHEN NOT b THEN {a} ELSE {b} END > 0"   # each row takes either branch in one of them
        yield f"coalesce({a}, {b}, 0.5) = 1"
        yield f"greatest({a}, {b}) IN (1, 'x')"
    for c in COLUMNS:
        yield f"nullif({c}, 0)"
        yield f"{c} / 2 > 1"
        yield f"TRY_CAST(s AS INTEGER) + 0 > {c}"
    for c in COLUMNS:
        yield f"{c} IN (1, 300, -129, 0.5, 1e300)"
        yield f"{c} BETWEEN -1 AND 0.5"
        yield f"{c} IS NULL"
        yield f"NOT {c}"
        yield f"{c} AND TRUE"
        yield f"-{c}"
        # issue 27: what is bare runs faster and prints for Spark without a guard
        for shape in ("abs({c})", "floor({c})", "ceil({c})", "floor({c} / 10) * 10", "{c} + 1e300", "{c} * -1e300",
                      "{c} - {c}", "{c} // 7", "{c} // -1", "{c} % -1", "{c} % 7", "-{c} // 2", "lower({c})",
                      "upper({c})", "length({c})", "replace({c}, 'x', 'yy')", "{c} > -1.5e0", "{c} >= -1e400",
                      "abs({c} - 50) < 10", "round({c})", "CAST(round({c}) AS BIGINT) % 2 = 0"):
            yield shape.format(c=c)
        yield f"{c} LIKE 'x%\\'"
        for part in ("year({c})", "month({c})", "day({c})", "quarter({c})", "dayofweek({c})", "dayofyear({c})",
                     "extract(year FROM {c})", "extract(week FROM {c})", "extract(isodow FROM {c})",
                     "year({c}) > 2020", "quarter({c}) = 1.5", "dayofweek({c}) < bi", "month({c}) IN (1, 300)"):
            yield part.format(c=c)


@pytest.mark.parametrize("text", list(total_candidates()))
def test_what_is_called_total_never_raises(con, text):
    """Anything is_total accepts runs bare on the extremes of every type without an error."""
    if is_total(parse(text), TYPES.get):
        runs_on_every_row(con, text, wrap_try=False)


@pytest.mark.parametrize("template", FUNCTIONS)
def test_every_allowed_function_fails_only_in_ways_try_catches(con, template):
    """Under TRY(), every allowlisted function and operator, given the extremes of every type, either
    binds and runs on every row, or is refused while binding (before anything is spent)."""
    ran = [runs_on_every_row(con, template.format(n=c), wrap_try=True) for c in COLUMNS]
    assert any(ran), f"{template} never binds: the test does not exercise it"


def test_try_does_not_catch_everything(con):
    """Why the allowlist matters: a LIKE pattern ending in its ESCAPE character fails at run time,
    under TRY() too, and only when a row reaches it (so ESCAPE is not in the dialect)."""
    with pytest.raises(duckdb.Error):
        con.sql("SELECT TRY(s LIKE '\\' ESCAPE '\\') FROM t").fetchall()
    assert con.sql("SELECT TRY(s LIKE '\\' ESCAPE '\\') FROM t WHERE false").fetchall() == []


def test_decimal_literals_become_doubles():
    """0.5 would be a DECIMAL in DuckDB, and a BIGINT column compared with it is cast to a DECIMAL
    that a large value overflows; as a DOUBLE it cannot."""
    assert literals_as_doubles(parse("bi > 0.0000000000000000000000000000000001 AND d < 1.5 AND i = 3")).sql() == \
        "bi > 0.0000000000000000000000000000000001e0 AND d < 1.5e0 AND i = 3"


# What a DATE or TIMESTAMP column is compared with: its own type's literals at the calendar's edges,
# the other type's (at midnight or not), strings naming a day or an instant, and strings that do not.
TEMPORAL_OPERANDS = ["DATE '2020-01-01'", "DATE '0001-01-01'", "DATE '9999-12-31'", "TIMESTAMP '1998-09-02 00:00:00'",
                     "TIMESTAMP '2020-01-01 10:00:00'", "TIMESTAMP '9999-12-31 23:59:59.999999'", "'2020-06-01'",
                     "'1992-01-01 12:30:00'", "'2020-02-30'", "'infinity'", "'5881580-07-10'"]


def temporal_comparisons():
    for c, op, lit in itertools.product(["dt", "ts"], COMPARISONS, TEMPORAL_OPERANDS):
        yield f"{c} {op} {lit}"
    for c in ("dt", "ts"):
        yield f"{c} BETWEEN DATE '1992-01-01' AND TIMESTAMP '1998-09-02 00:00:00'"
        yield f"{c} BETWEEN '1992-01-01' AND '1998-12-31'"
        yield f"{c} IN (DATE '2020-01-01', '2020-06-01', TIMESTAMP '2021-01-01 00:00:00')"


@pytest.mark.parametrize("text", list(temporal_comparisons()))
def test_dates_compared_with_literals_of_their_type_are_total_and_unchanged(con, text):
    """A comparison's literals written in its DATE or TIMESTAMP column's type (narrow_dates) give the
    same value on every row as DuckDB gives the comparison as written (extremes, infinities, NULL
    included); and a comparison of one temporal type runs bare without an error."""
    narrowed = narrow_dates(parse(text), TYPES.get)
    written = parse(text)
    if isinstance(written, exp.Between):   # SQL's meaning of BETWEEN: two comparisons (narrow_dates)
        written = exp.and_(exp.GTE(this=written.this, expression=written.args["low"]),
                           exp.LTE(this=written.this.copy(), expression=written.args["high"]))
    expected = con.sql(f"SELECT TRY({written.sql('duckdb')}) FROM t").fetchall()
    assert con.sql(f"SELECT TRY({narrowed.sql('duckdb')}) FROM t").fetchall() == expected
    if is_total(narrowed, TYPES.get):
        assert con.sql(f"SELECT {narrowed.sql('duckdb')} FROM t").fetchall() == expected


def test_which_date_comparisons_run_bare():
    def total(text):
        return is_total(narrow_dates(parse(text), TYPES.get), TYPES.get)
    bare = ["dt <= DATE '1998-09-02'", "dt <= TIMESTAMP '1998-09-02 00:00:00'", "dt > '2020-06-01'",
            "ts >= TIMESTAMP '2020-01-01 10:00:00'", "ts < DATE '2020-01-01'", "ts = '2020-01-01 10:00:00'",
            "dt BETWEEN DATE '1994-01-01' AND '1994-12-31'", "dt IN (DATE '2020-01-01', '2020-01-02')",
            "dt < DATE '9999-12-31' AND ts > TIMESTAMP '0001-01-01 00:00:00'", "year(dt) > 2020",
            "extract(month FROM ts) IN (1, 2)"]
    bare.append("dt BETWEEN DATE '1992-01-01' AND TIMESTAMP '1998-09-02 00:00:00'")
    tried = ["dt < TIMESTAMP '1998-09-02 10:00:00'", "dt BETWEEN DATE '1992-01-01' AND TIMESTAMP '1998-09-02 10:00:00'",
             "dt IN (DATE '1992-01-01', TIMESTAMP '1998-09-02 00:00:00')", "dt > '2020-02-30'", "dt > 'infinity'", "dt < ts",
             "dt > DATE '2020-02-30'", "dt = 1", "year(dt) > '2020'", "dt + 1 > DATE '2020-01-01'"]
    assert all(total(t) for t in bare), [t for t in bare if not total(t)]
    assert not any(total(t) for t in tried), [t for t in tried if total(t)]


@pytest.mark.parametrize("text", [f"{c} {op} {lit}" for c in ("de", "dw") for op in ("<", "=")
                                  for lit in ("0.5", "-12345678.5", "99999999", "999999999", "1234567890123456.5",
                                              "99999999999999999999", "0.0000000000000000000000000000000001")]
                         + ["dw BETWEEN 0.5 AND 12345678", "dw IN (99999999, 0.000000000000000000000000000001)"]
                         # an earlier stage's released value (frontend/stages.py): compared in DOUBLE
                         + [f"{c} > CAST({v} AS DOUBLE)" for c in ("de", "dw")
                            for v in ("5017.600795381137", "-1.7976931348623157e308", "1e400", "99999999999999999999")])
def test_decimal_columns_against_decimal_literals(con, text):
    """Where is_total runs before the literals become DOUBLEs (lower/guard.py's safe), a DECIMAL literal
    keeps DuckDB's DECIMAL: what is called total runs bare on the extremes of both DECIMAL columns."""
    if is_total(parse(text), TYPES.get):
        con.sql(f"SELECT {parse(text).sql('duckdb')} FROM t").fetchall()


def test_the_classifier_knows_what_can_fail():
    total = ["bi > 0.5", "ti = 1000", "s = 'x'", "b = TRUE", "ubi > -1", "d IN (1, 2.5)", "s LIKE 'a%'",
             "NOT b", "bi IS NULL", "ti < ubi", "year(dt)", "extract(week FROM ts)", "dayofweek(dt)",
             "de > 1", "de BETWEEN 0.05 AND 0.07", "dw < 99999999", "dw IN (1, -0.5)", "dw > 1e300",
             "de > CAST(5017.6 AS DOUBLE)", "dw <= -CAST(1e300 AS DOUBLE)"]
    partial = ["dw < 999999999", "dw BETWEEN 0.5 AND 123456789", "de > i + 1", "uhi > -1", "-ti > 0", "ti + 1 > 0", "s = 5", "dt > '2020-01-01'", "NOT ti",
               "dt < ts", "bi > 99999999999999999999", "s LIKE s", "year(s)", "extract(epoch FROM ts)",
               "year(dt + 1)", "month(bi)",
               "de > CAST(s AS DOUBLE)", "de > TRY_CAST(5017.6 AS DOUBLE)"]
    assert all(is_total(parse(t), TYPES.get) for t in total)
    assert not any(is_total(parse(t), TYPES.get) for t in partial)


@pytest.mark.parametrize("text, bound", [
    ("s", (1, 0)), ("'abc'", (0, 3)), ("s || s || 'x'", (2, 1)), ("upper(s)", (2, 0)),
    ("replace(s, 'a', 'bbb')", (3, 0)), ("replace(replace(s, 'ab', 'c'), 'c', 'dd')", (2, 0)),
    ("left(s, 2)", (1, 0)), ("CAST(bi AS VARCHAR)", (0, 64)), ("length(s)", (0, 64)),
])
def test_string_length_bounds(text, bound):
    assert string_length(parse(text), TYPES.get) == bound


@pytest.mark.parametrize("text", [
    "replace(replace(s, 'a', 'aaaaaaaaaa'), 'a', 'aaaaaaaaaa')",
    "length(replace(replace(s, 'a', 'aaaaaaaaaa'), 'a', 'aaaaaaaaaa')) > 1",   # only its length is used
    "replace(s, s, 'x')", "replace(s, '', 'x')", "replace(s, 'a', s)",
])
def test_strings_that_could_blow_up_are_refused(text):
    assert string_too_long(parse(text), TYPES.get) is not None


def test_nested_replace_is_refused_before_it_can_exhaust_memory(db):
    """The attack: memory (and time) that only explodes on the database where a row holds the
    matched character. The query is refused for free, with DP313 and a caret on the REPLACE."""
    sql = ("SELECT COUNT(*) FROM people WHERE length(" + "replace(" * 8 + "zip" +
           ", '0', '00000000000000000000')" * 8 + ") > 1")
    err = pytest.raises(dpsql.DpsqlError, db.sql, sql).value
    assert err.code == "DP313" and err.rule == "bounded_strings"
    assert sql[err.start:err.end + 1].lower().startswith("replace(")


def test_the_test_seam_couples_the_choice_of_partitions(db):
    """dpsql.testing ranks a unit's partitions by a hash of (unit, key), so two runs, and two
    neighbouring databases, choose the same L partitions for every other unit; db.sql salts the hash
    with a parameter the executor draws fresh on every run (lower/bounding.py)."""
    from dpsql import testing
    sql = "SELECT clinic, SUM(cost) FROM visits GROUP BY clinic"   # 3 clinics, L = 2: sampled
    seam, drawn = sql_tree.tree(testing.lower(db, sql)), sql_tree.tree(db.explain(sql))
    assert sql_tree.calls(seam, "hash") and not sql_tree.has(seam, exp.Placeholder)
    assert [len(c.expressions) for c in sql_tree.calls(drawn, "hash")] == [
        len(c.expressions) + 1 for c in sql_tree.calls(seam, "hash")] and sql_tree.has(drawn, exp.Placeholder)
    assert not sql_tree.has(drawn, exp.Rand)
    assert testing.run(db, sql).rows == testing.run(db, sql).rows
