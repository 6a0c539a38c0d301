"""A scalar subquery over private data correlated on public keys of the outer query (issue 24, TPC-H
Q17), released as a stage grouped by those keys, its values read by the query as a public lookup:

    SELECT SUM(l_extendedprice) FROM lineitem, part WHERE p_partkey = l_partkey AND p_brand = 'B#23'
        AND l_quantity < (SELECT 0.2 * AVG(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)
    stage 1  SELECT p.p_partkey, 0.2 * AVG(l_quantity) FROM lineitem, part AS p
             WHERE l_partkey = p.p_partkey AND p.p_brand = 'B#23' GROUP BY p.p_partkey
    stage 2  SELECT SUM(l_extendedprice) FROM lineitem, part, __dpsql_stage_values AS __dpsql_s
             WHERE ... AND __dpsql_s.__dpsql_k0 = p_partkey AND l_quantity < __dpsql_s.__dpsql_v

Privacy. Stage 1 is an ordinary DP query through the whole pipeline: its keys are the public table's
values (read from public data, pruned only by the outer query's conditions on that table, which are
public too), so every key is released with a noisy value, an empty one around 0 as any public group,
and a person reaches at most L of them (parallel composition over the keys). Stage 2 reads the
released values from a table the engine holds for the run (api/connection.py): a function of stage
1's release and public data, so post-processing, public to the rest of the plan; joined as a lookup
(frontend/lookups.py) on its keys, which are unique in it by construction (one released row per
group) and checked unique after it is filled (DP999 otherwise); compared by the one comparison
builder (sql/compare.py) like any join. No analyst text names that table or its columns: their names
are reserved (DP201, DP202 when a query names them), and its rows are only what stage 1 released.

What is accepted: one subquery, the statement's only stage, inside a top-level conjunct of the
statement's WHERE; correlated only by top-level equalities of its WHERE between a column of one of
its private tables and a column of one public table of the outer query's FROM that is not an
identifier; without HAVING, ORDER BY, LIMIT or OFFSET (grouped by the key, they would filter or cut
the keys). Anything else correlated stays refused (DP317): a private or identifier column, a
correlation in any other place, nested subqueries. A row whose key is NULL finds no released value
and is dropped (the subquery's value there is that of no row: NULL for AVG or SUM, which drops it
too; 0 for a COUNT, which may not).
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.frontend.dialect import Dpsql
from dpsql.frontend.relation import conjuncts
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy
from dpsql.sql.build import ident
from dpsql.sql.compare import compare
from dpsql.sql.positions import span

TABLE = "__dpsql_stage_values"   # the engine's table of stage 1's released values, for one run (+ a connection's token)
ALIAS = "__dpsql_s"
KEY, VALUE = "__dpsql_k", "__dpsql_v"
RESERVED = "__dpsql_"
COMPARE = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
HINT = ("correlate the subquery only by equalities with a public table's columns in its WHERE "
        "(WHERE l_partkey = p_partkey), and compare it in a top-level condition of the query's WHERE")


@dataclass(frozen=True)
class Correlated:
    """Stage 1's SQL (grouped by the correlation keys), stage 2's (the values read from ``values``),
    and the table of released values as the plan of stage 2 sees it: public, ``released``."""
    inner: str
    outer: exp.Expression
    values: TablePolicy
    keys: exp.Select | None = None   # a public last stage's every possible key, each with no value (``probe``)


def refuse(message: str, node: exp.Expression | None, sql: str, code: str = "DP317") -> UnsupportedConstruct:
    start, end = span(node, sql)
    return UnsupportedConstruct(code, message, hint=HINT, sql=sql, start=start, end=end, rule="stages")


def correlated(statement: exp.Expression, node: exp.Subquery, outer: dict[str, str], sql: str,
               policy: Policy, table: str = TABLE, exact_last: bool = False) -> Correlated:
    """The two stages of ``statement`` whose only stage ``node`` is correlated (``outer``: the outer
    query's aliases -> tables); DP317 for a correlation it cannot release by keys (module docstring).
    ``exact_last``: the last stage reads public tables only (answered exactly: its comparisons with the
    released values are written here, by sql/compare.py, as the relation writes them otherwise)."""
    _reserved(statement, sql)
    if not isinstance(statement, exp.Select) or not _in_where(statement, node):
        raise refuse("a correlated subquery over private data must be in a top-level condition of the query's "
                     "WHERE (each row compared with the released value of its key)", node, sql)
    inner = node.this
    pairs = _correlations(inner, outer, sql, policy)
    tables = {alias for alias, _ in (column for _, column in pairs)}
    if len(tables) != 1:
        raise refuse("a correlated subquery over private data may name columns of one public table of the outer "
                     "query only", node, sql)
    (alias,) = tables
    public = policy.tables[outer[alias]]
    keys = [(public.columns[name], name) for _, (_, name) in pairs]
    values = TablePolicy(table, "row", columns={
        **{f"{KEY}{i}": ColumnPolicy(f"{KEY}{i}", sql_type=c.sql_type) for i, (c, _) in enumerate(keys)},
        VALUE: ColumnPolicy(VALUE, sql_type="DOUBLE")}, public=True, released=True)
    names = [n for _, n in keys]
    one = _stage_one(statement, inner, alias, outer[alias], names, policy)
    types = [c.sql_type for c, _ in keys]
    every = _keys(statement, alias, outer[alias], names, policy) if exact_last else None   # before stage 2's edits
    two = _stage_two(statement, node, alias, names, table, (types, outer, policy) if exact_last else None)
    return Correlated(one, two, values, every)


def _reserved(statement: exp.Expression, sql: str) -> None:
    """DP201/DP202: a name of dpsql's own (its released values' table and columns) in the analyst's SQL."""
    for node in statement.find_all(exp.Table, exp.Column):
        if node.name.lower().startswith(RESERVED):
            table = isinstance(node, exp.Table)
            what = f"table {node.name!r} is not a table of the policy" if table else f"unknown column {node.name!r}"
            start, end = span(node, sql)
            raise UnsupportedConstruct("DP201" if table else "DP202", f"{what} (names starting with {RESERVED} are "
                                       "dpsql's own)", hint="name the policy's tables and their columns only",
                                       sql=sql, start=start, end=end, rule="reserved_names")


