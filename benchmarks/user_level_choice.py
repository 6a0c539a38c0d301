"""Issue 29, item 2: every correct SQL form of the choice of L partitions per person, timed on the same
data in the same run, against the floor and against no choice at all.

The query and data are ``user_level_stages.py``'s (issue 29's ``SELECT grp, COUNT(*), SUM(value) ...
GROUP BY grp`` at user level, power-law users, 50 public groups, L=3, C=10). Each form replaces the
rewritten query's ``__bounded`` CTE and keeps the rest (the noise off: ``profile_core.passthrough``):

    window        dpsql's form: ``QUALIFY ROW_NUMBER() OVER (PARTITION BY unit ORDER BY rank) <= L``
    cut_union     per unit (GROUP BY) its count and L-th smallest rank; units with <= L partitions kept
                  whole, a window over only the others' ranks at or below their cut (dpsql's form for
                  private keys, lower/bounding.py ``cuts_ranks_first``)
    above_window  the units above L found by GROUP BY .. HAVING COUNT(*) > L; the window over them only
    count_window  ``COUNT(*) OVER (PARTITION BY unit)``; the window over the units above L only
    min_by_lists  per unit (GROUP BY) ``MIN_BY(row, rank, L)``: a bounded heap of its L rows of least
                  rank in the hash aggregate, unnested (exactly L whatever the ties; no window)
    heap_window   ``MIN(rank, L + 1) OVER (PARTITION BY unit)`` (a bounded heap, no ORDER BY): ranks
                  below the L-th kept, the L-th too unless it ties the next
    none          no choice at all (NOT correct: a person reaches every group): the least any choice
                  can cost, for reference

Every correct form's rows are checked equal to ``window``'s before timing (no rank ties on this
data). Medians of alternating rounds after one warm-up each.

    python benchmarks/user_level_choice.py [--rows 10000000] [--repeats 5] [--save]
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
from user_level_stages import QUERY, floor  # noqa: E402
from dpsql import testing  # noqa: E402

RESULTS = Path(__file__).parent / "results"
DECLARED = "__r < 9007199254740992"   # lower/bounding.py RANKS: undeclared partitions rank at or past it


def forms(L: int) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Form -> (its __bounded, the CTEs it adds before it)."""
    cut = ("__cut", f"SELECT __unit, COUNT(*) AS __n, LIST_MAX(MIN(__r, {L})) AS __cut FROM __units "
                    f"WHERE {DECLARED} GROUP BY __unit")
    above = ("__above", f"SELECT __unit FROM __units WHERE {DECLARED} GROUP BY __unit HAVING COUNT(*) > {L}")
    window = f"QUALIFY ROW_NUMBER() OVER (PARTITION BY __unit ORDER BY __r) <= {L}"
    counted = f"(SELECT *, COUNT(*) OVER (PARTITION BY __unit) AS __c FROM __units WHERE {DECLARED})"
    return {
        "window": (f"SELECT * FROM __units WHERE {DECLARED} {window}", []),
        "cut_union": (
            f"SELECT __units.* FROM __units JOIN __cut ON __units.__unit = __cut.__unit "
            f"WHERE __units.{DECLARED} AND __cut.__n <= {L} UNION ALL "
            f"SELECT __units.* FROM __units JOIN __cut ON __units.__unit = __cut.__unit "
            f"WHERE __units.{DECLARED} AND __cut.__n > {L} AND __units.__r <= __cut.__cut "
            f"QUALIFY ROW_NUMBER() OVER (PARTITION BY __units.__unit ORDER BY __units.__r) <= {L}", [cut]),
        "above_window": (
            f"SELECT * FROM __units WHERE {DECLARED} AND __unit NOT IN (SELECT __unit FROM __above) UNION ALL "
            f"SELECT * FROM (SELECT * FROM __units WHERE {DECLARED} AND __unit IN (SELECT __unit FROM __above) "
            f"{window})", [above]),
        "count_window": (
            f"SELECT * EXCLUDE (__c) FROM {counted} WHERE __c <= {L} UNION ALL "
            f"SELECT * EXCLUDE (__c) FROM {counted} WHERE __c > {L} {window}", []),
        "min_by_lists": (
            f"SELECT UNNEST(__s) FROM (SELECT UNNEST(MIN_BY(__units, __r, {L})) AS __s FROM __units "
            f"WHERE {DECLARED} GROUP BY __unit)", []),
        "heap_window": (
            f"SELECT * EXCLUDE (__l) FROM (SELECT *, MIN(__r, {L + 1}) OVER (PARTITION BY __unit) AS __l "
            f"FROM __units WHERE {DECLARED}) WHERE LEN(__l) <= {L} OR __r < __l[{L}] "
            f"OR (__r = __l[{L}] AND __l[{L}] < __l[{L + 1}])", []),
        "none": (f"SELECT * FROM __units WHERE {DECLARED}", []),
    }


