"""Parse SQL text into one sqlglot AST, keeping positions for error messages.

>>> parse("SELECT COUNT(*) FROM people").sql()
'SELECT COUNT(*) FROM people'
"""
from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from dpsql.frontend.dialect import Dpsql
from dpsql.errors import SqlSyntaxError, UnsupportedConstruct
from dpsql.sql.keywords import BARE_ITEM_ALIAS, BARE_TABLE_ALIAS, TABLE_ALIAS
from dpsql.sql.positions import offset_of, span
from dpsql.sql.schemas import ENGINE_SCHEMAS

DIALECT = Dpsql


def parse(sql: str) -> exp.Expression:
    """Parse exactly one statement, raising DpsqlError on syntax errors or several statements.

    Parse with errors raised: with ErrorLevel.IGNORE sqlglot silently returns an empty SELECT.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise SqlSyntaxError("DP100", "empty query: expected one SELECT statement")
    try:
        dialect = DIALECT()
        tokens = dialect.tokenize(sql)
        _no_empty_item(tokens, sql)
        statements = dialect.parser(error_level=sqlglot.ErrorLevel.RAISE).parse(tokens, sql)
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        line, col = first.get("line") or 1, first.get("col") or 1
        desc = first.get("description") or str(e)
        start = offset_of(sql, line, col)
        highlight = first.get("highlight") or ""
        start = max(0, start - len(highlight) + 1) if highlight else start
        desc = re.sub(r"<Token token_type: [^>]*?text: (.*?), line: .*?>", r"'\1'", desc.split(". Line")[0])
        raise SqlSyntaxError("DP100", f"syntax error: {desc}", sql=sql,
                             start=start, end=start + max(len(highlight), 1) - 1) from None
    except TokenError as e:
        raise SqlSyntaxError("DP100", f"syntax error: {e}", sql=sql) from None
    except RecursionError:
        raise SqlSyntaxError("DP100", "syntax error: query nested too deeply") from None
    except (AttributeError, TypeError, ValueError, IndexError, KeyError, AssertionError):
        # sqlglot itself can trip on some malformed input: still a syntax error, never a traceback.
        raise SqlSyntaxError("DP100", "syntax error: the query could not be parsed", sql=sql) from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        node = statements[1] if len(statements) > 1 else None
        start, end = span(node)
        err = UnsupportedConstruct("DP101", f"expected exactly one SELECT statement, got {len(statements)}",
                                   sql=sql, start=start, end=end)
        err.rule = "one_statement"
        raise err
    statement = _aliases_duckdb_reads(_well_formed(statements[0], sql), tokens, sql)
    return column_lists(unqualified_tables(_columns_named_so(statement, sql)), sql)


# A comma right after these starts an empty item (``SELECT , a``, ``f(, a)``, ``a, , b``), which sqlglot
# skips and DuckDB's parser refuses; after the last item one is DuckDB's trailing comma (``SELECT a, FROM t``).
OPENERS = frozenset({TokenType.SELECT, TokenType.DISTINCT, TokenType.COMMA, TokenType.L_PAREN})


# An AS before these names nothing (``SELECT x AS, y``, ``FROM t AS``), which sqlglot drops and DuckDB refuses.
CLOSERS = frozenset({TokenType.COMMA, TokenType.R_PAREN, TokenType.SEMICOLON})


def _no_empty_item(tokens: list, sql: str) -> None:
    """DP100 at a comma that starts an empty item, or at an AS without its name: dpsql answers only what
    DuckDB would parse."""
    for before, token in zip(tokens, tokens[1:]):
        if token.token_type == TokenType.COMMA and before.token_type in OPENERS:
            raise SqlSyntaxError("DP100", "syntax error: an empty item before ','", sql=sql,
                                 start=token.start, end=token.end)
        if before.token_type == TokenType.ALIAS and token.token_type in CLOSERS:
            raise SqlSyntaxError("DP100", "syntax error: AS without a name", sql=sql,
                                 start=before.start, end=before.end)
    if tokens and tokens[-1].token_type == TokenType.ALIAS:
        raise SqlSyntaxError("DP100", "syntax error: AS without a name", sql=sql,
                             start=tokens[-1].start, end=tokens[-1].end)


def _well_formed(statement: exp.Expression, sql: str) -> exp.Expression:
    """The statement, unless it holds what sqlglot parses and DuckDB cannot: a function without arguments
    that sqlglot cannot write again (``DATE()``, which would fail deep in planning), or ``x IS 4`` (DuckDB
    takes IS NULL, TRUE, FALSE only; its parser error would surface from an engine read): DP100 there.
    Only calls without arguments are tried (writing the whole statement would cost more than parsing
    it); api/planner.py refuses whatever else fails to write, without a position."""
    for test in statement.find_all(exp.Is):   # sqlglot reads ``x IS 4``, which DuckDB's parser refuses
        if not isinstance(test.expression, (exp.Null, exp.Boolean)):
            start, end = span(test.expression, sql)
            raise SqlSyntaxError("DP100", "syntax error: IS takes NULL, TRUE, FALSE or DISTINCT FROM", sql=sql,
                                 start=start, end=end)
    for test in statement.find_all(exp.In):   # ``x IN ()``: sqlglot reads an empty list, DuckDB refuses it
        if not any(test.args.get(k) for k in ("expressions", "query", "field", "unnest")):
            start, end = span(test, sql)
            raise SqlSyntaxError("DP100", "syntax error: IN needs a list of values or a subquery", sql=sql,
                                 start=start, end=end)
    for number in statement.find_all(exp.Literal):   # ``1e``: sqlglot reads a number, DuckDB fails binding it
        if not number.is_string and not _number_text(number.this):
            start, end = span(number, sql)
            raise SqlSyntaxError("DP100", f"syntax error: {number.this!r} is not a number", sql=sql,
                                 start=start, end=end, hint="write an exponent after e, as in 1e3")
    for node in statement.find_all(exp.Func):
        if not any(node.args.values()):
            try:
                node.sql(dialect="duckdb")
            except (ParseError, AttributeError, TypeError, ValueError, IndexError, KeyError, AssertionError):
                start, end = span(node, sql)
                raise SqlSyntaxError("DP100", f"syntax error: {node.sql_name()}() needs arguments", sql=sql,
                                     start=start, end=end) from None
    return statement


def _number_text(text: str) -> bool:
    """Whether a number literal's text reads as a number (Python's reading of the digits, the point and
    the exponent is DuckDB's)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _aliases_duckdb_reads(statement: exp.Expression, tokens: list, sql: str) -> exp.Expression:
    """The statement, unless an unquoted alias is a keyword DuckDB's parser refuses there (sql/keywords.py):
    sqlglot reads ``SELECT COUNT(*) all FROM t`` as an alias ``all``, DuckDB as a syntax error (DP100)."""
    before = {token.start: prev.token_type for prev, token in zip(tokens, tokens[1:])}
    for ident in statement.find_all(exp.Identifier):
        parent, start = ident.parent, ident.meta.get("start")
        if ident.quoted or start is None:
            continue
        written_as = before.get(start) == TokenType.ALIAS
        if isinstance(parent, exp.Alias) and parent.args.get("alias") is ident:
            refused = not written_as and ident.name.lower() in BARE_ITEM_ALIAS
        elif isinstance(parent, exp.TableAlias) and parent.this is ident and \
                isinstance(parent.parent, (exp.Table, exp.Subquery)):
            refused = ident.name.lower() in (TABLE_ALIAS if written_as else BARE_TABLE_ALIAS)
        else:
            continue
        if refused:
            raise SqlSyntaxError("DP100", f"syntax error: {ident.name} is a keyword here; quote it to name an alias",
                                 sql=sql, start=start, end=ident.meta["end"])
    return statement


