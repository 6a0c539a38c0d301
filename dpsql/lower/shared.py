"""Shared scans: a batch's statements that read one frame, lowered as one engine query (issue 26).

A frame is what a statement's exact stage is a function of, besides its aggregates: the table (or
relation), the WHERE, the GROUP BY keys and their domain, L and C. Statements of one frame differ only
in their measurements, so one pass computes them all: __rows reads every statement's arguments,
__units / __bounded bound each unit once per (unit, partition), __agg holds every measurement's exact
total and __shared (MATERIALIZED: one draw per group and measurement) noises each with its own
mechanism and arguments. Each statement's own post-processing then reads its columns of __shared
renamed back (``__noisy``), and its own final SELECT (HAVING, ORDER BY, LIMIT) runs as written. The
statements' rows come back tagged (``__s``) and numbered in their own order (``__n``), and ``split``
cuts them apart. Measured: benchmarks/shared_scans.py.

Why each statement gets exactly the release it gets alone:
- every measurement keeps its own calibration (sensitivity, loss, scale: its plan's, from the same L
  and C, since the frame is the same), and its noise is its own draw of the executor's one source;
- its rows are the rows it reads alone: the same table, WHERE and key filter (the frame), and each
  argument evaluated as it is alone (an argument two statements evaluate otherwise gets a column of
  each: a COUNT(x) never reads x as another statement's SUM(x) casts it);
- at user level each unit's C rows per partition are capped per measurement as alone, and its L
  partitions are chosen once by one rank per (unit, partition), the run's salted hash (lower/bounding.py),
  for all of the frame's measurements: for each statement the same law as alone (the rank is a function
  of the unit's own row and a salt independent of the data), and
  for the batch what one query with all those aggregates already does (plan/build.py composes its
  measurements sequentially, each calibrated for any choice of partitions: the sensitivity bound holds
  for every fixed choice, so it holds mixed over an independent one). The statements are charged as
  before, each its own epsilon, so the ledger composes exactly what is released.
Totality: every part is the lowering's own (bounding.py, noise.py, post.py); the union, the row
numbers and the tags read released values only and cannot fail. Memory: one unit state per (unit,
partition) with more columns of fixed size, as one query with those aggregates.

A plan with stages, a public last stage, a lookup, a top-k, partition selection, a clipping report, a
quantile or COUNT(DISTINCT) (stages of their own), or without an ORDER BY over its keys, runs alone.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dpsql.lower.bounding import agg_cte, cuts_ranks_first, row_arguments, rows_cte, user_level_ctes
from dpsql.lower.names import SALT, key_names
from dpsql.lower.noise import noisy_cte
from dpsql.lower.post import final_select
from dpsql.lower.rewrite import out_cte
from dpsql.plan.model import Plan
from dpsql.plan.quantities import QUANTITIES, Stage
from dpsql.sql.build import DIALECT, alias, col, ident, num, table

SHARED = "__shared"     # the frame's noisy measurements, every statement's renamed
TAG, ORDINAL = "__s", "__n"
MAX_SHARED = 32         # statements per shared query: its width (and a turn of the engine) stays bounded
# The shared answer holds every statement's rows with every statement's columns (NULL where another's):
# at most this many cells, counted from public bounds (partitions, outputs), never from the data.
MAX_CELLS = 1 << 24


@dataclass(frozen=True)
class Shared:
    """One engine query for several statements: its SQL and each statement's output names, in order."""
    sql: str
    names: tuple[tuple[str, ...], ...]
    salted: bool = False   # it reads the run's salt (lower/names.py SALT): the executor binds one fresh


def shareable(plan: object) -> bool:
    """Whether a plan may run in a shared query (see the module docstring for those that run alone)."""
    return (isinstance(plan, Plan) and not plan.stages and plan.then is None and plan.lookup is None
            and plan.top_k is None and plan.selection is None and plan.clipping is None
            and bool(plan.measurements) and (bool(plan.order) or not plan.group_keys)
            and all(QUANTITIES[m.kind].stage is Stage.STATE for m in plan.measurements))


def same_frame(a: Plan, b: Plan) -> bool:
    """Whether two shareable plans read one frame: the same rows, keys, L and C. The WHERE and the keys
    are compared as nodes and as the SQL they print (a literal's case, a quoted name's, counts)."""
    return (a.table == b.table and a.where == b.where and a.group_keys == b.group_keys
            and a.max_groups == b.max_groups and a.max_rows == b.max_rows and a.partitions == b.partitions
            and _printed(a) == _printed(b))


def _printed(plan: Plan) -> tuple[str, ...]:
    parts = [plan.where, *(k.expression for k in plan.group_keys), *(f for k in plan.group_keys for f in k.filters)]
    return tuple("" if p is None else p.sql(dialect=DIALECT) for p in parts)


def _size(plan: Plan) -> tuple[int, int]:
    """(rows, columns) of a plan's answer at most: its partitions (public keys: known), its outputs
    with their intervals."""
    return plan.partitions or 1, 3 * len(plan.outputs) + 1