def _in_where(statement: exp.Select, node: exp.Subquery) -> bool:
    """Is the subquery inside a top-level conjunct of the statement's WHERE?"""
    where = statement.args.get("where")
    tops = {id(c) for c in conjuncts(where.this)} if where is not None else set()
    parent = node.parent
    while parent is not None and id(parent) not in tops:
        parent = parent.parent
    return parent is not None


def _owner(column: exp.Column, inner: dict[str, str], outer: dict[str, str], policy: Policy) -> str | None:
    """The outer alias a column of the subquery belongs to, or None for its own (SQL's scoping: the
    subquery's own tables first)."""
    qualifier = column.table.lower()
    if qualifier:
        return None if qualifier in inner else qualifier if qualifier in outer else None
    name = column.name.lower()
    if any(name in policy.tables[t].columns for t in inner.values() if t in policy.tables):
        return None
    owners = [a for a, t in outer.items() if t in policy.tables and name in policy.tables[t].columns]
    return owners[0] if len(owners) == 1 else None


def _correlations(inner: exp.Select, outer: dict[str, str], sql: str,
                  policy: Policy) -> list[tuple[exp.Column, tuple[str, str]]]:
    """Each top-level equality of the subquery's WHERE between its own column and an outer public
    column: (own column, (outer alias, outer column)). DP317 for an outer column anywhere else."""
    own = tables(inner)
    where = inner.args.get("where")
    pairs, allowed = [], set()
    for c in conjuncts(where.this) if where is not None else []:
        if isinstance(c, exp.EQ) and all(isinstance(s, exp.Column) for s in (c.this, c.expression)):
            owners = [_owner(s, own, outer, policy) for s in (c.this, c.expression)]
            if owners.count(None) == 1:
                mine, theirs = (c.this, c.expression) if owners[0] is None else (c.expression, c.this)
                alias = owners[1] if owners[0] is None else owners[0]
                assert alias is not None
                _check_key(theirs, outer[alias], sql, policy)
                _check_own(mine, own, sql, policy)
                pairs.append((mine, (alias, theirs.name.lower())))
                allowed.add(id(theirs))
    for column in inner.find_all(exp.Column):
        if id(column) not in allowed and _owner(column, own, outer, policy) is not None:
            raise refuse(f"the subquery over private data names {column.sql(dialect='duckdb')}, a column of the "
                         "outer query, other than in an equality with its own column at the top of its WHERE",
                         column, sql)
    if inner.find(exp.Subquery, exp.Exists):
        raise refuse("a correlated subquery over private data may not hold subqueries of its own", inner, sql)
    clause = next((inner.args[k] for k in ("having", "order", "limit", "offset") if inner.args.get(k)), None)
    if clause is not None:   # grouped by the key, they would filter or cut the keys, not the one value
        raise refuse("a correlated subquery over private data may not have HAVING, ORDER BY, LIMIT or OFFSET",
                     clause, sql)
    return pairs


