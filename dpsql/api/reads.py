"""The engine's reads of public data that planning needs (free: no person's data), once per reader.

A joined public table's GROUP BY column gets its values as keys, a lookup is checked unique, a number
column aggregated without bounds gets [MIN, MAX] of its values. Each read is the engine's
(engines/duckdb.py ``public_keys``, ``unique``, ``public_bounds``), kept per reader (an analyst), in
the reader's turn and under its deadline; api/planner.py calls them from its pipeline.
"""
from __future__ import annotations

import dataclasses
import secrets

from sqlglot import exp

from dpsql.engines.base import Engine
from dpsql.frontend import key_pruning, public_bounds
from dpsql.frontend.scope import Scope, group_keys
from dpsql.policy.model import JointKeys, Policy


class Reads:
    """Planning's reads of public data on one engine (see the module docstring)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def check_lookups(self, table, policy: Policy, reader: str | None, deadline: float | None) -> None:
        """Every public table the query joins is a lookup: the columns it is joined on are unique in it
        as compared (frontend/lookups.py), else DP207 before anything runs. Public data, read by the
        engine once per reader (engines/duckdb.py ``unique``), never shared between analysts. A table of
        released values is not filled yet: it is checked once its stage has run (api/executor.py)."""
        for lookup in table.lookups if table is not None else ():
            if policy.tables[lookup.table].released:
                continue
            if not self.engine.unique(lookup.table, lookup.columns, reader, deadline):
                raise lookup.refusal()

    def public_bounds(self, statement, sql: str, policy: Policy, reader: str | None, deadline: float | None) -> Policy:
        """A joined public table's number column that an aggregate reads without declared bounds gets
        [MIN, MAX] of its values as bounds (frontend/public_bounds.py: public data, so free), read by
        the engine once per reader (engines/duckdb.py ``public_bounds``)."""
        for column, node in public_bounds.wanted(statement, policy):
            table, name = column.public_source or ("", "")   # wanted() gives public columns only
            extremes = self.engine.public_bounds(table, name, reader, deadline)
            policy = public_bounds.with_bounds(statement, policy, column, node, extremes, sql)
        return policy

    def public_keys(self, statement, scope: Scope, reader: str | None, deadline: float | None) -> Scope:
        """GROUP BY columns of joined public tables get their values as keys, read from the engine
        (once per reader: engines/duckdb.py ``public_keys``)."""
        wanted = {c.name for k in group_keys(statement, scope) for c in k.columns
                  if c.public_source is not None and c.keys is None}
        if not wanted:
            return scope
        columns = {name: self._keys_of(statement, scope, c, reader, deadline) if name in wanted else c
                   for name, c in scope.table.columns.items()}
        joint = self._joint_keys(statement, scope, wanted, reader, deadline)
        return dataclasses.replace(scope, table=dataclasses.replace(scope.table, columns=columns, joint_keys=joint))

    def _joint_keys(self, statement, scope: Scope, wanted: set[str], reader: str | None,
                    deadline: float | None) -> JointKeys | None:
        """GROUP BY items that are all columns of one joined public table get the distinct tuples of its
        rows (that pass the query's public conditions) as their groups (frontend/key_pruning.py
        ``joint_read``), counted by the engine (public data only, so free). The tuples stay a read in the
        lowered SQL (lower/keys.py keys_source) and are never kept: nothing grows per WHERE an analyst
        writes; their count is bounded as any query's groups (DP315, frontend/size.py)."""
        keys = group_keys(statement, scope)
        names = [k.expression.name for k in keys if isinstance(k.expression, exp.Column)]
        if len(keys) < 2 or len(names) != len(keys) or not set(names) <= wanted:
            return None
        read = key_pruning.joint_read(statement, scope.table, names, scope.policy)
        if read is None:
            return None
        text = read[0].sql(dialect="duckdb")
        return JointKeys(tuple(names), text, self.engine.pruned_count(text, reader, deadline), read[1])

    def _keys_of(self, statement, scope: Scope, column, reader: str | None, deadline: float | None):
        """One public column's keys: its values, or those of the rows of the public tables that pass the
        WHERE's public conjuncts (frontend/key_pruning.py: public data only, so free)."""
        pruned = key_pruning.pruned_read(statement, scope.table, column, scope.policy)
        keys = self.engine.pruned_keys(pruned[0].sql(dialect="duckdb"), reader, deadline) if pruned else None
        if pruned is not None and keys is not None:
            return dataclasses.replace(column, keys=keys, keys_where=pruned[1])
        return self.engine.public_keys(scope.table.name, column, f"__dpsql_keys_{secrets.token_hex(4)}", reader,
                                       deadline)
