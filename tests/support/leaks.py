"""The metamorphic leak test's machinery, shared by its test modules (tests/properties/test_leaks.py, one
table per query; tests/properties/test_join_leaks.py, many tables; tests/properties/test_heavy_target.py,
under a memory limit): run a query on a database D and on neighbours D' (D plus one person with all
their rows) through the trusted seam, and check the three properties.

1. **The same outcome**: both refused with the same code, or both answered; never an engine error.
2. **Bounded measurements** (noise off): each scalar measurement moves, in L1 over all groups, by at
   most the sensitivity the plan charges for.
3. **Identical releases** (every measurement 0): the same rows in the same order.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pytest

import dpsql
from dpsql import testing
from tests.support.checks import within_sensitivity


def connect(con: duckdb.DuckDBPyConnection, policy: dict) -> dpsql.PrivateConnection:
    return dpsql.connect(con, ledger=":memory:", policy=copy.deepcopy(policy))


def finding_cases(findings: list[str], neighbour_ids: list[str]) -> list:
    """(sql, neighbour) for every pinned finding on every neighbour. The default run takes each finding on
    the mixed neighbour (its person cycles through every other neighbour's values) and on one more, a
    different one for each finding in turn; ``-m slow`` takes every other pair."""
    others = [n for n in neighbour_ids if n != "mixed"]
    cases = []
    for i, sql in enumerate(findings):
        chosen = {"mixed", others[i % len(others)]}
        cases += [pytest.param(sql, n, id=f"{sql[:70]}-{n}", marks=() if n in chosen else pytest.mark.slow)
                  for n in neighbour_ids]
    return cases


# --------------------------------------------------------------------------------------------
# Running one query on one side, and the three properties
# --------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What one side did: ``answered`` (with its table), ``refused`` (a DpsqlError code, or DP311 when
    DuckDB cannot bind the rewritten SQL: data-independent, refused free by ``db.sql``), or ``engine``
    (the rewritten SQL bound but failed while running: the DP900 of ``db.sql``)."""
    kind: str
    code: str | None = None
    table: pa.Table | None = None
    plan: object = None
    detail: str = ""

    def label(self) -> str:
        return self.kind if self.kind == "answered" else f"{self.kind} {self.code}"


def attempt(db: dpsql.PrivateConnection, sql: str, *, noise: str, stage: str) -> Outcome:
    """Run ``sql`` through the trusted seam the way ``db.sql`` would: plan and lower, bind, execute."""
    try:
        plan = testing.lower(db, sql, noise=noise, sampling="hash", stage=stage)
    except dpsql.DpsqlError as err:
        return Outcome("refused", err.code, detail=err.message)
    if testing.engine(db).dialect != "duckdb":
        return _on_engine(db, plan, noise, stage)
    try:
        relation = testing.bind(db, plan.rewritten_sql)
    except duckdb.Error as err:
        return Outcome("refused", "DP311", plan=plan, detail=str(err).splitlines()[0])
    try:
        # A plan kept by measurements runs as db.sql runs it: drawn, then post-processed (api/executor.py).
        table = testing.measured(db, plan, noise) if stage == "output" else None
        table = testing.fetch(db, relation) if table is None else table
    except duckdb.Error as err:
        return Outcome("engine", type(err).__name__, plan=plan, detail=str(err)[:300])
    return Outcome("answered", table=table, plan=plan)


def _on_engine(db: dpsql.PrivateConnection, plan, noise: str, stage: str) -> Outcome:
    """``attempt``'s bind and run through the engine's own ``bind`` (with the plan's tree, as the executor
    binds it: an engine of stages, engines/spark.py, prints and splits it, or refuses it DP440/DP311,
    free) and ``run``; any error while running is an engine failure."""
    engine = testing.engine(db)
    try:
        bound = engine.bind(plan.rewritten_sql, testing.params(plan.rewritten_sql), getattr(plan, "lowered", None))
    except dpsql.DpsqlError as err:
        return Outcome("refused", err.code, plan=plan, detail=err.message)
    try:
        table = testing.measured(db, plan, noise) if stage == "output" else None
        table = engine.run(bound) if table is None else table
    except Exception as err:   # noqa: BLE001 - EngineError, duckdb.Error: a failure after the bind
        return Outcome("engine", type(err).__name__, plan=plan, detail=str(err)[:300])
    return Outcome("answered", table=table, plan=plan)


def _value(v):
    """A released value made comparable: NaN equals NaN."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def python_columns(table: pa.Table) -> dict[str, list]:
    """The table's columns as Python values; dates and times as their integer storage (DuckDB's
    extreme dates, year 5877642 BC and the like, are no Python dates)."""
    out = {}
    for name, column in zip(table.column_names, table.columns):
        kind = column.type
        if pa.types.is_date32(kind):
            column = column.cast(pa.int32())
        elif pa.types.is_timestamp(kind) or pa.types.is_time(kind) or pa.types.is_date64(kind) or \
                pa.types.is_duration(kind):
            column = column.cast(pa.int64())
        out[name] = [_value(v) for v in column.to_pylist()]
    return out


def rows_of(table: pa.Table) -> list[tuple]:
    columns = list(python_columns(table).values())
    return list(zip(*columns)) if columns else []


def same_outcome(sql: str, name: str, before: Outcome, after: Outcome) -> None:
    """Property 1: the same outcome class on both sides, and never an engine failure."""
    for side, o in (("D", before), (f"D'={name}", after)):
        assert o.kind != "engine", f"engine failure on {side} ({o.code}: {o.detail}) for {sql!r}"
        assert o.code not in ("DP900", "DP999"), f"{o.code} on {side} for {sql!r}: {o.detail}"
    assert before.label() == after.label(), \
        f"outcomes differ: D {before.label()} ({before.detail}), D'={name} {after.label()} ({after.detail}) for {sql!r}"


def measurements_by_group(outcome: Outcome) -> dict[tuple, dict[str, int]]:
    table = outcome.table
    keys = [c for c in table.column_names if c.startswith("__k")]
    names = [m.name for m in outcome.plan.measurements if m.kind != "quantile"]
    names += ["__u"] if outcome.plan.top_k is not None else []
    columns = python_columns(table)
    groups: dict[tuple, dict[str, int]] = {}
    for i in range(table.num_rows):
        key = tuple(columns[k][i] for k in keys)
        while key in groups:            # a key listed twice (it should not be): keep both
            key = key + ("again",)
        groups[key] = {n: columns[n][i] for n in names}
    return groups


def bounded_measurements(sql: str, name: str, before: Outcome, after: Outcome) -> None:
    """Property 2: each scalar measurement moves by at most its sensitivity: L0 groups, Linf each, its
    L1 and L2 norms over all groups."""
    plans = [[(m.name, m.kind, m.sensitivity) for m in o.plan.measurements] for o in (before, after)]
    assert plans[0] == plans[1], f"the plans differ between neighbours: {plans} for {sql!r}"
    b, a = measurements_by_group(before), measurements_by_group(after)
    for m in before.plan.measurements:
        if m.kind == "quantile":
            continue   # quantile trees are not in the measurements stage
        moves = [(a.get(k) or {}).get(m.name, 0) - (b.get(k) or {}).get(m.name, 0) for k in b.keys() | a.keys()]
        broken = within_sensitivity(m.sensitivity, moves)
        assert broken is None, f"measurement {m.name} ({m.label}) moved beyond {m.sensitivity}: {broken}, " \
                               f"neighbour {name}, for {sql!r}"
    top = before.plan.top_k
    if top is not None:   # a top-k's utilities: their changes spread within the range of one choice
        changes = [(a.get(k) or {}).get("__u", 0) - (b.get(k) or {}).get("__u", 0) for k in b.keys() | a.keys()]
        spread = max(changes + [0]) - min(changes + [0])
        assert spread <= top.range, f"top-k utilities spread {spread} > {top.range}, neighbour {name}, for {sql!r}"


def identical_release(sql: str, name: str, before: Outcome, after: Outcome) -> None:
    """Property 3: with every measurement 0, the same table, rows in the same order."""
    assert before.table.column_names == after.table.column_names, (sql, name)
    rb, ra = rows_of(before.table), rows_of(after.table)
    assert len(rb) == len(ra), f"{len(rb)} rows on D, {len(ra)} on D'={name} with zero noise for {sql!r}"
    if rb != ra:
        if sorted(map(repr, rb)) == sorted(map(repr, ra)):
            raise AssertionError(f"the same rows in another order on D'={name} for {sql!r}:\n"
                                 f"D:  {rb[:8]}\nD': {ra[:8]}")
        diff = [(x, y) for x, y in zip(rb, ra) if x != y]
        raise AssertionError(f"released rows differ on D'={name} with zero noise for {sql!r}: first {diff[:3]}")


class Worlds:
    """The base database D (``build()``) and each neighbour D' (``add(build(), name)``), a dpsql
    connection each, with D's outcomes cached."""

    def __init__(self, policy: dict, neighbours, build, add, on=connect):
        """``on(con, policy)``: the dpsql connection over a world's DuckDB rows (default: on DuckDB itself)."""
        self.base = on(build(), policy)
        self.neighbours = {n: on(add(build(), n), policy) for n in neighbours}
        self._base: dict[tuple[str, str], Outcome] = {}

    def on_base(self, sql: str, stage: str, noise: str) -> Outcome:
        """D's outcome, computed once per query (a parametrized test asks again for each neighbour)."""
        if (sql, stage) not in self._base:
            if len(self._base) > 512:
                self._base.clear()
            self._base[sql, stage] = attempt(self.base, sql, noise=noise, stage=stage)
        return self._base[sql, stage]

    def check(self, sql: str, neighbours=None) -> str:
        """Check the three properties for ``sql`` on D and every neighbour; return D's outcome label."""
        base = {stage: self.on_base(sql, stage, noise) for stage, noise in STAGES}
        for name in neighbours or self.neighbours:
            db = self.neighbours[name]
            for stage, noise in STAGES:
                before, after = base[stage], attempt(db, sql, noise=noise, stage=stage)
                same_outcome(sql, name, before, after)
                if before.kind != "answered":
                    continue
                if stage == "measurements":
                    bounded_measurements(sql, name, before, after)
                else:
                    identical_release(sql, name, before, after)
        return base["output"].label()

    def close(self):
        for db in [self.base, *self.neighbours.values()]:
            db.close()


STAGES = (("measurements", "identity"), ("output", "zero"))
