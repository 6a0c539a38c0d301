"""Issue 12, "Speed": a join query's bounded aggregation against the floor it wraps (TPC-H Q1, Q5, Q9, Q13).

    python3 benchmarks/tpch/speed.py [--sf 1] [--runs 7] [--queries 1,5,9,13] [--no-readme]

For each query, in one process, on one DuckDB database opened read-only and locked down by dpsql
(the same connection, so the same settings and threads for every system):

    plain   the TPC-H query as written (unbounded, no privacy)
    floor   hand-written SQL doing the same joins and filters, then GROUP BY (unit, group keys) with
            the per-unit pre-aggregates (COUNT/SUM per unit and group), then GROUP BY the group keys
            over those: what any user-level DP system must at least compute (no clamping, no L/C
            caps, no sampling, no noise)
    dpsql   ``db.sql(query, epsilon=1, delta=1e-6, fresh=True)`` end to end, the query asked again
            (a dashboard's refresh): its plan from the connection's plan cache, the ledger (in
            memory), the engine run with its noise UDF, Arrow fetch
    cold    the same with the plan cache emptied first: parse, validate, plan and rewrite as well
    sql     the SQL dpsql runs (``db.explain(...).rewritten_sql``), bound and run on the same
            connection: the engine's share of ``dpsql``

The systems alternate within every round (plain, floor, dpsql, sql, plain, ...) after one warm-up
each; the report gives the median wall time and the median process CPU time (all DuckDB threads) of
``--runs`` rounds, and the ratios dpsql/floor, cold/floor, sql/floor, dpsql/plain. Target: dpsql <= 1.5x
floor; cold adds a fixed 5-35 ms of Python planning, whatever the data's size.
The floor's answer is checked against plain DuckDB's (same rows, same sums) before timing.

Writes ``results/speed_sf<SF>.json`` and the table into README.md (between the ``tpch-speed``
markers for that scale factor).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout without installing dpsql

from dpsql import testing  # noqa: E402
from data import DATA_DIR, connect_private, sf_label  # noqa: E402
from run import POLICY, README, RESULTS, environment, put_block, query_text  # noqa: E402

QUERIES = (1, 5, 9, 13)
SYSTEMS = ("plain", "floor", "dpsql", "cold", "sql")
TARGET = 1.5
EPSILON, DELTA = 1.0, 1e-6

# The floor of each query: the same joins and filters, the per-(unit, group) pre-aggregation, then the
# groups. The unit is the customer: o_custkey where orders is the closest table that holds it (Q1 joins
# orders for it, as dpsql must), c_custkey where customer is joined.
FLOORS = {
    1: """
with per_unit as (
    select o_custkey as unit, l_returnflag, l_linestatus,
        sum(l_quantity) as sum_qty,
        sum(l_extendedprice) as sum_base_price,
        sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
        sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
        sum(l_discount) as sum_disc,
        count(*) as n
    from lineitem join orders on l_orderkey = o_orderkey
    where l_shipdate <= date '1998-12-01' - interval '90' day
    group by o_custkey, l_returnflag, l_linestatus)
select l_returnflag, l_linestatus,
    sum(sum_qty) as sum_qty, sum(sum_base_price) as sum_base_price, sum(sum_disc_price) as sum_disc_price,
    sum(sum_charge) as sum_charge, sum(sum_qty) / sum(n) as avg_qty, sum(sum_base_price) / sum(n) as avg_price,
    sum(sum_disc) / sum(n) as avg_disc, sum(n) as count_order
from per_unit
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus
""",
    5: """
with per_unit as (
    select c_custkey as unit, n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
    from customer, orders, lineitem, supplier, nation, region
    where c_custkey = o_custkey
        and l_orderkey = o_orderkey
        and l_suppkey = s_suppkey
        and c_nationkey = s_nationkey
        and s_nationkey = n_nationkey
        and n_regionkey = r_regionkey
        and r_name = 'ASIA'
        and o_orderdate >= date '1994-01-01'
        and o_orderdate < date '1994-01-01' + interval '1' year
    group by c_custkey, n_name)
select n_name, sum(revenue) as revenue
from per_unit
group by n_name
order by revenue desc
""",
    9: """
with per_unit as (
    select o_custkey as unit, n_name as nation, extract(year from o_orderdate) as o_year,
        sum(l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity) as amount
    from part, supplier, lineitem, partsupp, orders, nation
    where s_suppkey = l_suppkey
        and ps_suppkey = l_suppkey
        and ps_partkey = l_partkey
        and p_partkey = l_partkey
        and o_orderkey = l_orderkey
        and s_nationkey = n_nationkey
        and p_name like '%green%'
    group by o_custkey, n_name, extract(year from o_orderdate))
select nation, o_year, sum(amount) as sum_profit
from per_unit
group by nation, o_year
order by nation, o_year desc
""",
    13: """
with c_orders as (
    select c_custkey, count(o_orderkey) as c_count
    from customer left outer join orders on c_custkey = o_custkey and o_comment not like '%special%requests%'
    group by c_custkey),
per_unit as (
    select c_custkey as unit, c_count, count(*) as n
    from c_orders
    group by c_custkey, c_count)
