"""dpsql answers an unquoted alias only where DuckDB's parser reads one: every keyword of the installed
DuckDB, in each place an alias goes, is tried with both parsers (sql/keywords.py is the list the parse
refuses DP100; a DuckDB whose grammar changes fails here rather than widening the dialect silently)."""
import duckdb
import pytest

import dpsql
from dpsql.frontend.parse import parse
from dpsql.sql.keywords import BARE_ITEM_ALIAS, BARE_TABLE_ALIAS, TABLE_ALIAS

PLACES = {"SELECT COUNT(*) {k} FROM visits": BARE_ITEM_ALIAS, "SELECT COUNT(*) FROM visits {k}": BARE_TABLE_ALIAS,
          "SELECT COUNT(*) FROM visits AS {k}": TABLE_ALIAS, "SELECT COUNT(*) AS {k} FROM visits": frozenset()}
CONN = duckdb.connect()
KEYWORDS = sorted(r[0] for r in CONN.sql("SELECT keyword_name FROM duckdb_keywords()").fetchall())


def duckdb_parses(sql: str) -> bool:
    try:
        CONN.extract_statements(sql)
        return True
    except duckdb.ParserException:
        return False


@pytest.mark.parametrize("place", PLACES)
def test_what_duckdb_cannot_parse_is_refused(db, place):
    answered = []
    for k in KEYWORDS:
        sql = place.format(k=k)
        if not duckdb_parses(sql):
            try:
                db.sql(sql)
                answered.append(k)
            except dpsql.DpsqlError:
                pass
    assert not answered, f"answered, though DuckDB's parser refuses: {answered}"
    assert db.budget.spent_epsilon == 0


@pytest.mark.parametrize("place", PLACES)
def test_the_list_refuses_only_what_duckdb_refuses(place):
    listed, place = PLACES[place], place.replace("COUNT(*)", "x")   # COUNT(*) EXPORT_STATE is DuckDB's syntax
    assert listed <= set(KEYWORDS)
    assert not [k for k in listed if duckdb_parses(place.format(k=k))]
    for k in listed:
        with pytest.raises(dpsql.DpsqlError) as info:
            parse(place.format(k=k))
        assert info.value.code == "DP100"


def test_a_quoted_keyword_names_an_alias():
    assert parse('SELECT COUNT(*) "all" FROM t AS "from"').sql() == 'SELECT COUNT(*) AS "all" FROM t AS "from"'


@pytest.mark.parametrize(("sql", "caret"), [("SELECT x year FROM t", "year"), ("SELECT x AS, y FROM t", "AS"),
                                            ("SELECT 1 FROM t AS", "AS"), ("SELECT x IN () FROM t", "x")])
def test_the_caret_is_on_what_duckdb_cannot_parse(sql, caret):
    with pytest.raises(dpsql.DpsqlError) as info:
        parse(sql)
    assert info.value.code == "DP100"
    assert sql[info.value.start:info.value.end + 1] == caret
