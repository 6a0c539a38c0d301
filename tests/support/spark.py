"""The fixture database's tables as a Spark session's temp views (tests/engines/: marker ``spark``)."""
from __future__ import annotations

FIXTURE_TABLES = ("people", "visits", "prescriptions", "clinics")


def as_views(spark, con, names=FIXTURE_TABLES) -> None:
    """Each table ``names`` of the DuckDB connection ``con`` as the session's temp view of its name (what
    ``dpsql.connect(spark, ...)`` reads for a policy table without a ``source:``)."""
    for name in names:
        spark.createDataFrame(con.sql(f'SELECT * FROM "{name}"').to_arrow_table()).createOrReplaceTempView(name)
