"""Per-operation guards (dpsql/sql/guard.py ``per_operation``): each operation that can fail on a row
is NULL there on its own, and SQL's NULL propagates by the ordinary rules; what is provably total
runs bare. Checked on the extremes of every type (tests/sql/test_totality.py's table)."""
import random

import duckdb
import pytest
from sqlglot import exp

from dpsql.sql.build import TryOp
from dpsql.sql.guard import guarded, per_operation, quoted
from dpsql.sql.totality import is_total
from tests.support.adversarial import COLUMNS, FUNCTIONS, TYPES, adversarial_table, parse

LOGIC = ["({a}) OR ({b})", "({a}) AND NOT ({b})", "({a}) > 0 OR ({b}) IS NULL", "({a}) = ({b})",
         "CASE WHEN ({a}) > 0 THEN ({b}) ELSE NULL END", "coalesce({a}, {b}) < 3",
         "(({a}) > 0 OR ({b}) IS NULL) AND ({b}) IS NOT NULL"]


@pytest.fixture(scope="module")
def con():
    return adversarial_table()


def nested(rng: random.Random) -> str:
    """An expression of two or three allowlisted functions and operators around columns of any type."""
    inner = rng.choice(FUNCTIONS).format(n=rng.choice(COLUMNS))
    outer = rng.choice(FUNCTIONS).format(n=f"({inner})")
    return rng.choice(LOGIC).format(a=outer, b=rng.choice(FUNCTIONS).format(n=rng.choice(COLUMNS)))


def run(con, node):
    try:
        relation = con.sql(f"SELECT {node.sql('duckdb')} FROM t")
    except duckdb.Error:
        return None   # refused while binding: the same for every database
    return relation.fetchall()


@pytest.mark.parametrize("seed", range(8))
def test_guarded_per_operation_never_fails_on_any_row(con, seed):
    """Whatever the nesting, the guarded expression binds and runs on every row, or never binds."""
    rng = random.Random(seed)
    ran = 0
    for _ in range(80):
        node = quoted(parse(nested(rng)))
        written = per_operation(node, TYPES.get)
        ran += run(con, written) is not None   # raises (a finding) if a row makes it fail
        run(con, guarded(node, TYPES.get))
    assert ran >= 8   # the test exercises something


@pytest.mark.parametrize("text", ["i > 3 OR s = 'x'", "dt < DATE '2020-01-01' AND NOT b", "bi IN (1, 2)",
                                  "CASE WHEN i > 3 THEN d ELSE 0 END > 1", "coalesce(i, bi, 0) = 1",
                                  "TRY_CAST(s AS INTEGER) > 3", "if(b, s, 'x') = 'y'", "nullif(i, 0) < 2"])
def test_what_is_total_is_kept_bare_and_never_fails(con, text):
    node = parse(text)
    assert is_total(node, TYPES.get), text
    assert per_operation(node, TYPES.get) == node
    run(con, node)


def test_only_the_failing_operation_is_null(con):
    """The issue's shape: the cast fails on a row, the OR's other side keeps it (one TRY around the
    whole condition would drop it)."""
    node = per_operation(parse("CAST(s AS INTEGER) > 3 OR i > 99"), TYPES.get)
    assert node.sql("duckdb") == "TRY_CAST(s AS INT) > 3 OR i > 99"
    assert con.sql(f"SELECT count(*) FROM t WHERE {node.sql('duckdb')}").fetchall() == [(1,)]
    assert con.sql("SELECT count(*) FROM t WHERE TRY(CAST(s AS INTEGER) > 3 OR i > 99)").fetchall() == [(0,)]


