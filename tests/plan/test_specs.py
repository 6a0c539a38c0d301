"""The vocabulary of aggregates is one table per layer, and the tables agree: every aggregate the
frontend accepts (frontend/scope.py FORMS) is one the plan can release (plan/aggregates.py
AGGREGATES), every kind of output and of measurement has its spec, and each quantity's spec gives
what the stage that lowers it reads."""
import sqlglot
from sqlglot import exp

from dpsql.frontend.scope import AGGREGATES as NODES, FORMS
from dpsql.plan.aggregates import AGGREGATES, signature
from dpsql.plan.kinds import OutputKind, Quantity
from dpsql.plan.quantities import QUANTITIES, Stage
from dpsql.policy import load_policy


def test_the_frontend_and_the_plan_name_the_same_aggregate_nodes():
    released = {node for spec in AGGREGATES.values() for node in spec.nodes}
    assert set(FORMS) == released == set(NODES)


def test_every_kind_has_its_spec():
    assert set(AGGREGATES) == {k for k in OutputKind if k.aggregate}
    assert set(QUANTITIES) == set(Quantity)
    assert all(spec.kind == kind for kind, spec in AGGREGATES.items())
    assert all(spec.kind == kind for kind, spec in QUANTITIES.items())


def test_each_quantity_gives_what_its_stage_reads():
    for kind, spec in QUANTITIES.items():
        # __units holds a fixed-size state of every STATE quantity, and __agg (row level) its total.
        assert (spec.unit is not None) == (spec.stage is Stage.STATE), kind
        # Trees and quantile rules read the leaves, never __agg.
        assert (spec.exact is None) == (spec.stage in (Stage.TREE, Stage.HISTOGRAM)), kind
        # A measurement's own per-row value comes from its shared argument or from the row, not both.
        assert spec.row is None or spec.read is None, kind
        assert not spec.numeric or spec.argument, kind


def test_every_written_form_of_a_node_is_some_aggregate():
    """signature() finds a spec for each way a node is written; COUNT's forms in their order."""
    table = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "u", "columns": {
        "u": {"identifier": True}, "x": {"keys": [1, 2]}}}}}).tables["t"]
    written = {"COUNT(*)": "count", "COUNT(x)": "count_col", "COUNT(DISTINCT x)": "distinct",
               "COUNT(DISTINCT u)": "units", "MEDIAN(x)": "quantile", "QUANTILE_CONT(x, 0.5)": "quantile",
               "STDDEV(x)": "stddev_samp", "VARIANCE(x)": "var_samp", "COUNT_IF(x > 1)": "count_if",
               "MIN(x)": "min", "MAX(x)": "max"}
    for sql, kind in written.items():
        agg = sqlglot.parse_one(sql, read="duckdb")
        assert isinstance(agg, exp.AggFunc)
        assert signature(agg, table)[0].kind == kind, sql
