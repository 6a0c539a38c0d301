#!/usr/bin/env python3
"""Noisy top-k against noisy values (issue 23, "Measure"): recall of the true top k and the released
values' error, on a Zipf column of 1M rows and on TPC-H Q21.

* **Zipf**: 1M rows, a key drawn from 10,000 public keys with P(key i) ~ 1 / (i + 1)^1.1; at row level
  (one row a person) and at user level (100,000 persons of 10 rows each, each row's key drawn alone;
  the policy's L = 10 keys and C = 3 rows a person: few rows are dropped). ``SELECT key, COUNT(*) AS n FROM z GROUP BY key
  ORDER BY n DESC LIMIT k`` for k = 10 and 100 at epsilon 0.1, 1 and 10, answered three ways:
  ``exponential`` (OPTIONS(top_k = 'exponential'): k peels at half the epsilon, the chosen groups'
  counts at the other half), ``noisy_values`` (OPTIONS(top_k = 'noisy_values'): every key's noisy
  count at the whole epsilon, the k largest kept: the meaning before issue 23) and ``default`` (no
  option: what dpsql picks, plan/top_k.py). And ``SELECT MODE(flat) FROM z``, ``flat`` a second key
  over 1,000 public keys with P(key i) ~ 1 / (i + 1)^0.05: the top key leads the next by about 3%
  (k = 1: recall is how often the true mode is answered).
* **TPC-H Q21** (benchmarks/tpch: its query and customer-level policy, lineitem L = 4, C = 50):
  ``ORDER BY numwait DESC, s_name LIMIT 100`` over every supplier's name, at epsilon 1 and 10, the
  same three ways; and Q15's top-1 supplier, reachable as ``GROUP BY l_suppkey ORDER BY revenue DESC
  LIMIT 1`` (not its text: a scalar subquery over a CTE, DP201).

Recall: |released keys and the exact top k| / k (the exact top k of the raw data, ties to the smaller
key). Value error: the median over released rows of |released - exact| / exact (exact: the raw
count; 0 excluded). Each a mean over ``--runs`` runs, each run a fresh query (seeded generator).

    PYTHONPATH=. nice -n 10 python3 benchmarks/topk.py [--runs 5] [--sf 1] [--out benchmarks/results]

Writes ``topk.json`` and ``topk.md``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

import dpsql

HERE = Path(__file__).resolve().parent
ROWS, KEYS, ZIPF = 1_000_000, 10_000, 1.1   # a person: 10 consecutive rows
FLAT_KEYS, FLAT = 1_000, 0.05
WAYS = {"exponential": "OPTIONS(top_k = 'exponential') ", "noisy_values": "OPTIONS(top_k = 'noisy_values') ",
        "default": ""}
EPSILONS, KS = (0.1, 1.0, 10.0), (10, 100)


def zipf_database(rows: int = ROWS, seed: int = 1) -> duckdb.DuckDBPyConnection:
    """z(pid, person, key, flat): ``rows`` rows, key ~ Zipf(1.1) over 0..9999, flat ~ Zipf(0.05) over
    0..999; person = row // 10."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, KEYS + 1) ** ZIPF
    flat = 1.0 / np.arange(1, FLAT_KEYS + 1) ** FLAT
    con = duckdb.connect()
    con.register("frame", {"key": rng.choice(KEYS, size=rows, p=p / p.sum()),
                           "flat": rng.choice(FLAT_KEYS, size=rows, p=flat / flat.sum())})
    con.execute("CREATE TABLE z AS SELECT row_number() OVER () - 1 AS pid, (row_number() OVER () - 1) // 10 AS person, "
                "key::INTEGER AS key, flat::INTEGER AS flat FROM frame")
    return con


def zipf_policy(level: str) -> dict:
    unit = {"privacy_unit": "row"} if level == "row" else \
        {"privacy_unit": "person", "max_groups_per_unit": 10, "max_rows_per_unit": 3}
    return {"budget": {"epsilon": 1e9}, "tables": {"z": {**unit, "columns": {
        "pid": {"identifier": True}, "key": {"keys": {"range": [0, KEYS - 1]}},
        "flat": {"keys": {"range": [0, FLAT_KEYS - 1]}}}}}}


def answer(db, sql: str, epsilon: float, delta: float = 0.0) -> tuple[list[tuple], float, bool]:
    """The rows of one fresh answer, its seconds, and whether its plan chose by the exponential mechanism."""
    started = time.perf_counter()
    result = db.sql(sql, epsilon=epsilon, delta=delta, fresh=True)
    rows = result.fetchall()
    return rows, time.perf_counter() - started, result.plan.top_k is not None


def scored(rows: list[tuple], exact: dict, top: list, k: int) -> tuple[float, float | None]:
    """(recall of ``top`` among the released keys, the released values' median relative error: none
    without a released value, MODE)."""
    released = [r[0] for r in rows]
    errors = [abs(r[1] - exact[r[0]]) / exact[r[0]] for r in rows if len(r) > 1 and exact.get(r[0])]
    return len(set(released) & set(top)) / k, statistics.median(errors) if errors else None


