"""``dpsql analyst add|list|revoke|top-up``: the data owner's commands for analysts (tokens and budgets).

Each works on a ledger file alone (``--ledger FILE``, or ``--db FILE`` for the ledger beside it): the
ledger keeps its policy. ``--policy`` is needed only to make a new ledger. Exit codes: 0 done, 2 refused
(a bad or taken name, a budget above the total: nothing recorded), 3 set-up error (the ledger or the
policy cannot be used), 1 anything else.
"""
from __future__ import annotations

import contextlib
import json
from typing import Iterator

import click

from dpsql.accounting.ledger import Ledger, default_ledger_path
from dpsql.cli.render import render_table
from dpsql.cli.reporting import SetupFile
from dpsql.errors import EXIT_CODES, DpsqlError
from dpsql.policy.loading import load_policy



@contextlib.contextmanager
def reporting() -> Iterator[None]:
    """A DpsqlError as ``error[DP###]`` on stderr and its exit code; anything else, one line and 1."""
    try:
        yield
    except DpsqlError as err:
        click.echo(err.format(), err=True)
        raise SystemExit(err.exit_code) from None
    except OSError as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(EXIT_CODES["setup"]) from None


def ledger_options(func):
    """--ledger FILE | --db FILE, and --policy FILE (only to make a new ledger)."""
    options = [
        click.option("--ledger", "ledger", default=None, metavar="FILE", help="The budget ledger file."),
        click.option("--db", "db_path", default=None, metavar="FILE.duckdb",
                     help="Use the default ledger of this database, FILE.duckdb.dpsql-ledger.sqlite."),
        click.option("--policy", "policy_path", default=None, metavar="policy.yaml",
                     type=SetupFile("policy"),
                     help="The policy, to make a new ledger (an existing ledger keeps its own; a "
                          "changed policy is recorded in it)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def open_ledger(ledger: str | None, db_path: str | None, policy_path: str | None) -> Ledger:
    if ledger is None and db_path is None:
        raise click.UsageError("pass --ledger FILE, or --db FILE.duckdb for its default ledger")
    path = ledger if ledger is not None else default_ledger_path(db_path)
    return Ledger(path, None if policy_path is None else load_policy(policy_path))


def with_ledger(ledger: str | None, db_path: str | None, policy_path: str | None, use):
    """``use(ledger)`` on the ledger the options name, errors reported with their exit code."""
    with reporting():
        book = open_ledger(ledger, db_path, policy_path)
        try:
            return use(book)
        finally:
            book.close()


@click.group()
def analyst():
    """Analysts: each gets a token (shown once) and a budget inside the total (for dpsql serve).

    \b
    Example:
        dpsql analyst add alice --epsilon 2 --ledger budget.sqlite --policy policy.yaml
        dpsql analyst list --ledger budget.sqlite
    """


@analyst.command("add")
@click.argument("name")
@click.option("--epsilon", type=float, required=True, help="The analyst's epsilon (at most the total).")
@click.option("--delta", type=float, default=0.0, show_default=True, help="The analyst's delta.")
@ledger_options
def add(name, epsilon, delta, ledger, db_path, policy_path):
    """Add an analyst NAME with a budget; print their token, once.

    \b
    Example:
        dpsql analyst add alice --epsilon 2 --delta 1e-7 --db people.duckdb --policy policy.yaml
    """
    token = with_ledger(ledger, db_path, policy_path, lambda book: book.add_analyst(name, epsilon, delta))
    click.echo(token)
    click.echo(f"analyst {name!r} added (epsilon={epsilon:g}, delta={delta:g}); the token above is not stored "
               "and will not be shown again: give it to the analyst now", err=True)


@analyst.command("list")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
@ledger_options
def list_(fmt, ledger, db_path, policy_path):
    """List the analysts: budget, spent, remaining, queries, revoked.

    \b
    Example:
        dpsql analyst list --ledger budget.sqlite --format json
    """
    show(fmt, with_ledger(ledger, db_path, policy_path, Ledger.analysts),
         ["analyst", "epsilon", "spent", "remaining", "delta", "spent delta", "queries", "status", "created"],
         lambda a: (a.name, a.total_epsilon, a.spent_epsilon, a.remaining_epsilon, a.total_delta, a.spent_delta,
                    a.queries, "revoked" if a.revoked else "active", a.created))


def show(fmt: str, records, columns: list[str], row) -> None:
    """Records as one JSON array of their ``as_dict()``, or as a table of ``row(record)``."""
    if fmt == "json":
        click.echo(json.dumps([r.as_dict() for r in records], indent=2, allow_nan=False))
    else:
        click.echo(render_table(columns, [row(r) for r in records]), nl=False)


@analyst.command("revoke")
@click.argument("name")
@ledger_options
def revoke(name, ledger, db_path, policy_path):
    """Revoke analyst NAME: their token stops working; what they spent stays spent.

    \b
    Example:
        dpsql analyst revoke alice --ledger budget.sqlite
    """
    with_ledger(ledger, db_path, policy_path, lambda book: book.revoke_analyst(name))
    click.echo(f"analyst {name!r} revoked")


@analyst.command("top-up")
@click.argument("name")
@click.option("--epsilon", type=float, default=0.0, help="Epsilon to add.")
@click.option("--delta", type=float, default=0.0, help="Delta to add.")
@ledger_options
def top_up(name, epsilon, delta, ledger, db_path, policy_path):
    """Add to analyst NAME's budget (recorded; never above the total).

    \b
    Example:
        dpsql analyst top-up alice --epsilon 0.5 --ledger budget.sqlite
    """
    after = with_ledger(ledger, db_path, policy_path, lambda book: book.top_up(name, epsilon, delta))
    click.echo(f"analyst {name!r}: epsilon {after.total_epsilon:g} (remaining {after.remaining_epsilon:g}), "
               f"delta {after.total_delta:g} (remaining {after.remaining_delta:g})")
