"""dpsql serve under load: many analysts' clients at once against one analyst budget.

50 concurrent clients send 20 queries each (``fresh``: every one pays) through ``dpsql.remote``
to a ``dpsql serve`` subprocess on the loopback address; the analyst's budget fits exactly N of
them. Checked: exactly N answered, the rest refused with DP402, the ledger's sum exact. Measured:
throughput (requests/s) and latency percentiles, for answered and refused requests apart.

    python3 benchmarks/server_load.py                      # 1 x 20, then 50 x 20, N = 100 (2 minutes)
    python3 benchmarks/server_load.py --clients 5 --queries 4 --fits 6 --rows 1000   # smoke

Writes ``benchmarks/results/server_load.json``; the table is in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from decimal import Decimal
from pathlib import Path

import duckdb
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import dpsql  # noqa: E402 - the working tree's dpsql, not an installed copy
from dpsql.accounting.ledger import Ledger  # noqa: E402
from dpsql.policy import load_policy  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "server_load.json"
# One analyst's 50 clients at once, most refused for budget: past what the server lets one analyst do
# by default (3 requests in flight, 120 free requests a minute), so those limits are lifted here.
UNLIMITED = ("--per-analyst", "1024", "--free-per-minute", "1000000")
EPSILON = "0.01"   # per query; exact in the ledger's decimals
SQL = "SELECT state, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY state"
POLICY = {"version": 1, "budget": {"epsilon": 1000.0, "delta": 1e-6}, "default_epsilon": 1.0,
          "tables": {"people": {"privacy_unit": "row", "columns": {
              "income": {"type": "float", "lower": 0, "upper": 1000},
              "state": {"keys": ["CA", "NY", "TX"]}}}}}


def build(directory: Path, rows: int) -> tuple[Path, Path, Path]:
    """A people table of ``rows`` rows, its policy, and a ledger path."""
    db_path, policy_path = directory / "people.duckdb", directory / "policy.yaml"
    con = duckdb.connect(str(db_path))
    con.execute(f"""CREATE TABLE people AS SELECT range AS id, ['CA', 'NY', 'TX', 'WA'][1 + range % 4] AS state,
                    ((range * 37) % 1200)::DOUBLE AS income FROM range({rows})""")
    con.close()
    policy_path.write_text(yaml.safe_dump(POLICY))
    return db_path, policy_path, directory / "ledger.sqlite"


def start_server(db_path: Path, policy_path: Path, ledger: Path, port: int, log) -> subprocess.Popen:
    """``dpsql serve`` from the working tree; returns once it answers."""
    process = subprocess.Popen(
        [sys.executable, "-c", "from dpsql.cli import main; main()", "serve", "--db", str(db_path), "--policy",
         str(policy_path), "--ledger", str(ledger), "--port", str(port), "--log-level", "warning",
         *UNLIMITED],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/schema", timeout=2)
        except urllib.error.HTTPError:
            return process   # 401: up
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not start")


def run_load(url: str, token: str, clients: int, queries: int, sql: str = SQL) -> dict:
    """``clients`` threads, each sending ``queries`` fresh queries; every outcome and its latency."""
    outcomes: list[tuple[str, float]] = []
    lock, start = threading.Lock(), threading.Barrier(clients)

    def client() -> None:
        remote = dpsql.remote(url, token)
        start.wait()
        for _ in range(queries):
            began = time.perf_counter()
            try:
                remote.sql(sql, epsilon=float(EPSILON), fresh=True)
                outcome = "answered"
            except dpsql.DpsqlError as err:
                outcome = err.code
            with lock:
                outcomes.append((outcome, time.perf_counter() - began))
    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"wall_s": time.perf_counter() - began, "outcomes": outcomes}


def percentiles(latencies: list[float]) -> dict:
    if not latencies:
        return {}
    ordered = sorted(latencies)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000
    return {"count": len(ordered), "p50_ms": pick(0.50), "p90_ms": pick(0.90), "p99_ms": pick(0.99),
            "max_ms": ordered[-1] * 1000}


def summary(load: dict, fits: int, spent: Decimal, charges: int) -> dict:
    """Throughput, latency percentiles (all, answered, refused) and the checks."""
    outcomes = load["outcomes"]
    answered = [t for o, t in outcomes if o == "answered"]
    refused = [t for o, t in outcomes if o == "DP402"]
    return {"requests": len(outcomes), "answered": len(answered), "refused_dp402": len(refused),
            "other": sorted({o for o, _ in outcomes} - {"answered", "DP402"}),
            "wall_s": load["wall_s"], "requests_per_s": len(outcomes) / load["wall_s"],
            "latency_all": percentiles([t for _, t in outcomes]), "latency_answered": percentiles(answered),
            "latency_refused": percentiles(refused),
            "checks": {"exactly_n_answered": len(answered) == fits,
                       "rest_dp402": len(answered) + len(refused) == len(outcomes),
                       "ledger_sum_exact": spent == Decimal(EPSILON) * fits and charges == fits}}


def measure(clients: int, queries: int, fits: int, rows: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db_path, policy_path, ledger_path = build(Path(tmp), rows)
        ledger = Ledger(str(ledger_path), load_policy(str(policy_path)))
        token = ledger.add_analyst("load", float(Decimal(EPSILON) * fits))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with open(Path(tmp) / "server.log", "wb") as log:
            server = start_server(db_path, policy_path, ledger_path, port, log)
            try:
                dpsql.remote(f"http://127.0.0.1:{port}", token).explain(SQL)   # warm: plan caches, DuckDB
                load = run_load(f"http://127.0.0.1:{port}", token, clients, queries)
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=60)
        state = ledger.budget(analyst="load")
        spent = sum((Decimal(str(c.epsilon)) for c in state.history), Decimal(0))
        ledger.close()
        result = summary(load, fits, spent, len(state.history))
    result.update(clients=clients, queries_per_client=queries, fits=fits, rows=rows, sql=SQL, epsilon=EPSILON,
                  machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                  load_average_after=os.getloadavg())
    return result


def table(results: dict) -> str:
    """The README's table: one row per run and kind of request."""
    lines = ["| run | requests | answered / DP402 | requests/s | latency of | p50 ms | p90 ms | p99 ms |",
             "|---" * 8 + "|"]
    for name, r in results.items():
        for label, key in (("all", "latency_all"), ("answered", "latency_answered"), ("refused", "latency_refused")):
            lat = r[key]
            if lat:
                lines.append(f"| {name}: {r['clients']} x {r['queries_per_client']} | {r['requests']} | "
                             f"{r['answered']} / {r['refused_dp402']} | {r['requests_per_s']:.1f} | {label} "
                             f"({lat['count']}) | {lat['p50_ms']:.0f} | {lat['p90_ms']:.0f} | {lat['p99_ms']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--queries", type=int, default=20, help="per client")
    parser.add_argument("--fits", type=int, default=100, help="queries the analyst's budget fits")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    # One client alone first: the service time of one request, without a queue.
    results = {"one client": measure(1, args.queries, args.queries // 2, args.rows),
               "concurrent": measure(args.clients, args.queries, args.fits, args.rows)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print("checks:", {name: r["checks"] for name, r in results.items()})


if __name__ == "__main__":
    main()
