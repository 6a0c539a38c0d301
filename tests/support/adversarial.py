"""The adversarial table of the totality tests (tests/sql/): a column of each type, rows holding
each type's extremes, and the allowlisted functions and operators to try on them."""
import duckdb
import sqlglot

from dpsql.frontend.dialect import Dpsql

TYPES = {
    "ti": "TINYINT", "si": "SMALLINT", "i": "INTEGER", "bi": "BIGINT", "hi": "HUGEINT", "uti": "UTINYINT",
    "ubi": "UBIGINT", "uhi": "UHUGEINT", "de": "DECIMAL(18,3)", "f": "FLOAT", "d": "DOUBLE", "s": "VARCHAR",
    "b": "BOOLEAN", "dt": "DATE", "ts": "TIMESTAMP", "dw": "DECIMAL(38,30)",
}
# Each row holds the extremes of every type: minimum, maximum, NaN, infinities, huge and empty
# strings, the edges of the calendar, NULL.
ROWS = [
    "(-128, -32768, -2147483648, -9223372036854775808, -170141183460469231731687303715884105727, 0, 0, 0, "
    "-999999999999999.999, '-inf', 'nan', '', false, '-5877641-06-25', '-290308-12-22 00:00:00', "
    "-99999999.999999999999999999999999999999)",
    "(127, 32767, 2147483647, 9223372036854775807, 170141183460469231731687303715884105727, 255, "
    "18446744073709551615, 340282366920938463463374607431768211455, 999999999999999.999, 'inf', 1e308, "
    "repeat('ß\u0301x', 30000), true, '5881580-07-10', '294247-01-10 04:00:54', "
    "99999999.999999999999999999999999999999)",
    "(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1e308, '\\', NULL, 'infinity', '-infinity', 0)",
    "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]


def adversarial_table() -> duckdb.DuckDBPyConnection:
    """A connection with table t: one column of each of TYPES, the rows of ROWS."""
    c = duckdb.connect()
    c.execute(f"CREATE TABLE t ({', '.join(f'{name} {t}' for name, t in TYPES.items())})")
    for row in ROWS:
        c.execute(f"INSERT INTO t VALUES {row}")
    return c


def parse(text):
    return sqlglot.parse_one(text, read=Dpsql)


COLUMNS = list(TYPES)

FUNCTIONS = [
    "abs({n})", "sign({n})", "round({n})", "round({n}, 2)", "floor({n})", "ceil({n})", "sqrt({n})", "ln({n})",
    "log10({n})", "exp({n})", "pow({n}, {n})", "{n} + {n}", "{n} - {n}", "{n} * {n}", "{n} / {n}", "{n} // {n}",
    "{n} % {n}", "-{n}", "greatest({n}, {n})", "least({n}, {n})", "coalesce({n}, 1)", "nullif({n}, 0)",
    "CASE WHEN {n} > 0 THEN {n} ELSE -{n} END", "if({n} > 0, 1, 0)", "CAST({n} AS TINYINT)", "CAST({n} AS INTEGER)",
    "CAST({n} AS BIGINT)", "CAST({n} AS HUGEINT)", "CAST({n} AS UBIGINT)", "CAST({n} AS DOUBLE)",
    "CAST({n} AS DECIMAL)", "CAST({n} AS VARCHAR)", "CAST({n} AS DATE)", "CAST({n} AS BOOLEAN)",
    "TRY_CAST({n} AS TINYINT)", "lower({n})", "upper({n})", "length({n})", "trim({n})", "substring({n}, 2, 3)",
    "concat({n}, 'x')", "{n} || 'x'", "starts_with({n}, 'x')", "contains({n}, 'x')", "left({n}, -2)",
    "right({n}, 3)", "replace({n}, 'x', 'yy')", "year({n})", "month({n})", "day({n})", "quarter({n})",
    "dayofweek({n})", "dayofyear({n})", "extract(year FROM {n})", "date_trunc('month', {n})",
    "isnan({n})", "isinf({n})", "regexp_matches({n}, '(a|b)+')", "regexp_matches({n}, '(')",
    "{n} LIKE '%x_'", "{n} ILIKE 'SS%'", "CAST({n} AS DATE) + 1", "CAST({n} AS TIMESTAMP)",
]
