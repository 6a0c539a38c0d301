"""The joined relation as a table (frontend/joins.py checks what may be joined): its columns, renamed
where two tables share a name; its privacy unit, the key of its private tables (COALESCE across a
LEFT JOIN), reached through the links' joins when no table of the query holds it; its bounds L and C,
those of its most detailed private table; and the SQL it is read from."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp

from dpsql.sql.compare import compare
from dpsql.sql.build import col, ident, join as join_node  # nodes, not the builders' parsed strings
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy

UNIT = "__unit"


@dataclass
class Instance:
    """One table as the query names it (``orders AS o``)."""
    alias: str
    table: TablePolicy
    node: exp.Table
    side: str = ""          # "LEFT" when joined with LEFT JOIN (its columns may be NULL)


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The parts of a condition joined by top-level ANDs (parentheses looked through)."""
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def resolve(column: exp.Column, instances: dict[str, Instance]) -> str | None:
    """The alias of the instance a column belongs to (None: unknown or an output alias)."""
    if column.table:
        alias = column.table.lower()
        return alias if alias in instances else None
    owners = [a for a, i in instances.items() if column.name.lower() in i.table.columns]
    return owners[0] if len(owners) == 1 else None


def build(select: exp.Select, instances: dict[str, Instance], policy: Policy) -> tuple[TablePolicy, dict[tuple[str, str], str]]:
    """The relation as a table: its columns (renamed where two tables share a name), its unit, its
    bounds, and its SQL source. Returns it with (alias, column) -> the relation's column name."""
    counts: dict[str, int] = {}
    for inst in instances.values():
        for name in inst.table.columns:
            counts[name] = counts.get(name, 0) + 1
    renames: dict[tuple[str, str], str] = {}
    columns: dict[str, ColumnPolicy] = {}
    private = [i for i in instances.values() if not i.table.public]
    unit_name = _unit_name(private, instances)
    for inst in instances.values():
        for name, column in inst.table.columns.items():
            if private and not inst.table.public and name == inst.table.unit_key:
                renames[(inst.alias, name)] = unit_name   # every copy of the unit's key is the unit
                continue
            virtual = name if counts[name] == 1 else f"{inst.alias}_{name}"
            while virtual in columns or (virtual != name and virtual in counts):
                virtual += "_"
            renames[(inst.alias, name)] = virtual
            public = (inst.table.name, name) if inst.table.public else None
            columns[virtual] = dataclasses.replace(column, name=virtual, public_source=public)
    name = " join ".join(i.table.name if i.alias == i.table.name else f"{i.table.name} {i.alias}"
                         for i in instances.values())
    source = _source(select, instances, renames, unit_name, policy)
    if not private:   # public tables only: nobody's rows (answered as row level, which is safe)
        return TablePolicy(name=name, privacy_unit="row", columns=columns, public=True, source=source), renames
    columns[unit_name] = ColumnPolicy(name=unit_name, identifier=True, sql_type=_unit_type(private))
    deepest = max(private, key=lambda i: (len(i.table.path), i.table.max_rows_per_unit))
    relation = TablePolicy(name=name, privacy_unit=unit_name, columns=columns,
                           max_groups_per_unit=max(i.table.max_groups_per_unit for i in private),
                           max_rows_per_unit=deepest.table.max_rows_per_unit, source=source,
                           auto_contributions=_automatic(private, deepest))
    return relation, renames


def _automatic(private: list[Instance], deepest: Instance) -> tuple[tuple[str, str], ...]:
    """The relation's ``auto`` bounds: its L if any table's is (L is their largest), its C if the table
    it takes C from has it."""
    groups = [a for i in private for a in i.table.auto_contributions if a[1] == "groups"]
    rows = [a for a in deepest.table.auto_contributions if a[1] == "rows"]
    return tuple(dict.fromkeys(groups[:1] + rows))


def _unit_name(private: list[Instance], instances: dict[str, Instance]) -> str:
    """The relation's unit column: named as the root's unit column unless another column is."""
    if not private:
        return UNIT
    root = private[0].table
    name = root.root_column
    others = {c for i in instances.values() for c in i.table.columns
              if i.table.public or c != i.table.unit_key}
    return UNIT if name in others else name


def _unit_type(private: list[Instance]) -> str:
    for inst in private:
        key = inst.table.unit_key
        if key is not None and key in inst.table.columns:
            return inst.table.columns[key].sql_type
    return ""


def _unit_expression(instances: dict[str, Instance], source: exp.Select, policy: Policy) -> exp.Expression:
    """The unit of a joined row: the key of any private table that holds it (COALESCE: a LEFT JOIN's
    side may be NULL); when none does, the links' joins are added (LEFT, on a unique key) to reach one."""
    keys = [col(i.table.unit_key, i.alias) for i in instances.values()
            if not i.table.public and i.table.unit_key is not None]
    if not keys:
        private = [i for i in instances.values() if not i.table.public]
        top = min(private, key=lambda i: len(i.table.path))   # the one no other private table references
        previous, table = top.alias, top.table
        for n, link in enumerate(top.table.path, start=1):
            alias = f"__path{n}"
            parent = policy.tables[link.references_table]
            # As any link is compared: by the builder, in the form its key was checked unique in.
            on = compare(exp.EQ, col(link.column, previous), table.columns[link.column].sql_type,
                         col(link.references_column, alias), parent.columns[link.references_column].sql_type)
            join_node(source, exp.Table(this=ident(link.references_table), alias=exp.TableAlias(this=ident(alias))),
                      on, "LEFT")
            previous, table = alias, parent
            if table.unit_key is not None:
                keys = [col(table.unit_key, alias)]
                break
    return keys[0] if len(keys) == 1 else exp.Coalesce(this=keys[0], expressions=keys[1:])


def _source(select: exp.Select, instances: dict[str, Instance], renames: dict[tuple[str, str], str],
            unit_name: str, policy: Policy) -> exp.Select:
    """SELECT every column of every table under its relation name, and the unit, FROM the joins (their
    ON, and WHERE's join conditions, as frontend/joins.py wrote them), plus the links' joins the unit needs."""
    first = select.args["from_"].this
    source = exp.select().from_(_table(first, instances), copy=False)
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        parts = [edge.written for edge in join.meta.get("edges", [])]
        if "filter" in join.meta:   # the joined table's own filters, validated and guarded
            parts.append(join.meta["filter"])
        join_node(source, _table(join.this, instances), exp.and_(*parts, copy=False) if parts else None,
                  join.side or ("CROSS" if on is None else "INNER"))
    filters = [edge.written for edge in select.meta.get("join_filters", [])]
    filters += select.meta.get("semi_joins", [])   # already written over the tables' aliases
    if filters:
        source.where(exp.and_(*filters, copy=False), copy=False)
    projections = [exp.Alias(this=col(column, alias), alias=ident(virtual))
                   for (alias, column), virtual in renames.items() if virtual != unit_name]
    if any(not i.table.public for i in instances.values()):
        projections.append(exp.Alias(this=_unit_expression(instances, source, policy), alias=ident(unit_name)))
    source.set("expressions", projections)
    return source


def _table(node: exp.Table, instances: dict[str, Instance]) -> exp.Table:
    alias = (node.alias or node.name).lower()
    return exp.Table(this=ident(instances[alias].table.name), alias=exp.TableAlias(this=ident(alias)))


