"""The one place that picks an engine for ``dpsql.connect``: a SparkSession runs on Spark
(engines/spark.py, imported only then: pyspark is an optional extra), anything else on DuckDB."""
from __future__ import annotations

from pathlib import Path

import duckdb

from dpsql.engines.base import Engine
from dpsql.engines.duckdb import DuckDBEngine
from dpsql.policy.model import Policy


def open_engine(con_or_path, policy: Policy) -> Engine:
    """The engine over ``con_or_path`` (see ``dpsql.connect``)."""
    if is_spark_session(con_or_path):
        from dpsql.engines.spark import SparkEngine
        return SparkEngine(con_or_path)
    return DuckDBEngine.open(con_or_path, policy)


def is_spark_session(value) -> bool:
    """A pyspark SparkSession (classic or Connect), recognised without importing pyspark."""
    return any(c.__name__ == "SparkSession" and c.__module__.startswith("pyspark.sql") for c in type(value).__mro__)


def described(con_or_path) -> str:
    """What the data handed to ``connect`` is, for an error that it has no file to keep a ledger beside."""
    if isinstance(con_or_path, duckdb.DuckDBPyConnection):
        return "a DuckDB connection object"
    if is_spark_session(con_or_path):
        return "a Spark session"
    if con_or_path is None or isinstance(con_or_path, (str, Path)):
        return "data read from sources or a glob"
    return "in-memory data (DataFrames)"
