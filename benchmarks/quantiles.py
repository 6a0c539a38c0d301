#!/usr/bin/env python3
"""MIN, MAX, MEDIAN and p90 under every mechanism dpsql offers for them (issue 23, "Measure").

Each aggregate is asked alone (one measurement, the whole epsilon) with ``mechanism => 'tree'``
(the quantile tree: Laplace noise on 16**4 leaves' node counts), ``'exponential'`` (Smith's
exponential mechanism on the same 65,536 cells), ``'ptr'`` (propose-test-release; NULL when its test
fails) and ``'smooth'`` (smooth sensitivity), at epsilon 0.1, 1 and 10 (delta 1e-6: only PTR and
smooth sensitivity spend it), ``runs`` times each with a seeded generator per run, on:

    events     the benchmark data (benchmarks/bench_core.py build): value uniform on [-20, 120] against
               bounds [0, 100], so 14% of it sits on each bound (ties at MIN and MAX)
    events_loose  the same values against loose bounds [-50, 150]: MIN and MAX inside them
    income     the demo's skewed column (dpsql/cli/demo.py: log-normal income, bounds [0, 500,000])
    income_1k  the same at 1,000 people: few values near each quantile

The error is |released - exact| against the exact quantile of the clamped values (DuckDB's MIN, MAX,
QUANTILE_CONT), the median over runs, and PTR's share of runs without an answer. Then the case
where the tree should win: all nine deciles in one query, one shared tree against nine exponential
choices at a ninth of the epsilon each (the mean error over the deciles). Peers: OpenDP's quantile
and SmartNoise when importable (neither is installed here: the results say so).

    PYTHONPATH=. nice -n 10 python3 benchmarks/quantiles.py [--rows 100000] [--runs 10] [--out benchmarks/results]

Writes ``quantiles.json`` (every number), ``quantiles.md`` (the tables) and ``quantiles.png``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from dpsql.cli.demo import INCOME_UPPER, build_dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import build as build_events   # noqa: E402  (benchmarks/ is not a package)

MECHANISMS = ("tree", "exponential", "ptr", "smooth")
AGGREGATES = {"min": "MIN(x{m})", "max": "MAX(x{m})", "median": "MEDIAN(x{m})", "p90": "QUANTILE_CONT(x, 0.9{m})"}
TRUTH = {"min": "MIN(c)", "max": "MAX(c)", "median": "QUANTILE_CONT(c, 0.5)", "p90": "QUANTILE_CONT(c, 0.9)"}
EPSILONS = (0.1, 1.0, 10.0)
DELTA = 1e-6
DECILES = [round(0.1 * i, 1) for i in range(1, 10)]


def datasets(rows: int, scratch: Path) -> dict[str, tuple[duckdb.DuckDBPyConnection, float, float]]:
    """name -> (a connection holding t(x), lower, upper)."""
    out = {}
    events = duckdb.connect()
    build_events(events, rows)
    events.execute("CREATE TABLE t AS SELECT value AS x FROM events")
    out["events"] = (events, 0.0, 100.0)
    out["events_loose"] = (events, -50.0, 150.0)
    for name, people in (("income", rows), ("income_1k", 1000)):
        path = build_dataset(scratch / f"{name}.duckdb", rows=people)
        con = duckdb.connect()
        con.execute(f"ATTACH '{path}' AS demo (READ_ONLY)")
        con.execute("CREATE TABLE t AS SELECT income AS x FROM demo.people")
        con.execute("DETACH demo")
        out[name] = (con, 0.0, float(INCOME_UPPER))
    return out


def connect(con: duckdb.DuckDBPyConnection, lower: float, upper: float, seed: int) -> dpsql.PrivateConnection:
    """A private connection over a copy of t (dpsql locks the connection it is handed down)."""
    copy = duckdb.connect()
    arrow = con.sql("SELECT x FROM t").to_arrow_table()   # noqa: F841  (DuckDB reads the local by name)
    copy.execute("CREATE TABLE t AS SELECT x FROM arrow")
    policy = {"budget": {"epsilon": 1e9, "delta": 0.5}, "tables": {"t": {
        "privacy_unit": "row", "columns": {"x": {"type": "float", "lower": lower, "upper": upper}}}}}
    return dpsql.connect(copy, ledger=":memory:", policy=policy, rng=np.random.default_rng(seed))


def truths(con: duckdb.DuckDBPyConnection, lower: float, upper: float) -> dict[str, float]:
    clamped = f"(SELECT LEAST(GREATEST(x, {lower}), {upper}) AS c FROM t WHERE x IS NOT NULL)"
    exact = {name: con.execute(f"SELECT {sql} FROM {clamped}").fetchall()[0][0] for name, sql in TRUTH.items()}
    deciles = con.execute(f"SELECT QUANTILE_CONT(c, {DECILES}) FROM {clamped}").fetchall()[0][0]
    return {**exact, "deciles": list(deciles)}


def one_quantile(db, truth: dict, epsilon: float) -> dict:
    """{aggregate: {mechanism: error or None (no answer)}} for one run."""
    out: dict = {}
    for name, template in AGGREGATES.items():
        out[name] = {}
        for m in MECHANISMS:
            sql = f"SELECT {template.format(m=f', mechanism => {m!r}')} AS v FROM t"
            value = db.sql(sql, epsilon=epsilon, delta=DELTA, fresh=True).fetchall()[0][0]
            out[name][m] = None if value is None else abs(value - truth[name])
    return out


def deciles(db, truth: dict, epsilon: float) -> dict:
    """The mean error over the nine deciles of one query: one tree, or nine exponential choices."""
    out = {}
    for m in ("tree", "exponential"):
        items = ", ".join(f"QUANTILE_CONT(x, {q}, mechanism => '{m}') AS q{i}" for i, q in enumerate(DECILES))
        row = db.sql(f"SELECT {items} FROM t", epsilon=epsilon, fresh=True).fetchall()[0]
        out[m] = statistics.fmean(abs(v - t) for v, t in zip(row, truth["deciles"]))
    return out


def run(rows: int = 100_000, runs: int = 10, epsilons=EPSILONS, log=print) -> dict:
    started = time.time()
    results: dict = {"rows": rows, "runs": runs, "epsilons": list(epsilons), "delta": DELTA, "datasets": {},
                     "peers": peers()}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (con, lower, upper) in datasets(rows, Path(scratch)).items():
            truth = truths(con, lower, upper)
            cells: dict = {}
            for epsilon in epsilons:
                per_run = []
                for seed in range(runs):
                    db = connect(con, lower, upper, seed)
                    per_run.append({"one": one_quantile(db, truth, epsilon), "deciles": deciles(db, truth, epsilon)})
                    db.close()
                cells[str(epsilon)] = summarise(per_run)
                log(f"{name} epsilon {epsilon}: done ({time.time() - started:.0f} s)")
            results["datasets"][name] = {"lower": lower, "upper": upper, "truth": truth, "errors": cells,
                                         "n": con.execute("SELECT COUNT(x) FROM t").fetchall()[0][0]}
    results["seconds"] = round(time.time() - started, 1)
    return results


def summarise(per_run: list[dict]) -> dict:
    """Median error over runs (of the runs that answered) and the share without an answer."""
    out: dict = {"one": {}, "deciles": {}}
    for name in AGGREGATES:
        out["one"][name] = {}
        for m in MECHANISMS:
            errors = [r["one"][name][m] for r in per_run]
            answered = [e for e in errors if e is not None]
            out["one"][name][m] = {"median_error": statistics.median(answered) if answered else None,
                                   "no_answer": 1 - len(answered) / len(errors)}
    for m in ("tree", "exponential"):
        out["deciles"][m] = statistics.median(r["deciles"][m] for r in per_run)
    return out


def peers() -> dict:
    """The peers with a DP quantile, if importable here (nothing is installed for them)."""
    return {"opendp": importlib.util.find_spec("opendp") is not None,
            "smartnoise (snsql)": importlib.util.find_spec("snsql") is not None}


def _cell(entry: dict, span: float) -> str:
    if entry["median_error"] is None:
        return "no answer"
    text = f"{entry['median_error']:.3g} ({100 * entry['median_error'] / span:.2g}%)"
    return text + (f", {entry['no_answer']:.0%} none" if entry["no_answer"] else "")


def markdown(results: dict) -> str:
    """The tables: one per dataset (aggregate x mechanism, median error and % of the range per
    epsilon), the winners, and the deciles."""
    eps = results["epsilons"]
    lines = ["# Quantiles: MIN, MAX, MEDIAN and p90 by each mechanism", "",
             f"`benchmarks/quantiles.py`, {results['runs']} runs per cell (seeded), delta {results['delta']:g} "
             f"(PTR and smooth sensitivity only), {results['seconds']:.0f} s. Error: the median over runs of "
             "|released - exact| against the quantile of the clamped values, and in % of the bounds' range; "
             "PTR's runs without an answer are left out of its median and counted (`none`).", ""]
    for name, data in results["datasets"].items():
        span = data["upper"] - data["lower"]
        lines += [f"## {name} (n = {data['n']:,}, bounds [{data['lower']:g}, {data['upper']:g}])", "",
                  "| aggregate | mechanism | " + " | ".join(f"epsilon {e:g}" for e in eps) + " |",
                  "|---|---|" + "---|" * len(eps)]
        for aggregate in AGGREGATES:
            for m in MECHANISMS:
                cells = [_cell(data["errors"][str(e)]["one"][aggregate][m], span) for e in eps]
                lines.append(f"| {aggregate} | {m} | " + " | ".join(cells) + " |")
        lines += ["", "Best per aggregate and epsilon: " + "; ".join(
            f"{aggregate} at {e:g}: {best(data['errors'][str(e)]['one'][aggregate])}" for aggregate in AGGREGATES
            for e in eps), "",
            "All nine deciles in one query (mean error over the deciles): " + "; ".join(
            f"epsilon {e:g}: tree {data['errors'][str(e)]['deciles']['tree']:.3g}, exponential "
            f"{data['errors'][str(e)]['deciles']['exponential']:.3g}" for e in eps), ""]
    missing = [peer for peer, found in results["peers"].items() if not found]
    if missing:
        lines.append(f"Peers: {', '.join(missing)} not installed here; not measured.")
    return "\n".join(lines) + "\n"


def best(entries: dict) -> str:
    """The mechanism with the smallest median error among those that always answered."""
    answered = {m: e["median_error"] for m, e in entries.items() if e["median_error"] is not None and not e["no_answer"]}
    return min(answered, key=answered.get) if answered else "none"


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(results["datasets"])
    fig, axes = plt.subplots(len(names), len(AGGREGATES), figsize=(4 * len(AGGREGATES), 3 * len(names)),
                             squeeze=False)
    for row, name in zip(axes, names):
        data = results["datasets"][name]
        span = data["upper"] - data["lower"]
        for ax, aggregate in zip(row, AGGREGATES):
            for m in MECHANISMS:
                points = [(e, data["errors"][str(e)]["one"][aggregate][m]["median_error"]) for e in results["epsilons"]]
                # Floored at 1e-4 % of the range (an error of 0: the exact cell, or ties at a bound).
                points = [(e, max(100 * err / span, 1e-4)) for e, err in points if err is not None]
                if points:
                    ax.plot(*zip(*points), marker="o", label=m)
            ax.set(xscale="log", yscale="log", title=f"{name}: {aggregate}", xlabel="epsilon",
                   ylabel="median error, % of range")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--replot", action="store_true", help="redraw quantiles.md and .png from quantiles.json")
    args = parser.parse_args()
    results = json.loads((args.out / "quantiles.json").read_text()) if args.replot else run(args.rows, args.runs)
    save(results, args.out)
    print(markdown(results))


def save(results: dict, out: Path) -> None:
    """quantiles.json (every number), quantiles.md (the tables), quantiles.png (the plot) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for suffix, text in (("json", json.dumps(results, indent=1)), ("md", markdown(results))):
        (out / f"quantiles.{suffix}").write_text(text)
    plot(results, out / "quantiles.png")


if __name__ == "__main__":
    main()
