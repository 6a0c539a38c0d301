"""The row of the largest (smallest) private total as the noisy top-1 (issue 24, item 3; TPC-H Q15's
shape, frontend/arg_max.py): recognised exactly, planned as the top-1, the public columns looked up."""
import pytest
from sqlglot import exp

from dpsql import testing
from dpsql.frontend.arg_max import KEY, arg_max
from dpsql.frontend.parse import parse
from tests.support import sql_tree

Q15_LIKE = ("WITH per_clinic (clinic_id, total) AS (SELECT clinic, SUM(cost) FROM visits WHERE cost > 1 GROUP BY clinic) "
            "SELECT clinics.clinic, region, total FROM clinics, per_clinic "
            "WHERE clinics.clinic = clinic_id AND total = (SELECT {m}(total) FROM per_clinic) ORDER BY clinics.clinic")


@pytest.mark.parametrize("extreme, descending", [("MAX", True), ("MIN", False)])
def test_the_shape_is_the_top_one_of_the_public_key(db, extreme, descending):
    statement, lookup = arg_max(parse(Q15_LIKE.format(m=extreme)), db.policy)
    assert (lookup.table, lookup.column, lookup.key, lookup.value) == ("clinics", "clinic", "clinic", "total")
    assert lookup.outputs == (("clinic", True, "clinic"), ("region", False, "region"), ("total", True, "total"))
    assert [o.alias for o in statement.expressions] == ["clinic", "total"]
    assert statement.args["limit"].expression.name == "1"
    (order,) = statement.args["order"].expressions
    assert bool(order.args.get("desc")) == descending
    assert statement.args["where"] is not None   # the CTE's own WHERE kept


@pytest.mark.parametrize("sql", [
    # another conjunct, a join with a condition of its own, a column of neither, a private "lookup",
    # a grouped CTE without the equality to its extreme, two CTEs
    Q15_LIKE.format(m="MAX").replace("ORDER BY", "AND region = 'north' ORDER BY"),
    Q15_LIKE.format(m="MAX").replace("FROM clinics, per_clinic", "FROM clinics JOIN per_clinic ON region = 'x'"),
    Q15_LIKE.format(m="MAX").replace("region, total", "region, total, doctors + 1"),
    "WITH r (k, v) AS (SELECT clinic, COUNT(*) FROM visits GROUP BY clinic) SELECT person_id, v FROM visits, r "
    "WHERE person_id = k AND v = (SELECT MAX(v) FROM r)",
    "WITH r (k, v) AS (SELECT clinic, COUNT(*) FROM visits GROUP BY clinic) SELECT region, v FROM clinics, r "
    "WHERE clinics.clinic = k AND v = (SELECT MAX(v) FROM r WHERE v > 3)",
    "WITH r (k, v) AS (SELECT clinic, COUNT(*) FROM visits GROUP BY clinic), s AS (SELECT 1 AS x FROM clinics) "
    "SELECT region, v FROM clinics, r WHERE clinics.clinic = k AND v = (SELECT MAX(v) FROM r)",
])
def test_other_shapes_are_left_as_they_are(db, sql):
    statement = parse(sql)
    assert arg_max(statement, db.policy) == (statement, None)


def test_the_chosen_row_is_the_top_one_with_its_public_columns(db, raw):
    """Noiseless (the seam's exact choice), the row is the clinic of the largest bounded total, with its
    region read from clinics; explain says what is looked up and that it costs nothing."""
    sql = Q15_LIKE.format(m="MAX")
    top = testing.run(db, "SELECT clinic, SUM(cost) AS t FROM visits WHERE cost > 1 GROUP BY clinic "
                          "ORDER BY t DESC LIMIT 1").rows
    (clinic, total), = top
    region = raw.execute("SELECT region FROM clinics WHERE clinic = ?", [clinic]).fetchone()[0]
    assert testing.run(db, sql).rows == [(clinic, region, total)]
    assert "then region read from public table clinics where clinic is the chosen key" in str(db.explain(sql))
    lowered = sql_tree.tree(testing.lower(db, sql))
    assert [j.this.name for j in lowered.find_all(exp.Join) if j.side == "LEFT" and j.this.alias == "__p"] == ["clinics"]


def test_without_the_key_among_the_outputs_the_top_one_names_it_apart(db):
    statement, lookup = arg_max(parse(Q15_LIKE.format(m="MAX").replace("clinics.clinic, region", "region")),
                                db.policy)
    assert [o.alias for o in statement.expressions] == [KEY, "total"] and lookup.key == KEY


def test_q15_as_written_is_answered_with_one_row(db):
    res = db.sql(Q15_LIKE.format(m="MAX"), epsilon=1)
    assert len(res.fetchall()) == 1 and res.columns == ["clinic", "region", "total"]
    assert res.plan.top_k is not None and res.plan.top_k.k == 1
