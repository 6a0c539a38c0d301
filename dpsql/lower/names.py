"""Every name the lowering invents for the engine: group keys __k0.., each argument's row value __c_*,
each measurement's per-row value __v_*, the top-k choice function. One place, so no generated name can
collide with another; and each starts with ``__`` (as __unit, __rows, ...), so the stage that reads the
private table (__rows) never writes an alias equal to a column a query names there, unless that
column's name starts with ``__`` itself: an engine that read select aliases in WHERE, a window or
QUALIFY (lateral aliases: Spark, or a later DuckDB) would otherwise read the new value where the
table's was meant (issue 27; tests/lower/test_aliases.py checks the whole accept corpus)."""
from __future__ import annotations

from dpsql.plan.exact import Columns
from dpsql.plan.model import Plan
from dpsql.plan.parts import Measurement


def key_names(plan: Plan) -> list[str]:
    return [key_name(i) for i in range(len(plan.group_keys))]


def key_name(index: int) -> str:
    return f"__k{index}"


def value_column(m: Measurement) -> str:
    return f"__v_{m.name}"


def top_k_function(noise_function: str) -> str:
    """The engine's top-k choice function beside a noise function (lower/top_k.py): registered with it
    by the connection and by dpsql.testing, so the one name the lowering is given finds both."""
    return f"{noise_function}_top_k"


def raw_column(column: str) -> str:
    """A column as read: COUNT of it counts non-NULL values, shared by every measurement on it."""
    return f"__c_{column}"


def columns(m: Measurement) -> Columns:
    """The columns of __rows a measurement's SQL reads (plan/quantities.py builds it from them)."""
    return Columns(raw=raw_column(m.column) if m.column is not None else None, value=value_column(m))


def choice_function(noise_function: str) -> str:
    """The engine's choice function (a quantile rule's answer per group) that goes with a noise
    function: registered beside it under this name (api/connection.py, testing.py)."""
    return f"{noise_function}_choice"


# The clipping report's columns, after the outputs in the released table (plan/clipping.py): the noisy
# counts of cut people and of people, which api/result.py takes off into Result.clipping.
# The query parameter holding a run's salt for the keyed hash that ranks a unit's partitions (lower/
# bounding.py): bound by the executor with a fresh value from the OS CSPRNG each time it binds a plan.
SALT = "__dpsql_salt"

CLIPPING_COLUMNS = ("__dpsql_clipped", "__dpsql_people")


def clipping_columns(plan: Plan) -> list[tuple[str, str]]:
    """(measurement, column) of the clipping report's released counts; none without the report."""
    report = plan.clipping
    return [] if report is None else list(zip((report.clipped, report.people), CLIPPING_COLUMNS))
