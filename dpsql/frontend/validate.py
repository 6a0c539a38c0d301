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

from sqlglot import exp

from dpsql.errors import DpsqlError
from dpsql.frontend.coerce import coerce_literals, unit_counts
from dpsql.frontend.derived import key_bounds
from dpsql.frontend.options import query_options
from dpsql.policy.model import Policy
from dpsql.frontend.scope import Scope, name_of
from dpsql.frontend.rules.structure import allowed_nodes, known_columns, one_private_table, single_select, star_only_in_count
from dpsql.frontend.rules.aggregates import aggregate_arguments, dp_options, quantile_arguments
from dpsql.frontend.rules.privacy import group_keys_public, no_identifiers, order_by_outputs, outputs_are_aggregates_or_keys, post_clauses
from dpsql.frontend.rules.expressions import bounded_strings, predicates_type_safe
from dpsql.frontend.rules.tables import unit_in_table



# Rules that find the one table the query reads; the scope then knows that table.
SOURCE_RULES = (
    single_select,
    quantile_arguments,
    allowed_nodes,
    one_private_table,
)
# Rules about the query over that table.
QUERY_RULES = (
    unit_in_table,
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
    order_by_outputs,
)
VALIDATION_RULES = SOURCE_RULES + QUERY_RULES


def validate(select: exp.Expression, sql: str, policy: Policy) -> Scope:
    """Run every rule in order; return the scope (table, alias, DP options) of an accepted query."""
    scope = _checked(select, Scope(sql=sql, policy=policy), SOURCE_RULES)
    table = select.args["from_"].this
    scope = dataclasses.replace(scope, table=key_bounds(policy.tables[name_of(table)]),
                                alias=table.alias.lower() if table.alias else None)
    # What the user meant, made total (in place: the plan reads the same tree): literals in their
    # column's type, COUNT(unit) as COUNT(*) on a plain table (a joined relation's unit is its own).
    coerce_literals(select, scope.types)
    unit_counts(select, None if scope.table.row_level or scope.table.source is not None else scope.table.privacy_unit)
    scope = _checked(select, scope, QUERY_RULES)
    # dp_options accepted them: reading them now cannot fail.
    return dataclasses.replace(scope, options=query_options(select, scope.refuse))


def _checked(select: exp.Expression, scope: Scope, rules) -> Scope:
    """Run ``rules``; a refusal names the rule that raised it."""
    for rule in rules:
        try:
            rule(select, scope)
        except DpsqlError as err:
            err.rule = err.rule or rule.__name__
            raise
    return scope
