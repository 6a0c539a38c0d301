#!/usr/bin/env python3
"""How much noise a total budget buys under each mechanism and accountant (issue 22, "Measure").

A total of (epsilon 1, delta 1e-6) answers 100 COUNT queries, and apart 100 SUM queries (sensitivity 1
each: one row a person, values in [0, 1]), under
(a) discrete Laplace with basic composition, (b) discrete Laplace under PLD, (c) the discrete
Gaussian under zCDP, (d) the discrete Gaussian under PLD. For each, the largest per-query epsilon
whose 100 charges the ledger's accountant still fits in the total is found by bisection on the
accountant itself (``accounting/accountants.py`` composing each query's ``Plan.releases()``); then
the 100 queries are answered for real, ``runs`` times, each time on a fresh ledger that must accept
every one of them, and the RMSE against the exact answers is measured next to the plan's predicted
standard deviation. Also: a GROUP BY where a person touches L = 10 groups (the Gaussian's sqrt(L)
gain), and the crossover, from how many queries on the Gaussian beats Laplace at delta 1e-6.

    PYTHONPATH=. nice -n 10 python3 benchmarks/composition.py [--runs 10] [--out benchmarks/results]

Writes ``composition.json``, ``composition.md`` (the tables) and ``composition.png`` (the plot).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from dpsql.accounting.accountants import ACCOUNTANTS
from dpsql.accounting.budget import Cost
from dpsql.accounting.composition import Charged

TOTAL = (1.0, 1e-6)
# A query's own delta under the Gaussian: zCDP and PLD compose its exact curve, not this statement,
# so it only fixes which point of the curve each query is calibrated at.
QUERY_DELTA = 1e-8
CONFIGS = [("a", "laplace", "basic"), ("b", "laplace", "pld"), ("c", "gaussian", "zcdp"), ("d", "gaussian", "pld")]
COUNT = "SELECT COUNT(*) AS n FROM people"
SUM = "SELECT SUM(v) AS s FROM people"
GROUPS = "SELECT g, COUNT(*) AS n FROM visits GROUP BY g"
PERSONS = 2000
L = 10


def database(accountant: str) -> dpsql.PrivateConnection:
    """``people``: one row a person, v in [0, 1]; ``visits``: ten rows a person, one in each of L groups."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE people AS SELECT i AS pid, (i % 97) / 96.0 AS v FROM range({PERSONS}) t(i)")
    con.execute(f"CREATE TABLE visits AS SELECT i AS pid, g FROM range({PERSONS}) t(i), range({L}) s(g)")
    person = {"pid": {"identifier": True}}
    policy = {"budget": {"epsilon": TOTAL[0], "delta": TOTAL[1], "accountant": accountant}, "tables": {
        "people": {"privacy_unit": "pid", "max_groups_per_unit": 1, "max_rows_per_unit": 1,
                   "columns": {**person, "v": {"lower": 0, "upper": 1}}},
        "visits": {"privacy_unit": "pid", "max_groups_per_unit": L, "max_rows_per_unit": 1,
                   "columns": {**person, "g": {"keys": {"range": [0, L - 1]}}}}}}
    return dpsql.connect(con, ledger=":memory:", policy=policy)


def delta_of(mechanism: str) -> float:
    return QUERY_DELTA if mechanism == "gaussian" else 0.0


def fits(db, queries: list[str], mechanism: str, accountant: str, epsilon: float) -> bool:
    """Whether ``queries`` at ``epsilon`` each (and the mechanism's delta) fit the total, by the accountant."""
    acct, delta = ACCOUNTANTS[accountant], delta_of(mechanism)
    releases = {sql: db.explain(sql, epsilon, delta, mechanism=mechanism).releases() for sql in set(queries)}
    charges = [Charged(Decimal(repr(epsilon)), Decimal(repr(delta)), releases[sql]) for sql in queries]
    return acct.fits(acct.compose(acct.empty(), charges), Cost.of(*TOTAL))


