"""The fixture database's tables as a Spark session's temp views (tests/engines/: marker ``spark``)."""
from __future__ import annotations

FIXTURE_TABLES = ("people", "visits", "prescriptions", "clinics")


def as_views(spark, con, names=FIXTURE_TABLES) -> None:
    """Each table ``names`` of the DuckDB connection ``con`` as the session's temp view of its name (what
    ``dpsql.connect(spark, ...)`` reads for a policy table without a ``source:``)."""
    for name in names:
        spark.createDataFrame(con.sql(f'SELECT * FROM "{name}"').to_arrow_table()).createOrReplaceTempView(name)


# The leak world on Spark (tests/engines/test_spark_leaks.py): the values Spark cannot hold are held as
# Spark's own extremes (an unsigned BIGINT as DECIMAL(20,0); HUGEINT past 38 digits, dates and
# timestamps past years 1..9999, infinities included, clamped), so each neighbour is as adversarial as
# a Spark table can be.
HUGE_MAX = "99999999999999999999999999999999999999::HUGEINT"
SPARK_FORMS = {
    "u64": "u64::DECIMAL(20,0)",
    "i128": f"least(greatest(i128, -{HUGE_MAX}), {HUGE_MAX})",
    **{c: f"least(greatest({c}, DATE '0001-01-01'), DATE '9999-12-31')" for c in ("day", "joined")},
    "ts": "least(greatest(ts, TIMESTAMP '0001-01-01'), TIMESTAMP '9999-12-31 23:59:59')",
}


def leak_views(spark, con, names=("people", "visits", "prescriptions", "clinics")) -> None:
    """``as_views`` of the leak world's tables, each column in a form Spark holds (``SPARK_FORMS``)."""
    for name in names:
        columns = [row[0] for row in con.sql(f'DESCRIBE "{name}"').fetchall()]
        select = ", ".join(f'{SPARK_FORMS[c]} AS "{c}"' if c in SPARK_FORMS else f'"{c}"' for c in columns)
        spark.createDataFrame(con.sql(f'SELECT {select} FROM "{name}"').to_arrow_table()).createOrReplaceTempView(name)


def spark_worlds(spark, neighbours):
    """The leak test's D and neighbours D' (tests/support/leak_world.py) each a dpsql connection on Spark,
    over views made from that world's rows (``leak_views``; ``connect`` keeps its own views of them, so
    the next world's views replace the names, not the rows a connection reads)."""
    import copy

    import dpsql
    from tests.support.leak_world import LEAK_POLICY, add_neighbour, make_base_database
    from tests.support.leaks import Worlds

    def on_spark(con, policy):
        leak_views(spark, con)
        return dpsql.connect(spark, ledger=":memory:", policy=copy.deepcopy(policy))
    return Worlds(LEAK_POLICY, neighbours, make_base_database, add_neighbour, on=on_spark)
