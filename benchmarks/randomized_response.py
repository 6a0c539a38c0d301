#!/usr/bin/env python3
"""Randomized response (the local model) against the central discrete Laplace count at the same epsilon
(issue 23, item 6).

On the demo's ``people`` table (``dpsql demo``'s data: 20,000 people by default), for ``sex`` (k = 2,
Warner's) and ``state`` (k = 6), at each epsilon, ``runs`` times: the table is randomized
(``dpsql.randomize``, the column at epsilon per respondent) and ``SELECT col, COUNT(*) AS n ... GROUP
BY col`` is answered in the local model (the debiased estimate), beside the same query on the original
table in central DP at the same epsilon (fresh discrete Laplace noise each time). Both raw (not
clamped at 0). The error is the RMSE over the categories and the runs, beside each one's predicted
standard deviation (the estimator's variance at the true counts; the plan's). Seeded: the same numbers
every run.

    PYTHONPATH=. nice -n 10 python3 benchmarks/randomized_response.py [--rows 20000] [--runs 20] [--out benchmarks/results]

Writes ``randomized_response.json`` and ``randomized_response.md``.
"""
from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from dpsql.cli.demo import build_dataset, demo_policy
from dpsql.mechanisms.randomized_response import RandomizedResponse

COLUMNS = ("sex", "state")
EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)


def predicted_local_sd(truth: np.ndarray, epsilon: float) -> float:
    """The estimator's standard deviation at the true counts, averaged over the categories as a RMSE is."""
    rr = RandomizedResponse(epsilon, truth.size)
    p, q, n = float(rr.p_keep), float(rr.q), truth.sum()
    variance = (truth * p * (1 - p) + (n - truth) * q * (1 - q)) / (p - q) ** 2
    return math.sqrt(variance.mean())


def local_answer(people, column: str, keys: list, epsilon: float, rng: np.random.Generator) -> dict:
    """The table randomized, then the count per category answered in the local model (debiased, raw)."""
    con = duckdb.connect()
    dpsql.randomize(people, [column], epsilon, con, output_table="people", domains={column: keys}, rng=rng)
    policy = {"budget": {"epsilon": 1}, "tables": {"people": {"privacy_unit": "person_id", "local_model": True,
              "columns": {column: {"randomized": {"epsilon": epsilon, "domain": keys}}}}}}
    db = dpsql.connect(con, policy=policy, ledger=":memory:")
    rows = db.sql(f"SELECT {column}, COUNT(*) AS n FROM people GROUP BY {column}", nonnegative=False).fetchall()
    return {row[0]: row[1] for row in rows}


def central_answer(db, column: str, epsilon: float) -> dict:
    res = db.sql(f"SELECT {column}, COUNT(*) AS n FROM people GROUP BY {column}", epsilon, nonnegative=False,
                 fresh=True)
    return dict(res.fetchall())


def run(rows: int = 20_000, runs: int = 20, epsilons=EPSILONS, seed: int = 0) -> list[dict]:
    """One row per (column, epsilon): the RMSE and predicted sd of each model, and their ratio."""
    out = []
    with tempfile.TemporaryDirectory() as folder:
        path = build_dataset(Path(folder) / "demo.duckdb", rows=rows)
        with duckdb.connect(str(path), read_only=True) as con:
            people = con.table("people").to_arrow_table()
            truths = {c: dict(con.execute(f"SELECT {c}, count(*) FROM people GROUP BY {c}").fetchall())
                      for c in COLUMNS}
        policy = demo_policy()
        policy["budget"] = {"epsilon": 1e9}   # this benchmark's own ledger, in memory
        rng = np.random.default_rng(seed)
        central = dpsql.connect(str(path), policy=policy, ledger=":memory:", rng=rng)
        for column in COLUMNS:
            keys = list(policy["tables"]["people"]["columns"][column]["keys"])
            truth = np.array([truths[column].get(k, 0) for k in keys], dtype=float)
            for epsilon in epsilons:
                started = time.perf_counter()
                local = [local_answer(people, column, keys, epsilon, rng) for _ in range(runs)]
                noisy = [central_answer(central, column, epsilon) for _ in range(runs)]
                rmse = [math.sqrt(np.mean([(a[k] - t) ** 2 for a in answers for k, t in zip(keys, truth)]))
                        for answers in (local, noisy)]
                sql = f"SELECT {column}, COUNT(*) AS n FROM people GROUP BY {column}"
                out.append({"column": column, "k": len(keys), "epsilon": epsilon, "rows": rows, "runs": runs,
                            "local_rmse": rmse[0], "local_sd": predicted_local_sd(truth, epsilon),
                            "central_rmse": rmse[1], "central_sd": central.explain(sql, epsilon).measurements[0].std_dev,
                            "ratio": rmse[0] / rmse[1], "seconds": time.perf_counter() - started})
    return out


def markdown(results: list[dict]) -> str:
    first = results[0]
    lines = [f"Randomized response (local model) against central discrete Laplace at the same epsilon: the demo's "
             f"people table ({first['rows']:,} people), `SELECT col, COUNT(*) ... GROUP BY col`, {first['runs']} "
             "seeded runs each (the local answers each from a fresh randomization of the table); RMSE over the "
             "categories and runs, raw (not clamped), beside each model's predicted sd.", "",
             "| column | k | epsilon | local RMSE | local predicted sd | central RMSE | central predicted sd "
             "| local / central |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['column']} | {r['k']} | {r['epsilon']:g} | {r['local_rmse']:.1f} | {r['local_sd']:.1f} | "
                     f"{r['central_rmse']:.2f} | {r['central_sd']:.2f} | {r['ratio']:.0f}x |")
    lines += ["", "The local model protects each respondent whoever reads the table, at the price of an error that "
              "grows with sqrt(n) (and with k); the central count's error does not depend on n."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    results = run(rows=args.rows, runs=args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "randomized_response.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "randomized_response.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
