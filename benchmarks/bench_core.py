"""How much dpsql's rewrite costs over the plain DuckDB query it protects.

Each case times three systems on the same data, in one process, alternating (A, B, C, A, B, C, ...)
after one warm-up each, and reports the median wall time:

    dpsql      db.sql(...) end to end: parse, validate, plan, rewrite, run, noise, fetch as Arrow
    floor      plain DuckDB doing the least work any DP answer needs: values clamped to the policy
               bounds, and at user level the per-unit pre-aggregation (no sampling, no noise)
    plain      the same aggregate in plain DuckDB, unclamped

Targets: row level <= 1.1x floor, user level <= 1.5x floor.

    python benchmarks/bench_core.py                      # 10M rows, 5 repeats
    python benchmarks/bench_core.py --rows 10000 --repeats 3

>>> [r["case"] for r in run(rows=2000, repeats=1)]
['row', 'user L=1 C=3', 'user L=5 C=3']
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import duckdb

import dpsql

GROUPS = 50
LOWER, UPPER = 0.0, 100.0
QUERY = "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM events GROUP BY grp"

PLAIN = QUERY
CLAMPED = f"LEAST(GREATEST(value, {LOWER}), {UPPER})"
ROW_FLOOR = f"SELECT grp, COUNT(*), SUM({CLAMPED}), AVG({CLAMPED}) FROM events GROUP BY grp"
USER_FLOOR = (
    "SELECT grp, SUM(c), SUM(s), SUM(s) / SUM(n) FROM ("
    f" SELECT user_id, grp, COUNT(*) AS c, SUM({CLAMPED}) AS s, COUNT(value) AS n"
    " FROM events GROUP BY user_id, grp"
    ") GROUP BY grp"
)


def build(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    """Create ``events(event_id, user_id, grp, value)`` with ``rows`` rows, generated in SQL.

    Deterministic (hashes of the row number, no RANDOM()):
      user_id  ~rows/10 users, user = floor(U * u**3): a power law in rank (Zipf exponent 2/3);
               at 10M rows: ~990k users, median 6 rows, max ~100k rows
      grp      50 INTEGER keys; 70% of a user's rows in a home group, the rest skewed toward low keys,
               so a user touches a median of 3 groups (17 at the 99th percentile)
      value    DOUBLE uniform on [-20, 120] (14% below 0, 14% above 100), 1% NULL
    """
    users = max(rows // 10, 1)
    unit = "(hash({}) >> 11)::DOUBLE / 9007199254740992"   # 53 uniform bits in [0, 1)
    con.execute(f"""
        CREATE OR REPLACE TABLE events AS
        WITH r AS (
            SELECT range AS i,
                   LEAST(FLOOR({users} * POW({unit.format('4 * range')}, 3)), {users - 1})::BIGINT AS user_id,
                   {unit.format('4 * range + 1')} AS u_home,
                   {unit.format('4 * range + 2')} AS u_grp,
                   {unit.format('4 * range + 3')} AS u_value
            FROM range({rows})
        )
        SELECT i AS event_id,
               user_id,
               (CASE WHEN u_home < 0.7 THEN (user_id * 7919) % {GROUPS}
                     ELSE LEAST(FLOOR({GROUPS} * POW(u_grp, 2)), {GROUPS - 1}) END)::INTEGER AS grp,
               CASE WHEN u_value < 0.01 THEN NULL
                    ELSE ROUND(-20 + 140 * (u_value - 0.01) / 0.99, 2) END AS value
        FROM r
    """)


def policy(unit: str, L: int = 1, C: int = 1) -> dict:
    """A policy over ``events`` with a budget large enough that a benchmark never runs out."""
    columns = {"grp": {"keys": list(range(GROUPS))},
               "value": {"type": "float", "lower": LOWER, "upper": UPPER}}
    if unit == "row":
        columns["user_id"] = {"identifier": True}
    return {"version": 1, "budget": {"epsilon": 1e9, "delta": 1e-6},
            "tables": {"events": {"privacy_unit": unit, "max_groups_per_unit": L,
                                  "max_rows_per_unit": C, "columns": columns}}}


@dataclass(frozen=True)
class Case:
    name: str
    policy: dict
    floor: str
    target: float       # dpsql / floor must stay at or below this


CASES = (
    Case("row", policy("row"), ROW_FLOOR, 1.1),
    Case("user L=1 C=3", policy("user_id", L=1, C=3), USER_FLOOR, 1.5),
    Case("user L=5 C=3", policy("user_id", L=5, C=3), USER_FLOOR, 1.5),
)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(systems: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """One warm-up each, then ``repeats`` rounds with the systems alternating within every round."""
    for fn in systems.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(repeats):
        for name, fn in systems.items():
            times[name].append(timed(fn))
    return times


def fresh(rows: int, threads: int | None) -> duckdb.DuckDBPyConnection:
    """A new in-memory database holding ``events``, built before dpsql locks it down."""
    con = duckdb.connect(":memory:")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    build(con, rows)
    return con


def run(rows: int, repeats: int, threads: int | None = None) -> list[dict]:
    """Build the data, time every case, return one dict per case (seconds and ratios of medians).

    Keys: case, rows, threads, repeats, dpsql_s, floor_s, plain_s, plan_s (parse..rewrite only),
    dpsql_over_floor, dpsql_over_plain, target, ok, and the raw times under ``times``.
    """
    results = []
    for case in CASES:
        # One database per case: dpsql.connect on an already locked-down database fails (its
        # _lock_down leaves a fetchone() result open, then create_function is refused).
        con = fresh(rows, threads)
        plain = con.cursor()   # shares the database and its global settings (threads included)
        threads_used = plain.execute("SELECT current_setting('threads')").fetchall()[0][0]
        db = dpsql.connect(con, policy=case.policy)
        checks = {"dpsql": len(db.sql(QUERY, epsilon=1.0).fetchall()),
                  "floor": len(plain.sql(case.floor).fetchall()),
                  "plain": len(plain.sql(PLAIN).fetchall())}
        if set(checks.values()) != {GROUPS}:
            raise AssertionError(f"{case.name}: expected {GROUPS} groups from every system, got {checks}")
        times = measure({
            "dpsql": lambda: db.sql(QUERY, epsilon=1.0).arrow(),
            "floor": lambda: plain.sql(case.floor).to_arrow_table(),
            "plain": lambda: plain.sql(PLAIN).to_arrow_table(),
            "plan": lambda: db.explain(QUERY, epsilon=1.0),
        }, repeats)
        plain.close()
        con.close()
        med = {name: statistics.median(ts) for name, ts in times.items()}
        ratio = med["dpsql"] / med["floor"]
        results.append({
            "case": case.name, "rows": rows, "threads": threads_used, "repeats": repeats,
            "dpsql_s": med["dpsql"], "floor_s": med["floor"], "plain_s": med["plain"], "plan_s": med["plan"],
            "dpsql_over_floor": ratio, "dpsql_over_plain": med["dpsql"] / med["plain"],
            "target": case.target, "ok": ratio <= case.target, "times": times,
        })
    return results


def table(results: list[dict]) -> str:
    header = (f"{'case':<14} {'dpsql s':>9} {'floor s':>9} {'plain s':>9} {'plan s':>8}"
              f" {'dpsql/floor':>12} {'dpsql/plain':>12} {'target':>7}  ok")
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r['case']:<14} {r['dpsql_s']:>9.4f} {r['floor_s']:>9.4f} {r['plain_s']:>9.4f}"
                     f" {r['plan_s']:>8.4f} {r['dpsql_over_floor']:>11.2f}x {r['dpsql_over_plain']:>11.2f}x"
                     f" {r['target']:>6.1f}x  {'yes' if r['ok'] else 'NO'}")
    return "\n".join(lines)


def machine() -> str:
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(f.readline().split()[1])
        memory = f"{mem_kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        memory = "unknown memory"
    return (f"{os.cpu_count()} cpus, {memory}, duckdb {duckdb.__version__}, "
            f"python {platform.python_version()}, {platform.machine()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows in events (default 10M)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per case (default 5)")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: DuckDB's)")
    args = parser.parse_args(argv)
    results = run(args.rows, args.repeats, args.threads)
    print(f"{args.rows:,} rows, {args.repeats} repeats, {results[0]['threads']} threads; {machine()}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
