"""Each guarded or newly bare operation printed for Spark (engines/spark_dialect.py) means there what it
means on DuckDB: the same value, NULL on the same rows, the same kind of number, on the extremes of
every type Spark holds (marker ``spark``; about 1 minute). The expression is written as the lowering
writes it (sql/guard.py ``per_operation``: each column annotated with its DuckDB type), run by DuckDB
as printed for DuckDB and by Spark (ANSI on) as printed for Spark."""
import math
from decimal import Decimal

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from dpsql.engines.spark_dialect import spark_sql
from dpsql.errors import DpsqlError
from dpsql.sql.build import DoubleRound, fn
from dpsql.sql.guard import per_operation, quoted

pytestmark = pytest.mark.spark

TYPES = {"ti": "TINYINT", "si": "SMALLINT", "i": "INTEGER", "bi": "BIGINT", "f": "FLOAT", "d": "DOUBLE",
         "de": "DECIMAL(18,3)", "s": "VARCHAR"}
# Extremes, signs, ties, zeros of both signs, infinities, NaN, the doubles past 2^52, NULL; strings past
# ASCII (a combining accent, an emoji, a character whose case maps to two).
ROWS = [
    (-128, -32768, -2 ** 31, -2 ** 63, "-3.4e38", "-1.7976931348623157e308", "-999999999999999.999", "''"),
    (127, 32767, 2 ** 31 - 1, 2 ** 63 - 1, "3.4e38", "1.7976931348623157e308", "999999999999999.999", "'ß\u0301x'"),
    (-1, -1, -1, -1, "-0.5", "-0.5", "-2.5", "'😀a'"),
    (1, 7, -7, 7, "2.5", "2.5", "0.5", "'İ0Σ0'"),
    (0, 0, 0, 0, "-0.0", "-0.0", "0", "'00042'"),
    (-7, 25, 100, -9, "'inf'", "'-inf'", "-0.5", "'abc'"),
    (13, -25, 50, 50, "'nan'", "'nan'", "1.5", "'0'"),
    (2, 3, 4, 5, "0.49999997", "0.49999999999999994", "2.5", "'x'"),
    (-2, -3, -4, 4503599627370497, "16777217", "4503599627370497.5", "-1.5", "'ab0'"),
    (None, None, None, None, "NULL", "NULL", "NULL", "NULL"),
]
SHAPES = ["-{c}", "abs({c})", "floor({c})", "ceil({c})", "round({c})", "{c} // 7", "{c} // -1", "{c} % -1", "{c} % 7",
          "{c} // NULLIF({c}, 0)", "{c} % ({c} - 1)", "{c} + 100", "{c} - 1", "{c} * 3", "floor({c} / 10) * 10",
          "abs({c} - 50)", "CAST({c} AS BIGINT)", "CAST({c} / 4 AS INTEGER)", "{c} > -1.5", "{c} >= -1e400",
          "{c} < 1e400", "{c} / 3", "{c} / NULLIF({c}, 0)", "{c} / ({c} - 1)", "{c} / 0.001"]
# Refused on Spark (DP440): DuckDB's DECIMAL arithmetic overflows at its own result type, Spark's is
# wider; FLOAT arithmetic Spark computes in DOUBLE.
REFUSED = {"de // 7", "de // -1", "de % -1", "de % 7", "de // NULLIF(de, 0)", "de % (de - 1)", "de * 3", "abs(de - 50)",
           "de + 100", "de - 1", "f + 100", "f - 1", "f * 3", "floor(f / 10) * 10", "abs(f - 50)",
           "CAST(f / 4 AS INTEGER)", "f % (f - 1)", "f / 3", "f / NULLIF(f, 0)", "f / (f - 1)", "f / 0.001",
           "de / (de - 1)"}
STRINGS = ["length(s)", "replace(s, '0', 'ab')", "replace(s, '0', 'ab') LIKE '%ab%'", "length(s) = 5"]


