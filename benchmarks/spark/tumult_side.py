"""Tumult Analytics' side of benchmarks/spark/run.py, run by the Tumult environment's own Python (its own
pyspark): one local Spark session, the same Parquet file, the same queries at the same epsilon; prints
one JSON object (times of warm runs, the released answers of each run) on its last line.

    /work/venv-tumult/bin/python benchmarks/spark/tumult_side.py FILE --level row|user --runs 3 --epsilon 1
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

GROUPS = 50
LOWER, UPPER = 0.0, 100.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--level", choices=("row", "user"), required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--L", type=int, default=3)
    parser.add_argument("--C", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from tmlt.analytics import (AddOneRow, AddRowsWithID, KeySet, MaxGroupsPerID, MaxRowsPerGroupPerID,
                                PureDPBudget, QueryBuilder, Session)
    spark = (SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.ui.showConsoleProgress", "false")
             # Tumult writes temporary tables: into the git-ignored data folder, not the working directory
             .config("spark.sql.warehouse.dir", os.path.join(os.path.dirname(os.path.abspath(args.path)), "warehouse"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    frame = spark.read.parquet(args.path)
    keys = KeySet.from_dict({"grp": list(range(GROUPS))})
    change = AddOneRow() if args.level == "row" else AddRowsWithID("user_id")

    def query(kind: str):
        builder = QueryBuilder("events")
        if args.level == "user":
            builder = builder.enforce(MaxGroupsPerID("grp", args.L)).enforce(MaxRowsPerGroupPerID("grp", args.C))
        grouped = builder.groupby(keys)
        return grouped.count(name="v") if kind == "count" else grouped.sum("value", LOWER, UPPER, name="v")

    out: dict = {"level": args.level}
    for kind in ("count", "sum"):
        times, answers = [], []
        for run in range(args.runs + 1):   # run 0: the warm-up
            started = time.perf_counter()
            session = Session.from_dataframe(PureDPBudget(args.epsilon), "events", frame, change)
            rows = session.evaluate(query(kind), PureDPBudget(args.epsilon)).toPandas()
            elapsed = time.perf_counter() - started
            if run:
                times.append(elapsed)
                answers.append({int(g): float(v) for g, v in zip(rows["grp"], rows["v"])})
        out[kind] = {"times": times, "answers": answers}
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
