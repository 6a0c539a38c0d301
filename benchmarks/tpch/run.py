"""TPC-H as the yardstick (issue 12): the 22 queries, as written, through dpsql under customer-level privacy.

    python3 benchmarks/tpch/run.py [--sf 1] [--epsilon 1[,10]] [--queries 1,6,13] [--runs 3]

For each query: plain DuckDB gives the exact answer and the time to beat; then dpsql
(``dpsql.connect(file, policy=policy.yaml, ledger=":memory:")``, ``db.sql(q, epsilon=e, fresh=True)``)
answers it verbatim, or refuses it (the code and the first line of the message), or fails (any other
exception). A refused query with a stated minimal rewrite in ``rewrites/qNN.sql`` is tried again
through that file and, if answered, recorded as "answered after rewrite" with the reason on its first
line. For answered queries: median time of ``--runs`` fresh runs (plain DuckDB the same), and the
relative error of every numeric output against the exact answer, rows matched by the non-aggregate
outputs (median over matched cells, then over runs).

Writes ``results/sf<SF>.json`` (every number) and the table into README.md between markers for that
scale factor, so a rerun replaces it.
"""
from __future__ import annotations

import argparse
import datetime
import decimal
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import sqlglot
from sqlglot import exp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout without installing dpsql

import dpsql  # noqa: E402
from dpsql.errors import DpsqlError  # noqa: E402
from data import DATA_DIR, ensure_database, sf_label  # noqa: E402

QUERIES = HERE / "queries"
REWRITES = HERE / "rewrites"
RESULTS = HERE / "results"
README = HERE / "README.md"
POLICY = HERE / "policy.yaml"
ALL = tuple(range(1, 23))


def query_text(n: int) -> str:
    return (QUERIES / f"q{n:02d}.sql").read_text()


def rewrite_of(n: int) -> tuple[str, str] | None:
    """(SQL, reason) of the stated minimal rewrite of query n, or None; the reason is line 1's comment."""
    path = REWRITES / f"q{n:02d}.sql"
    if not path.exists():
        return None
    text = path.read_text()
    first = text.splitlines()[0].strip() if text.strip() else ""
    if not first.startswith("--"):
        raise SystemExit(f"{path}: the first line must be a `-- reason` comment")
    return text, first.lstrip("-").strip()


def key_columns(sql: str) -> list[bool]:
    """For each output of the outermost SELECT: True if it holds no aggregate (a key to match rows by).

    >>> key_columns("select a, sum(b) as s, count(*) from t group by a")
    [True, False, False]
    """
    tree = sqlglot.parse_one(sql, read="duckdb")
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    return [p.find(exp.AggFunc) is None for p in select.expressions]


def _value(v):
    if isinstance(v, decimal.Decimal):
        return float(v)
    return v


