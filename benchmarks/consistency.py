#!/usr/bin/env python3
"""Consistency as post-processing: the error it saves over the raw noisy tables, and its time (issue
26, item 4).

Counts shaped like PUMS, generated here (seeded): 50 states of Zipf-like sizes, 3,000 counties
shared among them by size, 60 ages; 1,000,000 people. Two release shapes, each table a count with
sensitivity 1 and the release's epsilon split evenly among its tables (Laplace of scale
b = tables / epsilon, variance 2 b^2: continuous Laplace here, the discrete one's variance differs by
less than 1% at these scales):

* ``hierarchy``: the total, per state, per state and county (1 + 50 + 3,000 cells);
* ``two-way``: the total, per state, per age, per state and age (1 + 50 + 60 + 3,000 cells).

For each epsilon, ``runs`` seeded draws of the noise; each draw made consistent
(``dpsql/publish/consistency.py`` ``make_consistent``) by least squares alone (``gls``) and
non-negative (``nonneg``, the default). The RMSE per level (over the level's cells and the draws)
of the raw tables, of each, and their ratio to the raw; then the median time of one call.

    PYTHONPATH=. nice -n 10 python3 benchmarks/consistency.py [--runs 100] [--out benchmarks/results]

Writes ``consistency.json`` and ``consistency.md``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpsql.publish.consistency import Marginal, make_consistent

EPSILONS = (0.1, 1.0, 10.0)
PEOPLE = 1_000_000


def population(seed: int = 26, states: int = 50, counties: int = 3000, ages: int = 60) -> dict:
    """True counts per (state, county) and per (state, age), PUMS-like: states and counties of Zipf-like
    sizes (many small counties), ages flatter; every state holds at least one county."""
    rng = np.random.default_rng(seed)
    share = 1 / np.arange(1, states + 1) ** 0.9
    per_state = 1 + rng.multinomial(counties - states, share / share.sum())
    county_state = np.repeat(np.arange(states), per_state)
    size = rng.pareto(1.2, counties) + 0.05
    weight = size / np.bincount(county_state, weights=size)[county_state] * (share / share.sum())[county_state]
    by_county = rng.multinomial(PEOPLE, weight / weight.sum()).astype(float)
    age_share = np.exp(-np.arange(ages) / 40.0)
    by_state = np.bincount(county_state, weights=by_county, minlength=states)
    by_age = np.stack([rng.multinomial(int(n), age_share / age_share.sum()) for n in by_state]).astype(float)
    return {"county_state": county_state, "by_county": by_county, "by_state_age": by_age}


def shapes(pop: dict) -> dict:
    """Each release shape as its tables: (keys, key columns, true counts) per table."""
    cs, counties, sa = pop["county_state"], pop["by_county"], pop["by_state_age"]
    states = [f"s{i:02d}" for i in range(sa.shape[0])]
    st_of_county = [states[i] for i in cs]
    s_idx, a_idx = np.divmod(np.arange(sa.size), sa.shape[1])
    return {
        "hierarchy": [((), {}, np.array([counties.sum()])),
                      (("state",), {"state": states}, sa.sum(axis=1)),
                      (("state", "county"), {"state": st_of_county, "county": [f"c{i:04d}" for i in range(len(cs))]},
                       counties)],
        "two-way": [((), {}, np.array([sa.sum()])),
                    (("state",), {"state": states}, sa.sum(axis=1)),
                    (("age",), {"age": list(range(sa.shape[1]))}, sa.sum(axis=0)),
                    (("state", "age"), {"state": [states[i] for i in s_idx], "age": a_idx.tolist()}, sa.reshape(-1))],
    }


def draw(tables, epsilon: float, rng: np.random.Generator) -> list[Marginal]:
    b = len(tables) / epsilon
    return [Marginal(pa.table({**cols, "n": truth + rng.laplace(0, b, truth.size)}), keys, "n", 2 * b * b)
            for keys, cols, truth in tables]


def summed(finest: pa.Table, table: pa.Table, keys: tuple) -> np.ndarray:
    """The table's cells as sums of the raw finest table's cells: what one who adds up the finest
    release gets without consistency."""
    cols = [finest[k].to_pylist() for k in keys]
    totals: dict = {}
    for i, v in enumerate(finest["n"].to_pylist()):
        key = tuple(c[i] for c in cols)
        totals[key] = totals.get(key, 0.0) + v
    rows = zip(*(table[k].to_pylist() for k in keys)) if keys else [()] * table.num_rows
    return np.array([totals[tuple(r)] for r in rows])


def measure(tables, epsilon: float, runs: int, seed: int) -> dict:
    """Squared errors summed per level and way over ``runs`` draws, and the calls' times."""
    rng = np.random.default_rng(seed)
    sq = {way: np.zeros(len(tables)) for way in ("raw", "summed", "gls", "nonneg")}
    times: dict[str, list[float]] = {"gls": [], "nonneg": []}
    for _ in range(runs):
        noisy = draw(tables, epsilon, rng)
        for way in ("gls", "nonneg"):
            start = time.perf_counter()
            out = make_consistent(noisy, nonnegative=way == "nonneg")
            times[way].append(time.perf_counter() - start)
            for i, (table, (_, _, truth)) in enumerate(zip(out, tables)):
                sq[way][i] += float(((table["n"].to_numpy() - truth) ** 2).sum())
        for i, (m, (keys, _, truth)) in enumerate(zip(noisy, tables)):
            sq["raw"][i] += float(((m.table["n"].to_numpy() - truth) ** 2).sum())
            sq["summed"][i] += float(((summed(noisy[-1].table, m.table, keys) - truth) ** 2).sum())
    cells = [truth.size * runs for _, _, truth in tables]
    levels = []
    for i, (keys, _, truth) in enumerate(tables):
        rmse = {way: (sq[way][i] / cells[i]) ** 0.5 for way in sq}
        levels.append({"level": "(" + ", ".join(keys) + ")", "cells": int(truth.size), **rmse,
                       "gls_ratio": rmse["gls"] / rmse["raw"], "nonneg_ratio": rmse["nonneg"] / rmse["raw"]})
    return {"epsilon": epsilon, "levels": levels,
            "median_s": {way: statistics.median(t) for way, t in times.items()}}


