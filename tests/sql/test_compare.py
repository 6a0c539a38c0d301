"""The comparison builder (dpsql/sql/compare.py) against DuckDB itself, on every pair of types and
the types' extreme values: a comparison it writes never fails, gives DuckDB's own answer wherever
DuckDB gives one (NULL only where DuckDB would fail), stays a hash join, and says truthfully which
forms keep distinct values distinct (the form a key's uniqueness is checked in)."""
import itertools

import duckdb
import pytest
from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql import compare

# Each type with values at its edges, and where casts to another type fail or collide.
VALUES = {
    "TINYINT": ["-128", "-1", "0", "1", "127"],
    "SMALLINT": ["-32768", "0", "127", "32767"],
    "INTEGER": ["-2147483648", "0", "16777216", "16777217", "2147483647"],
    "BIGINT": ["-9223372036854775808", "0", "1", "16777217", "999999999999999999", "1000000000000000000",
               "1152921504606846976", "1152921504606846977", "9223372036854775807"],
    "HUGEINT": ["-170141183460469231731687303715884105727", "0", "1152921504606846977",
                "170141183460469231731687303715884105727"],
    "UTINYINT": ["0", "255"],
    "USMALLINT": ["0", "65535"],
    "UINTEGER": ["0", "4294967295"],
    "UBIGINT": ["0", "9223372036854775808", "18446744073709551615"],
    "UHUGEINT": ["0", "32768", "340282366920938463463374607431768211455"],
    "FLOAT": ["'-3.4028235e38'", "'-0.0'", "0", "1.5", "16777216", "'3.4028235e38'", "'nan'", "'inf'", "'-inf'"],
    "DOUBLE": ["-1.7976931348623157e308", "'-0.0'", "0", "1.5", "1152921504606846976", "1e18", "'nan'", "'inf'"],
    "DECIMAL(4,1)": ["-999.9", "0", "1.5", "999.9"],
    "DECIMAL(18,3)": ["-999999999999999.999", "0", "123456789012345.678", "123456789012345.679"],
    "DECIMAL(38,20)": ["-999999999999999999.99999999999999999999", "0", "1.5", "999999999999999999.99999999999999999999"],
    "DECIMAL(38,37)": ["-9.9999999999999999999999999999999999999", "0", "1.5"],
    "DECIMAL(38,0)": ["-99999999999999999999999999999999999999", "0", "99999999999999999999999999999999999999"],
    "DATE": ["'5877642-06-25 (BC)'", "'0001-01-01'", "'1677-09-21'", "'2020-01-03'", "'2262-04-12'",
             "'9999-12-31'", "'294248-01-01'", "'5881580-07-10'", "'infinity'", "'-infinity'"],
    "TIMESTAMP": ["'290309-12-22 (BC) 00:00:00'", "'2020-01-03 00:00:00'", "'2020-01-03 00:00:00.5'",
                  "'294247-01-10 04:00:54.775806'", "'infinity'"],
    "TIMESTAMP_S": ["'2020-01-03 00:00:00'", "'9999-12-31 00:00:00'"],
    "TIMESTAMP_MS": ["'2020-01-03 00:00:00'", "'9999-12-31 00:00:00.5'"],
    "TIMESTAMP_NS": ["'1677-09-22 00:00:00'", "'2020-01-03 00:00:00'", "'2020-01-03 00:00:00.000000001'",
                     "'2262-04-11 00:00:00'"],
    "TIMESTAMP WITH TIME ZONE": ["'2020-01-03 00:00:00+00'"],
    "TIME": ["'00:00:00'", "'23:59:59'"],
    "INTERVAL": ["'1 day'", "'24 hours'"],
    "VARCHAR": ["''", "'a'", "'A'", "'ß'", "'ss'"],
    "BOOLEAN": ["false", "true"],
}
TYPES = list(VALUES)
OPS = (exp.EQ, exp.LT, exp.NEQ, exp.GTE)


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    for n, (t, values) in enumerate(VALUES.items()):
        con.execute(f"CREATE TABLE t{n} (id INTEGER, v {t})")
        con.execute(f"INSERT INTO t{n} VALUES " + ", ".join(f"({i}, CAST(({v}) AS {t}))" for i, v in enumerate(values)))
    return con


def table(t: str) -> str:
    return f"t{TYPES.index(t)}"


PAIRS = list(itertools.combinations_with_replacement(TYPES, 2))


@pytest.mark.parametrize("a,b", PAIRS, ids=lambda t: t.replace(" ", "_"))
def test_every_comparison_written_is_total_and_duckdbs_own_answer(con, a, b):
    """On every pair of values: no error; where DuckDB's comparison succeeds (TRY() is not NULL) the
    same answer; NULL only where DuckDB's would fail."""
    left, right = exp.column("v", "x"), exp.column("v", "y")
    found = compare.pairing(a, b)
    if found is None:
        with pytest.raises(UnsupportedConstruct) as info:
            compare.compare(exp.EQ, left, a, right, b)
        assert info.value.code == "DP306"
        return
    outputs = []
    for op in OPS:
        ours = compare.compare(op, left, a, right, b).sql("duckdb")
        theirs = op(this=left, expression=right).sql("duckdb")
        outputs.append(f"TRY({theirs}), {ours}")
    rows = con.execute(f"SELECT {', '.join(outputs)} FROM {table(a)} x, {table(b)} y").fetchall()
    for row in rows:
        for duck, ours in zip(row[::2], row[1::2]):
            if duck is not None:
                assert ours == duck, (a, b, row)
            assert ours is not None or duck is None, (a, b, row)