def replaced(sql: str, bounded: str, added: list[tuple[str, str]], materialize_units: bool) -> str:
    """The rewritten query with __bounded replaced (and ``added`` CTEs before it)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    out = []
    for cte in tree.args["with_"].expressions:
        if cte.alias == "__bounded":
            out += [exp.CTE(this=sqlglot.parse_one(text, read="duckdb"), alias=exp.TableAlias(this=exp.to_identifier(name)))
                    for name, text in added]
            cte = exp.CTE(this=sqlglot.parse_one(bounded, read="duckdb"),
                          alias=exp.TableAlias(this=exp.to_identifier("__bounded")))
        elif cte.alias == "__units" and materialize_units:
            cte.set("materialized", True)   # read more than once: aggregated once
        out.append(cte)
    tree.args["with_"].set("expressions", out)
    return tree.sql(dialect="duckdb")


def run(rows: int, repeats: int, L: int, C: int) -> dict:
    con = bc.fresh_database(rows, None)
    raw = con.cursor()
    raw.execute(f"SET disabled_optimizers = '{DISABLED}'")
    db = bc.private(con, bc.Case(f"user L={L} C={C}", bc.policy("user_id", L=L, C=C), floor(C), 1.25))
    rewritten = passthrough(db.explain(QUERY, epsilon=1.0).rewritten_sql)
    assert "__bounded" in rewritten, "the query must choose partitions (L below the groups)"
    sqls = {name: replaced(rewritten, bounded, added, materialize_units=bool(added) or "UNION" in bounded)
            for name, (bounded, added) in forms(L).items()}

    def answer(sql: str):
        return raw.sql(sql, params=testing.params(sql)).fetchall()
    expected = answer(sqls["window"])
    for name, sql in sqls.items():
        if name != "none":
            assert answer(sql) == expected, f"{name} chose other partitions than the window"
    pairs, units = raw.sql("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM "
                           "(SELECT DISTINCT user_id, grp FROM events)").fetchall()[0]
    above = raw.sql(f"SELECT COUNT(*) FROM (SELECT user_id FROM events GROUP BY user_id "
                    f"HAVING COUNT(DISTINCT grp) > {L})").fetchall()[0][0]
    systems = {"plain": lambda: raw.sql(QUERY).to_arrow_table(), "floor": lambda: raw.sql(floor(C)).to_arrow_table()}
    for name, sql in sqls.items():
        systems[name] = lambda sql=sql: raw.sql(sql, params=testing.params(sql)).to_arrow_table()
    times = bc.measure(systems, repeats)
    wall = {name: statistics.median(t[0] for t in ts) for name, ts in times.items()}
    cpu = {name: statistics.median(t[1] for t in ts) for name, ts in times.items()}
    con.close()
    return {"rows": rows, "L": L, "C": C, "repeats": repeats, "pairs": pairs, "units": units,
            "units_above_L": above, "machine": bc.machine(), "load": bc.load(), "wall_s": wall, "cpu_s": cpu}


def table(r: dict) -> str:
    lines = ["| form | wall s | x floor | CPU s | choice s (form - none) |", "|---|---|---|---|---|"]
    for name in ["plain", "floor", *forms(r["L"])]:
        choice = "" if name in ("plain", "floor") else f"{r['wall_s'][name] - r['wall_s']['none']:+.3f}"
        lines.append(f"| {name} | {r['wall_s'][name]:.3f} | {r['wall_s'][name] / r['wall_s']['floor']:.2f}x | "
                     f"{r['cpu_s'][name]:.3f} | {choice} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--L", type=int, default=3)
    parser.add_argument("--C", type=int, default=10)
    parser.add_argument("--save", action="store_true", help="write results/user_level_choice.{json,md}")
    args = parser.parse_args(argv)
    result = run(args.rows, args.repeats, args.L, args.C)
    print(report(result))
    if args.save:   # kept with the saved results of other sizes (one run per size)
        path = RESULTS / "user_level_choice.json"
        saved = [r for r in (json.loads(path.read_text()) if path.exists() else []) if r["rows"] != args.rows]
        results = sorted(saved + [result], key=lambda r: r["rows"])
        path.write_text(json.dumps(results, indent=1))
        (RESULTS / "user_level_choice.md").write_text(
            "# Every SQL form of the choice of L\n\n" + "\n\n".join(report(r) for r in results) + "\n")
    return 0


def report(r: dict) -> str:
    return (f"`{QUERY}` at user level, L={r['L']}, C={r['C']}, {r['rows']:,} rows: {r['pairs']:,} (person, "
            f"group) pairs, {r['units']:,} persons, {r['units_above_L']:,} of them in more than L groups; "
            f"{r['machine']}; {r['load']}; medians of {r['repeats']}\n\n{table(r)}")


if __name__ == "__main__":
    sys.exit(main())
