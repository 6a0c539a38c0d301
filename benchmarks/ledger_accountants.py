"""What one charge costs under each accountant (issue 22, item 4) as the history grows.

A ledger file gets N charges of one 0.01-epsilon count (the releases of a real COUNT plan), written in
one transaction; then ``--repeats`` more charges are timed one by one through ``Ledger.reserve``, the
way a query charges (its read of what was committed since, the accountant's check for the total, the
insert and the commit), by a ledger that has charged once already (the history composed and kept), and
the first charge of a fresh process's ledger (everything composed once) apart. The history is kept
composed between charges (accounting/history.py), so a charge under pld composes one release with
the kept distribution, not N.

    python3 benchmarks/ledger_accountants.py --charges 10,1000,10000 --repeats 30

>>> [(r["accountant"], r["charges"]) for r in run(charges=[10], repeats=2)]
[('basic', 10), ('zcdp', 10), ('pld', 10)]
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from dpsql.accounting.budget import Cost  # noqa: E402
from dpsql.accounting.ledger import Ledger  # noqa: E402
from dpsql.mechanisms.base import MECHANISMS  # noqa: E402
from dpsql.mechanisms.releases import Release, Sensitivity  # noqa: E402
from dpsql.policy import load_policy  # noqa: E402
from dpsql.policy.model import ACCOUNTANTS  # noqa: E402

# The releases of SELECT COUNT(*) at epsilon 0.01: today's noise at scale 100 (its plan's is a hair above).
COUNT = (Release(next(iter(MECHANISMS)), Sensitivity(1, Fraction(1)), Fraction(100)),)
POLICY = {"budget": {"epsilon": 1e6, "delta": 1e-6},   # never binding: a charge is timed, not refused
          "tables": {"people": {"privacy_unit": "person_id"}}}


def _fill(path: str, accountant: str, charges: int) -> None:
    """A ledger with ``charges`` charges of COUNT, inserted in one transaction (as many queries would)."""
    book = Ledger(path, load_policy({**POLICY, "budget": {**POLICY["budget"], "accountant": accountant}}))
    book.reserve(Cost.of(0.01, 0), sql="q", plan="p", releases=COUNT)
    book.close()
    with sqlite3.connect(path) as con:
        row = con.execute("SELECT time, sql, plan, epsilon, delta, composition, status, releases FROM charges").fetchone()
        con.executemany("INSERT INTO charges (time, sql, plan, epsilon, delta, composition, status, releases) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [row] * (charges - 1))


def one(accountant: str, charges: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "ledger.sqlite")
        _fill(path, accountant, charges)
        book = Ledger(path)
        start = time.perf_counter()
        book.reserve(Cost.of(0.01, 0), sql="q", plan="p", releases=COUNT)
        first = time.perf_counter() - start
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            book.reserve(Cost.of(0.01, 0), sql="q", plan="p", releases=COUNT)
            times.append(time.perf_counter() - start)
        budget = book.totals()
        book.close()
    return {"accountant": accountant, "charges": charges, "first_ms": round(first * 1000, 2),
            "median_ms": round(statistics.median(times) * 1000, 2), "p90_ms": round(sorted(times)[int(0.9 * len(times))] * 1000, 2),
            "spent_epsilon": budget.spent_epsilon}


def run(charges=(10, 1000, 10000), repeats: int = 30) -> list[dict]:
    return [one(accountant, n, repeats) for n in charges for accountant in ACCOUNTANTS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--charges", default="10,1000,10000", help="history sizes, comma separated")
    parser.add_argument("--repeats", type=int, default=30, help="charges timed at each size")
    parser.add_argument("--json", help="also write the results here")
    opts = parser.parse_args()
    results = run([int(n) for n in opts.charges.split(",")], opts.repeats)
    print("| accountant | charges | first charge of a process (ms) | a charge, median (ms) | p90 (ms) | spent epsilon |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['accountant']} | {r['charges']:,} | {r['first_ms']} | {r['median_ms']} | {r['p90_ms']} | "
              f"{r['spent_epsilon']:.4g} |")
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