@pytest.fixture(scope="module")
def tables(spark):
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (id INTEGER, {', '.join(f'{c} {t}' for c, t in TYPES.items())})")
    for n, row in enumerate(ROWS):
        values = ", ".join("NULL" if v is None else str(v) for v in row)
        con.execute(f"INSERT INTO t VALUES ({n}, {values})")
    spark.createDataFrame(con.sql("SELECT * FROM t").to_arrow_table()).createOrReplaceTempView("t")
    return con, spark


def same(a, b) -> bool:
    """One value, and one kind of number (a DOUBLE is no BIGINT: FLOOR's type differs between engines), a
    zero's sign included."""
    if a is None or b is None:
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, float) and isinstance(b, float)):
            return False   # a zero's sign too: -0.0 prints, and groups, apart from 0.0 on some engines
        return (math.isnan(a) and math.isnan(b)) or a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return Decimal(a) == Decimal(b)
    return a == b


def both(tables, text):
    """(DuckDB's rows, Spark's rows) of the expression as the lowering writes it, or None where DuckDB
    refuses to bind it (a free refusal, the same for every database)."""
    con, spark = tables
    written = per_operation(quoted(sqlglot.parse_one(text, read="duckdb")), TYPES.get)
    query = exp.select(exp.alias_(written, "v")).from_("t").order_by("id")
    try:
        expected = con.sql(query.sql("duckdb")).fetchall()
    except duckdb.Error:
        return None
    if text in REFUSED:
        with pytest.raises(DpsqlError) as refused:
            spark_sql(query)
        assert refused.value.code == "DP440"
        return None
    return [r[0] for r in expected], [r[0] for r in spark.sql(spark_sql(query)).collect()]


@pytest.mark.parametrize("text", [s.format(c=c) for s in SHAPES for c in TYPES if c != "s"] + STRINGS)
def test_an_operation_gives_duckdbs_values_on_spark(tables, text):
    found = both(tables, text)
    if found is None:
        pytest.skip("refused while binding on DuckDB, or on Spark (REFUSED)")
    expected, got = found
    assert len(expected) == len(got)
    assert all(same(a, b) for a, b in zip(expected, got)), [(a, b) for a, b in zip(expected, got) if not same(a, b)]


@pytest.mark.parametrize("text", ["lower(s)", "upper(s)", "regexp_matches(s, '[[:alpha:]]')"])
def test_what_means_otherwise_on_spark_is_refused(text):
    written = per_operation(quoted(sqlglot.parse_one(text, read="duckdb")), TYPES.get)
    with pytest.raises(DpsqlError) as refused:
        spark_sql(exp.select(written).from_("t"))
    assert refused.value.code == "DP440"


def test_case_maps_do_differ_past_ascii(tables):
    """Why LOWER and UPPER are refused: the engines map 'ß' and 'İ' differently."""
    con, spark = tables
    duck = con.sql("SELECT upper('ß'), lower('İ')").fetchall()[0]
    assert tuple(spark.sql("SELECT upper('ß'), lower('İ')").collect()[0]) != duck


