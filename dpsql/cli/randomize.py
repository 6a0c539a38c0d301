"""``dpsql randomize``: randomized response applied to columns of a table, by its owner (api/randomize.py).

Prints the policy entries of the randomized columns (YAML, for the new table's ``columns:``) on stdout
and what was written on stderr.
"""
from __future__ import annotations

import click
import yaml

import dpsql
from dpsql.api.randomize import policy_columns
from dpsql.cli.reporting import SetupFile, reporting_errors


def _domains(specs: tuple[str, ...]) -> dict[str, list[str]]:
    """``--domain region=N,S,E,W`` as {"region": ["N", "S", "E", "W"]} (texts, converted to the column's type).

    >>> _domains(("region=N,S", "smoker=false,true"))
    {'region': ['N', 'S'], 'smoker': ['false', 'true']}
    """
    out: dict[str, list[str]] = {}
    for spec in specs:
        column, sep, values = spec.partition("=")
        if not sep or not column.strip() or not values:
            raise click.UsageError(f"--domain takes COLUMN=A,B,...; got {spec!r}")
        out[column.strip()] = values.split(",")
    return out


@click.command()
@click.argument("source", type=SetupFile("source"))
@click.option("-c", "--column", "columns", multiple=True, required=True, metavar="NAME",
              help="A column to randomize (repeat for several); the others are copied unchanged.")
@click.option("--epsilon", type=float, required=True,
              help="Each column's epsilon per respondent (a respondent's reports in n columns cost n times it).")
@click.option("--domain", "domain_specs", multiple=True, metavar="COLUMN=A,B,...",
              help="A column's public categories (default: its keys in --policy; a BOOLEAN column: false,true).")
@click.option("-o", "--output", "output", required=True, metavar="FILE",
              help="A new .parquet file (parameters in its metadata) or a DuckDB database file (a new table in "
                   "it, parameters in its table dpsql_randomized).")
@click.option("--table", default=None, help="The table of a DuckDB database SOURCE, and the policy's table "
                                            "(default: the file's name).")
@click.option("--output-table", default=None, help="The new table's name in a DuckDB OUTPUT (default: --table).")
@click.option("--policy", "policy_path", default=None, type=SetupFile("policy"),
              metavar="policy.yaml", help="The policy whose keys are the domains not given by --domain.")
def randomize(source, columns, epsilon, domain_specs, output, table, output_table, policy_path):
    """Apply randomized response to columns of SOURCE and write the result (the local model).

    SOURCE is a Parquet or CSV file, or a DuckDB database file with --table. Each chosen column's
    value is kept with probability e^eps / (e^eps + k - 1) and otherwise replaced by one of the other
    k - 1 categories of its public domain, uniformly (Warner's randomized response for k = 2). The
    domain is declared, never read from the data; NULL is not a category (map it to one first). An
    existing OUTPUT is not replaced.

    \b
    Example:
        dpsql randomize survey.csv -c smoker -c region --domain region=N,S,E,W \\
            --epsilon 1 -o survey_rr.parquet
        dpsql randomize people.duckdb --table people -c sex --policy policy.yaml \\
            --epsilon 2 -o people_rr.duckdb
    """
    with reporting_errors(show_details=True):
        done = dpsql.randomize(source, list(columns), epsilon, output, table=table, domains=_domains(domain_specs),
                               policy=policy_path, output_table=output_table)
    for column in done.values():
        click.echo(f"{column.name}: {column.mechanism} over {len(column.domain)} categories, epsilon "
                   f"{column.epsilon:g} per respondent (p_keep {float(column.p_keep):.6f})", err=True)
    click.echo(f"wrote {output}; in a policy, its table needs local_model: true and these columns:", err=True)
    params = {name: c.to_json() for name, c in done.items()}
    click.echo(yaml.safe_dump({"local_model": True, "columns": policy_columns(params)}, sort_keys=False,
                              default_flow_style=None), nl=False)
