"""The ``dpsql`` command line: thin click wrappers over :func:`dpsql.connect`.

Every command calls the library and turns its errors into clean messages; nothing here makes a
privacy decision. Exit codes (design.md): 0 answered, 2 refused by dpsql (``DpsqlError``, rendered
with ``err.format()`` on stderr and nothing on stdout), 1 any other failure, including command-line
usage errors, so that 2 always means "dpsql refused".

Example:
    $ dpsql query "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex" \\
          --db people.duckdb --policy policy.yaml --epsilon 0.5 --format json
"""
from __future__ import annotations

import contextlib
import csv
import datetime
import decimal
import io
import json
import math
import os
import sys
import uuid
from typing import Any, Iterator, Sequence

import click

from dpsql.errors import DpsqlError

EXIT_FAILED = 1
EXIT_REFUSED = 2
FORMATS = ("table", "csv", "json")


class _Command(click.Command):
    """A click command whose usage errors exit 1, not click's 2 (2 means "refused by dpsql")."""

    def make_context(self, *args, **kwargs):
        with _usage_errors_exit_1():
            return super().make_context(*args, **kwargs)


class _Group(click.Group):
    command_class = _Command

    def make_context(self, *args, **kwargs):
        with _usage_errors_exit_1():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        # Unknown subcommands and subcommand option errors surface here.
        with _usage_errors_exit_1():
            return super().invoke(ctx)


@contextlib.contextmanager
def _usage_errors_exit_1() -> Iterator[None]:
    try:
        yield
    except click.UsageError as err:
        err.exit_code = EXIT_FAILED
        raise


@contextlib.contextmanager
def _reporting_errors(*, show_details: bool = True) -> Iterator[None]:
    """Turn library errors into exit codes.

    ``show_details=False`` withholds the text of unexpected (non-dpsql) exceptions: once a query
    reaches the engine, a raw engine message could quote a row value, and the analyst must only
    see what dpsql deliberately releases.
    """
    try:
        yield
    except DpsqlError as err:
        click.echo(err.format(), err=True)
        raise SystemExit(EXIT_REFUSED) from None
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as err:  # noqa: BLE001 - the CLI's job is a clean message, not a traceback
        if show_details:
            click.echo(f"error: {_one_line(err)}", err=True)
        else:
            click.echo(f"error: the query failed unexpectedly ({type(err).__name__}); "
                       "details are withheld; this is probably a bug in dpsql", err=True)
        raise SystemExit(EXIT_FAILED) from None


def _one_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    name = type(err).__name__
    return f"{name}: {text}" if text else name


# --- shared options ------------------------------------------------------------------------------

