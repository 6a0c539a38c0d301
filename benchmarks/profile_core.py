"""Where dpsql's rewritten SQL spends its time, and what hand-edited alternatives of it cost.

Runs on a plain (unlocked) DuckDB connection over the data of ``bench_core``, with the optimizer
that dpsql disables also disabled here. The rewritten SQL comes from ``db.explain`` over an empty
table of the same schema; its noise UDF calls are replaced by their first argument (a passthrough:
the UDF sees 50 values per call, its cost does not grow with the data).

For each case: the operators that dominate EXPLAIN ANALYZE, then median wall and process CPU time
of the floor, the generated SQL and each alternative, alternating (one warm-up each).

    python benchmarks/profile_core.py                 # 10M rows, 5 repeats
    python benchmarks/profile_core.py --rows 1000000 --repeats 3

The alternatives are regex edits of the generated SQL; one that no longer matches it (dpsql's
rewrite changed) is reported as "n/a" instead of timed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from typing import Callable

import duckdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402
from dpsql import testing  # noqa: E402


DISABLED = "top_n_window_elimination"   # as dpsql's LOCKDOWN sets it

NOISE = re.compile(r"system\.main\.dpsql_noise_[0-9a-f]+\(")
GUARDED = re.compile(
    r'CASE\s+WHEN (?:CAST\("value" AS DOUBLE\)|"value") IS NULL\s+THEN NULL\s+'
    r'ELSE CAST\(ROUND\(LEAST\(GREATEST\((CAST\("value" AS DOUBLE\)), ([-\d.e]+)\), ([-\d.e]+)\) \* ([\d.e]+)\) AS BIGINT\)\s+'
    r'END')
UNIT_SUM = re.compile(r'(CASE\s+WHEN COUNT\("v_m1"\) > \d+\s+THEN .*?\s+ELSE SUM\("v_m1"\)\s+END) AS "v_m1"', re.S)
QUALIFY = re.compile(r'QUALIFY\s+ROW_NUMBER\(\) OVER \(PARTITION BY "__unit" ORDER BY "__r"\) <= \d+')


def rewritten(case: bc.Case) -> str:
    """The SQL dpsql runs for ``bc.QUERY`` under the case's policy (it does not depend on the data)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE events (event_id BIGINT, user_id BIGINT, grp INTEGER, value DOUBLE)")
    db = bc.private(con, case)
    return db.explain(bc.QUERY, epsilon=1.0).rewritten_sql


def passthrough(sql: str) -> str:
    """Noise UDF calls replaced by the exact value they would perturb (their first argument)."""
    out, pos, calls = [], 0, 0
    for m in NOISE.finditer(sql):
        if m.start() < pos:
            continue
        depth, i, comma = 1, m.end(), None
        while depth:
            ch = sql[i]
            depth += ch == "("
            depth -= ch == ")"
            if ch == "," and depth == 1 and comma is None:
                comma = i
            i += 1
        out += [sql[pos:m.start()], "(", sql[m.end():comma], ")"]
        pos, calls = i, calls + 1
    if not calls:
        raise ValueError("no noise call found in the rewritten SQL")
    return "".join(out) + sql[pos:]


def substitute(pattern: re.Pattern, replacement: str | Callable, sql: str) -> str | None:
    out, n = pattern.subn(replacement, sql)
    return out if n else None


def case_clamp(sql: str) -> str | None:
    """Clamp with CASE instead of LEAST/GREATEST; NULL then needs no guard (NULL < lo is NULL).

    NaN and +inf still go to the upper bound (DuckDB orders NaN above every number), -inf to the
    lower; and DuckDB's statistics can now bound the grid value, so SUM runs as sum_no_overflow.
    """
    return substitute(GUARDED, lambda m: (
        f"CAST(ROUND((CASE WHEN {m[1]} < {m[2]} THEN {m[2]} WHEN {m[1]} > {m[3]} THEN {m[3]} "
        f"ELSE {m[1]} END) * {m[4]}) AS BIGINT)"), sql)


