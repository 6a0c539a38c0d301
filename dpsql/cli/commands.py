"""The ``dpsql`` command line: thin click wrappers over :func:`dpsql.connect`.

Every command calls the library and turns its errors into clean messages; nothing here makes a
privacy decision. Exit codes (``DpsqlError.exit_code``, mapped in ``dpsql/errors.py``): 0 answered,
2 refused by dpsql (the query is not allowed, or over budget), 3 a set-up error (policy, database,
ledger: DP5xx, DP403-DP406; a --db or --policy file that does not exist; the analyst's missing token, DP410),
1 any other failure, including command-line usage errors; a DpsqlError
is rendered with ``err.format()`` on stderr and nothing on stdout.

Example:
    $ dpsql query "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex" \\
          --db people.duckdb --policy policy.yaml --epsilon 0.5 --format json
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import sys
import tempfile
from typing import Iterator

import click

import dpsql
from dpsql.accounting.ledger import MEMORY, Ledger, LedgerError, default_ledger_path
from dpsql.api.budget_note import BudgetNote, budget_note
from dpsql.api.display import interval_note
from dpsql.cli import analysts as analysts_cli
from dpsql.cli import demo as demo_module
from dpsql.cli import ledger as ledger_cli
from dpsql.cli import policy_cmd
from dpsql.cli import publish_cmd
from dpsql.cli.randomize import randomize
from dpsql.cli.serve import remote_for, serve, serve_demo, server_option
from dpsql.cli.spark import data_for, engine_options
from dpsql.cli import config
from dpsql.cli.output import (FORMATS, check_destination, output_format, render, terminal_width, write,
                              write_after_charge)
from dpsql.cli.progress import spinner
from dpsql.cli.render import plan_output, render_budget
from dpsql.cli.reporting import EXIT_FAILED, MEMORY_DB, SetupFile, reporting_errors
from dpsql.api.advice import plan_warnings
from dpsql.mechanisms.base import OPTIONS as MECHANISM_OPTIONS
from dpsql.plan.model import Plan
from dpsql.plan.local import LocalPlan
from dpsql.plan.public import PublicPlan
from dpsql.policy.loading import load_policy
from dpsql.publish.files import FORMATS as RELEASE_FORMATS
from dpsql.publish.preview import describe
from dpsql.publish.spec import load_spec

EXPLAIN_LEDGER_WAIT = 1.0   # seconds explain waits for a locked ledger before saying it could not read it


class _Command(click.Command):
    """A click command whose usage errors exit 1, not click's 2 (2 means "refused by dpsql"), and whose
    SQL argument may open with a comment: ``"-- monthly report\\nSELECT ..."`` is not an option."""

    def make_context(self, *args, **kwargs):
        with _usage_errors_exit_1():
            return super().make_context(*args, **kwargs)

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, _sql_last(args) if any(p.name == "sql" for p in self.params) else args)


def _sql_last(args: list[str]) -> list[str]:
    """An argument that starts with ``-`` and holds white space is SQL (no option's name does): after
    ``--``, where click reads it as the positional argument whatever it starts with.

    >>> _sql_last(["--db", "a.duckdb", "-- report\\nSELECT 1", "--epsilon", "1"])
    ['--db', 'a.duckdb', '--epsilon', '1', '--', '-- report\\nSELECT 1']
    """
    if "--" in args:
        return args
    sql = [a for a in args if a.startswith("-") and any(c.isspace() for c in a)]
    return [a for a in args if a not in sql] + (["--", *sql] if sql else [])


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


# --- shared options ------------------------------------------------------------------------------

def connection_options(func):
    """The options every query-like command shares: SQL (the argument, - for stdin, or -f FILE),
    database, policy, epsilon, delta. The command gets the SQL text, and the database, policy and
    ledger filled from the environment or a dpsql.toml when not given (cli/config.py)."""
    options = [
        click.argument("sql", required=False),
        click.option("-f", "--file", "sql_file", type=click.File("r"), default=None, metavar="FILE",
                     help="Read the SQL from FILE (- for stdin) instead of the SQL argument."),
        click.option("--db", "db_path", default=None, metavar="FILE.duckdb", type=SetupFile("database"),
                     help="DuckDB database file, opened read-only, or a Parquet/CSV file as a one-table "
                          "database (default: $DPSQL_DB, or db in a dpsql.toml here; none, or :memory:, "
                          "when every table of the policy has a source:)."),
        click.option("--policy", "policy_path", default=None, metavar="policy.yaml", type=SetupFile("policy"),
                     help="Privacy policy (YAML) written by the data owner (default: $DPSQL_POLICY, "
                          "or policy in a dpsql.toml beside the database or here)."),
        server_option,
        click.option("--epsilon", type=float, default=None,
                     help="Privacy budget for this query (default: the policy's default_epsilon)."),
        click.option("--delta", type=float, default=None,
                     help="Delta for this query (default: the policy's default_delta)."),
    ]

    @functools.wraps(func)
    def command(*args, sql, sql_file, **kwargs):
        kwargs["sql"] = _read_sql(sql, sql_file)
        if kwargs.get("server") is None:   # an analyst's --server mode opens nothing locally
            kwargs.update(_setup(kwargs))
        return func(*args, **kwargs)

    for option in reversed(options):
        command = option(command)
    return command


def _read_sql(sql: str | None, sql_file) -> str:
    """The SQL argument (``-`` reads stdin), or the text of ``-f FILE``, or, with neither, stdin when it
    is not a terminal (``cat q.sql | dpsql query``); never empty."""
    if sql is not None and sql_file is not None:
        raise click.UsageError("give the SQL as an argument (- for stdin) or with -f FILE, not both")
    if sql is None and sql_file is None and sys.stdin.isatty():
        raise click.UsageError("no SQL: give it as an argument, pipe it in (- for stdin), or pass -f FILE")
    if sql_file is not None:
        text = sql_file.read()
    else:
        text = sys.stdin.read() if sql in (None, "-") else sql
    if not text.strip():
        where = "the argument" if sql not in (None, "-") else "the file" if sql_file is not None else "stdin"
        raise click.UsageError(f"no SQL: {where} is empty; give it as an argument, pipe it in (- for stdin), "
                               "or pass -f FILE")
    return text


def _setup(kwargs) -> dict:
    """--db, --policy and --ledger, from the options, the environment or a dpsql.toml. No database
    (or ``:memory:``) when every table of the policy names its ``source:``: dpsql reads them itself."""
    values = config.resolve(kwargs["db_path"], kwargs["policy_path"], kwargs.get("ledger"))
    if values["policy"] is None or values["db"] is not None or not _sources_only(str(values["policy"])):
        config.required(values, "db", "policy")
    db = None if values["db"] == MEMORY_DB else values["db"]
    found = {"db_path": db, "policy_path": values["policy"]}
    return {**found, "ledger": values["ledger"]} if "ledger" in kwargs else found


def _sources_only(policy_path: str) -> bool:
    """Whether every table of the policy is read from its ``source:`` (then no --db is needed)."""
    with reporting_errors(show_details=True):
        tables = load_policy(policy_path).tables.values()
    return bool(tables) and all(t.data_source is not None for t in tables)


def _connect(db_path: str, policy_path: str, **kwargs):

    with reporting_errors(show_details=True):
        return dpsql.connect(db_path, policy=policy_path, **kwargs)


# --- commands ------------------------------------------------------------------------------------

@click.group(cls=_Group)
@click.version_option(dpsql.__version__, "--version", prog_name="dpsql", message="%(prog)s %(version)s")
def main():
    """Differentially private SQL over DuckDB.

    Analysts send SQL; dpsql answers with calibrated noise and charges the privacy budget set by
    the data owner's policy. Exit codes: 0 answered, 2 refused by dpsql, 3 set-up error (policy,
    database, ledger), 1 other failure. Shell completion (bash, zsh, fish):
    eval "$(_DPSQL_COMPLETE=bash_source dpsql)" in ~/.bashrc (zsh_source, fish_source).

    \b
    Example:
        dpsql demo
        dpsql query "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex" \\
            --db people.duckdb --policy policy.yaml --epsilon 0.5
        dpsql budget --policy policy.yaml --db people.duckdb
    """


mechanism_option = click.option(
    "--mechanism", "mechanism", type=click.Choice(sorted(MECHANISM_OPTIONS), case_sensitive=False), default=None,
    help="The noise mechanism (one that is not pure needs --delta > 0); default: the query's OPTIONS, else the "
         "policy's mechanism, else what the ledger's accountant composes best.")


report_option = click.option(
    "--report-clipping", "report_clipping", is_flag=True, default=False,
    help="Also release, per group, the noisy count of people whose rows or values the bounds cut and their "
         "share (at 10% of epsilon, taken from it; OPTIONS(clipping_epsilon = ...) sets it); a warning says "
         "when the share is material.")


def _mechanism(mechanism: str | None, report_clipping: bool = False) -> dict:
    """The ``mechanism`` and ``report_clipping`` arguments of the library or the server, if asked for."""
    return {**({"mechanism": mechanism.lower()} if mechanism else {}),
            **({"report_clipping": True} if report_clipping else {})}


@main.command()
@connection_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format (default: the one -o's suffix names, else table); json is one array of "
                   "objects, ndjson one object per line, parquet needs -o.")
@click.option("-o", "--output", "output_path", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, writable=True),
              help="Write the result to FILE (whole, or not at all) instead of stdout.")
@click.option("--ledger", "ledger", default=None, metavar="FILE",
              help="Budget ledger file (SQLite) that records every spend across runs "
                   "(default: $DPSQL_LEDGER, or ledger in a dpsql.toml, else "
                   "FILE.duckdb.dpsql-ledger.sqlite beside --db).")
@click.option("--fresh", is_flag=True, default=False,
              help="Draw new noise and pay, even if this exact query was answered before "
                   "(by default the earlier answer is returned at no cost).")
@click.option("--ci", "ci", type=float, default=None, metavar="LEVEL",
              help="Add <col>_ci_low/<col>_ci_high confidence intervals at this level, e.g. 0.95 (free).")
@click.option("--raw-counts", is_flag=True, default=False,
              help="Release counts (and sums of non-negative values) without clamping them at 0.")
@engine_options
@mechanism_option
@report_option
def query(sql, db_path, policy_path, server, epsilon, delta, fmt, ledger, fresh, ci, raw_counts, output_path,
          engine, spark_master, mechanism, report_clipping):
    """Answer SQL with differential privacy and print the noisy result.

    SQL is the query text, - to read it from stdin, or -f FILE. --db, --policy and --ledger default
    to $DPSQL_DB, $DPSQL_POLICY, $DPSQL_LEDGER, then to a dpsql.toml beside the database or here
    (db = "people.duckdb", policy = "policy.yaml"). Warnings (noise larger than the answers,
    groups withheld) go to stderr. Exit codes: 0 answered, 2 refused, 3 set-up error, 1 other.

    \b
    Example:
        dpsql query "SELECT state, AVG(income) AS avg_income FROM people GROUP BY state" \\
            --db people.duckdb --policy policy.yaml --epsilon 1 --format csv --ci 0.95
        echo "SELECT COUNT(*) AS n FROM people" | dpsql query - --db people.duckdb \\
            --policy policy.yaml --ledger budget.sqlite --format json
        export DPSQL_DB=people.duckdb DPSQL_POLICY=policy.yaml
        dpsql query -f report.sql -o report.parquet
        dpsql query "SELECT COUNT(*) FROM people" --engine spark --policy policy.yaml --ledger budget.sqlite
    """
    text = sql
    fmt = output_format(fmt, output_path)   # a usage error before anything is spent
    check_destination(output_path)
    chosen = _mechanism(mechanism, report_clipping)
    with spinner("running the query"):
        data = data_for(engine, spark_master, db_path) if server is None else db_path
        db = _connect(data, policy_path, ledger=ledger) if server is None else \
            remote_for(server, db_path=db_path, policy_path=policy_path, ledger=ledger)
        with reporting_errors(show_details=server is not None):   # a remote error holds no data
            res = db.sql(text, epsilon=epsilon, delta=delta, fresh=fresh, ci=ci, nonnegative=not raw_counts, **chosen)
    if getattr(res, "replayed", False) is True:
        click.echo("note: the same answer as an identical earlier query; no budget spent "
                   "(--fresh draws anew and pays)", err=True)
    if isinstance(getattr(res, "plan", None), PublicPlan):
        click.echo("note: public tables only: answered exactly; no budget spent", err=True)
    if isinstance(getattr(res, "plan", None), LocalPlan):
        click.echo(f"note: {res.plan.summary}; no budget spent", err=True)
    if ci is not None and not isinstance(getattr(res, "plan", None), (PublicPlan, LocalPlan)):
        click.echo(f"note: <column>_ci_low, <column>_ci_high: {interval_note(ci)}", err=True)
    for warning in getattr(res, "warnings", ()):
        click.echo(f"warning: {warning}", err=True)
    # Render fully before writing: a refusal leaves stdout, and -o's file, as they were.
    with reporting_errors(show_details=True):
        data = render(res, fmt, terminal_width(output_path))
    write_after_charge(data, output_path)


@main.command()
@connection_options
@click.option("--ledger", "ledger", default=None, metavar="FILE",
              help="The budget ledger whose remaining budget explain shows (default as for query). Read "
                   "only, as dpsql budget reads it: never created, charged or locked for writing; one "
                   "that cannot be read (another policy's, locked, corrupt) does not stop the plan.")
@click.option("-o", "--output", "output_path", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, writable=True), help="Write the plan to FILE instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True,
              help="json: one object (epsilon, delta, text, outputs with their expected error, budget_before), "
                   "as dpsql serve's PLAN.")
@click.option("--sql", "show_sql", is_flag=True, default=False,
              help="Show the full rewritten SQL that DuckDB runs (long; left out by default).")
@mechanism_option
@report_option
def explain(sql, db_path, policy_path, server, epsilon, delta, ledger, output_path, fmt, show_sql, mechanism,
            report_clipping):
    """Print the plan for SQL (noise, sensitivity; the rewritten SQL with --sql); spends no budget.

    SQL is the query text, - to read it from stdin, or -f FILE; --db and --policy default as for
    query. Shows the budget remaining in the ledger before this query (in the accountant's terms and
    as epsilon, delta) and whether the query would fit; a missing ledger means nothing spent yet (it
    is not created), and a foreign, locked or corrupt one does not stop the plan.

    \b
    Example:
        dpsql explain "SELECT sex, SUM(income) AS total FROM people GROUP BY sex" \\
            --db people.duckdb --policy policy.yaml --epsilon 0.5
        dpsql explain -f report.sql -o report.plan.txt --sql
        dpsql explain "SELECT COUNT(*) AS n FROM people" --format json
    """

    text = sql
    chosen = _mechanism(mechanism, report_clipping)
    check_destination(output_path)
    # Planned over an in-memory ledger: the real one (maybe another policy's, or corrupt) cannot stop
    # the plan; it is read afterwards, only for the remaining budget (the server's explain has its own).
    with spinner("planning the query"):   # reading files into memory at connect may take a while
        db = _connect(db_path, policy_path, ledger=MEMORY) if server is None else \
            remote_for(server, db_path=db_path, policy_path=policy_path)
        with reporting_errors(show_details=server is not None):   # a remote error holds no data
            plan = db.explain(text, epsilon=epsilon, delta=delta, **chosen)
        if isinstance(plan, Plan):
            path = ledger if ledger is not None or db_path is None else default_ledger_path(db_path)
            plan = dataclasses.replace(plan, budget_note=_ledger_note(path, policy_path, plan))
    for warning in plan_warnings(plan) if isinstance(plan, Plan) else ():
        click.echo(f"warning: {warning}", err=True)
    write(plan_output(plan, fmt, show_sql).encode(), output_path)


def _ledger_note(path: str | None, policy_path: str, plan: Plan) -> BudgetNote:
    """The ledger's remaining budget for ``plan``, read as ``dpsql budget`` reads it (``record=False``:
    a changed policy is only checked; a missing file is not created: nothing spent yet). One that
    cannot be read says so instead; a lock is waited for a second at most."""
    if path is None:   # no database file to find a ledger beside, and no --ledger
        return BudgetNote.unreadable(LedgerError("DP403", "no ledger given: pass --ledger FILE"))
    try:
        book = Ledger(path, load_policy(policy_path), record=False, timeout=EXPLAIN_LEDGER_WAIT)
    except LedgerError as err:
        return BudgetNote.unreadable(err)
    try:
        return budget_note(book, plan, None)
    finally:
        book.close()


@main.command()
@server_option
@click.option("--policy", "policy_path", default=None, metavar="policy.yaml", type=SetupFile("policy"),
              help="Optional: the ledger keeps its policy; with --policy, a policy that changes a privacy "
                   "unit is refused, and a ledger not yet created shows this policy's total.")
@click.option("--ledger", "ledger", default=None, metavar="FILE",
              help="The budget ledger file (default: $DPSQL_LEDGER, or ledger in a dpsql.toml).")
@click.option("--db", "db_path", default=None, metavar="FILE.duckdb", type=SetupFile("database"),
              help="Read the default ledger of this database, FILE.duckdb.dpsql-ledger.sqlite (default: $DPSQL_DB, "
                   "or db in a dpsql.toml).")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True,
              help="Output format; json is one object: ledger, total, spent, remaining, history.")
def budget(server, policy_path, ledger, db_path, fmt):
    """Show the privacy budget: total, spent, remaining, and every charged query.

    Reads the ledger only; it never creates one or spends anything.

    \b
    Example:
        dpsql budget --ledger budget.sqlite
        dpsql budget --policy policy.yaml --db people.duckdb --format json
    """

    if server is not None:
        db = remote_for(server, db_path=db_path, policy_path=policy_path, ledger=ledger)
        with reporting_errors(show_details=True):
            state = db.budget
        click.echo(json.dumps({"server": db.url, **state.as_dict()}, indent=2, allow_nan=False) if fmt == "json"
                   else render_budget(state), nl=fmt == "json")
        return
    # Found as query finds them: the options, then $DPSQL_LEDGER / $DPSQL_DB, then a dpsql.toml.
    found = config.resolve(db_path, policy_path, ledger)
    ledger, db_path, policy_path = found["ledger"], found["db"], found["policy"]
    if ledger is None and db_path in (None, MEMORY_DB):
        raise click.UsageError("pass --ledger FILE (or set DPSQL_LEDGER, or ledger in a dpsql.toml), or --db "
                               "FILE.duckdb for its default ledger")
    path = ledger if ledger is not None else default_ledger_path(db_path)
    with analysts_cli.reporting():   # exit 3 for a set-up error: the ledger or the policy
        # The ledger keeps its policy: --policy only checks it (and gives the total before a first charge).
        book = Ledger(path, None if policy_path is None else load_policy(policy_path), record=False)
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
@click.option("--serve", "serve_it", is_flag=True, default=False,
              help="Then serve the demo data on http://127.0.0.1:8765/ with a new analyst's token (printed).")
def demo(directory, rows, serve_it):
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

    with reporting_errors(show_details=True):
        if serve_it and directory is None:   # the server needs the files after the tour
            directory = tempfile.mkdtemp(prefix="dpsql-demo-")
        demo_module.run(dir=directory, out=click.echo, rows=rows)
    if serve_it:
        serve_demo(directory)


@main.command()
@click.argument("spec", metavar="release.yaml")
@click.option("--db", "db_path", default=None, metavar="FILE.duckdb", type=SetupFile("database"),
              help="DuckDB database file, opened read-only (default as for query: $DPSQL_DB, or a dpsql.toml).")
@click.option("--policy", "policy_path", default=None, metavar="policy.yaml", type=SetupFile("policy"),
              help="Privacy policy (YAML) written by the data owner (default as for query).")
@click.option("--ledger", "ledger", default=None, metavar="FILE",
              help="Budget ledger file (default as for query: FILE.duckdb.dpsql-ledger.sqlite beside --db).")
@click.option("-o", "--output", "out", default=None, metavar="DIR", type=click.Path(file_okay=False),
              help="The release's directory: NAME.parquet (or .csv, or release.duckdb) per statistic, "
                   "manifest.json, report.html and report.md. Required unless --dry-run.")
@click.option("--format", "fmt", type=click.Choice(RELEASE_FORMATS), default="parquet", show_default=True,
              help="One file per statistic (parquet, csv), or one table per statistic in release.duckdb.")
@click.option("--dry-run", is_flag=True, default=False,
              help="Print each statistic's cost and expected errors, what would replay free and whether the "
                   "release fits; spends and writes nothing.")
@click.option("--quiet", "-q", is_flag=True, default=False,
              help="No progress and no summary (for cron): errors on stderr and the exit code only.")
def publish(spec, db_path, policy_path, ledger, out, fmt, dry_run, quiet):
    """Publish a release: many named statistics under one budget, reserved at once, written to -o DIR.

    release.yaml holds budget: {epsilon, delta} and statistics: a list of {name, sql} with an optional
    weight or epsilon (README, "Publishing a release"). Re-running a finished release writes the same files
    again at no cost; re-running one that stopped half-way resumes it. Exit codes: 0 published (a dry
    run: it fits), 2 refused or over budget (nothing spent), 3 set-up error (spec, policy, database,
    ledger), 4 incomplete (a statistic failed after its charge; re-run to resume), 1 other.

    \b
    Example:
        dpsql publish release.yaml --db people.duckdb --policy policy.yaml --dry-run
        dpsql publish release.yaml --db people.duckdb --policy policy.yaml -o release/ --quiet
    """
    if out is None and not dry_run:
        raise click.UsageError("pass -o DIR, the release's directory (or --dry-run)")
    with reporting_errors(show_details=True):
        count = len(load_spec(spec).statistics)
    found = _setup({"db_path": db_path, "policy_path": policy_path, "ledger": ledger})
    with publish_cmd.progress(count, quiet) as step:
        db = _connect(found["db_path"], found["policy_path"], ledger=found["ledger"])
        with reporting_errors(show_details=True):
            release = dpsql.publish(spec, db, out or ".", format=fmt, dry_run=dry_run, progress=step)
    if dry_run:
        click.echo(describe(release.preview), nl=False)
    elif not quiet:
        click.echo(publish_cmd.summary(release), nl=False)
    for name, err in release.failed.items() if quiet else ():
        click.echo(f"failed after its charge (spent): {name}: {err.code}", err=True)
    raise SystemExit(publish_cmd.exit_code(release))


main.add_command(serve)
main.add_command(analysts_cli.analyst)
main.add_command(ledger_cli.ledger)

main.add_command(policy_cmd.policy)
main.add_command(randomize)


if __name__ == "__main__":  # pragma: no cover
    main()
