"""Per-person subqueries: ``FROM (SELECT c_custkey, COUNT(o_orderkey) AS c_count FROM customer LEFT JOIN
orders ON ... GROUP BY c_custkey) AS c_orders`` yields one row per person, and the outer query
aggregates over those rows (TPC-H Q13, "a histogram of orders per customer").

The subquery becomes a table of the policy whose privacy unit is the person and whose rows are one
per person (L = C = 1): removing a person removes exactly their row, and every value in it is a
function of their own rows (the subquery's joins are checked by frontend/joins.py; its filters pass
the WHERE rules and are guarded). Its values are exact per person; the outer query releases only
noisy aggregates of them, with bounds from its own clamps (``contribution_bounds_per_row``) and
groups from partition selection, as for any column without declared bounds or keys.
"""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from dpsql.errors import PrivacyViolation, UnsupportedConstruct
from dpsql.frontend.flatten import inline_ctes
from dpsql.frontend.fold import fold_constants
from dpsql.frontend.joins import relate
from dpsql.sql.positions import clause_name, span
from dpsql.sql.totality import family
from dpsql.sql.types import NUMBER, type_family
from dpsql.frontend.validate import validate
from dpsql.sql.guard import guarded, per_operation, quoted
from dpsql.sql.totality import narrow_dates
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy

PER_PERSON = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def _refuse(code: str, message: str, node, sql: str, hint: str = "", cls=UnsupportedConstruct):
    start, end = span(node, sql)
    err = cls(code, message, hint=hint, sql=sql, start=start, end=end)
    err.rule = "one_row_per_person"
    return err


def per_person(select: exp.Expression, sql: str, policy: Policy) -> tuple[exp.Expression, Policy]:
    """A query reading a per-person subquery, turned into one reading a table of one row per person."""
    if not isinstance(select, exp.Select) or select.args.get("from_") is None:
        return select, policy
    inline_ctes(select, sql)
    source = select.args["from_"].this
    if not isinstance(source, exp.Subquery) or not isinstance(source.this, exp.Select) or \
            not source.this.args.get("group") or source.this.args.get("from_") is None or \
            source.this.meta.get("dp") is not None:
        return select, policy   # not a per-person subquery: flatten refuses it as before
    if select.args.get("joins"):
        raise _refuse("DP204", "a per-person subquery cannot be joined yet", select.args["joins"][0], sql)
    inner, inner_policy = relate(fold_constants(source.this, sql), sql, policy)
    table = inner_policy.tables.get(inner.args["from_"].this.name.lower()) if isinstance(
        inner.args["from_"].this, exp.Table) else None
    if table is None or table.public or table.row_level:
        raise _refuse("DP102", "a subquery in FROM may group only the rows of one person: by their privacy unit",
                      inner.args["group"], sql)
    _check_shape(inner, table, sql)
    names = _names(inner, source, sql)
    alias = source.alias.lower() if source.alias else "per_person"
    per_person_table = _per_person_table(inner, table, names, alias, sql, inner_policy)
    table_node = exp.Table(this=exp.to_identifier(alias))
    table_node.this.meta.update({k: v for k, v in (source.args["alias"].this.meta if source.args.get("alias")
                                                   else {}).items() if k in ("line", "col", "start", "end")})
    select.args["from_"].set("this", table_node)
    return select, dataclasses.replace(policy, tables={**policy.tables, alias: per_person_table})


def _check_shape(inner: exp.Select, table: TablePolicy, sql: str) -> None:
    group = inner.args["group"].expressions
    if len(group) != 1 or not isinstance(group[0], exp.Column) or group[0].name.lower() != table.privacy_unit:
        raise _refuse("DP206", f"a subquery in FROM may group only by the person ({table.privacy_unit}): "
                               "one row per person", inner.args["group"], sql, cls=PrivacyViolation)
    for key in ("having", "limit", "offset", "order", "distinct", "qualify"):
        if inner.args.get(key):
            raise _refuse("DP204", f"a per-person subquery may not use {clause_name(key)} yet", inner.args[key], sql)
    for item in inner.expressions:
        node = item.unalias()
        if isinstance(node, exp.Column) and node.name.lower() == table.privacy_unit:
            continue
        if not isinstance(node, PER_PERSON) or (isinstance(node.this, exp.Distinct) and not isinstance(node, exp.Count)):
            raise _refuse("DP102", "a per-person subquery selects the person and COUNT, SUM, AVG, MIN or MAX "
                                   "of their rows", node, sql)
    if not any(isinstance(i.unalias(), exp.Column) for i in inner.expressions):
        raise _refuse("DP102", f"a per-person subquery selects the person ({table.privacy_unit}) and COUNT, "
                               "SUM, AVG, MIN or MAX of their rows", inner, sql)


def _names(inner: exp.Select, source: exp.Subquery, sql: str) -> list[str]:
    """Each column's name: the alias list of ``AS t (a, b)``, else the item's own alias."""
    listed = [c.name.lower() for c in source.args["alias"].columns] if source.args.get("alias") else []
    if listed and len(listed) != len(inner.expressions):
        raise _refuse("DP102", "the column list names a different number of columns", source.args["alias"], sql)
    names = []
    for i, item in enumerate(inner.expressions):
        name = listed[i] if listed else (item.alias or (item.name if isinstance(item, exp.Column) else "")).lower()
        if not name:
            raise _refuse("DP102", "name this column with AS", item, sql)
        names.append(name)
    return names


