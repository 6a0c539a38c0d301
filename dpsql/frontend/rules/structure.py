"""Rules on the shape of a query: one SELECT of allowed nodes only (constructs, functions, casts),
over one table of the policy, naming declared columns, with * only in COUNT(*)."""
from __future__ import annotations

from sqlglot import exp
from dpsql.sql.totality import COMPARISONS
from dpsql.sql.schemas import qualified_table_hint
from dpsql.errors import PrivacyViolation
from dpsql.frontend.scope import AGGREGATES, FORMS, SUPPORTED, Scope, columns_in, name_of, output_aliases
from dpsql.frontend.suggest import unknown_column, unknown_table


# Deterministic scalar functions and operators. Any error they could raise on some row (overflow,
# division by zero, a failing cast, a bad date) becomes NULL: the rewrite runs every expression that
# totality.is_total cannot prove total under TRY(), so whether a query succeeds never depends on the
# data. Only functions whose errors TRY() catches are here; REPLACE's growth is bounded by the rule
# bounded_strings. Functions whose output size the data could blow up (repeat, lpad), volatile or
# side-effecting ones (random, now, setseed, nextval) and anything reading outside the tables
# (read_csv, getenv, current_setting) are not here.
SCALAR_NODES = (
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Abs, exp.Sign, exp.Round, exp.Floor,
    exp.Ceil, exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Pow, exp.Greatest, exp.Least, exp.Coalesce,
    exp.Nullif, exp.Case, exp.If, exp.Cast, exp.TryCast, exp.DataType, exp.Lower, exp.Upper,
    exp.Length, exp.Trim, exp.Substring, exp.Concat, exp.DPipe, exp.Like, exp.ILike, exp.StartsWith,
    exp.Contains, exp.Left, exp.Right, exp.Replace, exp.Year, exp.Month, exp.Day, exp.Quarter,
    exp.DayOfWeek, exp.DayOfYear, exp.Extract, exp.Var, exp.TimestampTrunc, exp.DateTrunc, exp.IsNan,
    exp.IsInf, exp.RegexpLike,  # DuckDB's regexes are RE2: linear time, no catastrophic backtracking
)


# Types a CAST may name, as sqlglot prints them for DuckDB (HUGEINT is INT128, VARCHAR is TEXT).
CAST_TYPES = {"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "INT128", "HUGEINT", "REAL", "FLOAT", "DOUBLE",
              "DECIMAL", "TEXT", "VARCHAR", "CHAR", "DATE", "TIMESTAMP", "TIME", "UTINYINT", "USMALLINT", "UINTEGER",
              "UBIGINT"}


# Every node type a query may contain; anything else is refused (DP102/DP103/DP204/DP303).
ALLOWED_NODES = (
    exp.Select, exp.From, exp.Table, exp.TableAlias, exp.Identifier, exp.Column, exp.Star,
    exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.Alias,
    exp.And, exp.Or, exp.Not, exp.Paren, exp.In, exp.Between, exp.Is, exp.Null, exp.Literal,
    exp.Boolean, exp.Neg, exp.Distinct, *COMPARISONS, *AGGREGATES, *SCALAR_NODES,
    exp.DataTypeParam,   # DECIMAL(p, s) in a CAST: checked by allowed_nodes
)


def single_select(select: exp.Expression, scope: Scope) -> None:
    """The one statement is a plain SELECT (DP101): no DDL/DML, PRAGMA, SET, set operations."""
    if not isinstance(select, exp.Select):
        kind = type(select).__name__.upper()
        raise scope.refuse("DP101", f"only SELECT queries are allowed, not {kind}", select)
    if select.args.get("distinct"):
        raise scope.refuse("DP102", "SELECT DISTINCT is not supported", select.args["distinct"])