def narrow_units(sql: str | None) -> str | None:
    """__units: one COUNT of non-NULL values (COUNT(v_m1) = COUNT(v_m2): the same column), the bounded
    sum as BIGINT (it fits: dpsql casts it to BIGINT for the noise call) and the sort key as BIGINT."""
    if sql is None:
        return None
    out = substitute(UNIT_SUM, lambda m: f'CAST({m[1]} AS BIGINT) AS "v_m1"', sql)
    if out is None or 'RANDOM() AS "__r"' not in out:
        return None
    out = out.replace('COUNT("v_m1")', 'COUNT("v_m2")')
    return out.replace('RANDOM() AS "__r"', 'CAST(RANDOM() * 9007199254740992 AS BIGINT) AS "__r"')


def no_sampling(sql: str | None) -> str | None:
    """Not DP: the QUALIFY dropped, to show what the per-unit partition sampling costs."""
    return None if sql is None else substitute(QUALIFY, "", sql)


def alternatives(case: bc.Case, generated: str) -> dict[str, str | None]:
    if case.name == "row":
        return {"A1 CASE clamp, no NULL guard": case_clamp(generated)}
    a1 = case_clamp(generated)
    a2 = narrow_units(a1)
    return {
        "A1 CASE clamp, no NULL guard": a1,
        "A2 A1 + one COUNT, BIGINT sum and sort key": a2,
        "[not DP] A2 without the QUALIFY": no_sampling(a2),
    }


def operators(con: duckdb.DuckDBPyConnection, sql: str, top: int = 5) -> list[tuple[str, int, float]]:
    """(operator and what it computes, rows out, seconds summed over threads): the slowest of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "profile.json")
        con.execute("SET enable_profiling = 'json'")
        con.execute(f"SET profiling_output = '{path}'")
        con.sql(sql, params=testing.params(sql)).to_arrow_table()
        con.execute("SET enable_profiling = 'no_output'")
        con.execute("RESET profiling_output")
        with open(path) as f:
            profile = json.load(f)
    found = []

    def walk(node):
        if "name" in node and "timing" in node:
            info = node.get("extra_info") or {}
            parts = [info[k] for k in ("Groups", "Aggregates", "Projections", "Table") if k in info]
            detail = "; ".join(", ".join(p) if isinstance(p, list) else str(p) for p in parts)
            found.append((f"{node['name'].strip()} {detail[:70]}".strip(),
                          node.get("operator_cardinality", node.get("intermediate_rows", 0)), node["timing"]))
        for child in node.get("children", []) + node.get("operator", []):
            walk(child)
    walk(profile)
    return sorted(found, key=lambda o: -o[2])[:top]


def profile(rows: int, repeats: int, threads: int | None = None) -> None:
    con = bc.fresh_database(rows, threads)
    con.execute(f"SET disabled_optimizers = '{DISABLED}'")
    for case in bc.CASES:
        generated = passthrough(rewritten(case))
        print(f"\n== {case.name}: slowest operators of the generated SQL (seconds summed over threads)")
        for name, out_rows, seconds in operators(con, generated):
            print(f"   {seconds:7.3f}s {out_rows:>12,} rows out  {name}")
        queries = {"floor": case.floor, "generated (noise passthrough)": generated}
        for name, sql in alternatives(case, generated).items():
            if sql is None:
                print(f"   {name}: n/a (no longer matches the generated SQL)")
            else:
                queries[name] = sql
        times = bc.measure({name: (lambda sql=sql: con.sql(sql, params=testing.params(sql)).to_arrow_table())
                            for name, sql in queries.items()}, repeats)
        floor = statistics.median(t[0] for t in times["floor"])
        print(f"   {'query':<46} {'wall s':>7} {'cpu s':>7} {'/floor':>7}")
        for name, ts in times.items():
            wall, cpu = statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)
            print(f"   {name:<46} {wall:7.3f} {cpu:7.3f} {wall / floor:6.2f}x")
    con.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    print(f"{args.rows:,} rows, {args.repeats} repeats; {bc.machine()}; {bc.load()}")
    profile(args.rows, args.repeats, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