@pytest.mark.parametrize("text, written", [
    ("d / i", "d / NULLIF(i, 0)"), ("d / 2", "d / 2"), ("d / -2", "d / -2"), ("d / 0", "d / NULLIF(0, 0)"),
    ("i // (i - 1)", "TRY(i // NULLIF(TRY(i - 1), 0))"), ("i % bi", "TRY(i % NULLIF(bi, 0))"),
    ("CAST(d AS INTEGER)", "TRY_CAST(ROUND(d) AS INT)"), ("CAST(de AS BIGINT)", "TRY_CAST(ROUND(de) AS BIGINT)"),
    ("CAST(i AS BIGINT)", "TRY_CAST(i AS BIGINT)"), ("CAST(s AS INTEGER)", "TRY_CAST(s AS INT)"),
    ("CAST(i + 1 AS DOUBLE)", "CAST(TRY(i + 1) AS DOUBLE)"), ("abs(i) + 1 > 2", "TRY(TRY(ABS(i)) + 1) > 2"),
    ("lower(s) LIKE 'a%'", "LOWER(s) LIKE 'a%'"), ("floor(i / 10) * 10", "FLOOR(i / 10) * 10"),
    ("-i", "TRY(-i)"), ("-d", "-d"), ("i // 25", "i // 25"), ("i // -1", "TRY(i // -1)"), ("NOT s", "NOT TRY_CAST(s AS BOOLEAN)"),
])
def test_how_each_operation_is_written(text, written):
    assert per_operation(parse(text), TYPES.get).sql("duckdb") == written


@pytest.mark.parametrize("value, rounded", [(2.5, 3), (-2.5, -3), (0.5, 1), (1.49, 1), (-0.5, -1)])
def test_a_cast_to_an_integer_rounds_half_away_from_zero(value, rounded):
    """One rule on every engine: DuckDB's own cast of a DOUBLE rounds half to even (2.5 -> 2), Spark's
    truncates; ROUND is half away from zero on both."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT {value!r}::DOUBLE AS d, {value!r}::DECIMAL(18,3) AS de")
    for column in ("d", "de"):
        node = per_operation(parse(f"CAST({column} AS INTEGER)"), {"d": "DOUBLE", "de": "DECIMAL(18,3)"}.get)
        assert con.sql(f"SELECT {node.sql('duckdb')} FROM t").fetchall() == [(rounded,)]


def test_a_division_by_zero_is_null_not_infinite():
    con = duckdb.connect()
    node = per_operation(parse("d / i"), {"d": "DOUBLE", "i": "INTEGER"}.get)
    assert con.sql(f"SELECT {node.sql('duckdb')} FROM (SELECT 1.0::DOUBLE AS d, 0 AS i)").fetchall() == [(None,)]


def test_guards_are_typed_nodes():
    """A later engine prints each guard by its class (a TryOp around one operation, a TRY_CAST), never
    by reading strings."""
    node = per_operation(parse("sqrt(d) + length(s) > 2"), TYPES.get)
    guards = list(node.find_all(TryOp))
    assert [type(g.this) for g in guards] == [exp.Add, exp.Sqrt] and not node.find(exp.Anonymous)


def _bare_operations(node: exp.Expression) -> list[str]:
    """Operands that are operations and print without their parentheses (sqlglot prints the tree as
    it is: an And over an Or reads back as the other precedence)."""
    found = []
    for n in node.walk():
        if isinstance(n, (exp.Binary, exp.Not, exp.Neg)):
            found += [c.sql("duckdb") for c in (n.args.get("this"), n.args.get("expression"))
                      if isinstance(c, (exp.Binary, exp.Predicate, exp.Not)) and not isinstance(c, exp.Paren)]
    return found


@pytest.mark.parametrize("seed", range(4))
def test_guarding_keeps_every_parenthesis_the_precedence_needs(seed):
    """sqlglot's AND, OR, ^ and COLLATE are Funcs: a guard that kept a Func bare printed
    `(a OR TRY(b)) AND c` as `a OR TRY(b) AND c` (the slow differential test found it)."""
    rng = random.Random(seed)
    for _ in range(80):
        node = quoted(parse(nested(rng)))
        assert _bare_operations(node) == []
        assert _bare_operations(per_operation(node, TYPES.get)) == [], node.sql("duckdb")


def test_a_parenthesised_or_with_a_guarded_side_keeps_its_precedence():
    """On a row where the OR's left side holds and the AND's right side does not, `(a OR b) AND c` is
    false; read as `a OR (b AND c)` it was true."""
    con = duckdb.connect()
    con.sql("CREATE TABLE t AS SELECT 5 AS i, 2::BIGINT AS bi, 'y' AS s")
    node = per_operation(quoted(parse("(i > 3 OR i // bi = 1) AND s = 'x'")), TYPES.get)
    assert "TRY(" in node.sql("duckdb")   # the OR's right side is guarded: the shape that lost its parentheses
    assert con.sql(f"SELECT count(*) FROM t WHERE {node.sql('duckdb')}").fetchall() == [(0,)]
