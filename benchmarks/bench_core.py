"""How much dpsql's rewrite costs over the plain DuckDB query it protects.

Each case times these systems on the same data, in one process, alternating (A, B, C, D, A, B, ...)
after one warm-up each, and reports the median wall time (and the median process CPU time, which
other load on the machine disturbs less):

    dpsql      db.sql(..., fresh=True) end to end: parse, validate, plan, rewrite, ledger, run the
               rewritten SQL with its noise UDF, fetch as Arrow (fresh: a replayed answer is a cache hit)
    sql        the rewritten SQL alone, run on the same connection (the engine's share of dpsql)
    floor      plain DuckDB doing the least work any DP answer needs: values clamped to the policy
               bounds, and at user level the per-unit pre-aggregation (no sampling, no noise)
    plain      the same aggregate in plain DuckDB, unclamped

plus ``plan``: ``db.explain`` alone (parse..rewrite, no ledger, no engine).
Targets: row level <= 1.1x floor, user level <= 1.5x floor.

``--planning`` times planning alone (``db.explain``: parse, flatten, validate, plan, lower; nothing
runs) over every query of grammar/accept on the fixture database and policy of tests/support/fixture.py,
both taken from the tree of the ``dpsql`` imported (so ``PYTHONPATH=<other tree>`` compares trees):
the median of ``--repeats`` rounds per query, then the median, p90, mean and total over the queries.
Planning is single-threaded Python, so it is timed in thread CPU time, which other jobs on the
machine disturb much less than wall time. ``--profile`` adds a cProfile of those rounds: time by
stage and by what sqlglot does (copies, printing, parsing).

    python benchmarks/bench_core.py                      # 10M rows, 5 repeats
    python benchmarks/bench_core.py --rows 10000 --repeats 3
    python benchmarks/bench_core.py --planning --repeats 30 [--profile]

>>> [r["case"] for r in run(rows=2000, repeats=1)]
['row', 'user L=1 C=3', 'user L=5 C=3']
"""
from __future__ import annotations

import argparse
import copy
import cProfile
import importlib.util
import inspect
import os
import pstats
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import duckdb

import dpsql
from dpsql import testing

GROUPS = 50
MANY_GROUPS = 10_000
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
SYSTEMS = ("dpsql", "sql", "floor", "plain", "plan")


