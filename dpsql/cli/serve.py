"""``dpsql serve`` (the owner runs the server) and the ``--server URL`` mode of query/explain/budget
(the analyst's side: SQL goes to the server with the token from ``DPSQL_TOKEN`` or the token file;
the analyst's process opens no database, policy or ledger).

Example:
    $ dpsql serve --db people.duckdb --policy policy.yaml --port 8765
    $ DPSQL_TOKEN=... dpsql query "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex" \\
          --server http://127.0.0.1:8765 --epsilon 0.5
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

import click

import dpsql
from dpsql.cli.reporting import MEMORY_DB, SetupFile
from dpsql.cli.spark import data_for, engine_options
from dpsql.errors import DpsqlError

server_option = click.option(
    "--server", "server", default=None, metavar="URL",
    help="Send the query to a dpsql server (dpsql serve) as an analyst, with the token from DPSQL_TOKEN "
         "or ~/.config/dpsql/token; --db, --policy and --ledger are then the server's, not given here.")


def remote_for(server: str, **local):
    """The analyst's connection for ``--server``; the owner's options make no sense with it."""
    given = [f"--{name.replace('_path', '').replace('_', '-')}" for name, value in local.items() if value]
    if given:
        raise click.UsageError(f"{', '.join(given)} cannot be used with --server: the server holds the data, "
                               "the policy and the ledger")
    try:
        return dpsql.remote(server)
    except DpsqlError as err:
        click.echo(err.format(), err=True)
        raise SystemExit(getattr(err, "exit_code", 2)) from None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command()
@click.option("--db", "db_path", default=None, metavar="FILE.duckdb", type=SetupFile("database"),
              help="DuckDB database file (or Parquet/CSV), opened read-only by the server; none (or :memory:) when "
                   "every table of the policy has a source:.")
@click.option("--policy", "policy_path", required=True, metavar="policy.yaml", type=SetupFile("policy"),
              help="Privacy policy (YAML).")
@click.option("--ledger", default=None, metavar="FILE",
              help="Budget ledger (default: FILE.duckdb.dpsql-ledger.sqlite beside --db; needed without --db); "
                   "analysts and their tokens live in it (dpsql analyst add).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback exposes the API to the network (use TLS in front).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="A browser origin allowed to call the API from its own pages (none by default).")
@click.option("--max-body", default=1 << 20, show_default=True, type=click.IntRange(min=1024),
              help="Largest request body in bytes (413 beyond).")
@click.option("--workers", default=8, show_default=True, type=click.IntRange(1, 64),
              help="Worker threads planning and running queries.")
@click.option("--deadline", default=30.0, show_default=True, type=click.FloatRange(min=0.01),
              help="Seconds a request may hold the engine from the start of its turn; DuckDB is interrupted then "
                   "(DP425; DP901 once charged).")
@click.option("--per-analyst", default=3, show_default=True, type=click.IntRange(1, 1024),
              help="Requests one analyst may have in flight (429 DP421 beyond).")
@click.option("--free-per-minute", default=120.0, show_default=True, type=click.FloatRange(min=0.01),
              help="Free requests (explain, public tables only, refusals, reads) per analyst per minute; "
                   "answers charged to a budget are not counted (429 DP424 beyond).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(("critical", "error", "warning", "info", "debug")))
@engine_options
def serve(db_path, policy_path, ledger, host, port, cors_origins, max_body, workers, deadline, per_analyst,
          free_per_minute, log_level, engine, spark_master):
    """Serve the HTTP API (and the browser console) over one database, for analysts with tokens.

    The server holds the data, the policy and the ledger; analysts send SQL with their token
    (dpsql analyst add NAME --epsilon E prints one) and are charged to their own budget.

    \b
    Example:
        dpsql serve --db people.duckdb --policy policy.yaml --port 8765 --deadline 60
        dpsql analyst add alice --epsilon 1 --db people.duckdb --policy policy.yaml
        dpsql serve --engine spark --spark-master spark://host:7077 --policy lake.yaml --ledger budget.sqlite
    """
    from dpsql.server.limits import Limits
    from dpsql.server.run import serve as run_server

    if not _loopback(host):
        click.echo(f"warning: listening on {host}: the API is reachable from the network; put TLS in front",
                   err=True)
    limits = Limits(max_body=max_body, workers=workers, deadline=deadline, per_analyst=per_analyst,
                    free_per_minute=free_per_minute)
    db_path = None if db_path == MEMORY_DB else db_path
    data = data_for(engine, spark_master, db_path)   # a set-up error (exit 3) before "serving"
    on = f" on Spark ({spark_master})" if engine == "spark" else ""
    click.echo(f"dpsql: serving {db_path or 'the sources of ' + policy_path}{on} on http://{host}:{port} "
               "(console at /, API at /v1/)", err=True)
    try:
        run_server(data, policy_path, ledger, host=host, port=port, limits=limits,
                   cors_origins=tuple(cors_origins), log_level=log_level)
    except DpsqlError as err:
        click.echo(err.format(), err=True)
        raise SystemExit(getattr(err, "exit_code", 2)) from None


def prepare_demo(directory: str, epsilon: float = 5.0) -> tuple[str, str, str]:
    """After ``dpsql demo --dir D``: an analyst on the demo's ledger; (database, policy, token)."""
    import secrets

    from dpsql.accounting.ledger import Ledger, default_ledger_path
    from dpsql.cli import demo as demo_module
    from dpsql.policy.loading import load_policy

    db_path = str(Path(directory) / demo_module.DB_NAME)
    policy_path = str(Path(directory) / demo_module.POLICY_NAME)
    book = Ledger(default_ledger_path(db_path), load_policy(policy_path))
    try:
        token = book.add_analyst(f"demo-{secrets.token_hex(3)}", epsilon)
    finally:
        book.close()
    return db_path, policy_path, token


def serve_demo(directory: str, port: int = 8765) -> None:
    """``dpsql demo --serve``: serve the demo data on 127.0.0.1 with a fresh analyst's token."""
    from dpsql.server.run import serve as run_server

    db_path, policy_path, token = prepare_demo(directory)
    click.echo(f"\nServing the demo on http://127.0.0.1:{port}/ (Ctrl-C stops it). An analyst's token "
               f"(epsilon 5 of the total), shown once:\n\n  {token}\n\nTry:\n"
               f"  DPSQL_TOKEN={token} dpsql query \"SELECT clinic, COUNT(*) AS n FROM visits GROUP BY clinic\" "
               f"--server http://127.0.0.1:{port}\n")
    try:
        run_server(db_path, policy_path, host="127.0.0.1", port=port)
    except DpsqlError as err:
        click.echo(err.format(), err=True)
        raise SystemExit(getattr(err, "exit_code", 2)) from None
