"""Queries answered in the local model (issue 23, item 6): ``SELECT col, COUNT(*) FROM t GROUP BY col``
over a randomized column of a ``local_model: true`` table (docs/local_model.md).

Why this spends no central budget: each row's value of the column is its respondent's randomized
report, epsilon-DP for them already (mechanisms/randomized_response.py), and the owner declared the
rows themselves public (``local_model``: who answered, how many). The number of reports of each
category is a function of the reports alone, and so is the debiased estimate: post-processing, which
costs nothing more. The query must read nothing else: a WHERE, another column, another aggregate, a
join, an ORDER BY, a LIMIT or OPTIONS would make the answer depend on private data beyond the
reports, so any of them sends the query through central DP as before (where the column's domain is
its public keys). The answer's rows are the domain's categories, in its declared order, whatever the
data holds.

>>> from dpsql.policy import load_policy
>>> from dpsql.frontend.parse import parse
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"s": {"privacy_unit": "id", "local_model": True,
...     "columns": {"smoker": {"randomized": {"epsilon": 1, "domain": [False, True]}}}}}})
>>> local_query(parse("SELECT smoker, COUNT(*) AS n FROM s GROUP BY smoker"), p)
LocalQuery(table='s', column='smoker', names=('smoker', 'n'), key_first=True)
>>> local_query(parse("SELECT smoker, COUNT(*) FROM s WHERE id > 3 GROUP BY smoker"), p) is None
True
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpsql.frontend.scope import name_of
from dpsql.policy.model import Policy

COUNT_NAME = "count_star()"   # DuckDB's name of an unaliased COUNT(*)


@dataclass(frozen=True)
class LocalQuery:
    """A count of each category of a randomized column: the table and column, the two outputs' names
    (the key's, the count's, as the SELECT names them), and whether the key comes first."""
    table: str
    column: str
    names: tuple[str, str]
    key_first: bool


def _unaliased(node: exp.Expression) -> tuple[exp.Expression, str | None]:
    return (node.this, node.alias) if isinstance(node, exp.Alias) else (node, None)


def _column_of(node: exp.Expression, table: exp.Table) -> str | None:
    """The lower-cased name of a plain column of ``table`` (unqualified, or by its name or alias)."""
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier) or \
            node.args.get("db") or node.args.get("catalog"):
        return None
    if node.table and node.table.lower() not in {name_of(table), (table.alias or name_of(table)).lower()}:
        return None
    return name_of(node)


def _is_count_star(node: exp.Expression) -> bool:
    return isinstance(node, exp.Count) and isinstance(node.this, exp.Star) and not node.meta.get("named_args")


def local_query(statement: exp.Expression, policy: Policy) -> LocalQuery | None:
    """The local-model count the statement asks for, or None (the query goes through central DP)."""
    if not isinstance(statement, exp.Select) or statement.meta.get("dp") is not None or \
            {k for k, v in statement.args.items() if v} != {"expressions", "from_", "group"}:
        return None
    source, group = statement.args["from_"].this, statement.args["group"]
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier) or \
            source.args.get("db") or source.args.get("catalog") or len(group.expressions) != 1 or \
            len(statement.expressions) != 2:
        return None
    table = policy.tables.get(name_of(source))
    column = _column_of(group.expressions[0], source)
    if table is None or not table.local_model or column is None or column not in table.columns or \
            table.columns[column].randomized is None:
        return None
    (first, first_alias), (second, second_alias) = (_unaliased(e) for e in statement.expressions)
    for key, key_alias, count, count_alias, key_first in ((first, first_alias, second, second_alias, True),
                                                          (second, second_alias, first, first_alias, False)):
        if _column_of(key, source) == column and _is_count_star(count):
            names = (key_alias or key.name, count_alias or COUNT_NAME)
            return LocalQuery(table.name, column, names, key_first)
    return None