def largest_epsilon(db, queries: list[str], mechanism: str, accountant: str, steps: int = 24) -> float:
    """The largest per-query epsilon (to 1 part in 2**(steps/4)) whose charges all fit: a bisection
    on log epsilon between a share that surely fits (basic's) and four times the total."""
    low, high = math.log(TOTAL[0] / len(queries)) - 1e-9, math.log(4 * TOTAL[0])
    if not fits(db, queries, mechanism, accountant, math.exp(low)):
        low = math.log(TOTAL[0] / len(queries) / 4)
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if fits(db, queries, mechanism, accountant, math.exp(mid)) else (low, mid)
    return math.exp(low)


def predicted_sd(db, sql: str, mechanism: str, epsilon: float) -> float:
    return db.explain(sql, epsilon, delta_of(mechanism), mechanism=mechanism).measurements[0].std_dev


def answered(db, sql: str, mechanism: str, epsilon: float) -> np.ndarray:
    """One fresh answer's released numbers (the ledger must accept it: DP402 here is a finding)."""
    table = db.sql(sql, epsilon, delta_of(mechanism), mechanism=mechanism, fresh=True).arrow()
    return np.asarray(table.column(table.num_columns - 1).to_numpy(zero_copy_only=False), dtype=float)


def hundreds(runs: int) -> list[dict]:
    """(a)-(d): 100 COUNT queries in the total, and apart 100 SUM queries in the total: the per-query
    epsilon the accountant allows, the plan's predicted sd and the RMSE of ``runs`` x 100 answers."""
    rows = []
    exact = duckdb_exact()
    for kind, sql in (("COUNT", COUNT), ("SUM", SUM)):
        for label, mechanism, accountant in CONFIGS:
            db = database(accountant)
            epsilon = largest_epsilon(db, [sql] * 100, mechanism, accountant)
            errors: list[float] = []
            started = time.perf_counter()
            for _ in range(runs):
                run = database(accountant)   # a fresh ledger each run: it must take all 100 charges
                errors.extend(answered(run, sql, mechanism, epsilon)[0] - exact[kind] for _ in range(100))
            rows.append({"query": kind, "config": label, "mechanism": mechanism, "accountant": accountant,
                         "query_epsilon": epsilon, "query_delta": delta_of(mechanism),
                         "predicted_sd": predicted_sd(db, sql, mechanism, epsilon),
                         "rmse": float(np.sqrt(np.mean(np.square(errors)))), "answers": len(errors),
                         "seconds": time.perf_counter() - started})
    return rows


def duckdb_exact() -> dict[str, float]:
    """The exact answers, from plain DuckDB on the same data (no person is clipped: C = L = 1, v in [0, 1])."""
    con = duckdb.connect()
    n, s = con.execute(f"SELECT COUNT(*), SUM((i % 97) / 96.0) FROM range({PERSONS}) t(i)").fetchone()
    return {"COUNT": float(n), "SUM": float(s)}


def grouped(runs: int) -> list[dict]:
    """A GROUP BY where each person touches L groups: one query at (1, 1e-6) standalone, and 100 such
    queries in the total, per configuration (Laplace's noise grows with L, the Gaussian's with sqrt(L))."""
    rows = []
    for label, mechanism, accountant in CONFIGS:
        db = database(accountant)
        alone = TOTAL[0]
        delta = TOTAL[1] if mechanism == "gaussian" else 0.0
        plan = db.explain(GROUPS, alone, delta, mechanism=mechanism)
        errors = []
        for _ in range(runs):
            run = database(accountant)
            table = run.sql(GROUPS, alone, delta, mechanism=mechanism, fresh=True).arrow()
            errors.extend(np.asarray(table.column("n").to_numpy(), dtype=float) - PERSONS)
        many = largest_epsilon(db, [GROUPS] * 100, mechanism, accountant)
        rows.append({"config": label, "mechanism": mechanism, "accountant": accountant,
                     "alone_predicted_sd": plan.measurements[0].std_dev,
                     "alone_rmse": float(np.sqrt(np.mean(np.square(errors)))), "alone_answers": len(errors),
                     "hundred_query_epsilon": many,
                     "hundred_predicted_sd": predicted_sd(db, GROUPS, mechanism, many)})
    return rows


