"""Smoke test of the benchmark harness at a tiny size: it runs, and dpsql's answer is timed fresh
(never a replay). Speed targets live in benchmarks/README.md, not here."""
import importlib.util
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_core.py"


def test_the_benchmark_harness_runs_at_10k_rows():
    spec = importlib.util.spec_from_file_location("bench_core", HARNESS)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_core"] = bench   # its dataclasses look their module up there
    spec.loader.exec_module(bench)
    results = bench.run(rows=10_000, repeats=1)
    assert results and all(r["dpsql_s"] > 0 and r["floor_s"] > 0 and r["dpsql_over_floor"] > 0 for r in results)
