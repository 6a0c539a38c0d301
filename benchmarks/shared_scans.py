#!/usr/bin/env python3
"""Shared scans (issue 26, item 3): a batch of statistics run one by one against the same batch run
with statements of one frame shared (dpsql/lower/shared.py), same run, same data.

Data: a PUMS-like table of ``--rows`` rows (default 10M) built in DuckDB from hashes of the row number
(deterministic): a person id (4 rows per person on average), sex (2), state (50), race (9),
education (16), age, income, hours. Read two ways: a table of a DuckDB file, and the same rows as a
Parquet file named by the policy's ``source:`` (copied into the engine at connect, outside the timing).

Two privacy units: row level, and user level (unit ``pid``, L = 1, C = 4: every partition choice and
cap runs). Two sets of 12 statistics:

* ``frames``: 4 frames (by state; by sex; by race where age >= 18; the total) x 3 statistics each
  (COUNT, AVG, SUM of other columns): what a release of marginals with several figures per table asks;
* ``mixed``: 12 statistics of 12 different frames (nothing shares: the cost of the check, if any).

Each configuration runs ``db.sql_batch(..., fresh=True)`` with ``shared_scans=False`` (every
statement its own engine query, as before) and ``True``, alternated, ``--repeats`` times each (the
user-level ones past 2M rows ``--user-repeats``: a minute or more a batch); the medians and their
ratio, and the engine queries run.

    PYTHONPATH=. nice -n 10 python3 benchmarks/shared_scans.py [--rows 2000000 10000000] [--repeats 3]

Writes ``benchmarks/results/shared_scans.json`` and ``shared_scans.md``.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time
from pathlib import Path

import duckdb

import dpsql
from dpsql import testing

STATES = [f"s{i:02d}" for i in range(50)]
FRAMES = [
    "SELECT state, COUNT(*) AS n FROM pums GROUP BY state",
    "SELECT state, AVG(income) AS income FROM pums GROUP BY state",
    "SELECT state, SUM(hours) AS hours FROM pums GROUP BY state",
    "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex",
    "SELECT sex, AVG(age) AS age FROM pums GROUP BY sex",
    "SELECT sex, SUM(income) AS income FROM pums GROUP BY sex",
    "SELECT race, COUNT(*) AS n FROM pums WHERE age >= 18 GROUP BY race",
    "SELECT race, AVG(hours) AS hours FROM pums WHERE age >= 18 GROUP BY race",
    "SELECT race, SUM(income) AS income FROM pums WHERE age >= 18 GROUP BY race",
    "SELECT COUNT(*) AS n FROM pums",
    "SELECT AVG(income) AS income FROM pums",
    "SELECT SUM(hours) AS hours FROM pums",
]
MIXED = [
    "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex",
    "SELECT state, COUNT(*) AS n FROM pums GROUP BY state",
    "SELECT race, COUNT(*) AS n FROM pums GROUP BY race",
    "SELECT educ, AVG(income) AS income FROM pums GROUP BY educ",
    "SELECT sex, state, COUNT(*) AS n FROM pums GROUP BY sex, state",
    "SELECT state, COUNT(*) AS n FROM pums WHERE age >= 18 GROUP BY state",
    "SELECT sex, race, AVG(hours) AS hours FROM pums GROUP BY sex, race",
    "SELECT educ, COUNT(*) AS n FROM pums WHERE income > 50000 GROUP BY educ",
    "SELECT COUNT(*) AS n FROM pums",
    "SELECT race, educ, SUM(income) AS income FROM pums GROUP BY race, educ",
    "SELECT sex, educ, AVG(age) AS age FROM pums GROUP BY sex, educ",
    "SELECT state, race, COUNT(*) AS n FROM pums GROUP BY state, race",
]


def build(rows: int, folder: Path) -> tuple[Path, Path]:
    """The DuckDB file and the Parquet file of the same rows (kept between runs: git-ignored)."""
    folder.mkdir(parents=True, exist_ok=True)
    db, parquet = folder / f"pums_{rows}.duckdb", folder / f"pums_{rows}.parquet"
    if not db.exists() or not parquet.exists():
        con = duckdb.connect(str(db))
        con.execute(f"""CREATE OR REPLACE TABLE pums AS SELECT
            (hash(range) % {max(rows // 4, 1)})::BIGINT AS pid,
            ['F', 'M'][1 + (hash(range * 3) % 2)::INT] AS sex,
            's' || lpad((hash(range * 5) % 50)::VARCHAR, 2, '0') AS state,
            (hash(range * 7) % 9)::INT AS race, (hash(range * 11) % 16)::INT AS educ,
            (hash(range * 13) % 100)::INT AS age, (hash(range * 17) % 300000)::DOUBLE AS income,
            (hash(range * 19) % 80)::INT AS hours
            FROM range({rows})""")
        con.execute(f"COPY pums TO '{parquet}' (FORMAT parquet)")
        con.close()
    return db, parquet


def policy(level: str, parquet: Path | None) -> dict:
    columns = {"pid": {"identifier": True}, "sex": {"keys": ["F", "M"]}, "state": {"keys": STATES},
               "race": {"keys": list(range(9))}, "educ": {"keys": list(range(16))},
               "age": {"type": "int", "lower": 0, "upper": 100},
               "income": {"type": "float", "lower": 0, "upper": 300000}, "hours": {"type": "int", "lower": 0, "upper": 80}}
    table: dict = {"columns": columns}
    table.update({"privacy_unit": "row"} if level == "row" else
                 {"privacy_unit": "pid", "max_groups_per_unit": 1, "max_rows_per_unit": 4})
    if parquet is not None:
        table["source"] = str(parquet)
    return {"version": 1, "budget": {"epsilon": 1e9, "delta": 1e-3}, "tables": {"pums": table}}


def measure(db, batch: list[str], repeats: int) -> dict:
    """Medians of ``repeats`` fresh runs of the batch alone and shared, alternated (after one untimed run
    of each); engine queries run."""
    times: dict[str, list[float]] = {"alone": [], "shared": []}
    queries = {}
    for mode in ("alone", "shared"):   # untimed: plans cached, shared queries built, data warm for both
        db.sql_batch(batch, epsilon=float(len(batch)), fresh=True, shared_scans=mode == "shared")
    for repeat in range(repeats):
        for mode in (("alone", "shared") if repeat % 2 == 0 else ("shared", "alone")):
            ran: list[int] = []
            with testing.before_run(db, functools.partial(ran.append, 1)):
                start = time.perf_counter()
                db.sql_batch(batch, epsilon=float(len(batch)), fresh=True, shared_scans=mode == "shared")
                times[mode].append(time.perf_counter() - start)
            queries[mode] = len(ran)
    alone, shared = statistics.median(times["alone"]), statistics.median(times["shared"])
    return {"alone_s": alone, "shared_s": shared, "speedup": alone / shared, "queries": queries, "runs": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--user-repeats", type=int, default=1, help="user level past 2M rows (minutes a run)")
    parser.add_argument("--data", type=Path, default=Path(__file__).parent / ".data")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    write(args, run(args.rows, args.repeats, args.user_repeats, args.data))


# The option this module did not take, measured in plain DuckDB (no bounding, no noise): the frames'
# figures by GROUPING SETS in one pass against one GROUP BY each.
SEPARATE = ["SELECT state, COUNT(*), AVG(income), SUM(hours) FROM pums GROUP BY state",
            "SELECT sex, COUNT(*), AVG(income), SUM(hours) FROM pums GROUP BY sex",
            "SELECT race, COUNT(*), AVG(income), SUM(hours) FROM pums GROUP BY race",
            "SELECT COUNT(*), AVG(income), SUM(hours) FROM pums"]
GROUPING_SETS = ("SELECT state, sex, race, COUNT(*), AVG(income), SUM(hours) FROM pums "
                 "GROUP BY GROUPING SETS ((state), (sex), (race), ())")


def grouping_sets(file: Path, repeats: int) -> dict:
    """Plain DuckDB: 4 GROUP BYs one by one against one GROUPING SETS query (medians, alternated)."""
    con = duckdb.connect(str(file), read_only=True)
    times: dict[str, list[float]] = {"separate": [], "grouping_sets": []}
    for _ in range(repeats + 1):   # the first of each untimed
        for mode, queries in (("separate", SEPARATE), ("grouping_sets", [GROUPING_SETS])):
            start = time.perf_counter()
            for q in queries:
                con.sql(q).fetchall()
            times[mode].append(time.perf_counter() - start)
    con.close()
    separate, grouped = (statistics.median(times[m][1:]) for m in ("separate", "grouping_sets"))
    return {"separate_s": separate, "grouping_sets_s": grouped, "speedup": separate / grouped}


def run(sizes: list[int], repeats: int, user_repeats: int, data: Path) -> list[dict]:
    """Every configuration at every size (the smoke test runs it at 10k rows)."""
    results = []
    for rows in sizes:
        file, parquet = build(rows, data)
        for level in ("row", "user"):
            times = repeats if level == "row" or rows <= 2_000_000 else user_repeats
            for source in ("table", "parquet"):
                results += configuration(rows, level, source, file, parquet, times)
        found = grouping_sets(file, repeats)
        results.append({"rows": rows, "level": "plain DuckDB", "source": "table", "set": "grouping sets", **found})
        print(f"{rows:>9} plain DuckDB: 4 GROUP BYs {found['separate_s']:.2f} s, GROUPING SETS "
              f"{found['grouping_sets_s']:.2f} s  x{found['speedup']:.2f}", flush=True)
    return results


def configuration(rows: int, level: str, source: str, file: Path, parquet: Path, repeats: int) -> list[dict]:
    """Both sets of statistics on one connection (the mixed one skipped where it adds only minutes)."""
    con = duckdb.connect(str(file), read_only=True) if source == "table" else None
    db = dpsql.connect(con, policy=policy(level, parquet if source == "parquet" else None), ledger=":memory:")
    results = []
    for name, batch in (("frames", FRAMES), ("mixed", MIXED)):
        if name == "mixed" and level == "user" and (source == "parquet" or rows > 2_000_000):
            continue   # nothing shares: the row-level and 2M runs say what it costs
        found = measure(db, batch, repeats)
        results.append({"rows": rows, "level": level, "source": source, "set": name, "repeats": repeats, **found})
        print(f"{rows:>9} {level:4} {source:7} {name:6} alone {found['alone_s']:7.2f} s  shared "
              f"{found['shared_s']:7.2f} s  x{found['speedup']:.2f}  queries {found['queries']}", flush=True)
    db.close()
    return results


def write(args, results: list[dict]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "shared_scans.json").write_text(json.dumps({"rows": args.rows, "results": results}, indent=1))
    lines = ["# Shared scans: a batch of 12 statistics, one by one and shared",
             "",
             f"`benchmarks/shared_scans.py --rows {' '.join(map(str, args.rows))} --repeats {args.repeats} "
             f"--user-repeats {args.user_repeats}` on {os.cpu_count()} cores shared with other work (load varies: "
             "the ratios, measured alternately in one run, are the figures to read). Medians of fresh batches "
             "(`db.sql_batch(..., fresh=True)`, `shared_scans=False` then `True`), noise and ledger included.",
             "",
             "| rows | unit | data | statistics | runs | engine queries (alone / shared) | alone (s) | shared (s) "
             "| speed-up |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r["set"] == "grouping sets":
            continue
        q = r["queries"]
        lines.append(f"| {r['rows']:,} | {r['level']} | {r['source']} | {r['set']} | {r['repeats']} | "
                     f"{q['alone']} / {q['shared']} | {r['alone_s']:.2f} | {r['shared_s']:.2f} | {r['speedup']:.2f}x |")
    lines += ["", "The option not taken, in plain DuckDB (no bounding, no noise): the 4 frames' COUNT, AVG and SUM "
              "as 4 GROUP BYs one by one, or as one GROUPING SETS query over the table.", "",
              "| rows | 4 GROUP BYs (s) | GROUPING SETS (s) | speed-up |", "|---|---|---|---|"]
    lines += [f"| {r['rows']:,} | {r['separate_s']:.2f} | {r['grouping_sets_s']:.2f} | {r['speedup']:.2f}x |"
              for r in results if r["set"] == "grouping sets"]
    (args.out / "shared_scans.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
