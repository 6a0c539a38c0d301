"""Planning time against the size of a query (issue 20, finding 4): linear in its outputs and keys.

Planning is Python and is never interrupted, so its time is bounded by bounding its input
(dpsql/limits.py: SQL text, outputs, tables). That only works if planning is linear in that input:
3,000 ``SUM(age + i)`` outputs once took 10 s of CPU (``Plan.slot`` found each output with
``list.index``, comparing whole dataclasses), 200 GROUP BY keys 3.4 s (each key printed again for every
node). This measures the CPU time of ``db.explain`` (parse, validate, plan, rewrite; the plan cache
emptied) at doubling sizes, with the limits lifted, each size in a fresh process; a ratio near 2 per
doubling is linear.

    python3 benchmarks/planning.py                  # every shape, 3 repeats (about 5 minutes)
    python3 benchmarks/planning.py --repeats 1 --shapes sum

Writes ``benchmarks/results/planning.json``; the table is in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "planning.json"

SHAPES = {   # name -> (SQL of n items, sizes)
    "sum": (lambda n: "SELECT " + ", ".join(f"SUM(age + {i}) AS s{i}" for i in range(n)) + " FROM people",
            (500, 1000, 2000, 4000)),
    "avg": (lambda n: "SELECT " + ", ".join(f"AVG(income + {i}) AS a{i}" for i in range(n)) + " FROM people",
            (500, 1000, 2000, 4000)),
    "expressions": (lambda n: "SELECT " + ", ".join(f"SUM(age) + {i} AS e{i}" for i in range(n)) + " FROM people",
                    (500, 1000, 2000, 4000)),
    "order by": (lambda n: "SELECT sex, COUNT(*) AS c FROM people GROUP BY sex ORDER BY "
                 + ", ".join(f"SUM(age) + {i}" for i in range(n)), (500, 1000, 2000, 4000)),
    "group by": (lambda n: "SELECT COUNT(*) AS c FROM people GROUP BY "
                 + ", ".join(f"CASE WHEN age = {i} THEN 'a' ELSE 'b' END" for i in range(n)), (50, 100, 200, 400)),
    "public": (lambda n: "SELECT " + ", ".join(f"clinic || '{i}' AS c{i}" for i in range(n)) + " FROM clinics",
               (500, 1000, 2000, 4000)),
}


def one(shape: str, n: int, repeats: int) -> float:
    """Median CPU seconds of planning one query of this shape and size (in this process)."""
    sys.path[:0] = [str(ROOT)]
    import dpsql
    from tests.support.fixture import POLICY, make_database
    from dpsql import testing
    from dpsql.limits import WorkLimits

    lifted = WorkLimits(max_sql=10 ** 9, max_outputs=10 ** 9, max_tables=10 ** 9, max_rows=10 ** 400)
    db = dpsql.connect(make_database(), policy=POLICY, ledger=":memory:", limits=lifted)
    sql = SHAPES[shape][0](n)
    times = []
    for _ in range(repeats):
        testing.forget_plans(db)
        started = time.process_time()
        db.explain(sql, epsilon=1000.0)
        times.append(time.process_time() - started)
    return statistics.median(times)


def measure(shapes: list[str], repeats: int) -> list[dict]:
    rows = []
    for shape in shapes:
        previous = None
        for n in SHAPES[shape][1]:
            out = subprocess.run([sys.executable, __file__, "one", shape, str(n), str(repeats)], check=True,
                                 capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            seconds = float(out.stdout.split()[-1])
            rows.append({"shape": shape, "items": n, "cpu_s": round(seconds, 3),
                         "ms_per_item": round(1000 * seconds / n, 3),
                         "ratio_to_half": None if previous is None else round(seconds / previous, 2)})
            previous = seconds
            print(f"{shape:12} {n:5} items  {seconds:7.3f} s  {rows[-1]['ratio_to_half'] or '':>5}", flush=True)
    return rows


def main() -> None:
    if sys.argv[1:2] == ["one"]:
        print(one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = measure(args.shapes, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