def _columns_named_so(statement: exp.Expression, sql: str) -> exp.Expression:
    """The statement, unless a column is named with more than its table (``clinics.clinics.clinic``,
    ``PUMS.PUMS.age``): DuckDB reads the first part as a schema or the last as a struct's field, and
    dpsql names a policy's tables unqualified (DP202), on every path: the single table's, the joins', the
    stages' and the public queries'."""
    for col in statement.find_all(exp.Column):
        if col.args.get("db") or col.args.get("catalog"):
            start, end = span(col, sql)
            err = UnsupportedConstruct("DP202", f"qualified column names are not allowed: {col.sql()}", sql=sql,
                                       start=start, end=end,
                                       hint=f"write {col.table}.{col.name} or {col.name}: a column is named "
                                            "by its table or alias, if at all")
            err.rule = "known_columns"
            raise err
    return statement


def unqualified_tables(statement: exp.Expression) -> exp.Expression:
    """A qualified table name (SmartNoise's ``PUMS.PUMS``, ``Sales.Orders``, ``Finance.Sales.Orders``)
    names the table itself: dpsql reads one database, whose tables the policy names unqualified, and
    the table must still be one of the policy's. Names that say where DuckDB should look (one of its
    own catalogs or schemas: ``main.people``, ``temp.x``, ``memory.main.x``) are left for the
    validator to refuse.

    >>> unqualified_tables(sqlglot.parse_one("SELECT COUNT(*) FROM PUMS.PUMS AS p")).sql()
    'SELECT COUNT(*) FROM PUMS AS p'
    """
    for table in statement.find_all(exp.Table):
        qualifiers = [table.args.get(k) for k in ("db", "catalog") if table.args.get(k) is not None]
        if isinstance(table.this, exp.Identifier) and qualifiers and all(
                isinstance(q, exp.Identifier) and q.name.lower() not in ENGINE_SCHEMAS for q in qualifiers):
            table.set("db", None)
            table.set("catalog", None)
    return statement