def groups(plans: Sequence[object]) -> list[list[int]]:
    """The indices of ``plans`` that share a query: each group one frame, 2 to MAX_SHARED statements and
    at most MAX_CELLS cells, in the plans' order; the others run alone.

    Comparisons are O(n * groups) frame checks, planning-time only."""
    found: list[list[int]] = []
    for i, plan in enumerate(plans):
        if not shareable(plan):
            continue
        home = next((g for g in found if _fits([plans[j] for j in g] + [plan])
                     and same_frame(plans[g[0]], plan)), None)  # type: ignore[arg-type]
        if home is None:
            found.append([i])
        else:
            home.append(i)
    return [g for g in found if len(g) > 1]


def _fits(plans: list) -> bool:
    sizes = [_size(p) for p in plans]
    return len(plans) <= MAX_SHARED and sum(r for r, _ in sizes) * sum(c for _, c in sizes) <= MAX_CELLS


def _measured(i: int, name: str) -> str:
    return f"s{i}_{name}"


def _column(i: int, j: int) -> str:
    return f"__c{i}_{j}"


def _labels(plans: Sequence[Plan]) -> list[dict[str, str]]:
    """Per statement, its arguments' labels that another statement evaluates otherwise (COUNT(x) reads x
    as written, SUM(x) as a clamped DOUBLE: bounding.py ``row_arguments``), each given a label of its
    own, so every statement's rows hold its arguments exactly as alone; labels that agree are shared."""
    taken = {label for plan in plans for label in row_arguments(plan)}
    seen: dict[str, exp.Expression] = {}
    renames = []
    for i, plan in enumerate(plans):
        mine = {}
        for label, value in row_arguments(plan).items():
            if seen.setdefault(label, value) != value:
                fresh = f"{label}@s{i}"
                while fresh in taken:
                    fresh += "@"
                taken.add(fresh)
                mine[label] = fresh
        renames.append(mine)
    return renames


def merged(plans: Sequence[Plan]) -> Plan:
    """The frame's plan with every statement's measurements (renamed apart) and no outputs: what the
    shared stages are lowered from."""
    measurements = tuple(dataclasses.replace(m, name=_measured(i, m.name), column=labels.get(m.column, m.column))
                         for i, (plan, labels) in enumerate(zip(plans, _labels(plans)))
                         for m in plan.measurements)
    return dataclasses.replace(plans[0], measurements=measurements, outputs=(), having=None, order=(), limit=None,
                               offset=None)


def _branch(i: int, plan: Plan) -> tuple[exp.Select, tuple[str, ...]]:
    """Statement ``i``'s own post-processing over its columns of __shared: its rows tagged ``i`` and
    numbered in its final ORDER BY (a total order: keys break ties), its columns named by position."""
    noisy = exp.select(*[col(k) for k in key_names(plan)],
                       *[alias(col(_measured(i, m.name)), m.name) for m in plan.measurements]).from_(table(SHARED))
    final = final_select(plan)
    order = final.args.get("order")
    rank = exp.Window(this=exp.RowNumber(), order=order.copy() if order is not None else None)
    names = tuple(e.alias_or_name for e in final.expressions)
    values = [e.this if isinstance(e, exp.Alias) else e for e in final.expressions]
    final.set("expressions", [alias(v, _column(i, j)) for j, v in enumerate(values)] + [alias(rank, ORDINAL)])
    final = final.with_(ident("__noisy"), as_=noisy, copy=False).with_(ident("__out"), as_=out_cte(plan), copy=False)
    tagged = exp.select(alias(num(i), TAG), exp.Star()).from_(
        exp.Subquery(this=final, alias=exp.TableAlias(this=ident(f"__q{i}"))), copy=False)
    return tagged, names


def combined(plans: Sequence[Plan], noise_function: str, sampling: str = "keyed") -> Shared:
    """One query answering every plan of one frame (``groups``); ``sampling`` as lower/rewrite.py's."""
    whole = merged(plans)
    ctes = [("__rows", rows_cte(whole))]
    source = "__rows"
    if not whole.table.row_level:
        ctes += user_level_ctes(whole, sampling)
        source = ctes[-1][0]
    materialized = {SHARED}   # one draw of the noise per group and measurement
    if source == "__bounded" and cuts_ranks_first(whole):
        materialized.add("__units")   # __cut and __bounded read it: aggregated once
    ctes += [("__agg", agg_cte(whole, source)), (SHARED, noisy_cte(whole, noise_function))]
    branches = [_branch(i, plan) for i, plan in enumerate(plans)]
    union: exp.Expression = branches[0][0]
    for branch, _ in branches[1:]:
        union = exp.Union(this=union, expression=branch, distinct=False, by_name=True)
    query = exp.select(exp.Star()).from_(exp.Subquery(this=union, alias=exp.TableAlias(this=ident("__all"))),
                                         copy=False).order_by(col(TAG), col(ORDINAL), copy=False)
    for name, cte in ctes:
        query = query.with_(ident(name), as_=cte, materialized=True if name in materialized else None, copy=False)
    salted = any(p.name == SALT for p in query.find_all(exp.Placeholder))
    return Shared(query.sql(dialect=DIALECT, copy=False), tuple(names for _, names in branches), salted)


def split(shared: Shared, answer: pa.Table) -> list[pa.Table]:
    """Each statement's released table, cut from the shared answer: its rows in its own order, its
    columns as it names them."""
    tags = answer.column(TAG)
    return [answer.filter(pc.equal(tags, i)).select([_column(i, j) for j in range(len(names))])
            .rename_columns(list(names)) for i, names in enumerate(shared.names)]
