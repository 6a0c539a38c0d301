#!/usr/bin/env python3
"""Golden files: dpsql's current planning and rewriting behaviour, pinned byte for byte.

For every query of grammar/accept/*.sql, and for a few extra queries with explicit options
(``EXTRAS``), ``tests/golden/<stem>.txt`` holds, on the fixture database and policy of
tests/support/fixture.py (``make_database()``, ``POLICY``, a seeded rng, ``ledger=":memory:"``):

* the query, and the options it is planned with;
* the explain text, ``str(db.explain(sql, ...))`` (it ends with the rewritten SQL, pretty-printed
  by sqlglot, which is lossy: ``POW`` prints as ``POWER``, ``LIST`` as ``ARRAY_AGG``);
* the rewritten SQL exactly as DuckDB runs it (``plan.rewritten_sql``), with a line break in place
  of each space that follows a ``,`` or ``)`` outside parentheses and quotes, and nothing else changed;
* the replay-key ingredients: ``dpsql.accounting.ledger.normalise_sql(sql)`` and
  ``dpsql.api.connection.plan_signature(plan)``;
* or, if dpsql refuses the query, its error (``err.format()``).

Nothing is executed and no noise is drawn, so the files depend only on the code. Names that are
random per connection are replaced by stable placeholders:

* ``dpsql_noise_<hex>``:   the noise UDF, ``dpsql_noise_<12 random hex digits>`` per connection;
* ``__dpsql_keys_<hex>``:  the prefix of TEMP key tables (``__dpsql_keys_<12 random hex>_<n>``),
  made for key sets longer than 256 keys (none in the fixture policy today);
* ``__dpsql_stage_values_<hex>``: a correlated stage's table of released values (frontend/correlated.py),
  ``__dpsql_stage_values_<12 random hex digits>`` per connection.

Every later refactoring is proven against these files; a change to them must be reviewed and
explained in the commit message.

    python3 tools/golden.py           # write/update tests/golden/, remove stale files, list changes
    python3 tools/golden.py --check   # exit 1 and print a unified diff for every file that would change
"""
from __future__ import annotations

import argparse
import copy
import difflib
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import dpsql
from dpsql.api.replay import plan_signature
from dpsql.api.replay import normalise_sql

ROOT = Path(__file__).resolve().parents[1]
ACCEPT = ROOT / "grammar" / "accept"
GOLDEN = ROOT / "tests" / "golden"
SEED = 20261125
REGENERATE = "python3 tools/golden.py"

PLACEHOLDERS = (
    (re.compile(r"dpsql_noise_[0-9a-f]+"), "dpsql_noise_<hex>"),
    (re.compile(r"__dpsql_keys_[0-9a-f]+"), "__dpsql_keys_<hex>"),
    (re.compile(r"__dpsql_stage_values_[0-9a-f]+"), "__dpsql_stage_values_<hex>"),
)


@dataclass(frozen=True)
class Case:
    stem: str
    sql: str
    options: dict = field(default_factory=dict)   # keyword arguments of db.explain


EXTRAS = (
    Case("extra_01_private_keys_delta_ci", "SELECT zip, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY zip",
         {"epsilon": 0.5, "delta": 1e-5, "ci": 0.9}),
    Case("extra_02_quantiles", "SELECT state, MEDIAN(income) AS m, QUANTILE_CONT(age, 0.9) AS q90 "
         "FROM people GROUP BY state", {"epsilon": 2.0}),
    Case("extra_03_user_level_visits_ci", "SELECT clinic, COUNT(*) AS n, SUM(cost) AS s, AVG(cost) AS a, "
         "STDDEV(cost) AS sd FROM visits GROUP BY clinic", {"epsilon": 0.3, "ci": 0.95}),
    Case("extra_04_user_level_distinct_units", "SELECT COUNT(DISTINCT person_id) AS people FROM visits",
         {"epsilon": 0.1, "nonnegative": False}),
    Case("extra_05_user_level_private_keys", "SELECT cost, COUNT(*) AS n FROM visits GROUP BY cost",
         {"epsilon": 1.0, "delta": 1e-6, "ci": 0.99}),
)


def cases() -> list[Case]:
    """Every golden case, sorted by stem (needs no database)."""
    accepted = [Case(p.stem, p.read_text(encoding="utf-8")) for p in ACCEPT.glob("*.sql")]
    return sorted(accepted + list(EXTRAS), key=lambda c: c.stem)