def column_lists(statement: exp.Expression, sql: str = "") -> exp.Expression:
    """A CTE's or FROM-subquery's column list (``WITH t (a, b) AS (SELECT x, y ...)``) written as aliases
    of its SELECT items (``SELECT x AS a, y AS b``): the same query, in the one form the later passes
    read. A list over ``*`` is left as written (a listed name is then refused as an unknown column);
    one longer than the items (DP202) or holding more than names (DP100) is refused, as DuckDB does.

    >>> column_lists(sqlglot.parse_one("WITH t (a) AS (SELECT x, y FROM p) SELECT a FROM t")).sql()
    'WITH t AS (SELECT x AS a, y FROM p) SELECT a FROM t'
    """
    for node in list(statement.find_all(exp.CTE, exp.Subquery)):
        alias, body = node.args.get("alias"), node.this
        listed = alias.columns if isinstance(alias, exp.TableAlias) else []
        odd = next((c for c in listed if not isinstance(c, exp.Identifier)), None)
        if odd is not None:   # `t (a b)`: sqlglot reads a column definition, DuckDB a syntax error
            start, end = span(odd)
            raise SqlSyntaxError("DP100", f"syntax error: a column list names columns only, not {odd.sql()!r}",
                                 sql=sql or None, start=start, end=end)
        if not listed or not isinstance(body, exp.Select) or any(
                isinstance(e, exp.Star) or isinstance(e.this, exp.Star) for e in body.expressions):
            continue
        if len(listed) > len(body.expressions):
            start, end = span(alias)
            err = UnsupportedConstruct("DP202", f"the column list names {len(listed)} columns, but the query "
                                       f"selects {len(body.expressions)}", sql=sql or None, start=start, end=end,
                                       hint="list one name for each selected column, or fewer")
            err.rule = "flatten_subqueries"
            raise err
        items = [exp.alias_(item.unalias(), name.copy(), copy=False) for item, name in zip(body.expressions, listed)]
        body.set("expressions", items + body.expressions[len(listed):])
        alias.set("columns", None)
    return statement
