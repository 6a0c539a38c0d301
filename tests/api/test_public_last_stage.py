"""TPC-H Q20's form (issue 24): a query over public tables whose IN list compares a column with a subquery
over private data correlated on a public key pair. Stage 1 releases the subquery per pair (the pairs read
from the public table, pruned by the list's public conditions); the rest reads public tables and the
released values only, answered exactly: the query costs stage 1, charged once, replayed whole. An empty
pair's SUM is released as a noisy 0, not DuckDB's NULL (``exact``)."""
import pytest
import sqlglot
import yaml
from sqlglot import exp

import dpsql
from dpsql import testing
from tests.support.paths import ROOT
from tests.support.tpch import whole

POLICY = yaml.safe_load((ROOT / "benchmarks" / "tpch" / "policy.yaml").read_text())
# L large enough for whole()'s customers (6 line items, 6 pairs each): no contribution is dropped, so the
# noiseless answer is DuckDB's
for _table in ("orders", "lineitem"):
    POLICY["tables"][_table]["max_groups_per_unit"] = 8
# Q20 on the columns whole() has: its green parts, its suppliers' nations, its one ship date's year
Q20 = ((ROOT / "benchmarks" / "tpch" / "queries" / "q20.sql").read_text()
       .replace("'forest%'", "'green%'").replace("'CANADA'", "'NATION7'").replace("1994-01-01", "1993-01-01")
       .replace("and s_nationkey = n_nationkey", "and s_nationkey = n_nationkey and n_nationkey < 15")
       .replace("s_address", "s_nationkey"))
PAIRS = ("SELECT ps_partkey, ps_suppkey, SUM(l_quantity) FROM lineitem, partsupp WHERE l_partkey = ps_partkey "
         "AND l_suppkey = ps_suppkey AND ps_partkey + ps_suppkey < 5 GROUP BY ps_partkey, ps_suppkey")


@pytest.fixture
def db():
    return dpsql.connect(whole(), policy=POLICY, ledger=":memory:")


def exact(sql: str) -> list:
    """DuckDB's answer with an empty pair's SUM as 0: dpsql releases every public pair, an empty one as a
    noisy 0 (whether a group is empty is what the noise hides), where DuckDB's NULL drops its row."""
    return whole().execute(sql.replace("* sum(l_quantity)", "* coalesce(sum(l_quantity), 0)")).fetchall()


def test_q20_as_written_answers_as_duckdb_without_noise(db):
    """Noiseless, the answer is DuckDB's: the same suppliers in the same order (some kept, some not)."""
    assert testing.run(db, Q20).rows == exact(Q20) == [("S1", 7)]
    nation0 = Q20.replace("'NATION7'", "'NATION0'")   # S0's pairs: some sums below its quantity of 100
    assert testing.run(db, nation0).rows == exact(nation0) == [("S0", 0)]
    double = nation0.replace("0.5 * sum", "2 * sum")   # none below: S0 is not listed
    assert testing.run(db, double).rows == exact(double) == []


def test_stage_one_is_released_per_pair_of_the_pruned_public_list(db):
    """Stage 1's groups are the 20 (part, supplier) pairs of the green parts: read from partsupp and
    pruned by the list's ``p_name LIKE 'green%'``, not every combination of the two columns' keys."""
    plan = db.explain(Q20, epsilon=2.0)
    assert plan.then is not None and plan.partitions == 20 and plan.epsilon == 2.0 and not plan.stages
    text = str(plan)
    assert "stages: 2, charged once: stage 1 is the release (the whole budget)" in text
    assert "(ps_partkey, ps_suppkey): the 20 combinations the public tables' rows hold where EXISTS(" in text
    assert "stage 2 of 2: the query below over public tables and stage 1's released values, answered exactly" in text
    assert "CAST(ps_availqty AS DOUBLE) > __dpsql_s.__dpsql_v" in text   # written by sql/compare.py
    assert db.budget.spent_epsilon == 0


