"""``--engine spark`` and ``--spark-master``, shared by ``dpsql query`` and ``dpsql serve``: the data
handed to ``dpsql.connect`` is then a Spark session (engines/spark.py reads the policy's ``source:``
paths, or the session's tables, through it), else the ``--db`` path."""
from __future__ import annotations

import os
import sys

import click

from dpsql.cli.reporting import SetupFailure
from dpsql.errors import PolicyError

engine_option = click.option(
    "--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
    help="Where the exact stage runs: DuckDB, or Spark (the policy's source: paths read by Spark; "
         "the noise runs in this process; needs pip install 'dpsql[spark]').")
master_option = click.option(
    "--spark-master", default="local[*]", show_default=True, metavar="URL",
    help="With --engine spark: the Spark master (local[*], spark://host:7077, yarn, ...).")


def engine_options(command):
    """``--engine`` and ``--spark-master`` on a command."""
    return engine_option(master_option(command))


def data_for(engine: str, spark_master: str, db_path):
    """What ``dpsql.connect`` opens: a Spark session at ``spark_master`` for ``--engine spark`` (Spark
    reads the policy's sources), else ``db_path``. A ``--db`` beside ``--engine spark`` is a set-up
    error (exit 3): Spark does not read a DuckDB file, and answering from the sources instead of the
    file named would answer another question than the one asked."""
    if engine != "spark":
        return db_path
    if db_path not in (None, ":memory:"):
        raise SetupFailure(PolicyError(
            "DP503", f"--engine spark does not read the database {str(db_path)!r}: Spark reads each table "
            "from the policy's source: paths", hint="drop --db (and unset DPSQL_DB, or db in dpsql.toml), "
            "and give each table of the policy a source:; or run on DuckDB without --engine spark"))
    return spark_session(spark_master)


def spark_session(master: str):
    """A Spark session at ``master``; a set-up error (exit 3) without pyspark."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SetupFailure(PolicyError("DP503", "--engine spark needs pyspark, which is not installed",
                                       hint="pip install 'dpsql[spark]'")) from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Python workers run this interpreter
    session = SparkSession.builder.master(master).appName("dpsql").config("spark.ui.enabled", "false").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
