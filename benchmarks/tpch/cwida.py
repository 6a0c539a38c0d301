"""Issue 24, item 6: cwida/privacy's published DuckDB DP benchmark (TPC-H Q1, Q5, Q6, Q14, Q19), reproduced.

    python3 benchmarks/tpch/cwida.py [--sf 10] [--runs 5] [--queries 1,5,6,14,19] [--no-readme]

The peer (github.com/cwida/privacy, the DuckDB community extension for DP, 2026) publishes, for its
``dp_standard`` mode (Google-style bounded user contribution, Laplace noise) at TPC-H SF 30 on 16
threads, customer privacy unit, epsilon 1, delta 1e-6, bound multiplier 1:
``benchmark/results/paper/dp_tpch_runtime_raw.csv`` (three runs: ``median_error_pct``, ``time_ms``;
``dp_tpch_runtime_figure.csv`` the slowdowns). PEER below holds those numbers.

Here the same queries (``cwida/qNN.sql``: the peer's ``benchmark/dp/tpch_queries/qNN.sql`` text with
GoogleSQL's ``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)`` and ``contribution_bounds_per_group`` holding
the peer's per-query bounds) run through dpsql under ``cwida/policy.yaml`` (the peer's per-person
bounds of Q1), and the same text without the DP clauses (``plain_text``) through plain DuckDB, on
dpsql's own connection (same settings and threads), alternating after one warm-up each: ``--runs``
rounds, wall-clock medians. The error is the peer's: per run, the median over matched numeric output
cells of |dpsql - exact| / |exact| (rows matched on the outputs without an aggregate), then the
median over runs. With fixed per-person bounds the noise does not grow with the data while the
answers grow linearly, so an error measured at SF s is compared as ``error * s / 30`` at SF 30
(``scaled_error``); the table states it.

Writes ``results/cwida_sf<SF>.json`` and the table into README.md between the ``tpch-cwida``
markers for that scale factor.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout without installing dpsql

from dpsql import testing  # noqa: E402
from data import DATA_DIR, connect_private, sf_label  # noqa: E402


def _tpch_run():
    """benchmarks/tpch/run.py, loaded under a name of its own (benchmarks/run.py is ``run`` too)."""
    spec = importlib.util.spec_from_file_location("tpch_run", HERE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_run = _tpch_run()
README, RESULTS, environment, put_block = _run.README, _run.RESULTS, _run.environment, _run.put_block
key_columns, relative_errors, _json_default = _run.key_columns, _run.relative_errors, _run._json_default

CWIDA = HERE / "cwida"
POLICY = CWIDA / "policy.yaml"
QUERIES = (1, 5, 6, 14, 19)
PEER_SF = 30

# dp_tpch_runtime_raw.csv, mode dp_standard, bound_multiplier 1, runs 0-2: median_error_pct (percent) and
# time_ms; duckdb's time_ms of the same runs; dp_tpch_runtime_figure.csv's slowdown (medians' ratio).
PEER = {
    1: {"errors_pct": [0.156251, 0.0896335, 0.230276], "dp_ms": [3843.589574, 3886.446746, 3956.883195],
        "duckdb_ms": [346.289296, 350.936952, 347.473255], "slowdown": 11.184880,
        "bounds": "COUNT 1000 rows, SUMs 50,000 / 105,000,000 / 105,000,000 / 113,400,000, AVG domains "
                  "[0, 50], [0, 105000], [0, 0.1]; C_u = 4"},
    5: {"errors_pct": [0.0511, 0.0182, 0.1516], "dp_ms": [544.90847, 549.720453, 553.160444],
        "duckdb_ms": [312.562994, 315.146242, 312.678782], "slowdown": 1.758100,
        "bounds": "SUM 1,000,000; C_u = 1"},
    6: {"errors_pct": [0.0101, 0.0052, 0.0001], "dp_ms": [326.026572, 330.93141, 331.708202],
        "duckdb_ms": [113.590799, 117.662987, 117.135526], "slowdown": 2.825201,
        "bounds": "SUM 100,000"},
    14: {"errors_pct": [0.0175852, 0.019907, 0.00756242], "dp_ms": [610.856335, 621.46085, 613.603993],
         "duckdb_ms": [195.437109, 200.094996, 200.15969], "slowdown": 3.066563,
         "bounds": "SUM 1,000,000 each"},
    19: {"errors_pct": [0.1197, 0.1577, 0.0893], "dp_ms": [576.70525, 580.380488, 576.649856],
         "duckdb_ms": [311.180564, 319.018571, 308.823821], "slowdown": 1.853282,
         "bounds": "SUM 100,000"},
}


def dp_text(n: int) -> str:
    return (CWIDA / f"q{n:02d}.sql").read_text()


def plain_text(sql: str) -> str:
    """The query without its DP clauses: the peer's text, which plain DuckDB runs.

    >>> plain_text("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) "
    ...            "sum(x, contribution_bounds_per_group => (0, 10)) AS s FROM t")
    'SELECT sum(x) AS s FROM t'
    """
    sql = re.sub(r"WITH\s+DIFFERENTIAL_PRIVACY\s+OPTIONS\s*\([^)]*\)\s*", "", sql, flags=re.I)
    return re.sub(r",\s*contribution_bounds_per_(group|row)\s*=>\s*\([^)]*\)", "", sql, flags=re.I)


def _time(fn) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def measure(db, n: int, runs: int, log=print) -> dict:
    """Alternating rounds of plain DuckDB and dpsql on query n; times, answers and errors."""
    sql = dp_text(n)
    plain = plain_text(sql)
    exact = testing.fetch(db, testing.bind(db, plain))
    systems = {"plain": lambda: testing.fetch(db, testing.bind(db, plain)),
               "dpsql": lambda: db.sql(sql, fresh=True).arrow()}
    for fn in systems.values():   # warm-up: caches, the plan cache, the first bind
        fn()
    times: dict[str, list[float]] = {s: [] for s in systems}
    answers = []
    for _ in range(runs):
        for name, fn in systems.items():
            seconds, out = _time(fn)
            times[name].append(seconds)
            if name == "dpsql":
                answers.append(out)
    keys = key_columns(plain)
    truth = [tuple(r.values()) for r in exact.to_pylist()]
    errs = [relative_errors(truth, [tuple(r.values()) for r in a.to_pylist()], keys) for a in answers]
    medians = [e["median"] for e in errs if e["median"] is not None]
    wall = {s: statistics.median(t) for s, t in times.items()}
    return {"query": f"q{n:02d}", "sql": sql, "plain_sql": plain, "wall_s": wall, "times": times,
            "ratio": wall["dpsql"] / wall["plain"], "runs": errs,
            "rel_error": statistics.median(medians) if medians else None, "exact": truth}


def compare(rec: dict, n: int, sf: float) -> dict:
    """The record's numbers beside the peer's: the error scaled to SF 30, and who is lower."""
    peer = PEER[n]
    peer_error = statistics.median(peer["errors_pct"]) / 100
    scaled = None if rec["rel_error"] is None else rec["rel_error"] * sf / PEER_SF
    rec.update({"peer_error": peer_error, "peer_ratio": peer["slowdown"], "scaled_error": scaled,
                "peer_bounds": peer["bounds"],
                "lower_error": scaled is not None and scaled < peer_error,
                "lower_ratio": rec["ratio"] < peer["slowdown"]})
    return rec


def run(sf: float = 10.0, queries=QUERIES, runs: int = 5, policy: Path = POLICY, data_dir: Path = DATA_DIR,
        log=print) -> dict:
    db, threads = connect_private(sf, policy, data_dir, log)
    try:
        load_start = round(os.getloadavg()[0], 1)
        log(f"SF {sf_label(sf)}, {runs} rounds, threads {threads}, load average {load_start}")
        records = []
        for n in queries:
            rec = compare(measure(db, n, runs, log), n, sf)
            log(f"  Q{n}: plain {rec['wall_s']['plain'] * 1000:.0f} ms, dpsql {rec['wall_s']['dpsql'] * 1000:.0f} ms "
                f"({rec['ratio']:.2f}x; peer {rec['peer_ratio']:.2f}x), error {_pct(rec['rel_error'])} at SF "
                f"{sf_label(sf)} = {_pct(rec['scaled_error'])} at SF 30 (peer {_pct(rec['peer_error'])})")
            records.append(rec)
    finally:
        db.close()
    return {"sf": sf, "runs": runs, "threads": threads, "policy": policy.name, "load_average_start": load_start,
            "environment": environment(), "queries": records}


def _pct(x) -> str:
    return "" if x is None else f"{x * 100:.4g}%"


def table(result: dict) -> str:
    env, sf = result["environment"], sf_label(result["sf"])
    lines = [f"SF {sf}, epsilon 1, delta 1e-6, median of {result['runs']} alternating hot rounds (one warm-up "
             f"each); dpsql {env['dpsql_commit']}, DuckDB {env['duckdb']}, {env['machine']}, threads "
             f"{result['threads']} (load average {result['load_average_start']} at the start, "
             f"{env['load_average_1min']} at the end), {env['date']}. The peer: SF 30, 16 threads, 3 runs. "
             f"Error at SF 30 = error at SF {sf} x {sf}/30 (fixed per-person bounds: constant noise, "
             f"totals proportional to SF).", "",
             f"| query | plain ms | dpsql ms | dpsql / plain | peer / DuckDB | median rel. error SF {sf} "
             f"| same, at SF 30 | peer's (SF 30) | lower error | lower ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for rec in result["queries"]:
        cells = [rec["query"], f"{rec['wall_s']['plain'] * 1000:.0f}", f"{rec['wall_s']['dpsql'] * 1000:.0f}",
                 f"{rec['ratio']:.2f}x", f"{rec['peer_ratio']:.2f}x", _pct(rec["rel_error"]),
                 f"**{_pct(rec['scaled_error'])}**", _pct(rec["peer_error"]),
                 "yes" if rec["lower_error"] else "no", "yes" if rec["lower_ratio"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def save(result: dict, readme: bool = True) -> Path:
    """``results/cwida_sf<SF>.json``, and the table between this scale factor's markers in README.md."""
    label = sf_label(result["sf"])
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"cwida_sf{label}.json"
    out.write_text(json.dumps(result, indent=1, default=_json_default) + "\n")
    if readme:
        marker = f"<!-- tpch-cwida sf={label} "
        put_block(README, marker + "start -->", marker + "end -->", table(result),
                  "## cwida/privacy's DP benchmark, reproduced (issue 24, item 6)")
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=10.0, help="scale factor (default 10)")
    parser.add_argument("--runs", type=int, default=5, help="hot rounds (default 5)")
    parser.add_argument("--queries", type=lambda s: tuple(int(q) for q in s.split(",") if q.strip()),
                        default=QUERIES, help="comma list among 1,5,6,14,19 (default all five)")
    parser.add_argument("--no-readme", action="store_true", help="do not write the table into README.md")
    args = parser.parse_args(argv)
    if not set(args.queries) <= set(QUERIES):
        parser.error("--queries: among 1, 5, 6, 14, 19")
    result = run(sf=args.sf, queries=args.queries, runs=args.runs)
    print(f"wrote {save(result, readme=not args.no_readme).relative_to(HERE.parents[1])}")
    print(table(result))
    return result


if __name__ == "__main__":
    main()