def run(runs: int = 100, epsilons=EPSILONS, seed: int = 26) -> dict:
    pop = population(seed)
    results = {name: [measure(tables, eps, runs, seed + k) for k, eps in enumerate(epsilons)]
               for name, tables in shapes(pop).items()}
    return {"runs": runs, "people": PEOPLE, "results": results}


def markdown(result: dict) -> str:
    out = ["# Consistency as post-processing (issue 26, item 4)", "",
           f"`benchmarks/consistency.py --runs {result['runs']}`: {result['people']:,} people, PUMS-like counts "
           "generated by the script; each table a count at epsilon / tables (Laplace); RMSE over each level's cells "
           "and the seeded draws; `gls` least squares, `nonneg` least squares with non-negative cells (the "
           "default); ratio = RMSE / raw RMSE (below 1: better); `finest summed`: each level's cells added up from "
           "the raw finest table, as one would without consistency.", ""]
    for name, rows in result["results"].items():
        out += [f"## {name}", "", "| epsilon | level | cells | raw RMSE | gls RMSE | ratio | nonneg RMSE | ratio "
                "| finest summed RMSE |", "|---|---|---|---|---|---|---|---|---|"]
        for row in rows:
            for lv in row["levels"]:
                out.append(f"| {row['epsilon']:g} | {lv['level']} | {lv['cells']:,} | {lv['raw']:.3g} | {lv['gls']:.3g} "
                           f"| {lv['gls_ratio']:.3f} | {lv['nonneg']:.3g} | {lv['nonneg_ratio']:.3f} | {lv['summed']:.3g} |")
        times = "; ".join(f"epsilon {r['epsilon']:g}: {r['median_s']['gls'] * 1000:.0f} ms "
                          f"({r['median_s']['nonneg'] * 1000:.0f} ms non-negative)" for r in rows)
        out += ["", f"Median time of one call: {times}.", ""]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    result = run(args.runs)
    text = markdown(result)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, body in (("consistency.json", json.dumps(result, indent=2) + "\n"), ("consistency.md", text)):
        (args.out / name).write_text(body)
    print(text)


if __name__ == "__main__":
    main()