def _check_key(column: exp.Column, table: str, sql: str, policy: Policy) -> None:
    """DP317 unless the outer column is a public table's column that is not an identifier."""
    t = policy.tables.get(table)
    c = t.columns.get(column.name.lower()) if t is not None else None
    if t is None or not t.public or c is None or c.identifier:
        raise refuse(f"the subquery over private data is correlated on {column.sql(dialect='duckdb')}, which is "
                     "not a column of a public table (its values are not public keys): one value per outer row "
                     "would be released by private keys", column, sql)


def _check_own(column: exp.Column, own: dict[str, str], sql: str, policy: Policy) -> None:
    """DP317 unless the subquery's side of a correlation is a column of one of its private tables: a key
    matched on a public table's column could be pruned by that table's conditions in stage 1, and the
    query's rows of such a key would find no released value (where the subquery's value is that of no row)."""
    tables = [own[column.table.lower()]] if column.table.lower() in own else [] if column.table else \
        [t for t in own.values() if t in policy.tables and column.name.lower() in policy.tables[t].columns]
    if len(tables) != 1 or tables[0] not in policy.tables or policy.tables[tables[0]].public:
        raise refuse(f"the subquery over private data is correlated through {column.sql(dialect='duckdb')}, which is "
                     "not a column of one of its private tables", column, sql)


def tables(select: exp.Select) -> dict[str, str]:
    """alias (or name) -> table name, of the tables a SELECT reads directly (FROM and its joins)."""
    return {(t.alias or t.name).lower(): t.name.lower() for t in _items(select) if isinstance(t, exp.Table)}


def _items(select: exp.Select) -> list[exp.Expression]:
    """The items of a SELECT's FROM and its joins (tables, subqueries), in order."""
    return [part.this for part in [select.args.get("from_"), *(select.args.get("joins") or [])] if part is not None]


def _stage_one(statement: exp.Select, inner: exp.Select, alias: str, table: str, keys: list[str],
               policy: Policy) -> str:
    """The subquery grouped by the outer table's key columns, that table joined by its equalities (a
    lookup), and the outer WHERE's conditions on that table alone added: they prune its keys to those
    the query can use (public conditions, so the key set stays public)."""
    one = _own_qualified(inner.copy(), policy)
    qualified = [exp.column(k, table=alias, quoted=True) for k in keys]
    one.set("expressions", [exp.Alias(this=q.copy(), alias=ident(f"{KEY}{i}")) for i, q in enumerate(qualified)]
            + [exp.Alias(this=inner.expressions[0].copy().unalias(), alias=ident(VALUE))])
    one.append("joins", exp.Join(this=exp.Table(this=ident(table), alias=exp.TableAlias(this=ident(alias)))))
    for condition in _pruning(statement, alias, policy):
        one = one.where(condition, copy=False)
    one.set("group", exp.Group(expressions=[q.copy() for q in qualified]))
    return one.sql(dialect=Dpsql)