def build(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    """Create ``events(event_id, user_id, grp, grp10k, value)`` with ``rows`` rows, generated in SQL.

    Deterministic (hashes of the row number, no RANDOM()):
      user_id  ~rows/10 users, user = floor(U * u**3): a power law in rank (Zipf exponent 2/3);
               at 10M rows: ~990k users, median 6 rows, max ~100k rows
      grp      50 INTEGER keys; 70% of a user's rows in a home group, the rest skewed toward low keys,
               so a user touches a median of 3 groups (17 at the 99th percentile): 3.3M (user, grp)
      grp10k   the same scheme over 10,000 INTEGER keys (benchmarks/run.py)
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
               (CASE WHEN u_home < 0.7 THEN (user_id * 7919) % {MANY_GROUPS}
                     ELSE LEAST(FLOOR({MANY_GROUPS} * POW(u_grp, 2)), {MANY_GROUPS - 1}) END)::INTEGER AS grp10k,
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


def accepts(fn: Callable, name: str) -> bool:
    return name in inspect.signature(fn).parameters


def private(con: duckdb.DuckDBPyConnection, case: Case):
    """dpsql over ``con``, with an in-memory ledger where the API has one."""
    options = {"ledger": ":memory:"} if accepts(dpsql.connect, "ledger") else {}
    return dpsql.connect(con, policy=case.policy, **options)


def answer(db, fresh: bool):
    """One answer; ``fresh`` draws new noise (an identical query is otherwise replayed from the ledger)."""
    options = {"fresh": True} if fresh and accepts(db.sql, "fresh") else {}
    result = db.sql(QUERY, epsilon=1.0, **options)
    if getattr(result, "replayed", False):
        raise AssertionError("dpsql replayed a stored answer: the benchmark would time a cache hit")
    return result


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and process CPU seconds (CPU counts every DuckDB thread)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(systems: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[tuple[float, float]]]:
    """One warm-up each, then ``repeats`` rounds with the systems alternating within every round."""
    for fn in systems.values():
        fn()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in systems}
    for _ in range(repeats):
        for name, fn in systems.items():
            times[name].append(timed(fn))
    return times


def fresh_database(rows: int, threads: int | None) -> duckdb.DuckDBPyConnection:
    """A new in-memory database holding ``events``, built before dpsql locks it down."""
    con = duckdb.connect(":memory:")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    build(con, rows)
    return con


def run_case(case: Case, rows: int, repeats: int, threads: int | None) -> dict:
    # One database per case: cases share no caches, and each dpsql connection locks its own.
    con = fresh_database(rows, threads)
    plain = con.cursor()   # shares the database and its global settings (threads included)
    threads_used = plain.execute("SELECT current_setting('threads')").fetchall()[0][0]
    db = private(con, case)
    first = answer(db, fresh=False)
    rewritten = first.plan.rewritten_sql
    checks = {"dpsql": len(first.fetchall()),
              "sql": len(con.sql(rewritten, params=testing.params(rewritten)).fetchall()),
              "floor": len(plain.sql(case.floor).fetchall()),
              "plain": len(plain.sql(PLAIN).fetchall())}
    if set(checks.values()) != {GROUPS}:
        raise AssertionError(f"{case.name}: expected {GROUPS} groups from every system, got {checks}")
    times = measure({
        "dpsql": lambda: answer(db, fresh=True).arrow(),
        # The same SQL dpsql ran, on the connection that holds its noise UDF: no ledger, no planning.
        "sql": lambda: con.sql(rewritten, params=testing.params(rewritten)).to_arrow_table(),
        "floor": lambda: plain.sql(case.floor).to_arrow_table(),
        "plain": lambda: plain.sql(PLAIN).to_arrow_table(),
        "plan": lambda: db.explain(QUERY, epsilon=1.0),
    }, repeats)
    plain.close()
    con.close()
    wall = {name: statistics.median(t[0] for t in ts) for name, ts in times.items()}
    cpu = {name: statistics.median(t[1] for t in ts) for name, ts in times.items()}
    ratio = wall["dpsql"] / wall["floor"]
    return {
        "case": case.name, "rows": rows, "threads": threads_used, "repeats": repeats,
        **{f"{name}_s": wall[name] for name in SYSTEMS},
        **{f"{name}_cpu_s": cpu[name] for name in SYSTEMS},
        "dpsql_over_floor": ratio, "dpsql_over_plain": wall["dpsql"] / wall["plain"],
        "sql_over_floor": wall["sql"] / wall["floor"],
        "cpu_dpsql_over_floor": cpu["dpsql"] / cpu["floor"] if cpu["floor"] else float("nan"),
        "target": case.target, "ok": ratio <= case.target,
        "times": times, "rewritten_sql": rewritten,
    }


def run(rows: int, repeats: int, threads: int | None = None) -> list[dict]:
    """Build the data, time every case, return one dict per case (seconds and ratios of medians).

    Keys: case, rows, threads, repeats; medians in seconds ``<system>_s`` (wall) and
    ``<system>_cpu_s`` for dpsql, sql, floor, plain, plan; ratios dpsql_over_floor, dpsql_over_plain,
    sql_over_floor, cpu_dpsql_over_floor; target and ok (dpsql_over_floor <= target); the raw
    (wall, cpu) pairs under ``times``; the SQL dpsql ran under ``rewritten_sql``.
    """
    return [run_case(case, rows, repeats, threads) for case in CASES]


def corpus() -> tuple[Path, list[tuple[str, str]]]:
    """The tree of the imported dpsql, and (stem, SQL) of each query of its grammar/accept, sorted."""
    root = Path(dpsql.__file__).resolve().parents[1]
    return root, [(p.stem, p.read_text(encoding="utf-8")) for p in sorted((root / "grammar" / "accept").glob("*.sql"))]


def fixture_connection(root: Path):
    """dpsql over tests/support/fixture.py's database and policy (the golden files' fixture), ledger in
    memory; a tree from before tests/support/ has them in tests/conftest.py."""
    path = root / "tests" / "support" / "fixture.py"
    spec = importlib.util.spec_from_file_location("_bench_fixture", path if path.exists() else root / "tests" / "conftest.py")
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    return dpsql.connect(fixture.make_database(), ledger=":memory:", policy=copy.deepcopy(fixture.POLICY))


def plan_once(db, sql: str) -> bool:
    """Plan one query; False if dpsql refuses it (a refusal is timed too: it is planning work)."""
    try:
        db.explain(sql)
        return True
    except dpsql.DpsqlError:
        return False


def percentile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (q = 0.5 is the median)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def cpu_ms(fn: Callable[[], object]) -> float:
    """Thread CPU milliseconds of one call (planning runs in this thread only)."""
    start = time.thread_time()
    fn()
    return 1e3 * (time.thread_time() - start)


def planning(repeats: int) -> dict:
    """Planning time of each grammar/accept query: one warm-up round, then ``repeats`` rounds over all
    queries; per query the median round, then the median, p90, mean and total over the queries (CPU ms)."""
    root, queries = corpus()
    db = fixture_connection(root)
    accepted = {stem: plan_once(db, sql) for stem, sql in queries}
    times: dict[str, list[float]] = {stem: [] for stem, _ in queries}
    for _ in range(repeats):
        for stem, sql in queries:
            times[stem].append(cpu_ms(lambda sql=sql: plan_once(db, sql)))
    # The benchmark's own query on the benchmark's policies, over an empty table of its schema.
    own = {}
    for case in CASES:
        con = fresh_database(0, None)
        own_db = private(con, case)
        own_db.explain(QUERY, epsilon=1.0)
        own[case.name] = statistics.median(cpu_ms(lambda own_db=own_db: own_db.explain(QUERY, epsilon=1.0))
                                           for _ in range(repeats))
        con.close()
    db.close()
    per_query = {stem: statistics.median(ts) for stem, ts in times.items()}
    values = list(per_query.values())
    return {"tree": str(root), "queries": len(queries), "accepted": sum(accepted.values()), "repeats": repeats,
            "median_ms": percentile(values, 0.5), "p90_ms": percentile(values, 0.9),
            "mean_ms": statistics.fmean(values), "total_ms": sum(values), "max_ms": max(values),
            "per_query_ms": per_query, "bench_query_ms": own}


# cProfile, cumulative time of the pipeline's stages (dpsql functions, either package layout) and of
# what sqlglot does for them (these overlap: a builder's copy happens inside a stage).
PROFILE_STAGES = ("parse", "public_only", "per_person", "flatten", "relate", "fold_constants", "validate",
                  "build_plan", "rewrite")
PROFILE_SQLGLOT = (
    ("deep copies (Expression.copy)", "expressions/core.py", "copy"),
    ("  of which builders' maybe_copy", "expressions/core.py", "maybe_copy"),
    ("printing SQL (Generator.generate)", "sqlglot/generator.py", "generate"),
    ("parsing the query (sqlglot.parse)", "sqlglot/__init__.py", "parse"),
    ("parsing builder strings (parse_one)", "sqlglot/__init__.py", "parse_one"),
)


def profile(repeats: int) -> str:
    """cProfile of ``repeats`` planning rounds over grammar/accept: cumulative time by stage and by
    sqlglot activity, then the top functions by cumulative time (ms a query, under the profiler)."""
    root, queries = corpus()
    db = fixture_connection(root)
    for _, sql in queries:
        plan_once(db, sql)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeats):
        for _, sql in queries:
            plan_once(db, sql)
    profiler.disable()
    db.close()
    stats = pstats.Stats(profiler).stats
    per_query = 1e3 / (repeats * len(queries))
    total = sum(cumulative for (_, _, function), (_, _, _, cumulative, _) in stats.items()
                if function == "plan_once")

    def cumulative(match) -> float:
        return sum(row[3] for key, row in stats.items() if match(*key))

    def line(label: str, seconds: float) -> str:
        return f"  {label:<38} {seconds * per_query:6.2f} ms  {100 * seconds / total:5.1f}%"

    lines = [f"cProfile, {repeats} rounds over {len(queries)} queries: {total * per_query:.2f} ms a query under "
             "the profiler; cumulative time by stage:"]
    for stage in PROFILE_STAGES:   # a stage the tree does not have is left out
        seconds = cumulative(lambda f, _, name, stage=stage: name == stage and "dpsql" in f and "sqlglot" not in f)
        if seconds:
            lines.append(line(stage, seconds))
    lines.append("by what sqlglot does (inside the stages):")
    for label, path, function in PROFILE_SQLGLOT:
        lines.append(line(label, cumulative(lambda f, _, name, path=path, function=function:
                                            name == function and f.endswith(path))))
    lines.append("top 25 functions by cumulative time (ms a query, calls a query):")
    top = sorted(stats.items(), key=lambda kv: -kv[1][3])[:25]
    for (filename, number, function), (_, calls, _, seconds, _) in top:
        short = "/".join(Path(filename).parts[-2:])
        lines.append(f"  {seconds * per_query:6.2f}  {calls / (repeats * len(queries)):8.1f}  {short}:{number}({function})")
    return "\n".join(lines)


def planning_table(result: dict) -> str:
    own = ", ".join(f"{name} {ms:.2f}" for name, ms in result["bench_query_ms"].items())
    return (f"planning (db.explain) over {result['queries']} grammar/accept queries ({result['accepted']} accepted), "
            f"median of {result['repeats']} rounds each (thread CPU time), tree {result['tree']}:\n"
            f"  median {result['median_ms']:.2f} ms, p90 {result['p90_ms']:.2f} ms, mean {result['mean_ms']:.2f} ms, "
            f"max {result['max_ms']:.2f} ms, total {result['total_ms']:.1f} ms\n"
            f"  this benchmark's query (ms): {own}")


def table(results: list[dict]) -> str:
    header = (f"{'case':<13} {'dpsql':>7} {'sql':>7} {'floor':>7} {'plain':>7} {'plan':>6}"
              f" {'dpsql/floor':>11} {'dpsql/plain':>11} {'sql/floor':>9} {'cpu d/f':>7} {'target':>6}  ok")
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r['case']:<13} {r['dpsql_s']:>7.3f} {r['sql_s']:>7.3f} {r['floor_s']:>7.3f} {r['plain_s']:>7.3f}"
            f" {r['plan_s']:>6.3f} {r['dpsql_over_floor']:>10.2f}x {r['dpsql_over_plain']:>10.2f}x"
            f" {r['sql_over_floor']:>8.2f}x {r['cpu_dpsql_over_floor']:>6.2f}x {r['target']:>5.1f}x"
            f"  {'yes' if r['ok'] else 'NO'}")
    return "\n".join(lines)


def machine() -> str:
    try:
        with open("/proc/meminfo") as f:
            memory = f"{int(f.readline().split()[1]) / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        memory = "unknown memory"
    return (f"{os.cpu_count()} cpus, {memory}, duckdb {duckdb.__version__}, "
            f"python {platform.python_version()}, {platform.machine()}")


def load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows in events (default 10M)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per case (default 5)")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: DuckDB's)")
    parser.add_argument("--planning", action="store_true",
                        help="time planning alone (db.explain) over grammar/accept instead; --repeats rounds")
    parser.add_argument("--profile", action="store_true", help="with --planning: add a cProfile, grouped")
    args = parser.parse_args(argv)
    before = load()
    if args.planning:
        result = planning(args.repeats)
        print(f"{machine()}; {before} before, {load()} after")
        print(planning_table(result))
        if args.profile:
            print(profile(args.repeats))
        return 0
    results = run(args.rows, args.repeats, args.threads)
    print(f"{args.rows:,} rows, {args.repeats} repeats, {results[0]['threads']} threads; {machine()}")
    print(f"{before} before, {load()} after; wall-clock medians in seconds")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
