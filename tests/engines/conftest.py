"""The Spark session the Spark engine's tests share (marker ``spark``: not in the default run)."""
import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    """A local[2] session: UI off, two shuffle partitions, ANSI on, logs off; skipped without pyspark."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Python workers run this interpreter
    session = (SparkSession.builder.master("local[2]").appName("dpsql-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.ansi.enabled", "true").getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()
