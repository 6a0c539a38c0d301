"""Per-person state before the caps (issue 20): the quantile tree's leaves, COUNT(DISTINCT)'s values
and the choice of a person's L partitions.

A quantile tree keeps C of a person's values per partition, COUNT(DISTINCT col) C of their distinct
values, __bounded L of their partitions. This times the SQL dpsql runs for such queries (noise off:
the engine's work) on ``bench_core.build``'s events (power-law users: at 10M rows ~990k users, max ~100k rows), and, with
``--baseline TREE``, the SQL another checkout's dpsql writes for the same queries, on the same
connection, alternating within every round after one warm-up each (medians of ``--repeats``):

    python3 benchmarks/per_person_lists.py --rows 1000000,10000000 --repeats 7 --baseline ../main

``--memory-limit 256MB --heavy 8000000`` adds one user with that many rows (in a home group, on 16
distinct values of ``value``) and runs every query under DuckDB's memory limit, one thread: a
lowering that holds a person's values in a list fails there ("OOM" in the table).

>>> [r["query"] for r in run(rows=5000, repeats=1)]
['median', 'quantiles_and_count', 'median_one_partition', 'distinct', 'distinct_by_bin', 'count_sum', 'private_keys']
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_core  # noqa: E402
import dpsql  # noqa: E402
from dpsql import testing  # noqa: E402

QUERIES = {
    "median": "SELECT grp, MEDIAN(value) FROM events GROUP BY grp",
    "quantiles_and_count": "SELECT grp, QUANTILE_CONT(value, 0.1), QUANTILE_CONT(value, 0.9), COUNT(*) "
                           "FROM events GROUP BY grp",
    "median_one_partition": "SELECT MEDIAN(value) FROM events",
    "distinct": "SELECT COUNT(DISTINCT grp) FROM events",
    "distinct_by_bin": "SELECT FLOOR(value / 10) AS b, COUNT(DISTINCT grp) FROM events GROUP BY b",
    # __bounded's choice of L partitions: by a window over each unit's (at most 50) public partitions,
    # and with private keys cut at each unit's L-th rank first
    "count_sum": "SELECT grp, COUNT(*), SUM(value) FROM events GROUP BY grp",
    "private_keys": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) grp10k, COUNT(*), SUM(value) "
                    "FROM events GROUP BY grp10k",
}
# L = 5 partitions of 50: a unit's partitions are sampled (__bounded); C = 3 values per partition.
POLICY = bench_core.policy("user_id", L=5, C=3)
POLICY["tables"]["events"]["columns"]["grp10k"] = {}   # keys not declared: partition selection
NOISE = re.compile(r"dpsql_identity_[0-9a-f]+")


def rewritten(db) -> dict[str, str]:
    """The SQL of every query, noise off (identity), partitions ranked by the keyed hash as in production."""
    return {name: testing.lower(db, sql, noise="identity", sampling="keyed").rewritten_sql
            for name, sql in QUERIES.items()}


def chosen(names: str | None) -> list[str]:
    """The queries named (comma-separated), or all of them."""
    picked = names.split(",") if names else list(QUERIES)
    unknown = [n for n in picked if n not in QUERIES]
    if unknown:
        raise SystemExit(f"unknown queries {unknown}; known: {', '.join(QUERIES)}")
    return picked


def baseline_sql(tree: str) -> dict[str, str]:
    """``rewritten`` as another checkout's dpsql writes it (in a child process run in that tree: ``python
    -c`` puts the working directory first on sys.path), over an empty events table of the same schema."""
    tree = str(Path(tree).resolve())
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import bench_core, dpsql, per_person_lists as p; "
            "con = bench_core.fresh_database(0, None); print(json.dumps([dpsql.__file__, "
            "p.rewritten(dpsql.connect(con, ledger=':memory:', policy=p.POLICY))]))")
    out = subprocess.run([sys.executable, "-c", code, str(HERE)], cwd=tree, env=dict(os.environ, PYTHONPATH=tree),
                         capture_output=True, text=True, check=True)
    where, sqls = json.loads(out.stdout)
    if not Path(where).resolve().is_relative_to(tree):
        raise SystemExit(f"the baseline imported {where}, not the dpsql of {tree}")
    return sqls


def add_heavy_user(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    """One more user (id -1) with ``rows`` rows in group 0, on 16 distinct values (16 leaves)."""
    con.execute(f"INSERT INTO events SELECT -1 - range, -1, 0, 0, (range % 16)::DOUBLE FROM range({rows})")


def timed(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[float, float] | None:
    """Wall and process CPU seconds of one run to Arrow; None if DuckDB ran out of memory."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        con.sql(sql, params=testing.params(sql)).to_arrow_table()
    except duckdb.OutOfMemoryException:
        return None
    return time.perf_counter() - wall, time.process_time() - cpu