def _pruning(statement: exp.Select, alias: str, policy: Policy) -> list[exp.Expression]:
    """The outer WHERE's conditions on the key table alone (and its public IN lists), copied and qualified
    by its alias: they prune the keys to those the query can use."""
    where = statement.args.get("where")
    outer = tables(statement)
    found = []
    for c in conjuncts(where.this) if where is not None else []:
        columns = list(c.find_all(exp.Column))
        if columns and not c.find(exp.Subquery, exp.Exists) and all(
                _owner(col, {}, outer, policy) == alias for col in columns):
            found.append(_qualified(c.copy(), alias))
        elif _public_in(c, alias, outer, policy):   # x IN (a public list): prunes the keys as public conditions do
            pruned = c.copy()
            _qualified(pruned.this, alias)
            found.append(pruned)
    return found


def _keys(statement: exp.Select, alias: str, table: str, keys: list[str], policy: Policy) -> exp.Select:
    """Every key stage 1 may release (the key table's, pruned as stage 1 prunes them), each with a NULL
    value: what a public last stage is tried on before the charge (``probe``)."""
    select = exp.select(*[exp.Alias(this=exp.column(k, table=alias, quoted=True), alias=ident(f"{KEY}{i}"))
                          for i, k in enumerate(keys)],
                        exp.Alias(this=exp.Cast(this=exp.Null(), to=exp.DataType.build("DOUBLE")), alias=ident(VALUE)))
    select = select.from_(exp.Table(this=ident(table), alias=exp.TableAlias(this=ident(alias)))).distinct()
    for condition in _pruning(statement, alias, policy):
        select = select.where(condition, copy=False)
    return select


def probe(statement: exp.Expression, table: str, keys: exp.Select) -> exp.Expression:
    """A public last stage as it is tried before the charge (api/executor.py ``check``): the released
    values' table replaced by every key stage 1 may release, each value NULL, and each top-level
    condition that reads the value wrapped ``COALESCE(c, TRUE)``. Under SQL's three-valued logic a
    condition that is NULL with the value unknown may hold for some value and one that is TRUE or FALSE
    holds so for every value, so the probe keeps every row some release could keep, evaluating every
    expression the query could: an engine error there (a cast of '' to a number) refuses the query
    free, where the query itself would fail after its charge. The probe reads public tables only."""
    tried = statement.copy()
    (held,) = [t for t in tried.find_all(exp.Table) if t.name == table]
    select = held.parent_select
    held.replace(exp.Subquery(this=keys.copy(), alias=exp.TableAlias(this=ident(ALIAS))))
    where = select.args.get("where") if select is not None else None
    reading = [c for c in (conjuncts(where.this) if where is not None else [])
               if any(col.name == VALUE and col.table == ALIAS for col in c.find_all(exp.Column))]
    for c in reading:
        c.replace(exp.Coalesce(this=c.copy(), expressions=[exp.true()]))
    return tried


def _public_in(condition: exp.Expression, alias: str, outer: dict[str, str], policy: Policy) -> bool:
    """``x IN (SELECT ... FROM public tables)`` with ``x`` over the key table's columns and the list
    uncorrelated (its columns its own tables'): a public condition on the key table (TPC-H Q20's
    ``ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')``)."""
    query = condition.args.get("query") if isinstance(condition, exp.In) else None
    if query is None or not isinstance(query.this, exp.Select) or query.this.find(exp.Subquery, exp.Exists) or \
            not all(_owner(c, {}, outer, policy) == alias for c in condition.this.find_all(exp.Column)):
        return False
    own = tables(query.this)
    names = {c.lower() for t in own.values() if t in policy.tables for c in policy.tables[t].columns}
    return all(t in policy.tables and policy.tables[t].public and not policy.tables[t].released
               for t in (n.name.lower() for n in query.this.find_all(exp.Table))) and all(
        (c.table.lower() in own if c.table else c.name.lower() in names) for c in query.this.find_all(exp.Column))


