"""Rules about the queried table's place in the policy: whether its rows carry their privacy unit."""
from __future__ import annotations

from sqlglot import exp

from dpsql.frontend.scope import Scope


def unit_in_table(select: exp.Select, scope: Scope) -> None:
    """The table holds its privacy unit's key (DP205). A linked table whose unit only a join along its
    path can find (``lineitem.l_orderkey -> orders.o_orderkey -> ...``) cannot bound each person's
    rows on its own; taking its link as the unit would bound per order, not per person."""
    table = scope.table
    if table is None or not table.path or table.unit_key is not None:
        return
    alone = sorted(name for name, t in scope.policy.tables.items() if t.root == table.root and t.unit_key)
    raise scope.refuse(
        "DP205", f"table {table.name!r} reaches its privacy unit ({table.root}.{table.root_column}) only through "
                 f"other tables ({', '.join(map(str, table.path))}); queries over it need those joins "
                 "(frontend/joins.py adds them)", select.args["from_"].this,
        hint=f"tables of this privacy unit that can be queried alone: {', '.join(alone)}")