def crossover(counts: list[int]) -> list[dict]:
    """For n COUNT queries in the total: the per-query sd each configuration allows (predicted)."""
    rows = []
    dbs = {accountant: database(accountant) for accountant in ("basic", "zcdp", "pld")}
    for n in counts:
        row: dict = {"queries": n}
        for label, mechanism, accountant in CONFIGS:
            epsilon = largest_epsilon(dbs[accountant], [COUNT] * n, mechanism, accountant, steps=20)
            row[label] = predicted_sd(dbs[accountant], COUNT, mechanism, epsilon)
        rows.append(row)
    return rows


def markdown(report: dict) -> str:
    lines = [f"Total budget (epsilon {TOTAL[0]:g}, delta {TOTAL[1]:g}); sensitivity-1 queries; "
             f"{report['runs']} runs of every query on a fresh ledger each.", "",
             "| query | | mechanism | accountant | per-query epsilon | predicted sd | measured RMSE | answers |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["hundreds"]:
        lines.append(f"| 100 {r['query']} | ({r['config']}) | {r['mechanism']} | {r['accountant']} | "
                     f"{r['query_epsilon']:.5f} | {r['predicted_sd']:.1f} | {r['rmse']:.1f} | {r['answers']} |")
    lines += ["", f"GROUP BY over {L} groups, each person in all {L} (L = {L}):", "",
              "| | mechanism | accountant | one query at (1, 1e-6): predicted sd | RMSE | 100 queries: predicted sd |",
              "|---|---|---|---|---|---|"]
    for r in report["grouped"]:
        lines.append(f"| ({r['config']}) | {r['mechanism']} | {r['accountant']} | {r['alone_predicted_sd']:.2f} | "
                     f"{r['alone_rmse']:.2f} | {r['hundred_predicted_sd']:.1f} |")
    lines += ["", "Per-query sd of n COUNT queries in the total (predicted):", "",
              "| n | (a) Laplace, basic | (b) Laplace, PLD | (c) Gaussian, zCDP | (d) Gaussian, PLD |",
              "|---|---|---|---|---|"]
    for r in report["crossover"]:
        lines.append(f"| {r['queries']} | {r['a']:.1f} | {r['b']:.1f} | {r['c']:.1f} | {r['d']:.1f} |")
    lines += ["", f"The Gaussian (best accountant) beats Laplace (best accountant) from n = {report['crossover_n']} on."]
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = {"a": "(a) Laplace, basic", "b": "(b) Laplace, PLD", "c": "(c) Gaussian, zCDP", "d": "(d) Gaussian, PLD"}
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ns = [r["queries"] for r in report["crossover"]]
    for key, name in names.items():
        ax.plot(ns, [r[key] for r in report["crossover"]], marker="o", markersize=3, label=name)
    for r in report["hundreds"]:
        if r["query"] == "COUNT":
            ax.scatter([100], [r["rmse"]], marker="x", color="black", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("COUNT queries in a total of (1, 1e-6)")
    ax.set_ylabel("noise sd per query (x: measured RMSE at 100)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def first_gaussian_win(rows: list[dict]) -> int | None:
    for r in rows:
        if min(r["c"], r["d"]) < min(r["a"], r["b"]):
            return r["queries"]
    return None


def run(runs: int = 10, counts: tuple[int, ...] = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 100, 200)) -> dict:
    report = {"runs": runs, "total": TOTAL, "hundreds": hundreds(runs), "grouped": grouped(runs * 20),
              "crossover": crossover(list(counts))}
    report["crossover_n"] = first_gaussian_win(report["crossover"])
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    report = run(args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "composition.json").write_text(json.dumps(report, indent=2))
    (args.out / "composition.md").write_text(markdown(report))
    plot(report, args.out / "composition.png")
    print(markdown(report))


if __name__ == "__main__":
    main()