def test_the_exact_totals_cannot_overflow_on_spark_where_duckdb_sums_them(spark):
    """__agg sums the units' BIGINT values (each up to 2^62): DuckDB in HUGEINT, Spark's SUM of a BIGINT in
    BIGINT, which under ANSI fails the job (after the charge) when enough units match. Printed as a
    DECIMAL(38, 0) sum, four units of 2^62 total 2^64 on both engines."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE big AS SELECT range AS u, range // 4 AS g, {2 ** 62}::BIGINT AS v FROM range(4)")
    # Summed in 21-bit parts on Spark: both signs, each part's extremes, NULLs, a group of NULLs only.
    mixed = [-2 ** 62, 2 ** 62 - 1, -1, 2 ** 21 - 1, -2 ** 21, 2 ** 42, -2 ** 42 - 1, 12345, None]
    con.execute("INSERT INTO big VALUES " + ", ".join(f"({i}, 1, {'NULL' if v is None else v})"
                                                      for i, v in enumerate(mixed)) + ", (99, 2, NULL)")
    spark.createDataFrame(con.sql("SELECT * FROM big").to_arrow_table()).createOrReplaceTempView("big")
    sql = "WITH __agg AS (SELECT g, SUM(v) AS s FROM big GROUP BY g) SELECT * FROM __agg ORDER BY g"
    expected = con.sql(sql).fetchall()
    got = [(g, None if s is None else int(s)) for g, s in spark.sql(spark_sql(sqlglot.parse_one(sql, read="duckdb"))).collect()]
    assert got == expected and expected[0][1] == 2 ** 64 and expected[2][1] is None
    assert expected[1][1] == sum(v for v in mixed if v is not None)


def test_a_units_lth_smallest_rank_is_duckdbs(spark):
    """__cut's LIST_MAX(MIN(r, L)) (lower/bounding.py): the L-th smallest value, duplicates counted, NULLs
    skipped; on Spark ARRAY_MAX(MIN_BY(r, r, L))."""
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT * FROM (VALUES (1, 5), (1, 1), (1, 3), (1, 1), (1, NULL), (1, 9), (2, NULL), "
                "(3, 7), (4, -9223372036854775808)) v(u, r)")
    spark.createDataFrame(con.sql("SELECT * FROM r").to_arrow_table()).createOrReplaceTempView("r")
    cut = fn("LIST_MAX", exp.Min(this=exp.column("r"), count=exp.Literal.number(3)))   # as lower/bounding.py writes it
    query = exp.select("u", exp.alias_(cut, "c")).from_("r").group_by("u").order_by("u")
    expected = con.sql(query.sql("duckdb")).fetchall()
    assert [tuple(row) for row in spark.sql(spark_sql(query)).collect()] == expected
    assert expected[0] == (1, 3)


def test_a_units_smallest_values_and_their_rows_are_duckdbs(spark):
    """COUNT(DISTINCT)'s MIN(v, C) (lower/distinct.py: a unit's C smallest distinct values) and UNNEST of
    that list: on Spark MIN_BY(v, v, C) and EXPLODE; the same values per unit, strings by their bytes."""
    con = duckdb.connect()
    con.execute("CREATE TABLE d AS SELECT * FROM (VALUES (1, 'b'), (1, 'a'), (1, 'ß'), (1, 'Z'), (2, 'x'), "
                "(3, '')) v(u, v)")
    spark.createDataFrame(con.sql("SELECT * FROM d").to_arrow_table()).createOrReplaceTempView("d")
    kept = exp.select("u", exp.alias_(exp.Min(this=exp.column("v"), count=exp.Literal.number(3)), "l")).from_("d") \
        .group_by("u")
    rows = exp.select("u", exp.alias_(exp.Unnest(expressions=[exp.column("l")]), "v")).from_(kept.subquery("k"))
    expected = sorted(con.sql(rows.sql("duckdb")).fetchall())
    assert sorted(tuple(r) for r in spark.sql(spark_sql(rows)).collect()) == expected
    assert [v for u, v in expected if u == 1] == ["Z", "a", "b"]


def test_a_quantiles_leaf_index_is_duckdbs(spark):
    """plan/exact.py leaf_index's CAST(FLOOR(x) AS BIGINT): Spark's BIGINT FLOOR where the cast holds."""
    con = duckdb.connect()
    con.execute("CREATE TABLE q AS SELECT * FROM (VALUES (0.0), (-0.0), (0.5), (65535.99999), (65536.0), (2.5)) v(x)")
    spark.createDataFrame(con.sql("SELECT * FROM q").to_arrow_table()).createOrReplaceTempView("q")
    query = exp.select(exp.alias_(exp.cast(fn("FLOOR", exp.column("x")), "BIGINT"), "i")).from_("q")
    assert sorted(r[0] for r in spark.sql(spark_sql(query)).collect()) == sorted(
        r[0] for r in con.sql(query.sql("duckdb")).fetchall()) == [0, 0, 0, 2, 65535, 65536]


def test_a_grid_step_rounds_as_duckdbs(spark):
    """plan/exact.py grid_steps' ROUND of a DOUBLE (a DoubleRound): on Spark RINT with a tie moved away from
    zero, not Spark's ROUND (BigDecimal, 4x slower): half away from zero on the ties of both signs, the
    double just below a half, -0.0, the wholes past 2^52, infinities and NaN, as DuckDB's ROUND."""
    con = duckdb.connect()
    values = ["0.5", "-0.5", "1.5", "-1.5", "2.5", "-2.5", "0.49999999999999994", "-0.49999999999999994",
              "-0.3", "-0.0", "0.0", "1048575.5", "-1048576.5", "4503599627370495.5", "4503599627370497.0",
              "'inf'", "'-inf'", "'nan'", "NULL", "123.4567"]
    con.execute("CREATE TABLE g AS SELECT * FROM (VALUES " + ", ".join(f"({i}, {v}::DOUBLE)" for i, v in
                                                                      enumerate(values)) + ") v(i, x)")
    spark.createDataFrame(con.sql("SELECT * FROM g").to_arrow_table()).createOrReplaceTempView("g")
    step = DoubleRound(this=exp.column("x"))
    query = exp.select("i", exp.alias_(step, "r")).from_("g").order_by("i")
    expected = [r[1] for r in con.sql(query.sql("duckdb")).fetchall()]
    printed = spark_sql(query)
    assert "RINT" in printed and "ROUND" not in printed
    got = [r[1] for r in spark.sql(printed).collect()]
    assert all(same(a, b) for a, b in zip(expected, got)) and len(got) == len(expected), list(zip(expected, got))
    signs = [math.copysign(1, v) for v in expected[8:11]]
    assert signs == [math.copysign(1, v) for v in got[8:11]] == [-1, -1, 1]   # -0.3 and -0.0 round to -0.0
    assert expected[:6] == [1, -1, 2, -2, 3, -3]


