"""Rules that keep single people out of the answer: no identifier column anywhere, GROUP BY keys used
once, outputs, HAVING and ORDER BY over aggregates and keys only, literal LIMIT/OFFSET."""
from __future__ import annotations

from sqlglot import exp
from dpsql.errors import PrivacyViolation
from dpsql.frontend.scope import AGGREGATES, KeySpec, Scope, columns_in, group_keys, is_key, is_unit_count, name_of, output_aliases


def no_identifiers(select: exp.Select, scope: Scope) -> None:
    """No identifier column (nor the privacy unit) appears anywhere in the query (DP203).

    The exemptions, each minimal and each with a grammar/accept file; there are no others:

    * ``COUNT(DISTINCT unit)``: the privacy unit counted, never read (here; accept 088);
    * ``COUNT(unit)``: a row count, rewritten to ``COUNT(*)`` before this rule (frontend/coerce.py;
      accept 077);
    * ``COUNT(id)`` of a bare identifier inside a per-person subquery: the person's rows where it is
      not NULL (frontend/per_person.py ``_counts_rows``; accept 089). SUM, AVG, MIN or MAX of one is
      refused there (reject 135, 136);
    * the keys of a policy's links inside the joins it declares (frontend/joins.py, semijoins.py).
    """
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


def group_keys_public(select: exp.Select, scope: Scope) -> None:
    """GROUP BY columns, or expressions of columns, never listed twice (DP304).

    Keys the policy declares public are all released; groups of any other column only through DP
    partition selection, which needs delta > 0: the plan checks that, knowing delta.
    """
    seen = set()
    for key in group_keys(select, scope):
        if any(isinstance(n, AGGREGATES) for n in key.expression.walk()):
            raise scope.refuse("DP305", "aggregate in GROUP BY", key.node)
        text = key.text
        if text in seen:
            raise scope.refuse("DP304", f"GROUP BY {text} appears twice", key.node)
        seen.add(text)


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


def order_by_outputs(select: exp.Select, scope: Scope) -> None:
    """ORDER BY <n> names one of the SELECT list's columns, counted from 1 (DP307)."""
    order = select.args.get("order")
    for ordered in (order.expressions if order else []):
        target = ordered.this
        if isinstance(target, exp.Literal) and not target.is_string and target.this.isdigit() and \
                not 1 <= int(target.this) <= len(select.expressions):
            raise scope.refuse("DP307", f"ORDER BY {target.this}: there is no output column {target.this}", target)
