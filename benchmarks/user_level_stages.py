"""Where a user-level query's time goes (issue 29): each stage of the rewritten SQL timed as a prefix of
it, against the floor and plain DuckDB on the same data, in the same run.

The query is issue 29's ``SELECT grp, COUNT(*) AS n, SUM(value) AS s FROM events GROUP BY grp`` over
``bench_core``'s events (power-law users, 50 public groups), at user level with L and C given. The
stages are the rewritten query's own CTEs (lower/rewrite.py), each run as ``WITH <the CTEs up to it>
SELECT COUNT(*), MAX(COLUMNS(*)) FROM <it>`` so that every column it computes is computed once:

    rows      __rows     the scan, the WHERE, values clamped and put on the grid
    units     __units    the per-(person, group) pre-aggregation, capped at C, and the keyed-hash rank
    choice    __bounded  the choice of L groups per person
    totals    __agg      the exact per-group totals
    noise     the whole query (the noise UDF, post-processing), run by dpsql itself (``db.sql``)

A stage's share is its prefix's time minus the previous prefix's. The floor is plain DuckDB doing the
least work a correct answer needs (issue 29): values clamped, the per-(person, group) pre-aggregation
capped at C rows, the per-group totals; no choice of L, no noise. Medians of alternating rounds.

    python benchmarks/user_level_stages.py                       # 10M rows
    python benchmarks/user_level_stages.py --rows 100000000 --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import sqlglot
from sqlglot import exp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402
from profile_core import DISABLED, passthrough  # noqa: E402
from dpsql import testing  # noqa: E402

QUERY = "SELECT grp, COUNT(*) AS n, SUM(value) AS s FROM events GROUP BY grp"
STAGES = (("rows", "__rows"), ("units", "__units"), ("choice", "__bounded"), ("totals", "__agg"))
RESULTS = Path(__file__).parent / "results"


def floor(C: int) -> str:
    """Values clamped, each (person, group) capped at C rows and C rows' worth, the per-group totals."""
    return (f"SELECT grp, SUM(LEAST(c, {C})) AS n, SUM(LEAST(GREATEST(s, {C} * {bc.LOWER}), {C} * {bc.UPPER})) AS s"
            f" FROM (SELECT user_id, grp, COUNT(*) AS c, SUM({bc.CLAMPED}) AS s FROM events GROUP BY user_id, grp)"
            " GROUP BY grp")


def prefixes(sql: str) -> dict[str, str]:
    """Stage -> the rewritten query cut after that stage's CTE (the ones it names that it has)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    ctes = tree.args["with_"].expressions
    names = [c.alias for c in ctes]
    out = {}
    for stage, name in STAGES:
        if name not in names:
            continue
        kept = ctes[:names.index(name) + 1]
        query = exp.select("COUNT(*)", "MAX(COLUMNS(*))").from_(name)
        query.set("with_", exp.With(expressions=[c.copy() for c in kept]))
        out[stage] = query.sql(dialect="duckdb")
    return out


def run(rows: int, repeats: int, L: int, C: int, threads: int | None) -> dict:
    con = bc.fresh_database(rows, threads)
    # A second connection to the same database for the hand-run SQL: dpsql locks its own down.
    raw = con.cursor()
    raw.execute(f"SET disabled_optimizers = '{DISABLED}'")
    case = bc.Case(f"user L={L} C={C}", bc.policy("user_id", L=L, C=C), floor(C), 1.25)
    db = bc.private(con, case)
    rewritten = passthrough(db.explain(QUERY, epsilon=1.0).rewritten_sql)
    systems = {"plain": lambda: raw.sql(QUERY).to_arrow_table(),
               "floor": lambda: raw.sql(case.floor).to_arrow_table()}
    for stage, sql in prefixes(rewritten).items():
        systems[stage] = lambda sql=sql: raw.sql(sql, params=testing.params(sql)).to_arrow_table()
    systems["noise"] = lambda: db.sql(QUERY, epsilon=1.0, fresh=True).fetchall()
    times = bc.measure(systems, repeats)
    median = {name: statistics.median(t[0] for t in ts) for name, ts in times.items()}
    cpu = {name: statistics.median(t[1] for t in ts) for name, ts in times.items()}
    shares, before = {}, 0.0
    for stage in [s for s, _ in STAGES if s in median] + ["noise"]:
        shares[stage] = median[stage] - before
        before = median[stage]
    con.close()
    return {"rows": rows, "L": L, "C": C, "repeats": repeats, "machine": bc.machine(), "load": bc.load(),
            "wall_s": median, "cpu_s": cpu, "stage_s": shares,
            "dpsql_over_floor": median["noise"] / median["floor"], "dpsql_over_plain": median["noise"] / median["plain"]}


def table(results: list[dict]) -> str:
    lines = ["| rows | plain s | floor s | dpsql s | dpsql/floor | " + " | ".join(
        f"{s} s (share)" for s, _ in STAGES) + " | noise s (share) |",
        "|---|---|---|---|---|" + "---|" * (len(STAGES) + 1)]
    for r in results:
        total = r["wall_s"]["noise"]
        cells = [f"{r['stage_s'][s]:.3f} ({r['stage_s'][s] / total:.0%})" if s in r["stage_s"] else "-"
                 for s, _ in STAGES] + [f"{r['stage_s']['noise']:.3f} ({r['stage_s']['noise'] / total:.0%})"]
        lines.append(f"| {r['rows']:,} | {r['wall_s']['plain']:.3f} | {r['wall_s']['floor']:.3f} | {total:.3f} | "
                     f"{r['dpsql_over_floor']:.2f}x | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--L", type=int, default=3)
    parser.add_argument("--C", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save", action="store_true", help="write results/user_level_stages.{json,md}")
    args = parser.parse_args(argv)
    results = [run(n, args.repeats, args.L, args.C, args.threads) for n in args.rows]
    text = table(results)
    print(f"{bc.machine()}; {bc.load()}\n{text}")
    if args.save:   # kept with the saved results of other sizes (one run per size)
        path = RESULTS / "user_level_stages.json"
        saved = json.loads(path.read_text()) if path.exists() else []
        results = sorted([r for r in saved if r["rows"] not in args.rows] + results, key=lambda r: r["rows"])
        path.write_text(json.dumps(results, indent=1))
        loads = "; ".join(f"{r['rows']:,} rows: {r['load']}" for r in results)
        (RESULTS / "user_level_stages.md").write_text(
            f"# Where a user-level query's time goes\n\n`{QUERY}`, L={args.L}, C={args.C}; "
            f"{results[0]['machine']}; {loads}\n\n{table(results)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