def _own_qualified(select: exp.Select, policy: Policy) -> exp.Select:
    """The subquery with each unqualified column of its own tables qualified by its table's alias: the
    outer table it is joined with in stage 1 could hold a column of the same name (``clinic = c.clinic``)."""
    own = tables(select)
    for column in list(select.find_all(exp.Column)):
        if not column.table:
            owners = [a for a, t in own.items() if t in policy.tables and column.name.lower() in policy.tables[t].columns]
            if len(owners) == 1:
                column.set("table", ident(owners[0]))
    return select


def _qualified(condition: exp.Expression, alias: str) -> exp.Expression:
    """A condition of the outer query on one table, its columns qualified by that table's alias (so
    the subquery's own tables cannot capture them)."""
    for column in condition.find_all(exp.Column):
        column.set("table", ident(alias))
    return condition


def _stage_two(statement: exp.Select, node: exp.Subquery, alias: str, keys: list[str], table: str,
               public: tuple[list[str], dict[str, str], Policy] | None = None) -> exp.Expression:
    """The statement reading the released values: the table joined on its keys, the value in place of
    the subquery (in place: the statement is not read after this). ``public``: (the keys' types, the
    outer aliases, the policy) of a last stage over public tables, whose ties and comparison with the
    value are written by sql/compare.py here (no relation writes them: frontend/public.py runs it as is)."""
    marker, parent = id(node), node.parent
    value = exp.column(VALUE, table=ALIAS)
    two = statement.transform(lambda n: value if id(n) == marker else n, copy=False)
    _star_of_its_own(two)
    two.append("joins", exp.Join(this=exp.Table(this=ident(table), alias=exp.TableAlias(this=ident(ALIAS)))))
    ties = [(exp.column(f"{KEY}{i}", table=ALIAS), exp.column(k, table=alias)) for i, k in enumerate(keys)]
    if public is None:
        return two.where(*[exp.EQ(this=a, expression=b) for a, b in ties], copy=False)
    types, outer, policy = public
    _compared(parent, value, outer, policy)
    return two.where(*[compare(exp.EQ, a, t, b, t) for (a, b), t in zip(ties, types)], copy=False)


def _star_of_its_own(select: exp.Select) -> None:
    """``SELECT *`` (or DuckDB's ``FROM t WHERE ...``) written as each of its FROM items' ``alias.*``, in
    place: the table of released values joined next is not a table of the query as written, and its
    columns are no output of it (the slow differential test found them answered)."""
    if not any(isinstance(e, exp.Star) for e in select.expressions):
        return
    own = [exp.Column(this=exp.Star(), table=ident(item.alias_or_name)) for item in _items(select) if item.alias_or_name]
    select.set("expressions", [q for e in select.expressions for q in (
        [c.copy() for c in own] if isinstance(e, exp.Star) else [e])])


def _compared(comparison: exp.Expression | None, value: exp.Column, outer: dict[str, str], policy: Policy) -> None:
    """``column <op> value`` (the released value in the subquery's place) rewritten in place by the one
    comparison builder, in the column's type against the value's DOUBLE. Another shape (an expression
    against the value) stays as written: the last stage reads public data and released values only, so
    whatever it does is post-processing of the release (module docstring)."""
    if not isinstance(comparison, COMPARE) or not (comparison.this is value or comparison.expression is value):
        return
    other = comparison.expression if comparison.this is value else comparison.this
    owner = _owner(other, {}, outer, policy) if isinstance(other, exp.Column) else None
    if owner is None:
        return
    kind = policy.tables[outer[owner]].columns[other.name.lower()].sql_type
    pair = (other, kind, value, "DOUBLE") if comparison.expression is value else (value, "DOUBLE", other, kind)
    comparison.replace(compare(type(comparison), *pair))
