"""dpsql on Spark against Spark's own query, the clamped floor on Spark, Tumult Analytics, and dpsql on
DuckDB, on the same Parquet file (issue 27, item 6). See benchmarks/spark/README.md.

    PYTHONPATH=$PWD python3 benchmarks/spark/run.py --rows 10000000 --runs 3

Writes benchmarks/results/spark_<rows>.json and .md; the data is generated once into
benchmarks/.data/spark/ (git-ignored).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DATA = ROOT / "benchmarks" / ".data" / "spark"
RESULTS = ROOT / "benchmarks" / "results"
TUMULT = Path("/work/venv-tumult/bin/python")
GROUPS, LOWER, UPPER = 50, 0.0, 100.0
L, C = 3, 10
CLAMPED = f"LEAST(GREATEST(value, {LOWER}), {UPPER})"
QUERIES = {"count": "SELECT grp, COUNT(*) AS v FROM events GROUP BY grp",
           "sum": "SELECT grp, SUM(value) AS v FROM events GROUP BY grp"}
# The least work a correct DP answer needs on Spark: values clamped; at user level each (user, group)'s
# rows pre-aggregated and capped at C rows' worth (no sampling of L groups, no noise).
FLOOR = {("row", "count"): QUERIES["count"],
         ("row", "sum"): f"SELECT grp, SUM({CLAMPED}) AS v FROM events GROUP BY grp",
         ("user", "count"): f"SELECT grp, SUM(LEAST(c, {C})) AS v FROM (SELECT user_id, grp, COUNT(*) AS c "
                            "FROM events GROUP BY user_id, grp) GROUP BY grp",
         ("user", "sum"): f"SELECT grp, SUM(LEAST(GREATEST(s, {C * LOWER}), {C * UPPER})) AS v FROM (SELECT "
                          f"user_id, grp, SUM({CLAMPED}) AS s FROM events GROUP BY user_id, grp) GROUP BY grp"}


def parquet(rows: int) -> Path:
    """benchmarks/bench_core.py's events (power-law users, 50 public groups) as one Parquet file."""
    path = DATA / f"events_{rows}.parquet"
    if not path.exists():
        spec = importlib.util.spec_from_file_location("bench_core", ROOT / "benchmarks" / "bench_core.py")
        core = importlib.util.module_from_spec(spec)
        sys.modules["bench_core"] = core   # its dataclasses look their module up there
        spec.loader.exec_module(core)
        DATA.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect()
        core.build(con, rows)
        con.execute(f"COPY (SELECT user_id, grp, value FROM events) TO '{path}' (FORMAT parquet)")
        con.close()
    return path


def policy(path: Path, level: str) -> dict:
    columns = {"grp": {"keys": list(range(GROUPS))}, "value": {"type": "float", "lower": LOWER, "upper": UPPER}}
    table = {"source": str(path), "columns": columns}
    if level == "row":
        table |= {"privacy_unit": "row"}
        columns["user_id"] = {"identifier": True}
    else:
        table |= {"privacy_unit": "user_id", "max_groups_per_unit": L, "max_rows_per_unit": C}
    return {"version": 1, "budget": {"epsilon": 1e9}, "tables": {"events": table}}


def timed(systems: dict, runs: int) -> dict[str, tuple[list[float], list]]:
    """One warm-up each, then ``runs`` rounds with the systems alternating within every round (the load
    other jobs put on the machine drifts: alternating spreads it over every system): (seconds, results)."""
    for fn in systems.values():
        fn()
    out: dict[str, tuple[list[float], list]] = {name: ([], []) for name in systems}
    for _ in range(runs):
        for name, fn in systems.items():
            started = time.perf_counter()
            result = fn()
            out[name][0].append(time.perf_counter() - started)
            out[name][1].append(result)
    return out


def by_group(table) -> dict[int, float]:
    rows = table.to_pylist()
    return {int(r["grp"]): float(r["v"] or 0) for r in rows}


def rmse(answers: list[dict], exact: dict[int, float]) -> float:
    errors = [(a.get(g, 0.0) - v) ** 2 for a in answers for g, v in exact.items()]
    return (sum(errors) / len(errors)) ** 0.5


