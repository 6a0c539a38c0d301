#!/usr/bin/env python3
"""Noise drawing for a million groups: the discrete Gaussian against discrete Laplace (issue 22).

Two measurements, both from the OS CSPRNG (``SystemRandomSource``), each the median of ``repeats``:

* ``udf``: the engine's work alone, ``mechanisms/base.py`` ``noise`` called as DuckDB calls the noise
  UDF, in vectors of 2048 groups (the buffer draws in doubling batches), for 1,000,000 groups;
* ``query``: ``SELECT k, COUNT(*) FROM wide GROUP BY k`` over 1,000,000 public keys at row level,
  end to end (``db.sql(..., fresh=True)``), epsilon 1 and delta 1e-6 for both mechanisms.

The Laplace scale is 1 (a count at epsilon 1); the Gaussian sigma 4.23 (the same count at epsilon 1,
delta 1e-6 on its exact curve). Target: the Gaussian within 1.5x of Laplace.

    PYTHONPATH=. nice -n 10 python3 benchmarks/noise_speed.py [--groups 1000000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from fractions import Fraction

import duckdb
import numpy as np

import dpsql
from dpsql.mechanisms.base import DISCRETE_GAUSSIAN, DISCRETE_LAPLACE, NoiseBuffer, noise
from dpsql.mechanisms.losses import Loss
from dpsql.mechanisms.randomness import SystemRandomSource
from dpsql.mechanisms.releases import Release, Sensitivity

VECTOR = 2048
ONE = Sensitivity(1, Fraction(1))


def udf_seconds(mechanism, loss: Loss, groups: int) -> float:
    """Seconds for the noise function to release ``groups`` exact zeros in DuckDB-sized vectors."""
    release = Release(mechanism.name, ONE, mechanism.calibrate(ONE, loss))
    arguments = np.array([mechanism.arguments(release)] * VECTOR, dtype=np.int64)
    codes = np.full(VECTOR, mechanism.code, dtype=np.int64)
    buffer, source, exact = NoiseBuffer(), SystemRandomSource(), np.zeros(VECTOR, dtype=np.int64)
    start = time.perf_counter()
    for first in range(0, groups, VECTOR):
        n = min(VECTOR, groups - first)
        noise(buffer, source, exact[:n], codes[:n], arguments[:n])
    return time.perf_counter() - start


def query_seconds(option: str, groups: int) -> float:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE wide AS SELECT range AS k FROM range({groups})")
    policy = {"budget": {"epsilon": 1e9, "delta": 0.5}, "tables": {"wide": {
        "privacy_unit": "row", "columns": {"k": {"keys": {"range": [0, groups - 1]}}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy)
    start = time.perf_counter()
    db.sql("SELECT k, COUNT(*) FROM wide GROUP BY k", epsilon=1.0, delta=1e-6, mechanism=option, fresh=True).arrow()
    return time.perf_counter() - start


def run(groups: int = 1_000_000, repeats: int = 3, end_to_end: bool = True) -> dict:
    results: dict = {"groups": groups, "repeats": repeats}
    cases = {"laplace": (DISCRETE_LAPLACE, Loss.pure(1.0)), "gaussian": (DISCRETE_GAUSSIAN, Loss.approximate(1.0, 1e-6))}
    for option, (mechanism, loss) in cases.items():
        results[f"udf_{option}_s"] = statistics.median(udf_seconds(mechanism, loss, groups) for _ in range(repeats))
        if end_to_end:
            results[f"query_{option}_s"] = statistics.median(query_seconds(option, groups) for _ in range(repeats))
    results["udf_ratio"] = results["udf_gaussian_s"] / results["udf_laplace_s"]
    if end_to_end:
        results["query_ratio"] = results["query_gaussian_s"] / results["query_laplace_s"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--udf-only", action="store_true", help="skip the end-to-end query")
    args = parser.parse_args()
    print(json.dumps(run(args.groups, args.repeats, not args.udf_only), indent=2))


if __name__ == "__main__":
    main()
