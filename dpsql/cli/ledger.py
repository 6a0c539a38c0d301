"""``dpsql ledger history|rebind``: the data owner's view of a ledger's policy history, and the explicit
command that lets a policy change a privacy unit or a link (accounting/policies.py says why it must be
explicit). Exit codes as ``dpsql analyst``: 0 done, 2 refused, 3 set-up error, 1 anything else.
"""
from __future__ import annotations


import click

from dpsql.accounting.ledger import Ledger
from dpsql.cli.analysts import show, with_ledger
from dpsql.cli.reporting import SetupFile
from dpsql.policy.loading import load_policy


@click.group()
def ledger():
    """The budget ledger: its policy history, and rebinding it to new privacy units.

    \b
    Example:
        dpsql ledger history --ledger budget.sqlite
        dpsql ledger rebind --ledger budget.sqlite --policy new-policy.yaml --yes
    """


@ledger.command("history")
@click.option("--ledger", "ledger_path", default=None, metavar="FILE", help="The budget ledger file.")
@click.option("--db", "db_path", default=None, metavar="FILE.duckdb",
              help="Use the default ledger of this database, FILE.duckdb.dpsql-ledger.sqlite.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True,
              help="json: every recorded policy with its whole document.")
def history(ledger_path, db_path, fmt):
    """Every policy the ledger was used with, oldest first: when, how (created, changed, rebound),
    the total budget and the accountant it set, and what changed. The newest is in force.

    \b
    Example:
        dpsql ledger history --db people.duckdb --format json
    """
    show(fmt, with_ledger(ledger_path, db_path, None, Ledger.policy_history),
         ["#", "time", "kind", "epsilon", "delta", "accountant", "changes"],
         lambda r: (r.id, r.time, r.kind, float(r.total.epsilon), float(r.total.delta), r.accountant,
                    _shown(r.changes)))


@ledger.command("rebind")
@click.option("--ledger", "ledger_path", default=None, metavar="FILE", help="The budget ledger file.")
@click.option("--db", "db_path", default=None, metavar="FILE.duckdb",
              help="Use the default ledger of this database, FILE.duckdb.dpsql-ledger.sqlite.")
@click.option("--policy", "policy_path", required=True, metavar="policy.yaml",
              type=SetupFile("policy"), help="The new policy.")
@click.option("--yes", is_flag=True, default=False, help="Record it without asking.")
def rebind(ledger_path, db_path, policy_path, yes):
    """Put a policy in force that changes a privacy unit or a link: what was spent so far counts
    against the new units (the data owner's decision, recorded in the ledger's history).

    \b
    Example:
        dpsql ledger rebind --ledger budget.sqlite --policy policy.yaml --yes
    """
    def rebind_to(book: Ledger) -> tuple[str, ...]:
        policy = load_policy(policy_path)
        if not yes:
            click.confirm(f"past spends in {book.path} will count against the privacy units of {policy_path}; "
                          "record it?", abort=True, err=True)
        return book.rebind(policy)
    changed = with_ledger(ledger_path, db_path, None, rebind_to)
    if changed:
        click.echo(f"rebound: {_shown(changed)}; recorded in the ledger's history")
    else:
        click.echo("no privacy unit or link changed; the policy is recorded as a plain change")


def _shown(changes) -> str:
    changes = list(changes)
    return ", ".join(changes[:6]) + (f" and {len(changes) - 6} more" if len(changes) > 6 else "")
