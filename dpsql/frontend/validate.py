"""Validation: an allowlist of what a dpsql query may contain, one rule per function.

Every rule is ``rule(select, scope) -> None`` and raises a DpsqlError with a stable code and the
offending node's position. ``VALIDATION_RULES`` lists them in the order they run; anything no rule
knows is refused, so the dialect only grows by adding to an allowlist.

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {}}}}})
>>> validate(parse("SELECT COUNT(*) FROM t"), "SELECT COUNT(*) FROM t", p).table.name
't'
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import DpsqlError, PrivacyViolation, UnsupportedConstruct
from dpsql.frontend.intervals import interval
from dpsql.frontend.options import QueryOptions, aggregate_bounds, number, query_options
from dpsql.frontend.parse import span
from dpsql.policy import ColumnPolicy, Policy, TablePolicy
from dpsql.engines.duckdb_schema import is_numeric, is_string
from dpsql.plan.sensitivity import MAX_BOUND
from dpsql.frontend.totality import BOOLEAN, NUMBER, family, string_too_long

QUANTILES = (exp.Median, exp.PercentileCont)   # MEDIAN(x); QUANTILE_CONT(x, q) = PERCENTILE_CONT(x, q)
AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.VariancePop, exp.Variance, exp.StddevPop, exp.Stddev, exp.StddevSamp,
              *QUANTILES)
BOUNDED_AGGREGATES = AGGREGATES[1:]   # their argument needs a finite range
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
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


@dataclass(frozen=True)
class Scope:
    """What a rule needs to know: the SQL text (for positions), the policy, and the queried table."""
    sql: str
    policy: Policy
    table: TablePolicy | None = None
    alias: str | None = None
    options: QueryOptions = QueryOptions()

    def types(self, name: str) -> str | None:
        """The DuckDB type of a column of the queried table (None: unknown)."""
        column = self.table.columns.get(name) if self.table is not None else None
        return column.sql_type if column is not None else None

    def refuse(self, code: str, message: str, node: exp.Expression | None, hint: str = "",
               cls=UnsupportedConstruct, rule: str | None = None):
        start, end = span(node, self.sql)
        err = cls(code, message, hint=hint, sql=self.sql, start=start, end=end)
        err.rule = rule
        return err


def name_of(node: exp.Expression) -> str:
    """Lower-cased name of a column or table (DuckDB names are case-insensitive, quoted or not)."""
    return node.name.lower()


def output_aliases(select: exp.Select) -> set[str]:
    return {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}


def columns_in(node: exp.Expression):
    return [c for c in node.find_all(exp.Column) if not isinstance(c.this, exp.Star)]


def single_select(select: exp.Expression, scope: Scope) -> None:
    """The one statement is a plain SELECT (DP101): no DDL/DML, PRAGMA, SET, set operations."""
    if not isinstance(select, exp.Select):
        kind = type(select).__name__.upper()
        raise scope.refuse("DP101", f"only SELECT queries are allowed, not {kind}", select)
    if select.args.get("distinct"):
        raise scope.refuse("DP102", "SELECT DISTINCT is not supported", select.args["distinct"])


def allowed_nodes(select: exp.Select, scope: Scope) -> None:
    """Every node is on the allowlist (DP102 construct, DP103 function, DP204 join, DP303 aggregate)."""
    for node in select.walk():
        if isinstance(node, ALLOWED_NODES):
            continue
        name = type(node).__name__
        if isinstance(node, exp.Join):
            raise scope.refuse("DP204", "joins are not supported yet: query one private table", node)
        if isinstance(node, (exp.Subquery, exp.With, exp.CTE, exp.Union, exp.Except, exp.Intersect)):
            raise scope.refuse("DP102", "subqueries, CTEs and set operations are not supported yet", node)
        if isinstance(node, exp.AggFunc):
            fname = node.sql_name() if hasattr(node, "sql_name") else name
            raise scope.refuse("DP303", f"aggregate {fname} is not supported", node,
                               hint="supported aggregates: COUNT, SUM, AVG, VAR_POP/VAR_SAMP, STDDEV_POP/STDDEV_SAMP, "
                                    "MEDIAN, QUANTILE_CONT/PERCENTILE_CONT(x, q)")
        if isinstance(node, exp.Func):
            fname = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
            raise scope.refuse("DP103", f"function {fname.upper()} is not allowed", node)
        raise scope.refuse("DP102", f"{name} is not supported in the dpsql dialect", node)
    for node in select.find_all(exp.Alias):
        if node.parent is not select:
            raise scope.refuse("DP102", "an alias (AS) is only allowed on a SELECT output", node)
        if not node.alias.strip():
            raise scope.refuse("DP102", "an output name cannot be empty", node)
    for cast in select.find_all(exp.Cast, exp.TryCast):
        target = cast.to.sql(dialect="duckdb").upper()
        base = target.split("(")[0].strip()
        params = [p.this for p in cast.to.expressions if isinstance(p, exp.DataTypeParam)]
        decimal = base == "DECIMAL" and len(params) == len(cast.to.expressions) <= 2 and all(
            isinstance(p, exp.Literal) and p.is_int for p in params) and all(int(p.this) <= 38 for p in params)
        if base not in CAST_TYPES or (cast.to.expressions and not decimal):
            raise scope.refuse("DP102", f"CAST to {cast.to.sql(dialect='duckdb')} is not supported", cast)


def quantile_of(agg: exp.Expression) -> float:
    """q of a validated MEDIAN (0.5) or QUANTILE_CONT/PERCENTILE_CONT(x, q)."""
    return 0.5 if isinstance(agg, exp.Median) else float(number(agg.expression))


def quantile_arguments(select: exp.Select, scope: Scope) -> None:
    """MEDIAN(x) and QUANTILE_CONT/PERCENTILE_CONT(x, q): q a number literal in [0, 1] (DP312), no
    DISTINCT (DP303). Runs before the allowlist, so a list of quantiles gets DP312 too."""
    for agg in select.find_all(*QUANTILES):
        fname = "MEDIAN" if isinstance(agg, exp.Median) else "QUANTILE_CONT"
        if isinstance(agg.this, exp.Distinct):
            raise scope.refuse("DP303", f"{fname}(DISTINCT ...) is not supported: a quantile is of all values", agg)
        if isinstance(agg, exp.Median):
            continue
        if isinstance(agg.parent, exp.WithinGroup):
            raise scope.refuse("DP312", "PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x) is not supported",
                               agg.parent, hint="write PERCENTILE_CONT(x, q)")
        q = agg.expression
        value = number(q) if q is not None else None
        if value is None or not 0 <= value <= 1:
            raise scope.refuse("DP312", f"{fname}(x, q): q must be one number literal in [0, 1]", q or agg,
                               hint="write QUANTILE_CONT(x, 0.9); for several quantiles, one aggregate each")


def one_private_table(select: exp.Select, scope: Scope) -> None:
    """FROM names exactly one table of the policy, unqualified (DP201)."""
    source = select.args.get("from_")
    if source is None:
        raise scope.refuse("DP201", "a query must read one private table: FROM is missing", select)
    table = source.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise scope.refuse("DP201", "FROM must name a table of the policy", table)
    if table.args.get("db") or table.args.get("catalog"):
        raise scope.refuse("DP201", f"qualified table names are not allowed: {table.sql()}", table)
    if name_of(table) not in scope.policy.tables:
        known = ", ".join(sorted(scope.policy.tables))
        raise scope.refuse("DP201", f"table {table.name!r} is not a table of the policy", table,
                           hint=f"tables you may query: {known}")


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
            raise scope.refuse("DP202", f"unknown column {col.name!r} in table {scope.table.name!r}", col,
                               hint="only columns declared in the policy may be used")


def is_unit_count(agg: exp.Expression, scope: Scope) -> bool:
    """COUNT(DISTINCT <privacy unit>): a noisy count of people, the one allowed use of the unit column."""
    arg = agg.this
    return (isinstance(agg, exp.Count) and isinstance(arg, exp.Distinct) and len(arg.expressions) == 1
            and isinstance(arg.expressions[0], exp.Column) and not scope.table.row_level
            and name_of(arg.expressions[0]) == scope.table.privacy_unit)


def no_identifiers(select: exp.Select, scope: Scope) -> None:
    """No identifier column (nor the privacy unit) appears anywhere in the query (DP203)."""
    aliases = output_aliases(select)
    dropped = [c for node in select.meta.get("dropped", []) for c in columns_in(node)]
    for col in columns_in(select) + dropped:
        name = name_of(col)
        if col.find_ancestor(exp.Having, exp.Order, exp.Group) is not None and not col.table \
                and name in aliases and name not in scope.table.columns:
            continue
        if name == scope.table.privacy_unit and isinstance(col.parent, exp.Distinct) and \
                isinstance(col.parent.parent, exp.Count) and is_unit_count(col.parent.parent, scope):
            continue
        if scope.table.is_identifier(name):
            raise scope.refuse("DP203", f"column {col.name!r} identifies a person and cannot be used", col,
                               cls=PrivacyViolation)


def star_only_in_count(select: exp.Select, scope: Scope) -> None:
    """``*`` appears only as COUNT(*): SELECT * would release raw rows (DP301)."""
    for star in select.find_all(exp.Star):
        parent = star.parent
        if isinstance(parent, exp.Column):
            parent = parent.parent
        if not isinstance(parent, exp.Count):
            raise scope.refuse("DP301", "SELECT * would release raw rows; select aggregates", star,
                               cls=PrivacyViolation)


def dp_options(select: exp.Select, scope: Scope) -> None:
    """GoogleSQL OPTIONS and contribution bounds are well formed and fit the table (DP308-DP310)."""
    options = query_options(select, scope.refuse)
    unit = options.privacy_unit
    if unit is not None and scope.table.row_level:
        raise scope.refuse("DP309", f"privacy_unit_column={unit}: table {scope.table.name!r} has no privacy unit "
                           "column (each row is a person)", select, hint="drop privacy_unit_column")
    if unit is not None and unit != scope.table.privacy_unit:
        raise scope.refuse("DP309", f"privacy_unit_column={unit} is not the policy's privacy unit of "
                           f"{scope.table.name!r}", select, hint=f"use privacy_unit_column={scope.table.privacy_unit}")
    if options.max_groups not in (None, 1) and scope.table.row_level:
        raise scope.refuse("DP308", "max_groups_contributed: each row is a person, so it is 1", select)
    for agg in select.find_all(*AGGREGATES):
        bounds = aggregate_bounds(agg, scope.refuse)
        fname = agg.sql_name()
        if bounds.per_row and isinstance(agg, exp.Count):
            raise scope.refuse("DP310", "COUNT takes contribution_bounds_per_group, not _per_row", agg)
        if bounds.per_group and scope.table.row_level:
            raise scope.refuse("DP310", f"{fname}: each row is a person in {scope.table.name!r}: "
                               "use contribution_bounds_per_row", agg)
        if bounds.per_group and isinstance(agg, exp.Count) and \
                any(b != int(b) or b < 0 for b in bounds.per_group):
            raise scope.refuse("DP310", "COUNT's contribution_bounds_per_group are whole numbers >= 0", agg)


def aggregate_arguments(select: exp.Select, scope: Scope) -> None:
    """Aggregates take one declared column (bounded for SUM/AVG), are not nested and not in WHERE/GROUP BY."""
    for agg in select.find_all(*AGGREGATES):
        fname = agg.sql_name()
        if agg.find_ancestor(exp.Where, exp.Group) is not None:
            raise scope.refuse("DP305", f"aggregate {fname} is not allowed in WHERE or GROUP BY", agg)
        inner = next((n for n in agg.this.find_all(*AGGREGATES)), None) if agg.this else None
        if inner is not None:
            raise scope.refuse("DP305", f"nested aggregate {inner.sql_name()} inside {fname}", inner)
        arg = agg.this
        if is_unit_count(agg, scope):
            continue
        if isinstance(arg, exp.Distinct):
            inner = arg.expressions[0] if len(arg.expressions) == 1 else None
            policy = scope.table.columns.get(name_of(inner)) if isinstance(inner, exp.Column) else None
            if isinstance(agg, exp.Count) and policy is not None and policy.keys is not None:
                continue   # COUNT(DISTINCT col) over a public key set: at most |keys| values
            raise scope.refuse("DP303", f"{fname}(DISTINCT ...) needs a column with public keys, or the privacy "
                               "unit: its count could otherwise reveal values only the data holds", agg)
        if isinstance(agg, exp.Count) and isinstance(arg, exp.Star):
            continue
        if arg is None or isinstance(arg, exp.Star) or agg.args.get("expressions") or \
                (isinstance(arg, exp.Column) and isinstance(arg.this, exp.Star)):
            raise scope.refuse("DP302", f"{fname} takes one argument: a column or an expression of columns", agg)
        if not isinstance(agg, BOUNDED_AGGREGATES):
            continue
        bounds = aggregate_bounds(agg, scope.refuse)
        if bounds.per_group and not isinstance(agg, (exp.Sum, exp.Avg)):
            raise scope.refuse("DP310", f"{fname} takes contribution_bounds_per_row only", agg)
        kind = family(arg, scope.types)
        if kind not in (NUMBER, BOOLEAN, "null") and (kind is not None or not isinstance(arg, exp.Column)):
            # A string or a date would have to be cast to a number row by row, and that cast fails
            # (or not) depending on the data.
            what = f"column {arg.name!r}" if isinstance(arg, exp.Column) else arg.sql()
            raise scope.refuse("DP302", f"{fname}: {what} is {'a ' + kind + ', ' if kind else ''}not a number", agg,
                               hint="aggregate a numeric column or expression")
        if not (bounds.per_row or bounds.per_group or argument_bounds(unqualified(arg), scope.table)):
            what = f"column {arg.name!r} has no bounds in the policy" if isinstance(arg, exp.Column) else \
                f"no finite bounds follow from the bounds of its columns for {arg.sql()}"
            raise scope.refuse("DP302", f"{fname}: {what}", agg,
                               hint="declare lower and upper for its columns in the policy, or pass "
                                    "contribution_bounds_per_row => (lower, upper)")


@dataclass(frozen=True)
class KeySpec:
    """One GROUP BY item: a column or an expression over columns, all with public keys."""
    node: exp.Expression            # where it was written (for errors)
    expression: exp.Expression      # the column or expression grouped on
    columns: tuple[ColumnPolicy, ...]


def unqualified(node: exp.Expression) -> exp.Expression:
    return node.copy().transform(lambda n: exp.column(name_of(n)) if isinstance(n, exp.Column) else n)


def argument_bounds(argument: exp.Expression, table) -> tuple[float, float] | None:
    """The finite range of an aggregate's argument, by interval arithmetic over the columns' bounds."""
    def column_bounds(name: str):
        col = table.columns.get(name)
        return (col.lower, col.upper) if col is not None and col.bounded else None
    derived = interval(argument, column_bounds)
    if derived is None or max(abs(derived[0]), abs(derived[1])) > MAX_BOUND:
        return None
    return derived


def group_keys(select: exp.Select, scope: Scope) -> list[KeySpec]:
    """The GROUP BY items; an ordinal or an output alias stands for that SELECT expression."""
    group = select.args.get("group")
    if group is None:
        return []
    aliases = {e.alias.lower(): e.unalias() for e in select.expressions if isinstance(e, exp.Alias)}
    keys = []
    for item in group.expressions:
        node = item
        if isinstance(item, exp.Literal) and not item.is_string and item.this.isdigit():
            index = int(item.this)
            if not 1 <= index <= len(select.expressions):
                raise scope.refuse("DP102", f"GROUP BY {index}: there is no output column {index}", item)
            node = select.expressions[index - 1].unalias()
        elif isinstance(item, exp.Column) and not item.table and name_of(item) not in scope.table.columns \
                and name_of(item) in aliases:
            node = aliases[name_of(item)]
        if isinstance(node, exp.Literal) or not list(columns_in(node)):
            raise scope.refuse("DP304", "GROUP BY takes columns, or expressions of columns, with public keys", item)
        cols = tuple(dict.fromkeys(scope.table.columns[name_of(c)] for c in columns_in(node)))
        keys.append(KeySpec(node=item, expression=unqualified(node), columns=cols))
    return keys


def group_keys_public(select: exp.Select, scope: Scope) -> None:
    """GROUP BY columns, or expressions of columns, never listed twice (DP304).

    Keys the policy declares public are all released; groups of any other column only through DP
    partition selection, which needs delta > 0: the plan checks that, knowing delta.
    """
    seen = set()
    for key in group_keys(select, scope):
        if any(isinstance(n, AGGREGATES) for n in key.expression.walk()):
            raise scope.refuse("DP305", "aggregate in GROUP BY", key.node)
        text = key.expression.sql()
        if text in seen:
            raise scope.refuse("DP304", f"GROUP BY {text} appears twice", key.node)
        seen.add(text)


def is_key(node: exp.Expression, keys: list[KeySpec]) -> bool:
    """Whether ``node`` (outside any aggregate) is one of the GROUP BY keys, written the same way."""
    # Callers ask this of every node of an expression: compare only nodes that could match (same
    # root type, not much larger), or a deep expression costs quadratic time in copies.
    candidates = [k for k in keys if type(k.expression) is type(node) and _at_most(node, 3 * _size(k.expression) + 3)]
    if not candidates:
        return False
    text = unqualified(node).sql()
    return any(k.expression.sql() == text for k in candidates)


def _size(node: exp.Expression) -> int:
    return sum(1 for _ in node.walk())


def _at_most(node: exp.Expression, limit: int) -> bool:
    return next((False for i, _ in enumerate(node.walk()) if i >= limit), True)


def outputs_are_aggregates_or_keys(select: exp.Select, scope: Scope) -> None:
    """Each output is an aggregate, a GROUP BY key, or post-processing of those: no raw values (DP301)."""
    keys = group_keys(select, scope)
    for item in select.expressions:
        _released_only(item.unalias(), keys, scope, "SELECT")


def _released_only(node: exp.Expression, keys: list[KeySpec], scope: Scope, clause: str,
                   aliases: set[str] = frozenset()) -> None:
    """Every column in ``node`` sits inside an aggregate, inside a key, or names an output alias."""
    if isinstance(node, AGGREGATES) or is_key(node, keys):
        return
    if isinstance(node, exp.Column):
        if not node.table and name_of(node) in aliases:
            return
        raise scope.refuse("DP301", f"column {node.name!r} in {clause} is neither aggregated nor a GROUP BY key",
                           node, hint="wrap it in an aggregate or add it to GROUP BY (with public keys)",
                           cls=PrivacyViolation)
    for child in node.iter_expressions():
        _released_only(child, keys, scope, clause, aliases)


def _literal_kind(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Neg):
        node = node.this
        return "number" if isinstance(node, exp.Literal) and not node.is_string else "other"
    if isinstance(node, exp.Literal):
        return "string" if node.is_string else "number"
    if isinstance(node, exp.Boolean):
        return "boolean"
    if isinstance(node, exp.Null):
        return "null"
    return None


def _column_kind(col: ColumnPolicy) -> str:
    if is_numeric(col.sql_type):
        return "number"
    if is_string(col.sql_type):
        return "string"
    if col.sql_type == "BOOLEAN":
        return "boolean"
    return "string"  # dates, times: a string literal is cast once, independent of the data


def predicates_type_safe(select: exp.Select, scope: Scope) -> None:
    """WHERE compares columns with literals or columns of the same kind, so no row can make it fail (DP306).

    A mismatch such as ``varchar_col = 5`` makes DuckDB cast the column, and whether that raises would
    depend on the data: an error would then reveal a row.
    """
    where = select.args.get("where")
    if where is None:
        return
    for pred in where.find_all(*COMPARISONS, exp.In, exp.Between):
        operands = [pred.this] + [pred.args[k] for k in ("expression", "low", "high") if pred.args.get(k)]
        operands += list(pred.args.get("expressions") or [])
        kinds = []
        for op in operands:
            if isinstance(op, exp.Paren):
                op = op.unnest()
            if isinstance(op, exp.Column):
                kinds.append((_column_kind(scope.table.columns[name_of(op)]), op))
            elif _literal_kind(op) in ("number", "string", "boolean", "null"):
                kinds.append((_literal_kind(op), op))
            else:
                kinds = []   # an expression: evaluated under TRY(), a failure is a NULL, not an error
                break
        real = {k for k, _ in kinds if k != "null"}
        if len(real) > 1:
            raise scope.refuse("DP306", f"type mismatch in {pred.sql()}: compares {' and '.join(sorted(real))}",
                               pred, hint="compare a column with a literal of its own type")
    for node in where.walk():
        if isinstance(node, exp.Column) and isinstance(node.parent, (exp.And, exp.Or, exp.Not, exp.Where, exp.Paren)):
            if _column_kind(scope.table.columns[name_of(node)]) != "boolean":
                raise scope.refuse("DP306", f"column {node.name!r} is not a boolean condition", node)


def bounded_strings(select: exp.Select, scope: Scope) -> None:
    """No expression can build a string much longer than the longest value a row holds (DP313): an
    out-of-memory error would depend on whether some row holds what the expression multiplies."""
    for node in select.iter_expressions():
        problem = string_too_long(node, scope.types)
        if problem is not None:
            culprit = next((n for n in node.walk() if isinstance(n, exp.Replace)), node)
            raise scope.refuse("DP313", f"{culprit.sql()}: {problem}", culprit,
                               hint="replace with a replacement no longer than the pattern, or nest fewer REPLACEs")


def post_clauses(select: exp.Select, scope: Scope) -> None:
    """HAVING, ORDER BY, LIMIT and OFFSET act on released values only; LIMIT/OFFSET are literals (DP307)."""
    for key in ("limit", "offset"):
        clause = select.args.get(key)
        if clause is not None:
            value = clause.expression
            if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
                raise scope.refuse("DP307", f"{key.upper()} takes a whole-number literal", clause)
            if int(value.this) >= 2 ** 62:
                raise scope.refuse("DP307", f"{key.upper()} {value.this} is too large", clause)
    keys = group_keys(select, scope)
    aliases = output_aliases(select)
    having = select.args.get("having")
    if having is not None:
        _released_only(having.this, keys, scope, "HAVING", aliases)
    order = select.args.get("order")
    for ordered in (order.expressions if order else []):
        _released_only(ordered.this, keys, scope, "ORDER BY", aliases)


VALIDATION_RULES = (
    single_select,
    quantile_arguments,
    allowed_nodes,
    one_private_table,
    known_columns,
    no_identifiers,
    star_only_in_count,
    dp_options,
    aggregate_arguments,
    group_keys_public,
    outputs_are_aggregates_or_keys,
    predicates_type_safe,
    bounded_strings,
    post_clauses,
)


def validate(select: exp.Expression, sql: str, policy: Policy) -> Scope:
    """Run every rule in order; return the scope (the resolved private table) of an accepted query."""
    scope = Scope(sql=sql, policy=policy)
    for rule in VALIDATION_RULES:
        try:
            rule(select, scope)
        except DpsqlError as err:
            err.rule = err.rule or rule.__name__
            raise
        if rule is one_private_table:
            table = select.args["from_"].this
            alias = table.alias.lower() if table.alias else None
            scope = Scope(sql=sql, policy=policy, table=policy.tables[name_of(table)], alias=alias)
        elif rule is dp_options:
            scope = dataclasses.replace(scope, options=query_options(select, scope.refuse))
    return scope