select c_count, sum(n) as custdist
from per_unit
group by c_count
order by custdist desc, c_count desc
""",
}


def _close(a, b) -> bool:
    if isinstance(a, (int, float)) or hasattr(a, "as_integer_ratio"):
        a, b = float(a), float(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    return a == b


def check_floor(con, n: int) -> None:
    """The floor computes the query's exact answer (rows and values as plain DuckDB's)."""
    want = con.sql(query_text(n)).fetchall()
    got = con.sql(FLOORS[n]).fetchall()
    same = len(want) == len(got) and all(len(w) == len(g) and all(_close(x, y) for x, y in zip(w, g))
                                         for w, g in zip(want, got))
    if not same:
        raise SystemExit(f"Q{n}: the floor's answer differs from the query's: {got[:3]} vs {want[:3]}")


def _time(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(db, n: int, runs: int, log=print) -> dict:
    """Interleaved medians of the four systems on query n."""
    con = testing.duckdb_connection(db)
    sql = query_text(n)
    rewritten = db.explain(sql, epsilon=EPSILON, delta=DELTA).rewritten_sql
    check_floor(con, n)
    systems = {
        "plain": lambda: testing.fetch(db, testing.bind(db, sql)),
        "floor": lambda: testing.fetch(db, testing.bind(db, FLOORS[n])),
        "dpsql": lambda: db.sql(sql, epsilon=EPSILON, delta=DELTA, fresh=True).arrow(),
        "cold": lambda: (testing.forget_plans(db), db.sql(sql, epsilon=EPSILON, delta=DELTA, fresh=True).arrow()),
        "sql": lambda: testing.fetch(db, testing.bind(db, rewritten)),
    }
    for fn in systems.values():   # warm-up: caches, the policy's public keys, the first bind
        fn()
    times: dict[str, list[tuple[float, float]]] = {s: [] for s in SYSTEMS}
    for _ in range(runs):
        for name in SYSTEMS:
            times[name].append(_time(systems[name]))
    wall = {s: statistics.median(t[0] for t in times[s]) for s in SYSTEMS}
    cpu = {s: statistics.median(t[1] for t in times[s]) for s in SYSTEMS}
    rec = {"query": f"q{n:02d}", "wall_s": wall, "cpu_s": cpu, "times": times, "rewritten_sql": rewritten,
           "floor_sql": FLOORS[n].strip(),
           "dpsql_over_floor": wall["dpsql"] / wall["floor"], "sql_over_floor": wall["sql"] / wall["floor"],
           "cold_over_floor": wall["cold"] / wall["floor"],
           "dpsql_over_plain": wall["dpsql"] / wall["plain"],
           "cpu_dpsql_over_floor": cpu["dpsql"] / cpu["floor"]}
    rec["ok"] = rec["dpsql_over_floor"] <= TARGET
    log(f"  Q{n}: " + ", ".join(f"{s} {wall[s] * 1000:.0f} ms" for s in SYSTEMS)
        + f"; dpsql/floor {rec['dpsql_over_floor']:.2f}x (cpu {rec['cpu_dpsql_over_floor']:.2f}x, "
        f"cold {rec['cold_over_floor']:.2f}x)")
    return rec


def run(sf: float = 1.0, queries=QUERIES, runs: int = 7, policy: Path = POLICY, data_dir: Path = DATA_DIR,
        log=print) -> dict:
    db, threads = connect_private(sf, policy, data_dir, log)
    try:
        log(f"SF {sf_label(sf)}, {runs} rounds, threads {threads}")
        records = [measure(db, n, runs, log) for n in queries]
    finally:
        db.close()
    return {"sf": sf, "runs": runs, "epsilon": EPSILON, "delta": DELTA, "threads": threads,
            "policy": policy.name, "environment": environment(), "queries": records}


def table(result: dict) -> str:
    env = result["environment"]
    lines = [f"SF {sf_label(result['sf'])}, epsilon {result['epsilon']:g}, delta {result['delta']:g}, median of "
             f"{result['runs']} interleaved rounds; dpsql {env['dpsql_commit']}, DuckDB {env['duckdb']}, "
             f"{env['machine']}, threads {result['threads']} (load average {env['load_average_1min']} at the end), "
             f"{env['date']}.", "",
             "| query | plain ms | floor ms | dpsql ms | cold ms | sql ms | dpsql / floor | cold / floor | sql / floor "
             "| cpu dpsql / floor | dpsql / plain | target 1.5x |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rec in result["queries"]:
        w = rec["wall_s"]
        lines.append(f"| {rec['query']} | {w['plain'] * 1000:.0f} | {w['floor'] * 1000:.0f} | {w['dpsql'] * 1000:.0f} "
                     f"| {w['cold'] * 1000:.0f} | {w['sql'] * 1000:.0f} | **{rec['dpsql_over_floor']:.2f}x** "
                     f"| {rec['cold_over_floor']:.2f}x | {rec['sql_over_floor']:.2f}x "
                     f"| {rec['cpu_dpsql_over_floor']:.2f}x | {rec['dpsql_over_plain']:.2f}x "
                     f"| {'met' if rec['ok'] else 'missed'} |")
    return "\n".join(lines)


def write_readme(result: dict, readme: Path = README) -> None:
    label = sf_label(result["sf"])
    put_block(readme, f"<!-- tpch-speed sf={label} start -->", f"<!-- tpch-speed sf={label} end -->", table(result),
              "## TPC-H joins: dpsql against the floor")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    parser.add_argument("--runs", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)), help="comma list among 1,5,9,13")
    parser.add_argument("--policy", type=Path, default=POLICY, help="the policy (default policy.yaml here)")
    parser.add_argument("--no-readme", action="store_true", help="do not write the table into README.md")
    args = parser.parse_args(argv)
    queries = tuple(int(q) for q in args.queries.split(",") if q.strip())
    if not set(queries) <= set(QUERIES):
        parser.error("--queries: among 1, 5, 9, 13")
    result = run(sf=args.sf, queries=queries, runs=args.runs, policy=args.policy.resolve())
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"speed_sf{sf_label(args.sf)}.json"
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"wrote {out.relative_to(HERE.parents[1])}")
    if not args.no_readme:
        write_readme(result)
    print(table(result))
    return result


if __name__ == "__main__":
    main()
