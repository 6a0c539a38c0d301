#!/usr/bin/env python3
"""SmartNoise SQL's own PUMS test queries, run through dpsql with SmartNoise's metadata unchanged.

The metadata (``PUMS_pid.yaml``, SmartNoise's ``datasets/PUMS_pid.yaml``) is converted by
``dpsql.policy.smartnoise.convert`` (what ``dpsql policy import`` does); the queries
(``pums_queries.sql``, collected from SmartNoise's ``sql/tests``) run as written, at epsilon 1 and
the imported policy's default delta. The table is a PUMS-like one: a CSV of the real sample
(``--csv PUMS_pid.csv``) or, by default, a synthetic table of the same columns and ranges (so the
project's tests need no data file). Prints, and with ``--out`` writes, how many answer and why the
others are refused (by error code, and each query's outcome).

    python3 benchmarks/smartnoise/run_pums.py [--csv PUMS_pid.csv] [--out benchmarks/smartnoise/results.md]
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout

import dpsql  # noqa: E402
from dpsql.policy.smartnoise import convert, load_metadata  # noqa: E402

METADATA = HERE / "PUMS_pid.yaml"
QUERIES = HERE / "pums_queries.sql"


@dataclass(frozen=True)
class Query:
    number: str
    origin: str
    sql: str
    smartnoise_refuses: bool


def queries(path: Path = QUERIES) -> list[Query]:
    """The corpus: blocks of ``-- NNN origin``, an optional ``-- smartnoise: refused``, the query."""
    found = []
    for block in path.read_text().split("\n\n"):
        head = re.search(r"^-- (\d{3}) (\S+)$", block, re.M)
        if head is None:
            continue
        sql = "\n".join(line for line in block.splitlines() if not line.startswith("--")).strip().rstrip(";")
        found.append(Query(head.group(1), head.group(2), sql, "-- smartnoise: refused" in block))
    return found


def synthetic_pums(rows: int = 1000) -> str:
    """SQL of a PUMS-like table: the sample's columns and ranges, values from a formula of the row."""
    return f"""SELECT
        18 + (range * 37) % 76 AS age, range % 2 AS sex, 1 + (range * 7) % 16 AS educ, 1 + (range * 5) % 6 AS race,
        ((range * 7919) % 421)::DOUBLE * 1000 AS income, ((range * 3) % 5 < 3)::INTEGER AS married,
        range + 1 AS pid
        FROM range({rows})"""


def database(csv: str | None, rows: int = 1000) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    if csv is not None:
        con.execute("CREATE TABLE pums AS SELECT * FROM read_csv(?)", [csv])
    else:
        con.execute(f"CREATE TABLE pums AS {synthetic_pums(rows)}")
    return con


def outcome(db, sql: str) -> str:
    """"answered", or the refusal's code."""
    try:
        db.sql(sql, epsilon=1.0).fetchall()
        return "answered"
    except dpsql.DpsqlError as err:
        return err.code


def run(csv: str | None = None, only: list[Query] | None = None, rows: int = 1000) -> dict[str, str]:
    """Query number -> outcome, over the imported policy (a fresh in-memory ledger each query)."""
    policy, _ = convert(load_metadata(METADATA))
    policy["budget"]["epsilon"] = 1e6   # the corpus, not the budget, is what is measured
    con = database(csv, rows)
    db = dpsql.connect(con, policy=policy, ledger=":memory:", rng=np.random.default_rng(14))
    return {q.number: outcome(db, q.sql) for q in (only or queries())}


def report(results: dict[str, str], corpus: list[Query], errors: dict[str, str]) -> str:
    answered = sum(r == "answered" for r in results.values())
    lines = [f"{answered} of {len(results)} answered; refused by code: "
             + ", ".join(f"{code} {n}" for code, n in collections.Counter(
                 r for r in results.values() if r != "answered").most_common())]
    sn = [q for q in corpus if q.smartnoise_refuses]
    lines.append(f"SmartNoise's own tests expect {len(sn)} of them refused; dpsql answers "
                 f"{sum(results[q.number] == 'answered' for q in sn)} of those")
    lines.append("")
    lines.append("| # | origin | SmartNoise | dpsql | why |")
    lines.append("|---|---|---|---|---|")
    for q in corpus:
        why = errors.get(q.number, "").replace("|", "\\|")
        lines.append(f"| {q.number} | {q.origin} | {'refused' if q.smartnoise_refuses else 'answers'} | "
                     f"{results[q.number]} | {why} |")
    return "\n".join(lines)


def first_lines(csv: str | None) -> dict[str, str]:
    """Each refused query's message, first line (for the report)."""
    policy, _ = convert(load_metadata(METADATA))
    policy["budget"]["epsilon"] = 1e6
    db = dpsql.connect(database(csv), policy=policy, ledger=":memory:", rng=np.random.default_rng(14))
    found = {}
    for q in queries():
        try:
            db.explain(q.sql)
        except dpsql.DpsqlError as err:
            found[q.number] = f"`{str(err).splitlines()[0][:150]}`"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", default=None, help="PUMS_pid.csv (default: a synthetic table)")
    parser.add_argument("--out", default=None, help="write the report (markdown) here")
    args = parser.parse_args()
    corpus = queries()
    results = run(args.csv)
    text = report(results, corpus, first_lines(args.csv))
    print(text.split("\n\n")[0])
    if args.out:
        Path(args.out).write_text(f"# SmartNoise's PUMS test queries through dpsql\n\nData: "
                                  f"{args.csv or 'synthetic PUMS-like table (1000 rows)'}; metadata PUMS_pid.yaml "
                                  f"imported unchanged; epsilon 1, delta the imported default.\n\n{text}\n")


if __name__ == "__main__":
    main()
