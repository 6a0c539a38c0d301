"""How the policy's tables reach their privacy unit: links along foreign keys, checked whole.

A private table either defines the unit itself (``privacy_unit: c_custkey``, or ``row``: a root) or
says how its rows reach it: ``privacy_unit: {via: o_custkey, references: customer.c_custkey}`` (a
link: a column of this table and the unique key it references). Following links from table to table
must end at a root whose unit is a column; a ``public: true`` table holds no person's data and is never
on a path. Each linked table gets its path (its own link first) and its root's unit column.

>>> from dpsql.policy.loading import load_policy
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {
...     "customer": {"privacy_unit": "c_custkey"},
...     "orders": {"privacy_unit": {"via": "o_custkey", "references": "customer.c_custkey"}},
...     "lineitem": {"privacy_unit": {"via": "l_orderkey", "references": "orders.o_orderkey"}},
...     "nation": {"public": True}}})
>>> [str(link) for link in p.tables["lineitem"].path]
['lineitem.l_orderkey -> orders.o_orderkey', 'orders.o_custkey -> customer.c_custkey']
>>> p.tables["lineitem"].root, p.tables["lineitem"].root_column, p.tables["orders"].unit_key
('customer', 'c_custkey', 'o_custkey')
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from dpsql.policy.model import ColumnPolicy, Link, TablePolicy, invalid


@dataclass(frozen=True)
class Declared:
    """A link as written, with the policy paths that errors name."""
    link: Link
    path: str           # tables.<name>.privacy_unit
    table_paths: Mapping[str, str]   # lower-cased table name -> tables.<name as written>


def parse_link(table: str, spec: Any, path: str) -> Link:
    """``{via: column, references: table.column}`` (names lower-cased, as DuckDB compares them)."""
    if not isinstance(spec, Mapping):
        raise invalid(path, "must be a column name, `row`, or {via: column, references: table.column}")
    for key in spec:
        if key not in ("via", "references"):
            raise invalid(f"{path}.{key}", "unknown entry (expected one of: references, via)")
    for key in ("via", "references"):
        if key not in spec:
            raise invalid(f"{path}.{key}", "is required (a link is {via: column, references: table.column})")
    via = spec["via"]
    if not isinstance(via, str) or not via or via.lower() == "row":
        raise invalid(f"{path}.via", "must name a column of this table")
    ref = spec["references"]
    parts = ref.split(".") if isinstance(ref, str) else []
    if len(parts) != 2 or not all(parts):
        raise invalid(f"{path}.references", f"must be `table.column` (the unique key the link points at), got {ref!r}")
    return Link(table, via.lower(), parts[0].lower(), parts[1].lower())


def _target_problem(link: Link, tables: Mapping[str, TablePolicy]) -> str | None:
    target = tables.get(link.references_table)
    if target is None:
        return (f"table {link.references_table!r} is not a table of the policy "
                f"(tables: {', '.join(sorted(tables))})")
    if target.public:
        return (f"table {link.references_table!r} is public (it holds no person's data): a link must lead, "
                "through private tables, to the table whose privacy_unit is a column")
    if target.row_level:
        return (f"table {link.references_table!r} has privacy_unit `row`: a link must reach a table whose "
                f"privacy_unit is a column (declare {link.references_table}'s unique key, e.g. "
                f"{link.references_column}, as its privacy_unit)")
    return None


def _cycle(start: str, links: Mapping[str, Declared]) -> list[Link] | None:
    """The links of a cycle reached from ``start``, or None when its links end at a root."""
    seen: list[str] = []
    name = start
    while name in links:
        if name in seen:
            cycle = seen[seen.index(name):]
            return [links[t].link for t in cycle]
        seen.append(name)
        name = links[name].link.references_table
    return None


def _path(name: str, links: Mapping[str, Declared]) -> tuple[Link, ...]:
    path = []
    while name in links:
        path.append(links[name].link)
        name = links[name].link.references_table
    return tuple(path)


def _mark_referenced(table: TablePolicy, column: str, declared: Declared, identifier) -> TablePolicy:
    """A referenced key names one row, hence one person: an identifier, never keys or bounds."""
    col = table.columns.get(column)
    if col is not None and (col.keys is not None or col.bounded or col.dates is not None):
        where = declared.table_paths[table.name]
        raise invalid(f"{where}.columns.{column}",
                      f"is referenced by {declared.path} ({declared.link}), so it identifies a person: "
                      "it cannot have keys or bounds")
    if col is not None and col.identifier:
        return table
    return dataclasses.replace(table, columns={**table.columns, column: identifier(column)})


def resolve_links(tables: Mapping[str, TablePolicy], links: Mapping[str, Declared],
                  identifier: Callable[[str], ColumnPolicy]) -> dict[str, TablePolicy]:
    """Check every link (target exists, is private and not row-level, no cycle) and give each linked
    table its path and root unit column; referenced keys become identifiers of their tables
    (``identifier(name)``: a new identifier column).

    Raises:
        PolicyError (DP501): naming the ``privacy_unit`` entry of the bad link.
    """
    for declared in links.values():
        problem = _target_problem(declared.link, tables)
        if problem:
            raise invalid(f"{declared.path}.references", problem)
    for name, declared in links.items():
        cycle = _cycle(name, links)
        if cycle:
            raise invalid(declared.path, f"the links form a cycle ({', '.join(map(str, cycle))}): following "
                                         "them must end at the table whose privacy_unit is a column")
    out = dict(tables)
    for declared in links.values():
        target = declared.link.references_table
        out[target] = _mark_referenced(out[target], declared.link.references_column, declared, identifier)
    for name in links:
        path = _path(name, links)
        out[name] = dataclasses.replace(out[name], path=path, root_unit=tables[path[-1].references_table].privacy_unit)
    return out