def test_a_units_rows_are_shuffled_once_for_its_groups_and_its_window(spark):
    """A user-level stage that numbers a unit's partitions in a window (__bounded) is printed with its rows
    partitioned by the unit (engines/spark_dialect.py ``_by_unit``): Spark's plan then shuffles once where
    it would shuffle for the (unit, key) grouping and again for the window; the same rows either way. A
    stage with no such window is printed without the hint."""
    from dpsql import testing
    from dpsql.engines.spark_dialect import DpsqlSpark
    from dpsql.lower.program import split
    from tests.support.fixture import POLICY, make_database
    import dpsql

    con = make_database()
    spark.createDataFrame(con.sql("SELECT * FROM visits").to_arrow_table()).createOrReplaceTempView("visits")
    db = dpsql.connect(con, ledger=":memory:", policy=POLICY)

    def stage(sql):
        plan = testing.lower(db, sql, 1.0)
        return dict(split(plan.lowered, private={"people", "visits", "prescriptions"}).collected)["__agg"]

    def shuffles(text):
        text = text.replace(":__dpsql_salt", "7")
        physical = spark.sql(f"EXPLAIN {text}").collect()[0][0]
        return physical.count("Exchange "), sorted(tuple(r) for r in spark.sql(text).collect())

    # a COUNT's __rows names the unit itself; a SUM's reads it from a subquery (__read)
    for sql in ("SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic",
                "SELECT clinic, SUM(cost) AS s FROM visits GROUP BY clinic"):
        windowed = stage(sql)
        hinted, plain = spark_sql(windowed), DpsqlSpark().generate(windowed, copy=True)
        assert hinted.count("REPARTITION(`__unit`)") == 1 and "REPARTITION" not in plain
        (once, rows), (twice, same_rows) = shuffles(hinted), shuffles(plain)
        assert once == twice - 1 and rows == same_rows and rows, sql
    assert "REPARTITION" not in spark_sql(stage("SELECT COUNT(*) AS n FROM visits"))   # no window: no hint