def median(times: list) -> dict:
    if any(t is None for t in times):
        return {"wall_s": None, "cpu_s": None}
    return {"wall_s": statistics.median(t[0] for t in times), "cpu_s": statistics.median(t[1] for t in times)}


def run(rows: int, repeats: int, baseline: str | None = None, memory_limit: str | None = None,
        heavy: int = 0, queries: list[str] | None = None) -> list[dict]:
    """One dict per query: medians (wall, CPU) of this tree's SQL and, with ``baseline``, the other's."""
    con = bench_core.fresh_database(rows, 1 if memory_limit else None)
    if heavy:
        add_heavy_user(con, heavy)
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    db = dpsql.connect(con, ledger=":memory:", policy=POLICY)
    ours = rewritten(db)
    function = NOISE.search(next(iter(ours.values()))).group(0)
    systems = {"new": ours}
    if baseline:
        systems["baseline"] = {name: NOISE.sub(function, sql) for name, sql in baseline_sql(baseline).items()}
    runner = testing.duckdb_connection(db)
    results = []
    for name in queries or list(QUERIES):
        times: dict[str, list] = {system: [] for system in systems}
        for sqls in systems.values():   # warm-up
            timed(runner, sqls[name])
        for _ in range(repeats):
            for system, sqls in systems.items():
                times[system].append(timed(runner, sqls[name]))
        row = {"query": name, "rows": rows, "heavy": heavy, "memory_limit": memory_limit, "repeats": repeats,
               **{system: median(ts) for system, ts in times.items()}}
        if baseline and row["new"]["wall_s"] and row["baseline"]["wall_s"]:
            row["new_over_baseline"] = row["new"]["wall_s"] / row["baseline"]["wall_s"]
            row["cpu_new_over_baseline"] = row["new"]["cpu_s"] / row["baseline"]["cpu_s"]
        results.append(row)
    db.close()
    return results


def seconds(value) -> str:
    return "OOM" if value is None else f"{value:.3f}"


def table(results: list[dict]) -> str:
    lines = ["| rows | query | new s (CPU) | baseline s (CPU) | new/baseline wall (CPU) |", "|---|---|---|---|---|"]
    for r in results:
        base = r.get("baseline", {"wall_s": None, "cpu_s": None})
        ratio = f"{r['new_over_baseline']:.2f}x ({r['cpu_new_over_baseline']:.2f}x)" if "new_over_baseline" in r else "-"
        rows = f"{r['rows']:,}" + (f" + {r['heavy']:,} heavy" if r["heavy"] else "")
        lines.append(f"| {rows} | {r['query']} | {seconds(r['new']['wall_s'])} ({seconds(r['new']['cpu_s'])}) | "
                     f"{seconds(base['wall_s'])} ({seconds(base['cpu_s'])}) | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1000000", help="comma-separated sizes (default 1000000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", metavar="TREE", help="another checkout whose lowering to time beside this one")
    parser.add_argument("--memory-limit", metavar="SIZE", help="DuckDB memory_limit (and one thread), e.g. 256MB")
    parser.add_argument("--heavy", type=int, default=0, metavar="ROWS", help="add one user with this many rows")
    parser.add_argument("--queries", metavar="NAMES", help=f"comma-separated, of {', '.join(QUERIES)} (default all)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    opts = parser.parse_args()
    results = [r for rows in opts.rows.split(",")
               for r in run(int(rows), opts.repeats, opts.baseline, opts.memory_limit, opts.heavy, chosen(opts.queries))]
    print(table(results))
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