def connection_options(func):
    """The options every query-like command shares: database, policy, epsilon, delta."""
    options = [
        click.argument("sql"),
        click.option("--db", "db_path", required=True, metavar="FILE.duckdb",
                     type=click.Path(exists=True, dir_okay=False),
                     help="DuckDB database file; opened read-only."),
        click.option("--policy", "policy_path", required=True, metavar="policy.yaml",
                     type=click.Path(exists=True, dir_okay=False),
                     help="Privacy policy (YAML) written by the data owner."),
        click.option("--epsilon", type=float, default=None,
                     help="Privacy budget for this query (default: the policy's default_epsilon)."),
        click.option("--delta", type=float, default=None,
                     help="Delta for this query (default: the policy's default_delta)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _read_sql(sql: str) -> str:
    """``-`` reads the SQL text from stdin."""
    if sql == "-":
        return sys.stdin.read()
    return sql


def _connect(db_path: str, policy_path: str, **kwargs):
    import dpsql

    with _reporting_errors(show_details=True):
        return dpsql.connect(db_path, policy=policy_path, **kwargs)


# --- commands ------------------------------------------------------------------------------------

@click.group(cls=_Group)
def main():
    """Differentially private SQL over DuckDB.

    Analysts send SQL; dpsql answers with calibrated noise and charges the privacy budget set by
    the data owner's policy. Exit codes: 0 answered, 2 refused by dpsql, 1 other failure.

    \b
    Example:
        dpsql demo
        dpsql query "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex" \\
            --db people.duckdb --policy policy.yaml --epsilon 0.5
        dpsql budget --policy policy.yaml --db people.duckdb
    """


@main.command()
@connection_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="Output format; json is one array of objects, one per row.")
@click.option("--ledger", "ledger", default=None, metavar="FILE",
              help="Budget ledger file (SQLite) that records every spend across runs "
                   "(default: FILE.duckdb.dpsql-ledger.sqlite beside --db).")
@click.option("--fresh", is_flag=True, default=False,
              help="Draw new noise and pay, even if this exact query was answered before "
                   "(by default the earlier answer is returned at no cost).")
@click.option("--ci", "ci", type=float, default=None, metavar="LEVEL",
              help="Add <col>_ci_low/<col>_ci_high confidence intervals at this level, e.g. 0.95 (free).")
@click.option("--raw-counts", is_flag=True, default=False,
              help="Release counts (and sums of non-negative values) without clamping them at 0.")
def query(sql, db_path, policy_path, epsilon, delta, fmt, ledger, fresh, ci, raw_counts):
    """Answer SQL with differential privacy and print the noisy result.

    SQL is the query text, or - to read it from stdin.

    \b
    Example:
        dpsql query "SELECT state, AVG(income) AS avg_income FROM people GROUP BY state" \\
            --db people.duckdb --policy policy.yaml --epsilon 1 --format csv --ci 0.95
        echo "SELECT COUNT(*) AS n FROM people" | dpsql query - --db people.duckdb \\
            --policy policy.yaml --ledger budget.sqlite --format json
    """
    text = _read_sql(sql)
    db = _connect(db_path, policy_path, ledger=ledger)
    with _reporting_errors(show_details=False):
        res = db.sql(text, epsilon=epsilon, delta=delta, fresh=fresh, ci=ci, nonnegative=not raw_counts)
        columns, rows = list(res.columns), res.fetchall()
    if getattr(res, "replayed", False) is True:
        click.echo("note: the same answer as an identical earlier query; no budget spent "
                   "(--fresh draws anew and pays)", err=True)
    # Render fully before writing: a refusal must leave stdout empty.
    with _reporting_errors(show_details=True):
        output = RENDERERS[fmt](columns, rows)
    click.echo(output, nl=not output.endswith("\n"))


@main.command()
@connection_options
@click.option("--ledger", "ledger", default=None, metavar="FILE",
              help="Accepted for symmetry with query, and ignored: explain spends nothing, so it never "
                   "opens, checks or creates a ledger.")
def explain(sql, db_path, policy_path, epsilon, delta, ledger):
    """Print the plan for SQL (noise, sensitivity, rewritten SQL); spends no budget.

    SQL is the query text, or - to read it from stdin. Needs no ledger: a missing, foreign or
    corrupt one does not stop a plan.

    \b
    Example:
        dpsql explain "SELECT sex, SUM(income) AS total FROM people GROUP BY sex" \\
            --db people.duckdb --policy policy.yaml --epsilon 0.5
    """
    from dpsql.accounting.ledger import MEMORY

    del ledger   # see its --help: a plan is never charged, so no ledger is read
    text = _read_sql(sql)
    # An in-memory ledger: the one beside the database (maybe another policy's, or corrupt) is not
    # opened, and no file is created.
    db = _connect(db_path, policy_path, ledger=MEMORY)
    with _reporting_errors(show_details=False):
        output = str(db.explain(text, epsilon=epsilon, delta=delta))
    click.echo(output)


@main.command()
@click.option("--policy", "policy_path", required=True, metavar="policy.yaml",
              type=click.Path(exists=True, dir_okay=False),
              help="The policy the ledger belongs to (a ledger of another policy is refused).")
@click.option("--ledger", "ledger", default=None, metavar="FILE", help="The budget ledger file.")
@click.option("--db", "db_path", default=None, metavar="FILE.duckdb", type=click.Path(exists=True, dir_okay=False),
              help="Read the default ledger of this database, FILE.duckdb.dpsql-ledger.sqlite.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True,
              help="Output format; json is one object: ledger, total, spent, remaining, history.")
def budget(policy_path, ledger, db_path, fmt):
    """Show the privacy budget: total, spent, remaining, and every charged query.

    Reads the ledger only; it never creates one or spends anything.

    \b
    Example:
        dpsql budget --policy policy.yaml --db people.duckdb
        dpsql budget --policy policy.yaml --ledger budget.sqlite --format json
    """
    from dpsql.accounting.ledger import Ledger, default_ledger_path
    from dpsql.policy import load_policy

    if ledger is None and db_path is None:
        raise click.UsageError("pass --ledger FILE, or --db FILE.duckdb for its default ledger")
    path = ledger if ledger is not None else default_ledger_path(db_path)
    with _reporting_errors(show_details=True):
        book = Ledger(path, load_policy(policy_path))
        state = book.budget()
        exists = os.path.exists(book.path)
        book.close()
    if fmt == "json":
        doc = {"policy": book.identity, "exists": exists, **state.as_dict()}
        click.echo(json.dumps(doc, indent=2, allow_nan=False))
    else:
        click.echo(render_budget(state, exists), nl=False)


@main.command()
@click.option("--dir", "directory", default=None, type=click.Path(file_okay=False),
              help="Where to write demo.duckdb and policy.yaml, replacing them if present "
                   "(default: a temporary directory).")
@click.option("--rows", default=20_000, show_default=True, type=click.IntRange(min=1),
              help="Number of synthetic people.")
def demo(directory, rows):
    """Build a bundled synthetic dataset and run example queries against it.

    Prints, for each example, the SQL, the plan, and the noisy answer next to the exact answer
    (computed by the owner with plain DuckDB, for comparison only).

    \b
    Example:
        dpsql demo
        dpsql demo --dir ./dpsql-demo && dpsql query \\
            "SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic" \\
            --db ./dpsql-demo/demo.duckdb --policy ./dpsql-demo/policy.yaml
    """
    from dpsql.cli import demo as demo_module

    with _reporting_errors(show_details=True):
        demo_module.run(dir=directory, out=click.echo, rows=rows)


# --- output formats ------------------------------------------------------------------------------

def _amount(x: float) -> str:
    return f"{x:.12g}"


def render_budget(state, exists: bool = True) -> str:
    """The budget as text: totals, then one line per charged query.

    >>> from dpsql.accounting.budget import Budget
    >>> print(render_budget(Budget(1.0, 1e-6, 0.25, 0.0, ledger="b.sqlite"), exists=False), end="")
    ledger b.sqlite (no file yet: nothing spent)
               epsilon  delta
    ---------  -------  -----
    total      1        1e-06
    spent      0.25     0
    remaining  0.75     1e-06
    """
    note = "" if exists else " (no file yet: nothing spent)"
    out = [f"ledger {state.ledger}{note}"]
    out.append(render_table(["", "epsilon", "delta"], [
        (label, _amount(eps), _amount(dlt)) for label, eps, dlt in (
            ("total", state.total_epsilon, state.total_delta),
            ("spent", state.spent_epsilon, state.spent_delta),
            ("remaining", state.remaining_epsilon, state.remaining_delta))]).rstrip().rsplit("\n", 1)[0])
    if state.history:
        counts = {s: sum(c.status == s for c in state.history) for s in ("released", "failed", "reserved")}
        replays = sum(c.replays for c in state.history)
        out.append(f"charged queries: {state.queries} ({counts['released']} released, {counts['failed']} failed "
                   f"after the charge, {counts['reserved']} reserved: running or interrupted, counted as spent); "
                   f"repeats answered again at no cost: {replays}")
        out.append("history:")
        out.append(render_table(["id", "time", "status", "epsilon", "delta", "replays", "sql", "plan"], [
            (c.id, c.time, c.status, _amount(c.epsilon), _amount(c.delta), c.replays, c.sql, c.plan)
            for c in state.history]).rstrip().rsplit("\n", 1)[0])
    return "\n".join(out) + "\n"


def to_json_value(value: Any) -> Any:
    """Convert one result cell to a JSON value; numbers stay numbers.

    >>> to_json_value(decimal.Decimal("2.50")), to_json_value(decimal.Decimal("3"))
    (2.5, 3)
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return None
        return int(value) if value == value.to_integral_value() and value.as_tuple().exponent >= 0 \
            else float(value)
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalars and 0-d arrays
        return to_json_value(value.item())
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    return str(value)


def _unique_keys(columns: Sequence[str]) -> list[str]:
    """Output names as JSON keys; a repeated name gets a ``_2``, ``_3`` suffix instead of
    silently overwriting the earlier column's value."""
    keys: list[str] = []
    for name in map(str, columns):
        key, n = name, 1
        while key in keys:
            n += 1
            key = f"{name}_{n}"
        keys.append(key)
    return keys


def render_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON array, one object per row, keyed by output column name."""
    keys = _unique_keys(columns)
    data = [{k: to_json_value(v) for k, v in zip(keys, row)} for row in rows]
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def render_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV with a header row; NULL is an empty field."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else _csv_cell(v) for v in row])
    return buffer.getvalue()


def _csv_cell(value: Any) -> Any:
    value = to_json_value(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def format_cell(value: Any) -> str:
    """Human-readable text for one table cell: NULL, and floats rounded for reading."""
    value = to_json_value(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e15:
            return f"{value:.6g}"
        return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned text table: numbers right-aligned, text left-aligned, then a row count.

    >>> print(render_table(["sex", "n"], [("F", 10.5), ("M", 9)]), end="")
    sex      n
    ---  -----
    F    10.50
    M        9
    (2 rows)
    """
    header = [str(c) for c in columns]
    cells = [[format_cell(v) for v in row] for row in rows]
    numeric = [bool(rows) and all(_is_number_or_null(row[i]) for row in rows)
               for i in range(len(header))]
    widths = [max([len(header[i])] + [len(r[i]) for r in cells]) for i in range(len(header))]

    def line(values):
        parts = [v.rjust(w) if numeric[i] else v.ljust(w)
                 for i, (v, w) in enumerate(zip(values, widths))]
        return "  ".join(parts).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out) + "\n"


def _is_number_or_null(value: Any) -> bool:
    value = to_json_value(value)
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


RENDERERS = {"table": render_table, "csv": render_csv, "json": render_json}


if __name__ == "__main__":  # pragma: no cover
    main()