def test_the_pairs_are_those_of_the_public_table_not_the_product(db):
    """A GROUP BY of two columns of one public table: its groups are the pairs its rows hold where the
    public conditions pass (6), not the product of the two columns' pruned keys (3 x 3)."""
    plan = db.explain(PAIRS)
    assert plan.partitions == 6
    rows = testing.run(db, PAIRS).rows
    assert [r[:2] for r in rows] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1)]
    assert [r for r in rows if r[2]] == [(a, b, float(c)) for a, b, c in sorted(whole().execute(PAIRS).fetchall())]


def test_charged_once_at_the_whole_budget_and_replayed_whole(db):
    first = db.sql(Q20, epsilon=1.0)
    assert db.budget.spent_epsilon == pytest.approx(1.0) and len(db.budget.history) == 1
    assert first.plan.releases() == tuple(m.release for m in first.plan.measurements)
    assert first.arrow().column_names == ["s_name", "s_nationkey"]
    again = db.sql(Q20, epsilon=1.0)
    assert again.replayed and again.fetchall() == first.fetchall()
    assert db.budget.spent_epsilon == pytest.approx(1.0)


def test_a_last_stage_that_fails_on_its_rows_is_refused_before_the_charge(db):
    """The public query around the subquery fails in DuckDB (a text cast to a number) on rows the release
    would keep: it is tried first on every pair stage 1 may release, each value NULL, and refused free
    (DP318), in one statement and in a batch; a last stage that runs is tried and answered as before."""
    outputs = Q20.replace("s_name,\n    s_nationkey", "s_name,\n    CAST(s_name AS INTEGER)")
    listed = Q20.replace("and ps_availqty >", "and ps_availqty * CAST(ps_partkey || 'x' AS INTEGER) >")
    assert outputs != Q20 and listed != Q20
    for sql in (outputs, listed):
        with pytest.raises(dpsql.DpsqlError) as info:
            db.sql(sql)
        assert info.value.code == "DP318" and "Could not convert string" in str(info.value)
        with pytest.raises(dpsql.DpsqlError) as info:
            db.sql_batch(["SELECT COUNT(*) FROM lineitem", sql], epsilon=1.0)
        assert info.value.code == "DP318"
    assert db.budget.spent_epsilon == 0 and not db.budget.history
    assert testing.run(db, Q20).rows == [("S1", 7)]


def test_the_try_reads_every_row_some_release_could_keep():
    """The probe (frontend/correlated.py): the values' table replaced by every key of the pruned public
    list with a NULL value, and the condition on the value wrapped COALESCE(c, TRUE): under three-valued
    logic a condition NULL for an unknown value may hold for some value, one TRUE or FALSE holds so for all."""
    db = dpsql.connect(whole(), policy=POLICY, ledger=":memory:")
    probe = db.explain(Q20).then.probe.rewritten_sql
    tree = sqlglot.parse_one(probe, read="duckdb")
    assert not [t for t in tree.find_all(exp.Table) if t.name.startswith("__dpsql_stage_values")]
    (keys,) = [s for s in tree.find_all(exp.Subquery) if s.alias == "__dpsql_s"]
    assert keys.this.args.get("distinct") and [e.alias for e in keys.this.expressions] == [
        "__dpsql_k0", "__dpsql_k1", "__dpsql_v"] and isinstance(keys.this.expressions[2].this.this, exp.Null)
    assert keys.this.find(exp.Like) is not None, "pruned as stage 1 prunes its pairs (p_name LIKE 'green%')"
    (tried,) = list(tree.find_all(exp.Coalesce))
    assert tried.expressions == [exp.true()] and tried.this.expression.sql() == "__dpsql_s.__dpsql_v"
    assert whole().execute(probe).fetchall() == [("S1", 7)] == exact(Q20)
    none = Q20.replace("'NATION7'", "'NATION0'").replace("0.5 * sum", "2 * sum")   # no sum below S0's quantities
    assert exact(none) == [] and whole().execute(db.explain(none).then.probe.rewritten_sql).fetchall() == [("S0", 0)]
