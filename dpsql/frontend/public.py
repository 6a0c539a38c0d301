"""Queries over public tables only (issue 12, item 5): answered exactly, at epsilon 0.

A table declared ``public: true`` holds no person's data. A query that reads nothing but such tables
needs no privacy, so it skips the DP pipeline and runs as written; it still runs for an untrusted
analyst, so it may read only the policy's public tables (no files, table functions, settings, other
tables, catalogs or schemas) and use only the allowlist below: broader than the DP dialect (joins of
every kind, subqueries, CTEs, set operations, window functions, MIN/MAX and other aggregates,
DISTINCT, ORDER BY/LIMIT as written), still nothing volatile, side-effecting or reading outside the
tables (random, now, setseed, nextval, read_csv, getenv, current_setting), nothing whose output one
call can blow up (repeat, lpad, range, unnest). Row order is the query's ORDER BY, else DuckDB's:
public data, so timing and order are no privacy channel.

A query that names a private table anywhere, even in a subquery or as a CTE's name, is not public
only: it goes through the DP pipeline exactly as before.

Every CTE is renamed (``__dpsql_cte_<n>``, each reference given the old name as its alias), so a name
DuckDB resolves as a CTE is one this module resolved so too: a reference it took for a base table
(checked public) cannot meet a CTE, and one it took for a CTE fails to bind if DuckDB sees no such CTE.

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"people": {"privacy_unit": "id"},
...                  "nation": {"public": True}}})
>>> public_only(parse("SELECT n_name FROM nation"), p), public_only(parse("SELECT COUNT(*) FROM people"), p)
(True, False)
>>> sql = "WITH n AS (SELECT * FROM nation) SELECT n.n_name FROM n ORDER BY 1"
>>> check_public(parse(sql), sql, p)
('WITH __dpsql_cte_0 AS (SELECT * FROM nation) SELECT n.n_name FROM __dpsql_cte_0 AS n ORDER BY 1', ('nation',))
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.positions import span
from dpsql.sql.schemas import qualified_table_hint
from dpsql.frontend.rules.structure import SCALAR_NODES, cast_allowed
from dpsql.frontend.scope import AGGREGATES, name_of
from dpsql.sql.totality import COMPARISONS, family
from dpsql.sql.types import BOOLEAN, NUMBER, STRING, TEMPORAL
from dpsql.frontend.suggest import unknown_table
from dpsql.policy.model import Policy

RULE = "public_tables_only"
CTE_PREFIX = "__dpsql_cte_"

QUERY_NODES = (
    exp.Select, exp.From, exp.Join, exp.Table, exp.TableAlias, exp.Identifier, exp.Column, exp.Star,
    exp.Where, exp.Group, exp.Having, exp.Qualify, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.Alias,
    exp.Distinct, exp.Subquery, exp.With, exp.CTE, exp.Union, exp.Intersect, exp.Except, exp.Exists, exp.Any,
    exp.All, exp.In, exp.Tuple, exp.Window, exp.WindowSpec, exp.Filter,
)
PREDICATES = (
    exp.And, exp.Or, exp.Not, exp.Paren, exp.Neg, exp.Is, exp.Null, exp.Literal, exp.Boolean, exp.Between,
    exp.Escape, exp.NullSafeEQ, exp.NullSafeNEQ, exp.Interval, exp.DataTypeParam, *COMPARISONS,
    exp.Collate,   # DuckDB's built-in collations only (deterministic); sql/compare.py writes COLLATE C for text
)
# Deterministic, reading only their arguments, output no longer than a polynomial of the inputs.
MORE_SCALARS = (
    exp.DateAdd, exp.DateSub, exp.DateDiff, exp.DateFromParts, exp.TimeToStr, exp.StrToTime, exp.Dayname,
    exp.Monthname, exp.LastDay, exp.Week, exp.DayOfMonth, exp.DayOfWeekIso, exp.Hour, exp.Minute, exp.Second,
    exp.EndsWith, exp.StrPosition, exp.SplitPart, exp.Reverse, exp.Trunc, exp.ConcatWs, exp.Ascii, exp.Chr,
    exp.Pi,
)
MORE_AGGREGATES = (
    exp.Min, exp.Max, exp.AnyValue, exp.IgnoreNulls, exp.RespectNulls, exp.ArgMax, exp.ArgMin, exp.GroupConcat,
    exp.LogicalAnd, exp.LogicalOr, exp.CountIf, exp.ApproxDistinct, exp.Corr, exp.CovarPop, exp.CovarSamp,
    exp.PercentileDisc, exp.WithinGroup, exp.Mode, exp.First, exp.Last,
)
WINDOW_FUNCTIONS = (
    exp.RowNumber, exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist, exp.Ntile, exp.Lag, exp.Lead,
    exp.FirstValue, exp.LastValue, exp.NthValue,
)
ALLOWED = (*QUERY_NODES, *PREDICATES, *SCALAR_NODES, *MORE_SCALARS, *AGGREGATES, *MORE_AGGREGATES,
           *WINDOW_FUNCTIONS)
# DuckDB functions sqlglot leaves anonymous (lower-case names), deterministic and bounded.
ANONYMOUS = frozenset({"date_part", "datepart", "suffix"})
# Names DuckDB's binder turns into a call of a session function when no column of that name is in
# scope (GetSQLValueFunctionName): a bare ``user`` or ``current_schema`` is a column reference in the
# parse. sqlglot parses the other five (current_date, current_user, ...) into nodes the allowlist
# leaves out. A column so named is read qualified by its table (``t.user``), which DuckDB never maps.
SQL_VALUE_KEYWORDS = frozenset({"current_catalog", "current_date", "current_schema", "current_role", "current_time",
                                "current_timestamp", "current_user", "localtime", "localtimestamp", "session_user",
                                "user"})


def _refuse(code: str, message: str, node: exp.Expression | None, sql: str, hint: str = "") -> UnsupportedConstruct:
    start, end = span(node, sql)
    return UnsupportedConstruct(code, message, hint=hint, sql=sql, start=start, end=end, rule=RULE)


def _named_tables(statement: exp.Expression) -> list[exp.Table]:
    return [t for t in statement.find_all(exp.Table) if isinstance(t.this, exp.Identifier)]


def public_only(statement: exp.Expression, policy: Policy) -> bool:
    """Does the statement name a public table of the policy, and no private one anywhere (as a table
    or as a CTE's name)? Tables outside the policy, functions in FROM and the rest are left to
    ``check_public`` to refuse."""
    names = {name_of(t) for t in _named_tables(statement)}
    names |= {cte.alias.lower() for cte in statement.find_all(exp.CTE)}
    tables = policy.tables
    return any(n in tables and tables[n].public for n in names) and not any(
        n in tables and not tables[n].public for n in names)


def _cte_of(table: exp.Table) -> exp.CTE | None:
    """The CTE a table reference names in its scope, or None (a base table).

    A CTE is visible in its query's body and in the later CTEs of its WITH (not recursive: refused).
    """
    name = name_of(table)
    child: exp.Expression = table
    node = table.parent
    while node is not None:
        with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            if child is with_:   # inside a CTE's body: the earlier CTEs only
                inner = next(i for i, c in enumerate(ctes) if c is _child_cte(table, with_))
                ctes = ctes[:inner]
            for cte in ctes:
                if cte.alias.lower() == name:
                    return cte
        child, node = node, node.parent
    return None


def _child_cte(node: exp.Expression, with_: exp.With) -> exp.CTE:
    while node.parent is not with_:
        node = node.parent
    return node   # type: ignore[return-value]


def _check_nodes(statement: exp.Expression, sql: str) -> None:
    for node in statement.walk():
        if node.meta.get("named_args"):
            raise _refuse("DP102", "contribution bounds mean nothing on public tables: the query is answered exactly",
                          node, sql, hint="remove the named bounds (=> (lo, hi))")
        if isinstance(node, exp.Anonymous) and node.name.lower() in ANONYMOUS:
            continue
        if not isinstance(node, ALLOWED):
            if isinstance(node, exp.Func):
                fname = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
                raise _refuse("DP103", f"function {fname.upper()} is not allowed", node, sql)
            raise _refuse("DP102", f"{type(node).__name__} is not supported in a query over public tables", node, sql)
        if isinstance(node, (exp.Cast, exp.TryCast)) and not cast_allowed(node):
            raise _refuse("DP102", f"CAST to {node.to.sql(dialect='duckdb')} is not supported", node, sql)
        if isinstance(node, COMPARISONS):
            _comparable(node, sql)
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise _refuse("DP102", "recursive CTEs are not supported", node, sql)
        if isinstance(node, exp.Column) and (node.args.get("db") or node.args.get("catalog")):
            raise _refuse("DP202", f"qualified column names are not allowed: {node.sql()}", node, sql)
        if isinstance(node, exp.Column) and node.name.lower() in SQL_VALUE_KEYWORDS and \
                (not node.table or node.table.lower() == "alias"):
            raise _refuse("DP103", f"{node.name} is read by DuckDB as a function of the session, not a column",
                          node, sql, hint=f"a column named so is read qualified by its table: t.{node.name}")


def _comparable(node: exp.Expression, sql: str) -> None:
    """A comparison of a boolean, a number, a string or a date with another of these kinds (known from
    the expressions alone: ``x IN (...) = a || b``) makes DuckDB cast one side, which fails on some
    values: in a public last stage (frontend/stages.py) after the stage was charged, on values its
    release decides. Refused DP306 before anything runs (sql/totality.py ``family`` types both sides)."""
    sides = (node.this.unnest(), node.expression.unnest())
    if any(isinstance(side, exp.Literal) and side.is_string for side in sides):
        return   # a string literal is cast once, as the query binds ('1995-01-01' against a date)
    kinds = (family(sides[0], _untyped), family(sides[1], _untyped))
    if kinds[0] != kinds[1] and set(kinds) <= {BOOLEAN, NUMBER, STRING, TEMPORAL}:
        raise _refuse("DP306", f"this compares a {kinds[0]} with a {kinds[1]}: DuckDB would cast "
                      "one to the other, which fails on some values", node, sql,
                      hint="compare values of one kind, casting one side explicitly where you mean it")


def _untyped(name: str) -> None:
    """Column types are not known here: a column's kind is unknown, so only what the expression itself
    says decides (a literal, a comparison, a concatenation)."""
    return None


def check_public(statement: exp.Expression, sql: str, policy: Policy) -> tuple[str, tuple[str, ...]]:
    """Refuse what a public-only query may not do (DP101, DP102, DP103, DP201, DP202, with a caret);
    return the query as DuckDB SQL, printed from the tree (CTEs renamed, see the module docstring),
    and the public tables it reads. ``statement`` is left as parsed."""
    if not isinstance(statement, (exp.Select, exp.SetOperation)):
        kind = type(statement).__name__.upper()
        raise _refuse("DP101", f"only SELECT queries are allowed, not {kind}", statement, sql)
    _check_nodes(statement, sql)
    for table in statement.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise _refuse("DP201", "FROM must name public tables of the policy (or CTEs), not a function", table, sql)
        if table.args.get("db") or table.args.get("catalog"):
            raise _refuse("DP201", f"qualified table names are not allowed: {table.sql()}", table, sql,
                          hint=qualified_table_hint(table))
    query = statement.copy()
    renamed: dict[int, str] = {}
    for cte in query.find_all(exp.CTE):
        renamed[id(cte)] = f"{CTE_PREFIX}{len(renamed)}"
    for with_ in query.find_all(exp.With):
        names = [c.alias.lower() for c in with_.expressions]
        if len(set(names)) != len(names):
            raise _refuse("DP102", "two CTEs of one WITH have the same name", statement, sql)
    references: list[tuple[exp.Table, str]] = []
    tables: list[str] = []
    for original, table in zip(statement.find_all(exp.Table), query.find_all(exp.Table)):
        cte = _cte_of(table)
        if cte is None:
            name = name_of(table)
            if name not in policy.tables or not policy.tables[name].public:
                message, hint = unknown_table(table.name, policy, public_only=True)
                raise _refuse("DP201", message, original, sql, hint=hint)
            tables.append(name)
        else:
            references.append((table, renamed[id(cte)]))
    for table, new in references:
        if not table.args.get("alias"):
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(new))
    for cte in query.find_all(exp.CTE):
        cte.args["alias"].set("this", exp.to_identifier(renamed[id(cte)]))
    return query.sql(dialect="duckdb", comments=False), tuple(sorted(set(tables)))
