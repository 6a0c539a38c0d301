"""``--engine spark`` and ``--spark-master``, shared by ``dpsql query`` and ``dpsql serve``: the data
handed to ``dpsql.connect`` is then a Spark session (engines/spark.py reads the policy's ``source:``
paths, or the session's tables, through it), else the ``--db`` path."""
from __future__ import annotations

import os
import sys

import click

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
    reads the sources; ``db_path`` is not read), else ``db_path``."""
    return spark_session(spark_master) if engine == "spark" else db_path


def spark_session(master: str):
    """A Spark session at ``master``; a set-up error (exit 3) without pyspark."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise click.ClickException("--engine spark needs pyspark: pip install 'dpsql[spark]'") from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Python workers run this interpreter
    session = SparkSession.builder.master(master).appName("dpsql").config("spark.ui.enabled", "false").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