def _number(v) -> float | None:
    v = _value(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def relative_errors(exact: list[tuple], noisy: list[tuple], keys: list[bool]) -> dict:
    """Relative errors |noisy - exact| / |exact| of every non-key numeric cell, rows matched by the keys.

    >>> r = relative_errors([("a", 10.0), ("b", 20.0)], [("a", 11.0), ("c", 5.0)], [True, False])
    >>> r["median"], r["cells"], r["missing_rows"], r["extra_rows"]
    (0.1, 1, 1, 1)
    """
    def key(row):
        return tuple(_value(v) for v, k in zip(row, keys) if k)

    truth: dict = {}
    for row in exact:
        truth.setdefault(key(row), row)
    errors, matched, extra = [], set(), 0
    for row in noisy:
        k = key(row)
        if k not in truth or k in matched:
            extra += 1
            continue
        matched.add(k)
        for is_key, want, got in zip(keys, truth[k], row):
            want, got = (None, None) if is_key else (_number(want), _number(got))
            if want is not None and got is not None and want != 0:
                errors.append(abs(got - want) / abs(want))
    return {"median": statistics.median(errors) if errors else None, "cells": len(errors),
            "matched_rows": len(matched), "missing_rows": len(truth) - len(matched), "extra_rows": extra}


def timed(fn, runs: int) -> tuple[float, list]:
    """Median wall time of ``runs`` calls and their results."""
    times, results = [], []
    for _ in range(runs):
        started = time.perf_counter()
        results.append(fn())
        times.append(time.perf_counter() - started)
    return statistics.median(times), results


def run_plain(db_file: Path, texts: dict[str, str], runs: int, log) -> dict[str, dict]:
    """Exact answers and median times from plain DuckDB (read-only, one warm-up run each)."""
    out = {}
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        for name, sql in texts.items():
            try:
                exact = con.sql(sql).fetchall()
                seconds, _ = timed(lambda sql=sql: con.execute(sql).to_arrow_table(), runs)
                out[name] = {"rows": exact, "seconds": seconds}
            except duckdb.Error as e:
                out[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
            log(f"  plain {name}: " + (f"{out[name]['seconds'] * 1000:.1f} ms" if "seconds" in out[name]
                                        else out[name]["error"]))
    finally:
        con.close()
    return out


def _refusal(e: DpsqlError) -> dict:
    message = (e.message or str(e)).splitlines()[0] if (e.message or str(e)) else ""
    return {"code": e.code, "message": message, "rule": e.rule}


def _failure(e: BaseException) -> dict:
    text = str(e).splitlines()[0] if str(e) else ""
    return {"type": type(e).__name__, "message": text}


def attempt(db, sql: str, epsilons: list[float], delta: float, runs: int) -> dict:
    """One query text through dpsql at each epsilon: answered (times, rows) / refused / failed."""
    per_eps = {}
    for eps in epsilons:
        try:
            seconds, results = timed(lambda eps=eps: db.sql(sql, epsilon=eps, delta=delta, fresh=True), runs)
        except DpsqlError as e:
            return {"status": "refused", **_refusal(e)}
        except Exception as e:   # anything else is a bug or a gap worth seeing, never a crash of the run
            return {"status": "failed", **_failure(e)}
        per_eps[eps] = {"seconds": seconds, "answers": [r.fetchall() for r in results],
                        "columns": results[0].columns}
    return {"status": "answered", "per_epsilon": per_eps}


def run(sf: float = 1.0, epsilons: list[float] = (1.0,), delta: float = 1e-6, queries=ALL, runs: int = 3,
        policy: Path = POLICY, data_dir: Path = DATA_DIR, log=print) -> dict:
    db_file = ensure_database(sf, data_dir, log)
    epsilons = list(epsilons)
    verbatim = {f"q{n:02d}": query_text(n) for n in queries}
    rewrites = {f"q{n:02d}": rewrite_of(n) for n in queries}
    texts = dict(verbatim)
    texts.update({f"{name} (rewrite)": rw[0] for name, rw in rewrites.items() if rw})
    log(f"plain DuckDB, SF {sf_label(sf)}, median of {runs}")
    plain = run_plain(db_file, texts, runs, log)

    log(f"dpsql, policy {policy.name}, epsilon {epsilons}, delta {delta:g}")
    connect_error = None
    try:
        db = dpsql.connect(str(db_file), policy=str(policy), ledger=":memory:")
    except DpsqlError as e:
        db, connect_error = None, {"status": "refused", "stage": "policy", **_refusal(e)}
    except Exception as e:
        db, connect_error = None, {"status": "failed", "stage": "policy", **_failure(e)}
    if connect_error:
        log(f"  the policy was not loaded: {connect_error}")

    records = []
    try:
        for name, sql in verbatim.items():
            rec = {"query": name, "rewrite_reason": None}
            if db is None:
                rec.update(connect_error)
            else:
                rec.update(attempt(db, sql, epsilons, delta, runs))
                rw = rewrites[name]
                if rec["status"] == "refused" and rw:
                    again = attempt(db, rw[0], epsilons, delta, runs)
                    if again["status"] == "answered":
                        rec = {"query": name, "verbatim": {k: rec[k] for k in ("code", "message")},
                               **again, "status": "answered after rewrite", "rewrite_reason": rw[1]}
                    else:
                        rec["rewrite"] = {k: v for k, v in again.items()}
            ran = f"{name} (rewrite)" if rec["rewrite_reason"] else name   # the text that was answered
            finish(rec, plain[ran], texts[ran])
            log(f"  {name}: {summary(rec)}")
            records.append(rec)
    finally:
        if db is not None:
            db.close()
    return {"sf": sf, "epsilons": epsilons, "delta": delta, "runs": runs, "policy": policy.name,
            "policy_loaded": db is not None, "policy_error": connect_error, "environment": environment(),
            "queries": records}


def finish(rec: dict, plain: dict, sql: str) -> None:
    """Replace the raw answers of an answered query by times and errors against the exact answer."""
    rec["plain_s"] = plain.get("seconds")
    if "error" in plain:
        rec["plain_error"] = plain["error"]
    if not rec["status"].startswith("answered"):
        return
    keys = key_columns(sql)
    per_eps = {}
    for eps, got in rec.pop("per_epsilon").items():
        errs = [relative_errors(plain.get("rows", []), answer, keys) for answer in got["answers"]]
        medians = [e["median"] for e in errs if e["median"] is not None]
        per_eps[str(eps)] = {"dpsql_s": got["seconds"],
                             "rel_error": statistics.median(medians) if medians else None,
                             "runs": errs, "columns": got["columns"]}
    rec["per_epsilon"] = per_eps


def summary(rec: dict) -> str:
    if rec["status"].startswith("answered"):
        first = next(iter(rec["per_epsilon"].values()))
        return f"{rec['status']}, {first['dpsql_s'] * 1000:.1f} ms, rel. error {first['rel_error']}"
    if rec["status"] == "refused":
        return f"refused {rec['code']}: {rec['message']}"
    return f"failed {rec['type']}: {rec['message']}"


def environment() -> dict:
    """What ran: dpsql's commit (with ``+dirty`` when its checkout has uncommitted changes to dpsql/)."""
    root = Path(dpsql.__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    commit = git("rev-parse", "--short", "HEAD")
    if commit and git("status", "--porcelain", "--", "dpsql"):
        commit += "+dirty"
    return {"dpsql_commit": commit, "dpsql_path": str(root), "duckdb": duckdb.__version__,
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "load_average_1min": round(os.getloadavg()[0], 1),   # timings on a busy machine are noisy
            "date": datetime.date.today().isoformat()}


# --- the report ------------------------------------------------------------------------------------

def _cell(text) -> str:
    return "" if text is None else str(text).replace("|", "\\|").replace("\n", " ")


def _ms(seconds) -> str:
    return "" if seconds is None else f"{seconds * 1000:.1f}"


def _rest(env: dict) -> str:
    """How an updated run (--update) was put together."""
    rest = env.get("rest_from")
    if rest is None:
        return ""
    return (f"; {', '.join(q.upper() for q in env['updated_queries'])} from that run, the other queries from "
            f"dpsql {rest['dpsql_commit']} (load average {rest['load_average_1min']}), {rest['date']}")


def table(result: dict) -> str:
    """The markdown table of one run (the block README.md holds between this SF's markers)."""
    eps = result["epsilons"]
    env = result["environment"]
    lines = [f"SF {sf_label(result['sf'])}, epsilon {', '.join(f'{e:g}' for e in eps)}, delta "
             f"{result['delta']:g}, median of {result['runs']} runs; dpsql {env['dpsql_commit']}, DuckDB "
             f"{env['duckdb']}, {env['machine']} (load average {env['load_average_1min']} at the end), {env['date']}"
             + _rest(env) + ".", ""]
    if not result["policy_loaded"]:
        err = result["policy_error"]
        lines += [f"**The policy was not loaded** ({err.get('code') or err.get('type')}): "
                  f"{_cell(err['message'])}. Every query is recorded as refused by the policy.", ""]
    counts: dict[str, int] = {}
    for rec in result["queries"]:
        counts[rec["status"]] = counts.get(rec["status"], 0) + 1
    lines += ["Totals: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + ".", ""]
    head = ["query", "status", "code", "reason", "plain ms", f"dpsql ms (ε={eps[0]:g})", "dpsql / plain"]
    head += [f"median rel. error ε={e:g}" for e in eps]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in result["queries"]:
        status = rec["status"] + (" (policy)" if rec.get("stage") == "policy" else "")
        if rec["status"].startswith("answered"):
            first = rec["per_epsilon"][str(eps[0])]
            code = rec.get("verbatim", {}).get("code", "")
            reason = rec.get("rewrite_reason") or ""
            ratio = f"{first['dpsql_s'] / rec['plain_s']:.2f}" if rec.get("plain_s") else ""
            errors = [rec["per_epsilon"][str(e)]["rel_error"] for e in eps]
            row = [rec["query"], status, code, reason, _ms(rec.get("plain_s")), _ms(first["dpsql_s"]), ratio]
            row += ["" if x is None else f"{x:.2%}" for x in errors]
        else:
            code = rec.get("code") or rec.get("type")
            row = [rec["query"], status, code, rec["message"], _ms(rec.get("plain_s")), "", ""] + [""] * len(eps)
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def write_readme(result: dict, readme: Path = README) -> None:
    """Put the table between this scale factor's markers, replacing an earlier run's (or append it)."""
    label = sf_label(result["sf"]) + ("" if result["policy"] == POLICY.name else f" policy={result['policy']}")
    start, end = f"<!-- tpch-results sf={label} start -->", f"<!-- tpch-results sf={label} end -->"
    put_block(readme, start, end, table(result), f"### SF {label.replace(' policy=', ', policy ')}")


def put_block(readme: Path, start: str, end: str, body: str, heading: str) -> None:
    """Write ``body`` between the markers ``start`` and ``end`` in ``readme``, replacing what they held;
    without the markers, append them and ``body`` under ``heading``."""
    block = f"{start}\n{body}\n{end}"
    text = readme.read_text() if readme.exists() else "# TPC-H yardstick\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
    readme.write_text(text)


def _json_default(value):
    if isinstance(value, (decimal.Decimal,)):
        return float(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return str(value)


def updated(saved: dict, new: dict) -> dict:
    """The saved run with the new run's queries in place of theirs (the rest kept, with the environment of
    both stated); refused when the two runs do not measure the same thing."""
    same = ("sf", "epsilons", "delta", "runs", "policy")
    if any(saved.get(k) != new.get(k) for k in same):
        raise SystemExit(f"--update: the saved run differs in {[k for k in same if saved.get(k) != new.get(k)]}")
    rows = {q["query"]: q for q in saved["queries"]}
    rows.update({q["query"]: q for q in new["queries"]})
    environment = {**new["environment"], "updated_queries": [q["query"] for q in new["queries"]],
                   "rest_from": saved["environment"]}
    return {**saved, "environment": environment, "queries": [rows[k] for k in sorted(rows)]}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1; 0.01 or 0.1 for quick runs)")
    parser.add_argument("--epsilon", default="1", help="epsilon per query, or a comma list (default 1)")
    parser.add_argument("--delta", type=float, default=1e-6, help="delta per query (partition selection; default 1e-6)")
    parser.add_argument("--queries", default=None, help="comma list of query numbers (default all 22)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per query and epsilon (default 3)")
    parser.add_argument("--policy", type=Path, default=POLICY, help="the policy (default policy.yaml here)")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="cache of generated data (default data/)")
    parser.add_argument("--no-readme", action="store_true", help="do not write the table into README.md")
    parser.add_argument("--update", action="store_true",
                        help="replace only these queries' rows in the saved results (same SF, epsilons, policy) "
                             "and rewrite the table from them")
    args = parser.parse_args(argv)
    queries = ALL if args.queries is None else tuple(int(q) for q in args.queries.split(",") if q.strip())
    if not set(queries) <= set(ALL):
        parser.error("--queries: numbers from 1 to 22")
    result = run(sf=args.sf, epsilons=[float(e) for e in args.epsilon.split(",")], delta=args.delta,
                 queries=queries, runs=args.runs, policy=args.policy.resolve(), data_dir=args.data_dir)
    RESULTS.mkdir(exist_ok=True)
    probe = "" if args.policy.resolve() == POLICY else f"-{args.policy.stem}"
    out = RESULTS / f"sf{sf_label(args.sf)}{probe}.json"
    if args.update:
        result = updated(json.loads(out.read_text()), result)
    out.write_text(json.dumps(result, indent=1, default=_json_default) + "\n")
    print(f"wrote {out.relative_to(HERE.parents[1])}")
    if not args.no_readme:
        write_readme(result)
        print(f"wrote the table into {README.relative_to(HERE.parents[1])}")
    print(table(result))
    return result


if __name__ == "__main__":
    main()
