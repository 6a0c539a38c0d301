"""Replay keys: what makes two queries the same release, so an identical query gets the answer already
paid for. They join the parse (the normalised SQL), the plan (its signature) and the ledger (the
policy's identity, the key's format), so they live here, in the layer above all three.

Repeated queries. An identical query (same normalised SQL and output names, epsilon, delta, policy
and data version: engines/versions.py) is answered with the answer already released, at no cost, so
averaging repeated answers gains nothing; ``fresh=True`` / ``--fresh`` draws anew and pays. A stale
replay is never a privacy problem: it repeats an answer already paid for.
"""
from __future__ import annotations

import hashlib
from enum import Enum

import pyarrow as pa
from sqlglot import exp

from dpsql.accounting.budget import Cost
from dpsql.accounting.identity import FORMAT, canonical

from dpsql.frontend.dialect import DifferentialPrivacy
from dpsql.frontend.parse import DIALECT, parse
from dpsql.plan.model import Plan


def normalise_sql(sql: str) -> tuple[str, tuple[str, ...]]:
    """The query as sqlglot prints it (keywords, spacing, identifier case, comments normalised), and its
    output names as typed (they name the result's columns).

    Printed in the dpsql dialect, so the ``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)`` clause and the
    per-aggregate ``contribution_bounds_per_group/_per_row`` stay in the history and the replay key.

    >>> normalise_sql("select  Sex AS N, count(*)  -- hi\\n FROM people group by sex")
    ('SELECT sex AS n, COUNT(*) FROM people GROUP BY sex', ('N', '*'))
    >>> normalise_sql("select with differential_privacy options(epsilon=1) sum(x, contribution_bounds_per_row=>(0,5)) from t")[0]
    'SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1) SUM(x, contribution_bounds_per_row => (0, 5)) FROM t'
    """
    statement = parse(sql)
    try:
        text = statement.sql(dialect=DIALECT, normalize=True, comments=False)
    except Exception:  # noqa: BLE001 - a node the generator cannot print: match the text exactly
        text = " ".join(sql.split())
    names = tuple(e.alias_or_name for e in getattr(statement, "expressions", None) or ())
    return text, names


def noisy_values_sql(sql: str) -> str | None:
    """The query with OPTIONS(top_k = 'noisy_values') added: a noisy top-k (plan/top_k.py) answered as
    post-processing of every group's noisy value instead, the plan api/accountant.py ``preferred``
    takes when those values were all released before (free). None where the query chose its top-k
    itself (OPTIONS(top_k = ...)), or has no SELECT of its own.

    >>> noisy_values_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n LIMIT 1")
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(top_k = 'noisy_values') sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n LIMIT 1"
    """
    statement = parse(sql)
    if not isinstance(statement, exp.Select):
        return None
    clause = statement.meta.get("dp")
    options = [] if clause is None else clause.options()
    if any(isinstance(o, exp.EQ) and o.this.name.lower() == "top_k" for o in options):
        return None
    choice = exp.EQ(this=exp.column("top_k"), expression=exp.Literal.string("noisy_values"))
    statement.meta["dp"] = DifferentialPrivacy(expressions=[*options, choice])
    return statement.sql(dialect=DIALECT)


LEVEL = b"dpsql.ci"   # a stored answer's intervals' confidence level, in its Arrow schema's metadata


def stored(table: pa.Table, plan: Plan) -> pa.Table:
    """A released answer as the ledger keeps it: with its intervals' level, so that the answer shown again
    from the history (GET /v1/history/N) labels its intervals as the fresh one did. The level is the
    analyst's own parameter, public.

    >>> stored(pa.table({"n": [1]}), Plan.__new__(Plan)).schema.metadata is None
    True
    """
    level = getattr(plan, "confidence", None)
    if level is None:
        return table
    return table.replace_schema_metadata({**(table.schema.metadata or {}), LEVEL: repr(float(level)).encode()})


def unstored(table: pa.Table) -> tuple[pa.Table, float | None]:
    """A stored answer as the analyst got it (without the level's metadata), and that level (None: no
    intervals, or an answer stored before levels were kept)."""
    meta = dict(table.schema.metadata or {})
    level = meta.pop(LEVEL, None)
    return table.replace_schema_metadata(meta or None), None if level is None else float(level)


def replay_key(normalised: tuple[str, tuple[str, ...]], cost: Cost, identity: str, data_version: str) -> str:
    """SHA-256 over everything that makes two queries the same release."""
    text, names = normalised
    doc = [FORMAT, identity, data_version, text, list(names), str(cost.epsilon), str(cost.delta)]
    return hashlib.sha256(canonical(doc).encode()).hexdigest()


def plan_summary(plan) -> str:
    """One line for the history: table, measurements, composition."""
    measurements = ", ".join(f"{m.label} {m.mechanism}, {m.loss}" for m in plan.measurements)
    text = (f"{plan.table.name}: sequential over {len(plan.measurements)} measurement(s) "
            f"[{measurements}]")
    if plan.group_keys:
        # Private keys: how many groups partition selection releases is not known before the run.
        groups = ("the groups released by partition selection" if plan.partitions is None
                  else f"{plan.partitions} partition(s)")
        text += f"; parallel over {groups}, each unit in <= {plan.max_groups}"
    for i, stage in enumerate(plan.stages):
        text += f"; after stage {i + 1} ({plan_summary(stage.plan)})"
    return text


def plan_signature(plan: Plan) -> str:
    """Everything about a plan that shapes what it releases, beyond its SQL text."""
    # Every field of every measurement (the argument as SQL text: a tree's repr can be enormous). A
    # quantile rule's q enters only where it is set, so the plans of before keep their replay keys.
    parts = [repr(tuple(m.argument.sql() if name == "argument" and m.argument is not None else
                        value.value if isinstance(value, Enum) else value   # as the strings they replaced
                        for name, value in vars(m).items() if name != "quantile" or value is not None))
             for m in plan.computed]
    parts += [repr((o.name, o.kind.value, o.column, o.measurements, o.key_index, o.lower, o.upper, o.hidden,
                    o.expression.sql() if o.expression is not None else None, o.quantile)) for o in plan.outputs]
    parts += [k.expression.sql() for k in plan.group_keys]
    parts += [f"L={plan.max_groups}", f"C={plan.max_rows}", f"selection={plan.selection}",
              f"ci={plan.confidence}", f"nonnegative={plan.nonnegative}"]
    top = plan.top_k
    if top is not None:   # the choice: its utility's fields are among the measurements' above (Plan.computed)
        parts.append(f"top_k=({top.utility.name}, {top.k}, {top.descending}, {top.by_rank}, {top.monotone}, "
                     f"{top.loss}, {top.scale})")
    # Earlier stages (frontend/stages.py): each releases too. Absent without stages: keys of before stay.
    parts += [f"stage=({plan_signature(s.plan)})" for s in plan.stages]
    return ";".join(parts)
