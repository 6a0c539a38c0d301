"""``dpsql policy``: commands on policy files (today: import SmartNoise metadata).

Example:
    $ dpsql policy import PUMS.yaml -o policy.yaml --db pums.duckdb
"""
from __future__ import annotations

from pathlib import Path

import click
import duckdb

from dpsql.policy import smartnoise
from dpsql.cli.reporting import SetupFile, reporting_errors
from dpsql.errors import PolicyError


@click.group()
def policy():
    """Policy files: convert other tools' metadata into a dpsql policy.

    \b
    Example:
        dpsql policy import PUMS.yaml -o policy.yaml
    """


@policy.command("import")
@click.argument("metadata", type=SetupFile("metadata"), metavar="smartnoise.yaml")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False), metavar="policy.yaml",
              help="Write the policy here (default: print it).")
@click.option("--db", "db_path", default=None, type=SetupFile("database"), metavar="FILE.duckdb",
              help="Read the keys of tables with censor_dims: false from this database (their distinct values).")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), default=smartnoise.DEFAULTS["epsilon"],
              show_default=True, help="The policy's total epsilon (SmartNoise's metadata has no budget).")
@click.option("--delta", type=click.FloatRange(min=0, max=1, max_open=True), default=smartnoise.DEFAULTS["delta"],
              show_default=True, help="The policy's total delta.")
def import_(metadata, output, db_path, epsilon, delta):
    """Convert SmartNoise SQL table metadata (collection/schema/table YAML) into a dpsql policy.

    private_id or row_privacy become the privacy unit, max_ids the contribution bounds, lower/upper
    the bounds; notes on what has no dpsql equivalent go to stderr and into the file's header.

    \b
    Example:
        dpsql policy import PUMS.yaml -o policy.yaml
        dpsql query "SELECT TOP 5 educ, AVG(income) FROM PUMS.PUMS GROUP BY educ" \\
            --db pums.duckdb --policy policy.yaml --delta 1e-6
    """
    with reporting_errors(show_details=True):
        keys_from = None
        con = None
        if db_path is not None:
            try:
                con = duckdb.connect(db_path, read_only=True)
            except duckdb.Error as e:
                raise PolicyError("DP503", f"cannot open database {db_path}: {str(e).splitlines()[0]}") from None
            keys_from = smartnoise.distinct_values(con)
        try:
            converted, notes = smartnoise.convert(smartnoise.load_metadata(metadata), keys_from=keys_from,
                                                  epsilon=epsilon, delta=delta)
        finally:
            if con is not None:
                con.close()
        text = smartnoise.dump(converted, notes, Path(metadata).name)
        for note in notes:
            click.echo(f"note: {note}", err=True)
        if output is None:
            click.echo(text, nl=False)
        else:
            Path(output).write_text(text)
            click.echo(f"wrote {output}: {len(converted['tables'])} table(s)", err=True)