def _per_person_table(inner: exp.Select, table: TablePolicy, names: list[str], alias: str, sql: str,
              policy: Policy) -> TablePolicy:
    """The per-person table: its SQL (grouped by the unit, filters guarded, arguments total) and columns."""
    types = lambda c: table.columns[c].sql_type if c in table.columns else None  # noqa: E731
    where = inner.args.get("where")
    _check_expressions(inner, table, sql, policy)
    unit = exp.column(table.privacy_unit, quoted=True)
    columns, projections = {}, []
    for name, item in zip(names, inner.expressions):
        node = item.unalias()
        if isinstance(node, exp.Column):
            columns[name] = ColumnPolicy(name=name, identifier=True, sql_type=table.columns[table.privacy_unit].sql_type)
            projections.append(exp.alias_(unit.copy(), name, quoted=True))
            continue
        value, sql_type = _aggregate(node, types, table, sql)
        columns[name] = ColumnPolicy(name=name, sql_type=sql_type)
        projections.append(exp.alias_(value, name, quoted=True))
    unit_name = next(n for n, i in zip(names, inner.expressions) if isinstance(i.unalias(), exp.Column))
    body = exp.select(*projections).from_(
        exp.Subquery(this=table.source.copy(), alias=exp.TableAlias(this=exp.to_identifier("__person", quoted=True)))
        if table.source is not None else exp.Table(this=exp.to_identifier(table.name, quoted=True)))
    conditions = [exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null()))]
    if where is not None:
        conditions.append(guarded(narrow_dates(quoted(where.this), types), types))
    body = body.where(exp.and_(*conditions), copy=False).group_by(unit.copy(), copy=False)
    return TablePolicy(name=alias, privacy_unit=unit_name, columns=columns, source=body, one_row_per_unit=True,
                       lookups=table.lookups,
                       about=f"one row per person, grouped from {table.name}" + (f" ({table.about})" if table.about else ""))


def _check_expressions(inner: exp.Select, table: TablePolicy, sql: str, policy: Policy) -> None:
    """WHERE and the aggregates' arguments pass the rules of a WHERE over that table (checked on a
    probe query). The one exemption: ``COUNT(id)`` of a bare identifier column counts the person's
    rows where it is not NULL, and reads no value of it (TPC-H Q13's ``COUNT(o_orderkey)``); SUM,
    AVG, MIN or MAX of an identifier would release its values, so they go to the probe, which
    refuses them (DP203) as a WHERE would."""
    aggregates = [i.unalias() for i in inner.expressions if isinstance(i.unalias(), PER_PERSON)]
    # An aggregate without an argument (``COUNT(+)`` parses so) goes to the probe as written: the
    # top level's rule refuses it (DP302).
    arguments = [e for a in aggregates for e in (a.this.expressions if isinstance(a.this, exp.Distinct) else [a])]
    probes = [exp.Count(this=a.this.copy()) if isinstance(a, exp.Func) and a.this is not None else
              a.copy() if isinstance(a, exp.Func) else exp.Count(this=a.copy())
              for a in arguments if not isinstance(a.this, exp.Star) and not _counts_rows(a, table)]
    probe = exp.select(exp.Count(this=exp.Star()), *probes).from_(inner.args["from_"].this.copy())
    if inner.args.get("where") is not None:
        probe = probe.where(inner.args["where"].this.copy(), copy=False)
    validate(probe, sql, policy)


def _counts_rows(aggregate: exp.Expression, table: TablePolicy) -> bool:
    """``COUNT(id)`` of a bare identifier column: the only aggregate of an identifier allowed here."""
    argument = aggregate.this
    return isinstance(aggregate, exp.Count) and isinstance(argument, exp.Column) and \
        table.is_identifier(argument.name.lower())


def _aggregate(node: exp.Expression, types, table: TablePolicy, sql: str) -> tuple[exp.Expression, str]:
    """A per-person aggregate in SQL that no row can make fail, and its type."""
    argument = node.this
    if isinstance(node, exp.Count):
        if isinstance(argument, exp.Star):
            return exp.Count(this=exp.Star()), "BIGINT"
        if isinstance(argument, exp.Distinct):   # the number of distinct values (or tuples) in a person's rows
            values = [quoted(e) for e in argument.expressions]
            values = [per_operation(v, types) for v in values]
            return exp.Count(this=exp.Distinct(expressions=values)), "BIGINT"
        value = quoted(argument)
        return exp.Count(this=per_operation(value, types)), "BIGINT"
    if isinstance(node, (exp.Min, exp.Max)):
        if not isinstance(argument, exp.Column) or table.is_identifier(argument.name.lower()):
            raise _refuse("DP102", "MIN and MAX in a per-person subquery take a column", node, sql)
        return type(node)(this=quoted(argument)), table.columns[argument.name.lower()].sql_type
    value = quoted(argument)
    if family(value, types) != NUMBER and type_family(types(argument.name.lower()) if isinstance(
            argument, exp.Column) else None) != NUMBER:
        raise _refuse("DP302", f"{type(node).__name__.upper()} needs a number", node, sql)
    return type(node)(this=per_operation(exp.Cast(this=value, to=exp.DataType.build("DOUBLE")), types)), "DOUBLE"