def load() -> str:
    """The machine's load averages (1, 5, 15 min), beside every number: the cores are shared."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def on_spark(spark, path: Path, level: str, kind: str, runs: int, epsilon: float) -> dict:
    import dpsql
    spark.read.parquet(str(path)).createOrReplaceTempView("events")
    db = dpsql.connect(spark, policy=policy(path, level), ledger=":memory:")
    sql = QUERIES[kind]
    systems = {"plain": lambda: spark.sql(sql).toArrow(),
               "floor": lambda: spark.sql(FLOOR[level, kind]).toArrow(),
               "dpsql": lambda: db.sql(sql, epsilon=epsilon, fresh=True).arrow()}
    out = {name: {"times": times, "load": load(), "answers": [by_group(r) for r in results]}
           for name, (times, results) in timed(systems, runs).items()}
    db.close()
    return out


def on_duckdb(path: Path, level: str, kind: str, runs: int, epsilon: float) -> dict:
    import dpsql
    db = dpsql.connect(None, policy=policy(path, level), ledger=":memory:")
    times, results = timed({"duckdb": lambda: db.sql(QUERIES[kind], epsilon=epsilon, fresh=True).arrow()}, runs)["duckdb"]
    db.close()
    return {"times": times, "load": load(), "answers": [by_group(r) for r in results]}


def tumult(path: Path, level: str, runs: int, epsilon: float) -> dict:
    done = subprocess.run([str(TUMULT), str(HERE / "tumult_side.py"), str(path), "--level", level, "--runs", str(runs),
                           "--epsilon", str(epsilon), "--L", str(L), "--C", str(C)],
                          capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "PYSPARK_PYTHON": str(TUMULT), "PYSPARK_DRIVER_PYTHON": str(TUMULT)})
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {kind: {**out[kind], "answers": [{int(k): v for k, v in a.items()} for a in out[kind]["answers"]],
                   "load": load()} for kind in ("count", "sum")}


CASES = [f"{level} {kind}" for level in ("row", "user") for kind in ("count", "sum")]


def run(rows: int, runs: int, epsilon: float, master: str, with_tumult: bool, cases=tuple(CASES)) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    path = parquet(rows)
    result = {"rows": rows, "runs": runs, "epsilon": epsilon, "master": master, "L": L, "C": C,
              "cores": os.cpu_count(), "machine": platform.platform(), "load_before": load(), "cases": {}}
    for level in ("row", "user"):
        for kind in ("count", "sum"):
            if f"{level} {kind}" not in cases:
                continue
            case = on_spark(spark, path, level, kind, runs, epsilon)
            case["duckdb"] = on_duckdb(path, level, kind, runs, epsilon)
            result["cases"][f"{level} {kind}"] = case
            print(level, kind, summary_line(case), flush=True)
    spark.stop()   # Tumult starts its own session (its own pyspark)
    if with_tumult:
        for level in ("row", "user"):
            side = tumult(path, level, runs, epsilon)
            for kind in ("count", "sum"):
                result["cases"][f"{level} {kind}"]["tumult"] = side.get(kind, side)
    for systems in result["cases"].values():
        exact = systems["plain"]["answers"][0]   # the true answer, unbounded
        for name, system in systems.items():
            if "times" in system:
                system["median"] = statistics.median(system["times"])
            if name in ("dpsql", "duckdb", "tumult") and "answers" in system:
                system["rmse"] = rmse(system["answers"], exact)
    result["load_after"] = load()
    return result


def summary_line(case: dict) -> str:
    return ", ".join(f"{n} {statistics.median(s['times']):.2f} s" for n, s in case.items() if "times" in s)


def markdown(result: dict) -> str:
    lines = [f"# dpsql on Spark: {result['rows']:,} rows, epsilon {result['epsilon']:g}, L={L} C={C} at user level",
             "", f"Spark `{result['master']}` on {result['cores']} cores shared with other engineers' jobs "
             f"(load average before {result['load_before']}, after {result['load_after']}); medians of "
             f"{result['runs']} warm runs after one warm-up each (plain, floor and dpsql on Spark alternating within each round), seconds; RMSE of the released values against the "
             "exact answer (plain Spark's), over those runs (so bounding's bias is in it)." +
             (f" Run again alone, the rest kept from the saved run: {', '.join(result['rerun'])}."
              if result.get("rerun") else "") +
             (" Tumult's numbers are from the earlier run saved here (`--tumult-from-saved`): its code did not "
              "change, ours did." if result.get("tumult_from_saved") else ""), "",
             "| case | plain Spark | floor (Spark) | dpsql on Spark | dpsql / floor | Tumult | dpsql on DuckDB "
             "| RMSE dpsql (Spark) | RMSE Tumult | load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for case, s in result["cases"].items():
        def cell(name, key="median", fmt="{:.2f}", s=s):
            value = s.get(name, {}).get(key)
            return fmt.format(value) if isinstance(value, (int, float)) else "-"
        ratio = s["dpsql"]["median"] / s["floor"]["median"]
        lines.append(f"| {case} | {cell('plain')} | {cell('floor')} | {cell('dpsql')} | {ratio:.2f}x | "
                     f"{cell('tumult')} | {cell('duckdb')} | {cell('dpsql', 'rmse', '{:.1f}')} | "
                     f"{cell('tumult', 'rmse', '{:.1f}')} | {s['dpsql']['load']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--no-tumult", action="store_true")
    parser.add_argument("--tumult-from-saved", action="store_true",
                        help="do not run Tumult; keep its numbers from the saved results of these rows (marked so)")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="which cases to run (comma-separated, e.g. 'user sum'); the others are kept from the "
                             "saved results of these rows, each with its own load")
    args = parser.parse_args()
    name = f"spark_{args.rows}"
    saved = RESULTS / f"{name}.json"
    cases = [c.strip() for c in args.cases.split(",")]
    kept = json.loads(saved.read_text()) if (args.tumult_from_saved or set(cases) != set(CASES)) and \
        saved.exists() else None
    result = run(args.rows, args.runs, args.epsilon, args.master,
                 not (args.no_tumult or args.tumult_from_saved) and TUMULT.exists(), cases)
    if kept is not None and set(cases) != set(CASES):   # the cases not run this time, as saved
        result["cases"] = {case: result["cases"].get(case) or kept["cases"][case] for case in CASES
                           if case in result["cases"] or case in kept["cases"]}
        result["rerun"] = cases
    if kept is not None and args.tumult_from_saved:   # Tumult's numbers from an earlier run (its code did not
        for case, systems in kept["cases"].items():          # change): marked as such
            if "tumult" in systems and case in result["cases"]:
                result["cases"][case]["tumult"] = {**systems["tumult"], "from_run_of": kept.get("load_before")}
        result["tumult_from_saved"] = True
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