def connect() -> dpsql.PrivateConnection:
    """The fixture connection of tests/support/fixture.py (loaded by path, so that the tool needs no
    tests package on its path)."""
    spec = importlib.util.spec_from_file_location("_golden_fixture", ROOT / "tests" / "support" / "fixture.py")
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    return dpsql.connect(fixture.make_database(), ledger=":memory:", policy=copy.deepcopy(fixture.POLICY),
                         rng=np.random.default_rng(SEED))


def stable(text: str) -> str:
    for pattern, placeholder in PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    return text


def break_top_level(sql: str) -> str:
    """Replace each space after a ``,`` or ``)`` at depth 0, outside quotes, by a line break.

    Lossless for SQL without line breaks (which is what the rewriter prints): undoing it is replacing
    every line break by a space.
    """
    if "\n" in sql:
        return sql
    out, depth, quote, previous = [], 0, None, ""
    for ch in sql:
        if quote:
            quote = None if ch == quote else quote   # a doubled quote closes and reopens: same result
        elif ch in "'\"":
            quote = ch
        elif ch in "()":
            depth += 1 if ch == "(" else -1
        out.append("\n" if ch == " " and not quote and depth == 0 and previous in ",)" else ch)
        previous = ch
    return "".join(out)


def section(title: str, body: str) -> str:
    return f"== {title} ==\n{body.rstrip()}\n"


def render(db: dpsql.PrivateConnection, case: Case) -> str:
    """The golden text of one case."""
    options = ", ".join(f"{k}={v!r}" for k, v in sorted(case.options.items())) or "(none)"
    parts = [f"# dpsql golden file; regenerate with `{REGENERATE}` (see its docstring). Random per-connection\n"
             "# names are replaced by dpsql_noise_<hex> (noise UDF) and __dpsql_keys_<hex> (TEMP key tables).\n",
             section("query", case.sql), section("options of db.explain", options)]
    try:
        plan = db.explain(case.sql, **case.options)
    except dpsql.DpsqlError as err:
        return "\n".join(parts + [section("refused", err.format())])
    text, names = normalise_sql(case.sql)
    parts += [section("explain", str(plan)),
              section("rewritten SQL (exact; a line break replaces each space after a top-level , or ))",
                      break_top_level(plan.rewritten_sql)),
              section("normalise_sql: text", text), section("normalise_sql: names", repr(names)),
              section("plan_signature", plan_signature(plan))]
    return stable("\n".join(parts))


def render_all() -> dict[str, str]:
    """stem -> golden text, for every case, on one fresh fixture connection."""
    db = connect()
    try:
        return {case.stem: render(db, case) for case in cases()}
    finally:
        db.close()


def stored(stem: str) -> str | None:
    path = GOLDEN / f"{stem}.txt"
    return path.read_bytes().decode("utf-8") if path.exists() else None


def stale() -> list[Path]:
    """Golden files whose case no longer exists."""
    stems = {case.stem for case in cases()}
    return sorted(p for p in GOLDEN.glob("*.txt") if p.stem not in stems)


def diff(stem: str, old: str | None, new: str | None) -> str:
    name = f"tests/golden/{stem}.txt"
    lines = difflib.unified_diff((old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                                 fromfile=name if old is not None else "/dev/null",
                                 tofile=name if new is not None else "/dev/null")
    return "".join(lines)


def check(rendered: dict[str, str]) -> int:
    """Print a diff for every file that would change; 1 if any would."""
    changes = [diff(stem, stored(stem), text) for stem, text in rendered.items() if stored(stem) != text]
    changes += [f"stale: tests/golden/{p.name} has no query\n{diff(p.stem, stored(p.stem), None)}" for p in stale()]
    for change in changes:
        print(change, end="" if change.endswith("\n") else "\n")
    if changes:
        print(f"{len(changes)} golden file(s) out of date: review, then run `{REGENERATE}`")
    return 1 if changes else 0


def write(rendered: dict[str, str]) -> int:
    """Write every file that changed, remove stale ones, list both."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for stem, text in rendered.items():
        old = stored(stem)
        if old != text:
            (GOLDEN / f"{stem}.txt").write_bytes(text.encode("utf-8"))
            print(f"{'updated' if old is not None else 'created'} tests/golden/{stem}.txt")
    for path in stale():
        path.unlink()
        print(f"removed tests/golden/{path.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff if out of date")
    args = parser.parse_args(argv)
    rendered = render_all()
    return check(rendered) if args.check else write(rendered)


if __name__ == "__main__":
    sys.exit(main())