def allowed_nodes(select: exp.Select, scope: Scope) -> None:
    """Every node is on the allowlist (DP102 construct, DP103 function, DP204 join, DP303 aggregate)."""
    aliases, casts = [], []   # gathered on the same walk, in its (find_all's) order
    for node in select.walk():
        if isinstance(node, ALLOWED_NODES):
            if isinstance(node, exp.Alias):
                aliases.append(node)
            elif isinstance(node, (exp.Cast, exp.TryCast)):
                casts.append(node)
            continue
        name = type(node).__name__
        if isinstance(node, exp.Join):
            raise scope.refuse("DP204", "joins are not supported yet: query one private table", node)
        if isinstance(node, (exp.Subquery, exp.With, exp.CTE, exp.Union, exp.Except, exp.Intersect)):
            raise scope.refuse("DP102", "subqueries, CTEs and set operations are not supported yet", node)
        if isinstance(node, exp.AggFunc):
            fname = node.sql_name() if hasattr(node, "sql_name") else name
            raise scope.refuse("DP303", f"aggregate {fname} is not supported", node,
                               hint=f"supported aggregates: {SUPPORTED}")
        if isinstance(node, exp.Interval):
            raise scope.refuse(
                "DP102", "INTERVAL is only supported added to or subtracted from a DATE or TIMESTAMP literal "
                "(folded to a literal at plan time), not in arithmetic on columns", node,
                hint="compare the column with a date computed from literals, e.g. "
                     "d <= DATE '1998-12-01' - INTERVAL '90' DAY (units: DAY, WEEK, MONTH, QUARTER, YEAR; "
                     "a whole number of them)")
        if isinstance(node, exp.Func):
            fname = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
            raise scope.refuse("DP103", f"function {fname.upper()} is not allowed", node)
        raise scope.refuse("DP102", f"{name} is not supported in the dpsql dialect", node)
    for node in aliases:
        if node.parent is not select:
            raise scope.refuse("DP102", "an alias (AS) is only allowed on a SELECT output", node)
        if not node.alias.strip():
            raise scope.refuse("DP102", "an output name cannot be empty", node)
    for cast in casts:
        if not cast_allowed(cast):
            raise scope.refuse("DP102", f"CAST to {cast.to.sql(dialect='duckdb')} is not supported", cast)


def cast_allowed(cast: exp.Cast) -> bool:
    """A CAST to a type of CAST_TYPES, with parameters only as DECIMAL(p[, s]) of whole literals <= 38."""
    target = cast.to.sql(dialect="duckdb").upper()
    base = target.split("(")[0].strip()
    params = [p.this for p in cast.to.expressions if isinstance(p, exp.DataTypeParam)]
    decimal = base == "DECIMAL" and len(params) == len(cast.to.expressions) <= 2 and all(
        isinstance(p, exp.Literal) and p.is_int for p in params) and all(int(p.this) <= 38 for p in params)
    return base in CAST_TYPES and (not cast.to.expressions or decimal)


def one_private_table(select: exp.Select, scope: Scope) -> None:
    """FROM names exactly one table of the policy, unqualified (DP201)."""
    source = select.args.get("from_")
    if source is None:
        raise scope.refuse("DP201", "a query must read one private table: FROM is missing", select)
    table = source.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise scope.refuse("DP201", "FROM must name a table of the policy", table)
    if table.args.get("db") or table.args.get("catalog"):
        raise scope.refuse("DP201", f"qualified table names are not allowed: {table.sql()}", table,
                           hint=qualified_table_hint(table))
    if name_of(table) not in scope.policy.tables:
        message, hint = unknown_table(table.name, scope.policy)
        raise scope.refuse("DP201", message, table, hint=hint)


def known_columns(select: exp.Select, scope: Scope) -> None:
    """Every column is declared in the policy and qualified, if at all, by the table or its alias (DP202)."""
    aliases = output_aliases(select)
    qualifiers = {scope.alias or scope.table.name}
    for col in columns_in(select):
        if col.args.get("db") or col.args.get("catalog"):
            raise scope.refuse("DP202", f"qualified column names are not allowed: {col.sql()}", col)
        if col.table and col.table.lower() not in qualifiers:
            raise scope.refuse("DP202", f"unknown table or alias {col.table!r} in {col.sql()}", col)
        name = name_of(col)
        in_post = col.find_ancestor(exp.Having, exp.Order, exp.Group) is not None
        if in_post and not col.table and name in aliases and name not in scope.table.columns:
            continue
        if name not in scope.table.columns:
            message, hint = unknown_column(col.name, scope.table, scope.policy)
            raise scope.refuse("DP202", message, col, hint=hint)


def star_only_in_count(select: exp.Select, scope: Scope) -> None:
    """``*`` appears only as COUNT(*): SELECT * would release raw rows (DP301)."""
    for star in select.find_all(exp.Star):
        parent = star.parent
        if isinstance(parent, exp.Column):
            parent = parent.parent
        if type(parent) not in FORMS or not FORMS[type(parent)].star:
            raise scope.refuse("DP301", "SELECT * would release raw rows; select aggregates", star,
                               cls=PrivacyViolation)