def compare(db, template: str, exact: dict, k: int, epsilon: float, runs: int, delta: float = 0.0) -> dict:
    """Each way's mean recall, median value error and seconds over ``runs`` fresh answers."""
    top = [key for key, _ in sorted(exact.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
    out = {}
    for way, option in WAYS.items():
        recalls, errors, seconds, chosen = [], [], [], False
        for _ in range(runs):
            rows, took, chosen = answer(db, template.format(dp=f"WITH DIFFERENTIAL_PRIVACY {option}" if option else "",
                                                           k=k), epsilon, delta)
            recall, error = scored(rows, exact, top, k)
            recalls.append(recall)
            errors += [error] if error is not None else []
            seconds.append(took)
        out[way] = {"recall": statistics.mean(recalls), "value_error": statistics.median(errors) if errors else None,
                    "seconds": statistics.median(seconds), "exponential": chosen}
    return out


ZIPF_SQL = "SELECT {dp}key, COUNT(*) AS n FROM z GROUP BY key ORDER BY n DESC LIMIT {k}"
MODE_SQL = "SELECT {dp}MODE(flat) FROM z"


def zipf(runs: int, log, rows: int = ROWS, epsilons=EPSILONS) -> list[dict]:
    con = zipf_database(rows)
    exact = dict(con.execute("SELECT key, COUNT(*) FROM z GROUP BY key").fetchall())
    modes = dict(con.execute("SELECT flat, COUNT(*) FROM z GROUP BY flat").fetchall())
    results = []
    for level in ("row", "user"):
        db = dpsql.connect(con, ledger=":memory:", policy=zipf_policy(level), rng=np.random.default_rng(7))
        for k, sql, counts, n in [(k, ZIPF_SQL, exact, runs) for k in KS] + [(1, MODE_SQL, modes, 4 * runs)]:
            for epsilon in epsilons:
                row = {"level": level, "k": k, "query": "mode" if sql == MODE_SQL else "top-k", "epsilon": epsilon,
                       **compare(db, sql, counts, k, epsilon, n)}
                log(f"zipf {level} {row['query']} k={k} eps={epsilon}: " + ", ".join(
                    f"{w} recall {row[w]['recall']:.2f}" for w in WAYS))
                results.append(row)
    return results


def tpch_database(sf: float):
    sys.path.insert(0, str(HERE / "tpch"))
    from data import ensure_database   # benchmarks/tpch/data.py: generated once, cached
    return ensure_database(sf, log=lambda line: None)


Q15 = ("SELECT {dp}s_suppkey, SUM(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem, supplier "
       "WHERE s_suppkey = l_suppkey AND l_shipdate >= DATE '1996-01-01' "
       "AND l_shipdate < DATE '1996-01-01' + INTERVAL '3' MONTH GROUP BY s_suppkey ORDER BY total_revenue DESC LIMIT {k}")


def tpch(sf: float, runs: int, log) -> list[dict]:
    """Q21 (k = 100) and Q15's top-1 (s_suppkey: the public supplier table's keys)."""
    path = tpch_database(sf)
    plain = duckdb.connect(str(path), read_only=True)
    q21 = (HERE / "tpch" / "queries" / "q21.sql").read_text()
    template = q21.replace("select\n    s_name", "select {dp}\n    s_name").replace("limit 100", "limit {k}")
    exact21 = dict(plain.execute(q21.replace("limit 100", "")).fetchall())
    exact15 = dict(plain.execute(Q15.format(dp="", k=1).replace(" ORDER BY total_revenue DESC LIMIT 1", "")).fetchall())
    db = dpsql.connect(str(path), ledger=":memory:", policy=str(HERE / "tpch" / "policy.yaml"),
                       rng=np.random.default_rng(11))
    results = []
    for name, sql, exact, k in (("q21", template, exact21, 100), ("q15", Q15, exact15, 1)):
        for epsilon in (1.0, 10.0):
            row = {"query": name, "k": k, "epsilon": epsilon,
                   **compare(db, sql, {key: float(v) for key, v in exact.items()}, k, epsilon, runs)}
            log(f"tpch {name} eps={epsilon}: " + ", ".join(f"{w} recall {row[w]['recall']:.2f}" for w in WAYS))
            results.append(row)
    return results


def _cell(way: dict) -> str:
    error = "" if way["value_error"] is None else f"{way['value_error']:.3g}"
    return f"{way['recall']:.2f} / {error}"


def markdown(report: dict) -> str:
    lines = ["# Noisy top-k against noisy values (`benchmarks/topk.py`)", "",
             f"{report['environment']}; {report['runs']} runs per cell (mean recall / median relative value "
             "error); `default` is what dpsql picks without an option (a star: the exponential mechanism).", "",
             "## Zipf, 1M rows, 10,000 public keys (user level: L = 10, C = 3)", "",
             "| level | query | k | epsilon | exponential | noisy_values | default |", "|---|---|---|---|---|---|---|"]
    for r in report["zipf"]:
        star = " *" if r["default"]["exponential"] else ""
        lines.append(f"| {r['level']} | {r['query']} | {r['k']} | {r['epsilon']:g} | {_cell(r['exponential'])} | "
                     f"{_cell(r['noisy_values'])} | {_cell(r['default'])}{star} |")
    lines += ["", f"## TPC-H SF {report['sf']:g}, customer-level policy (lineitem L = 4, C = 50)", "",
              "| query | k | epsilon | exponential | noisy_values | default |", "|---|---|---|---|---|---|"]
    for r in report["tpch"]:
        star = " *" if r["default"]["exponential"] else ""
        lines.append(f"| {r['query']} | {r['k']} | {r['epsilon']:g} | {_cell(r['exponential'])} | "
                     f"{_cell(r['noisy_values'])} | {_cell(r['default'])}{star} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--skip-tpch", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    report = {"runs": args.runs, "sf": args.sf, "zipf": zipf(args.runs, print),
              "tpch": [] if args.skip_tpch else tpch(args.sf, args.runs, print)}
    report["environment"] = (f"dpsql {dpsql.__version__ if hasattr(dpsql, '__version__') else ''}, DuckDB "
                             f"{duckdb.__version__}, {time.strftime('%Y-%m-%d')}, "
                             f"{time.perf_counter() - started:.0f} s in all")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "topk.json").write_text(json.dumps(report, indent=2))
    (args.out / "topk.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