@pytest.mark.parametrize("a,b", [p for p in PAIRS if compare.pairing(*p) is not None], ids=lambda t: t.replace(" ", "_"))
def test_a_form_called_exact_keeps_distinct_values_distinct(con, a, b):
    """Where the builder says a side's form is exact, no two of the type's values collide in it (so a
    key unique as itself is unique as compared); NULL (a failed TRY_CAST) matches nothing."""
    found = compare.pairing(a, b)
    for t, form in ((a, found.left), (b, found.right)):
        if not form.exact:
            continue
        written = form.apply(exp.column("v")).sql("duckdb")
        same = con.execute(f"SELECT COUNT(*) FROM {table(t)} x, {table(t)} y WHERE x.id < y.id AND x.v IS DISTINCT "
                           f"FROM y.v AND {written.replace('v', 'x.v', 1)} = {written.replace('v', 'y.v', 1)}"
                           ).fetchall()[0][0]
        assert same == 0, (t, written)


@pytest.mark.parametrize("own,other,first,second", [
    ("BIGINT", "DOUBLE", "1152921504606846976", "1152921504606846977"),      # 2**60, 2**60 + 1
    ("INTEGER", "FLOAT", "16777216", "16777217"),                          # 2**24, 2**24 + 1
    ("DECIMAL(18,3)", "DOUBLE", "123456789012345.678", "123456789012345.679"),
])
def test_keys_that_collide_only_in_the_common_type_are_not_exact(con, own, other, first, second):
    form = compare.key_form(own, other)
    assert not form.exact
    written = [form.apply(exp.Cast(this=exp.Literal.number(v), to=exp.DataType.build(own))).sql("duckdb")
               for v in (first, second)]
    assert con.execute(f"SELECT {written[0]} = {written[1]}").fetchall()[0][0] is True


def test_strings_compare_byte_for_byte_whatever_their_collation():
    con = duckdb.connect()
    con.execute("CREATE TABLE c (k VARCHAR COLLATE NOCASE)")
    con.execute("CREATE TABLE p (k VARCHAR)")
    con.execute("INSERT INTO c VALUES ('a'), ('B')")
    con.execute("INSERT INTO p VALUES ('a'), ('A'), ('b')")
    assert con.execute("SELECT COUNT(*) FROM c JOIN p ON c.k = p.k").fetchall() == [(3,)]   # DuckDB: NOCASE
    on = compare.compare(exp.EQ, exp.column("k", "c"), "VARCHAR", exp.column("k", "p"), "VARCHAR").sql("duckdb")
    assert con.execute(f"SELECT COUNT(*) FROM c JOIN p ON {on}").fetchall() == [(1,)]
    con.execute("SET default_collation = 'nocase'")
    assert con.execute(f"SELECT COUNT(*) FROM c JOIN p ON {on}").fetchall() == [(1,)]


@pytest.mark.parametrize("a,b", [("BIGINT", "BIGINT"), ("DATE", "TIMESTAMP_NS"), ("BIGINT", "DECIMAL(38,20)"),
                                 ("VARCHAR", "VARCHAR"), ("BIGINT", "DOUBLE"), ("TINYINT", "BIGINT")])
def test_an_equality_join_stays_a_hash_join(con, a, b):
    on = compare.compare(exp.EQ, exp.column("v", "x"), a, exp.column("v", "y"), b).sql("duckdb")
    plan = con.execute(f"EXPLAIN SELECT COUNT(*) FROM {table(a)} x JOIN {table(b)} y ON {on}").fetchall()[0][1]
    assert "HASH_JOIN" in plan.upper().replace(" ", "_"), plan


@pytest.mark.parametrize("a,b", [("TIMESTAMP WITH TIME ZONE", "TIMESTAMP"), ("TIMESTAMP WITH TIME ZONE", "DATE"),
                                 ("DATE", "VARCHAR"), ("BIGINT", "VARCHAR"), ("BOOLEAN", "INTEGER"),
                                 ("TIME", "TIMESTAMP"), ("INTERVAL", "BIGINT"), (None, "BIGINT"), ("UUID", "VARCHAR")])
def test_pairs_that_cannot_be_made_total_are_refused(a, b):
    assert compare.pairing(a, b) is None and compare.pairing(b, a) is None


def test_spellings_of_one_type_are_one_type():
    assert compare.normal("int8") == "BIGINT" and compare.normal("DECIMAL") == "DECIMAL(18,3)"
    assert compare.normal("numeric(10)") == "DECIMAL(10,0)" and compare.normal("timestamptz") == "TIMESTAMP WITH TIME ZONE"
    assert compare.pairing("INT8", "BIGINT").left == compare.BARE


@pytest.mark.parametrize("a,b", PAIRS, ids=lambda t: t.replace(" ", "_"))
def test_a_pairing_read_the_other_way_is_its_mirror(a, b):
    """The join writes ``child.via = parent.key`` and the key check asks for ``key_form(key, via)``:
    both must be the same form, whichever side is named first."""
    found = compare.pairing(a, b)
    assert compare.pairing(b, a) == (found.mirrored() if found is not None else None)
