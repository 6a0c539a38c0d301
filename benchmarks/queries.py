"""The fixed query set of ``run.py``: each query as the analyst writes it, the policy it runs under,
the plain-DuckDB floor any correct DP answer must pay, and SmartNoise SQL's version of it.

Data: ``events(event_id, user_id, grp, grp10k, value)`` from ``bench_core.build`` (skewed users, 50 and
10,000 groups, 28% of values outside the bounds [0, 100], 1% NULL); ``wide(k, value)`` for the
million-group case.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench_core import GROUPS, LOWER, MANY_GROUPS, UPPER, USER_FLOOR

import smartnoise_duckdb

DELTA = 1e-6
C = 3                    # user level: at most C rows per unit in a group ...
L = 1                    # ... and at most L groups per unit; SmartNoise: at most L * C rows per unit
MILLION = 1_000_000
CLAMPED = f"LEAST(GREATEST(value, {LOWER}), {UPPER})"


def policy(name: str) -> dict:
    """dpsql policies: ``row`` (public keys), ``private`` (grp10k keys not declared: selected), ``user``."""
    value = {"type": "float", "lower": LOWER, "upper": UPPER}
    if name == "wide":
        return {"version": 1, "budget": {"epsilon": 1e9, "delta": 0.5},
                "tables": {"wide": {"privacy_unit": "row",
                                    "columns": {"k": {"keys": list(range(MILLION))}, "value": value}}}}
    columns = {"grp": {"keys": list(range(GROUPS))}, "value": value, "event_id": {"identifier": True}}
    columns["grp10k"] = {"type": "int"} if name == "private" else {"keys": list(range(MANY_GROUPS))}
    table = {"privacy_unit": "row", "columns": columns}
    if name == "user":
        del columns["event_id"]
        columns["user_id"] = {"identifier": True}
        table = {"privacy_unit": "user_id", "max_groups_per_unit": L, "max_rows_per_unit": C,
                 "columns": columns}
    return {"version": 1, "budget": {"epsilon": 1e9, "delta": 0.5}, "tables": {"events": table}}


def smartnoise_metadata(name: str) -> dict:
    """The same table, bounds and unit for SmartNoise; public keys are declared by not censoring."""
    if name == "wide":
        return smartnoise_duckdb.metadata("wide", {"k": ("int", None, None), "value": ("float", LOWER, UPPER)},
                                          unit=None, max_ids=1, censor_dims=False)
    columns = {"grp": ("int", None, None), "grp10k": ("int", None, None), "event_id": ("int", None, None),
               "value": ("float", LOWER, UPPER)}
    unit = "user_id" if name == "user" else None
    return smartnoise_duckdb.metadata("events", columns, unit=unit, max_ids=L * C if unit else 1,
                                      censor_dims=name == "private")


@dataclass(frozen=True)
class Query:
    name: str
    sql: str                   # dpsql and plain DuckDB run this text
    policy: str                # see policy()
    floor: str                 # plain DuckDB doing the least work any DP answer needs
    smartnoise: str | None     # SmartNoise's text (None: it has no such query)
    delta: float = 0.0
    table: str = "events"
    speed_only: bool = False   # not in the accuracy runs

    @property
    def plain(self) -> str:
        return self.sql


def _agg(key: str, where: str = "", avg: bool = True, source: str = "events") -> tuple[str, str]:
    mean = ", AVG(value) AS mean" if avg else ""
    floor_mean = f", AVG({CLAMPED}) AS mean" if avg else ""
    sql = f"SELECT {key}, COUNT(*) AS n, SUM(value) AS total{mean} FROM {source}{where} GROUP BY {key}"
    floor = f"SELECT {key}, COUNT(*) AS n, SUM({CLAMPED}) AS total{floor_mean} FROM {source}{where} GROUP BY {key}"
    return sql, floor


def _in_main(sql: str, table: str = "events") -> str:
    """SmartNoise's text: the same SQL with the table named in its metadata's schema."""
    return sql.replace(f"FROM {table}", f"FROM main.{table}")


def _query(name: str, key: str, policy_name: str, where: str = "", avg: bool = True, **extra) -> Query:
    table = extra.get("table", "events")
    sql, floor = _agg(key, where, avg, table)
    return Query(name, sql, policy_name, floor, _in_main(sql, table), **extra)


QUERIES = (
    _query("count_sum_avg", "grp", "row"),
    _query("groups_10k", "grp10k", "row"),
    _query("where", "grp", "row", where=" WHERE value > 50", avg=False),
    Query("user_level", _agg("grp")[0], "user", USER_FLOOR, _in_main(_agg("grp")[0])),
    _query("private_keys", "grp10k", "private", avg=False, delta=DELTA),
    Query("median", "SELECT grp, MEDIAN(value) AS med FROM events GROUP BY grp", "row",
          f"SELECT grp, MEDIAN({CLAMPED}) AS med FROM events GROUP BY grp",
          "SELECT grp, PERCENTILE_CONT(value) AS med FROM main.events GROUP BY grp"),
    _query("groups_1m", "k", "wide", avg=False, table="wide", speed_only=True),
)
BY_NAME = {q.name: q for q in QUERIES}
