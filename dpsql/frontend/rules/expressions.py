"""Rules that keep expressions total: WHERE compares values of one kind, and no expression builds a
string much longer than what a row holds."""
from __future__ import annotations

from sqlglot import exp
from dpsql.sql.totality import COMPARISONS
from dpsql.policy.model import ColumnPolicy
from dpsql.sql.types import is_numeric, is_string
from dpsql.sql.totality import string_too_long
from dpsql.frontend.scope import Scope, name_of


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
