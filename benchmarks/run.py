"""dpsql against plain DuckDB and SmartNoise SQL on the same data: speed, peak memory and accuracy.

    python benchmarks/run.py                               # 1M, 10M, 100M rows (about an hour)
    python benchmarks/run.py --rows 1000000 --repeats 3    # a few minutes
    python benchmarks/run.py --rows 10000 --repeats 1 --runs 2 --no-plots   # smoke

Speed: each (rows, query) measures plain DuckDB (the query as written), the floor (plain DuckDB with
the clamping, and at user level the per-unit pre-aggregation, that any correct DP answer needs),
dpsql and SmartNoise SQL. Every measurement is a fresh worker process that opens the database file
read-only, runs the query once to warm up, then once timed; its peak memory is the growth of the
process's peak resident set over what it held before the query (VmHWM, reset before the query).
The systems alternate within every round; the report gives medians and ratios to plain DuckDB.

Accuracy: on the ``--accuracy-rows`` database, each query at epsilon 0.1, 0.5, 1 and 5, ``--runs``
answers per system: RMSE and median relative error against the exact answer, and for dpsql's
Laplace measurements (counts and sums at row level) the RMSE against the exact clamped answer
divided by the Laplace optimum sqrt(2) * sensitivity / epsilon of that measurement. Both systems
get the same total epsilon per query: SmartNoise's per-aggregate epsilon is divided by its number
of mechanisms (from its own ``get_privacy_cost``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import duckdb  # noqa: E402

import bench_core  # noqa: E402
import smartnoise_duckdb  # noqa: E402
from queries import BY_NAME, MILLION, QUERIES, Query, policy, smartnoise_metadata  # noqa: E402

SYSTEMS = ("plain", "floor", "dpsql", "smartnoise", "smartnoise_pandas")
PANDAS_MAX_ROWS = 10_000_000    # SmartNoise's pandas reader copies the table into SQLite: not at 100M
EPSILONS = (0.1, 0.5, 1.0, 5.0)
DEFAULT_ROWS = (1_000_000, 10_000_000, 100_000_000)


# -- data -------------------------------------------------------------------------------------------

def database(rows: int, data_dir: Path) -> Path:
    """The database file for ``rows`` rows, built once (deterministic) and reused."""
    path = data_dir / f"events_{rows}.duckdb"
    if path.exists():
        return path
    data_dir.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    con = duckdb.connect(str(partial))
    con.execute("SET enable_progress_bar = false")
    bench_core.build(con, rows)
    con.execute(f"""CREATE TABLE wide AS SELECT (range % {MILLION})::INTEGER AS k,
                    ((hash(range) >> 11)::DOUBLE / 9007199254740992 * 140 - 20) AS value
                    FROM range({max(rows, MILLION)})""")
    con.close()
    partial.rename(path)
    return path


# -- one measurement, in a worker process ------------------------------------------------------------

def _rss_high_water() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _rss() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


def _reset_high_water() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")   # Linux >= 4.0: resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def runner(system: str, query: Query, path: Path, epsilon: float = 1.0):
    """A zero-argument function that answers ``query`` once with ``system`` over the file at ``path``."""
    con = duckdb.connect(str(path), read_only=True)
    if system == "plain":
        return lambda: con.sql(query.plain).to_arrow_table()
    if system == "floor":
        return lambda: con.sql(query.floor).to_arrow_table()
    if system == "dpsql":
        import dpsql
        db = dpsql.connect(con, policy=policy(query.policy), ledger=":memory:")
        delta = query.delta or None
        return lambda: db.sql(query.sql, epsilon=epsilon, delta=delta, fresh=True).arrow()
    if system.startswith("smartnoise"):
        why = smartnoise_duckdb.available()
        if why:
            raise RuntimeError(why)
        if query.smartnoise is None:
            raise RuntimeError("SmartNoise SQL has no such query")
        reader = smartnoise_reader(con, query, epsilon, pandas=system == "smartnoise_pandas")
        return lambda: reader.execute(query.smartnoise)
    raise ValueError(system)


def smartnoise_reader(con, query: Query, epsilon: float, pandas: bool = False):
    """A SmartNoise reader whose whole query costs ``epsilon``, like dpsql's (see module docstring).

    ``pandas``: SmartNoise's own pandas reader (the table copied into SQLite, outside the timing)
    instead of our DuckDB adapter.
    """
    metadata = smartnoise_metadata(query.policy)
    delta = query.delta or 1e-9     # SmartNoise wants delta > 0 with row-level counts of rows
    probe = smartnoise_duckdb.reader(con, metadata, 1.0, delta)
    mechanisms = probe.get_privacy_cost(query.smartnoise)[0]
    if pandas:
        frame = con.sql(f"SELECT * FROM {query.table}").df()
        return smartnoise_duckdb.pandas_reader(frame, metadata, epsilon / mechanisms, delta)
    return smartnoise_duckdb.reader(con, metadata, epsilon / mechanisms, delta)


def worker(system: str, query_name: str, path: str) -> dict:
    query = BY_NAME[query_name]
    try:
        # DuckDB imports pandas (50 MB) at a process's first Python UDF call, and SmartNoise at import:
        # loaded here for every system, so that library memory is in every baseline, not in one peak.
        import pandas  # noqa: F401
        answer = runner(system, query, Path(path))
        # Peak memory: the high-water mark over the warm-up and the timed answer, above what the
        # process held once connected (libraries, policy, SmartNoise's SQLite copy: not the query's).
        before = _rss()
        resettable = _reset_high_water()
        answer()                                     # warm-up: DuckDB's buffers, SmartNoise's parser
        wall, cpu = time.perf_counter(), time.process_time()
        answer()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        peak = _rss_high_water() if resettable else None
        return {"ok": True, "wall": wall, "cpu": cpu,
                "peak_mb": None if peak is None or before is None else max(peak - before, 0) / 2**20}
    except Exception as error:   # reported in the table: a system that cannot answer is a result
        return {"ok": False, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}


def measure(system: str, query: Query, path: Path, timeout: float) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "worker", system, query.name, str(path)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout after {timeout:.0f} s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": f"worker failed: {done.stderr.strip().splitlines()[-1:]}"}


def speed(rows: int, path: Path, repeats: int, timeout: float, queries, systems, log,
          gave_up: dict | None = None) -> list[dict]:
    """Medians per (query, system) at one size. ``gave_up`` carries (system, query) -> error across
    sizes: a system that timed out on a smaller table is not run again on a larger one."""
    gave_up = {} if gave_up is None else gave_up
    results = []
    for query in queries:
        runs: dict[str, list[dict]] = {s: [] for s in systems}
        for system in systems:
            if (system, query.name) in gave_up:
                runs[system] = [gave_up[(system, query.name)]]
        for _ in range(repeats):
            for system in systems:
                if runs[system] and not runs[system][-1]["ok"]:
                    continue        # failed or timed out once: not again
                runs[system].append(measure(system, query, path, timeout))
                if runs[system][-1].get("error", "").startswith("timeout"):
                    gave_up[(system, query.name)] = {
                        "ok": False, "error": f"{runs[system][-1]['error']} at {rows:,} rows: not run on more"}
        row = {"rows": rows, "query": query.name}
        for system, measured in runs.items():
            good = [m for m in measured if m["ok"]]
            if good and len(good) == len(measured):
                row[system] = {"wall": statistics.median(m["wall"] for m in good),
                               "cpu": statistics.median(m["cpu"] for m in good),
                               "peak_mb": _median_or_none([m["peak_mb"] for m in good]),
                               "walls": [m["wall"] for m in good]}
            else:
                row[system] = {"error": next(m["error"] for m in measured if not m["ok"])}
        results.append(row)
        log(speed_line(row))
    return results


def _median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def speed_line(row: dict) -> str:
    def cell(system):
        m = row.get(system, {})
        return f"{m['wall']:8.3f}s" if "wall" in m else f"{'n/a':>9}"
    return f"{row['rows']:>11,} {row['query']:<14}" + "".join(f" {s}={cell(s)}" for s in SYSTEMS if s in row)


# -- accuracy ------------------------------------------------------------------------------------------

def _answer_map(rows, columns: int) -> dict:
    """First column is the group key; the rest the values (by position)."""
    return {r[0]: tuple(r[1:1 + columns]) for r in rows}


def _discrete_laplace_sd(scale: float) -> float:
    # Var = 2 e^(-1/t) / (1 - e^(-1/t))^2 for P(x) ~ exp(-|x|/t) on the integers (CKS 2020, Sec. 2)
    q = math.exp(-1 / scale)
    return math.sqrt(2 * q) / (1 - q)


def accuracy(path: Path, runs: int, queries, epsilons, log) -> list[dict]:
    import dpsql
    plain = duckdb.connect(str(path), read_only=True)
    results = []
    for query in queries:
        if query.speed_only:
            continue
        exact = plain.sql(query.plain)
        names = exact.columns[1:]
        exact = _answer_map(exact.fetchall(), len(names))
        clamped = _answer_map(plain.sql(query.floor).fetchall(), len(names))
        db = dpsql.connect(duckdb.connect(str(path), read_only=True), policy=policy(query.policy),
                           ledger=":memory:")
        for epsilon in epsilons:
            answers = {"dpsql": [], "smartnoise": []}
            plan = None
            for _ in range(runs):
                result = db.sql(query.sql, epsilon=epsilon, delta=query.delta or None, fresh=True,
                                nonnegative=False)
                plan = result.plan
                answers["dpsql"].append(_answer_map(result.fetchall(), len(names)))
            sn_error = None
            try:
                why = smartnoise_duckdb.available()
                if why:
                    raise RuntimeError(why)
                reader = smartnoise_reader(plain, query, epsilon)
                for _ in range(runs):
                    got = reader.execute(query.smartnoise)
                    answers["smartnoise"].append(_answer_map(got[1:], len(names)))
            except Exception as error:
                sn_error = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            for i, column in enumerate(names):
                row = {"query": query.name, "column": column, "epsilon": epsilon, "runs": runs,
                       "groups": len(exact), "smartnoise_error": sn_error}
                for system, maps in answers.items():
                    row[system] = _errors(maps, exact, clamped, i) if maps else None
                row["laplace"] = _laplace_optimum(plan, column, query)
                if row["laplace"] and row["dpsql"]:
                    row["dpsql"]["ratio_to_optimum"] = row["dpsql"]["rmse_clamped"] / row["laplace"]["optimum_rmse"]
                results.append(row)
                log(accuracy_line(row))
    return results


def _errors(maps: list[dict], exact: dict, clamped: dict, i: int) -> dict:
    squared, squared_clamped, relative, missing, total = [], [], [], 0, 0
    for answer in maps:
        for key, truth in exact.items():
            total += 1
            got = answer.get(key)
            if got is None or got[i] is None or truth[i] is None:
                missing += 1
                continue
            value = float(got[i])
            squared.append((value - float(truth[i])) ** 2)
            squared_clamped.append((value - float(clamped[key][i])) ** 2)
            if truth[i]:
                relative.append(abs(value - float(truth[i])) / abs(float(truth[i])))
    if not squared:
        return {"rmse": None, "rmse_clamped": None, "median_relative": None, "released": 0.0}
    return {"rmse": math.sqrt(statistics.fmean(squared)),
            "rmse_clamped": math.sqrt(statistics.fmean(squared_clamped)),
            # Relative standard error of that RMSE (delta method: sd(e^2) / (2 mean(e^2) sqrt(n))).
            "rmse_clamped_rel_se": (statistics.pstdev(squared_clamped) / (2 * statistics.fmean(squared_clamped)
                                    * math.sqrt(len(squared_clamped)))) if len(squared_clamped) > 1 and
                                   statistics.fmean(squared_clamped) > 0 else None,
            "sum_sq_clamped": math.fsum(squared_clamped),
            "median_relative": statistics.median(relative) if relative else None,
            "released": 1 - missing / total, "cells": len(squared)}


def _laplace_optimum(plan, column: str, query: Query) -> dict | None:
    """Continuous Laplace at the same sensitivity and epsilon share, for a plain count or sum at row level."""
    if query.policy == "user":
        return None     # the user-level error is dominated by contribution bounding, not noise
    output = next((o for o in plan.outputs if o.name == column), None)
    if output is None or output.kind not in ("count", "sum") or len(output.measurements) != 1:
        return None
    m = next(m for m in plan.measurements if m.name == output.measurements[0])
    return {"epsilon_share": m.epsilon, "sensitivity": m.sensitivity.l1 * m.granularity,
            "optimum_rmse": math.sqrt(2) * m.sensitivity.l1 * m.granularity / m.epsilon,
            "dpsql_expected_rmse": _discrete_laplace_sd(m.scale) * m.granularity}


def accuracy_line(row: dict) -> str:
    def cell(system):
        e = row.get(system)
        return f"{e['rmse']:11.4g}" if e and e["rmse"] is not None else f"{'n/a':>11}"
    ratio = row["dpsql"].get("ratio_to_optimum") if row["dpsql"] else None
    return (f"{row['query']:<14} {row['column']:<6} eps={row['epsilon']:<4} dpsql={cell('dpsql')}"
            f" smartnoise={cell('smartnoise')}" + (f" dpsql/optimum={ratio:.3f}" if ratio else ""))


# -- main ------------------------------------------------------------------------------------------------

def machine() -> dict:
    return {"description": bench_core.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "duckdb": duckdb.__version__, "smartnoise": _smartnoise_version()}


def _smartnoise_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("smartnoise-sql")
    except Exception:
        return None


def run(rows=DEFAULT_ROWS, repeats=3, runs=10, accuracy_rows=1_000_000, data_dir=HERE / ".data",
        timeout=240.0, queries=QUERIES, epsilons=EPSILONS, log=print, systems=SYSTEMS) -> dict:
    """Everything, as one dict (also written to results/results.json by main)."""
    started = time.time()
    report = {"machine": machine(), "load_before": bench_core.load(), "repeats": repeats, "runs": runs,
              "speed": [], "accuracy": []}
    gave_up: dict = {}
    for n in rows:
        path = database(n, data_dir)
        chosen = [q for q in queries if not (q.name == "groups_1m" and n < MILLION)]
        running = [s for s in systems if not (s == "smartnoise_pandas" and n > PANDAS_MAX_ROWS)]
        report["speed"] += speed(n, path, repeats, timeout, chosen, running, log, gave_up)
    if runs:
        report["accuracy"] = accuracy(database(accuracy_rows, data_dir), runs, queries, epsilons, log)
        report["accuracy_rows"] = accuracy_rows
    report["load_after"] = bench_core.load()
    report["seconds"] = time.time() - started
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(map(str, DEFAULT_ROWS)),
                        help="comma-separated table sizes for the speed runs (default 1M,10M,100M)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per system (default 3)")
    parser.add_argument("--runs", type=int, default=10, help="answers per system and epsilon (default 10)")
    parser.add_argument("--accuracy-rows", type=int, default=1_000_000)
    parser.add_argument("--queries", default=",".join(q.name for q in QUERIES))
    parser.add_argument("--timeout", type=float, default=240.0,
                        help="seconds per worker (default 240); a system that times out is not run on larger tables")
    parser.add_argument("--data", type=Path, default=HERE / ".data", help="where the database files live")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    queries = [BY_NAME[name] for name in args.queries.split(",")]
    report = run(rows=[int(r) for r in args.rows.split(",")], repeats=args.repeats, runs=args.runs,
                 accuracy_rows=args.accuracy_rows, data_dir=args.data, timeout=args.timeout, queries=queries)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=1))
    import report as summary
    (args.out / "summary.md").write_text(summary.markdown(report))
    if not args.no_plots:
        summary.plots(report, args.out)
    print(summary.markdown(report))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        print(json.dumps(worker(*sys.argv[2:5])))
        sys.exit(0)
    sys.exit(main())
