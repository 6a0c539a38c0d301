"""Every conversion to an integer type in the lowered SQL rounds explicitly or converts an integer
(issue 27, item 3): DuckDB's cast rounds a DOUBLE half to even and a DECIMAL half away from zero,
Spark's truncates, so a cast of a fraction would answer differently per engine. Checked on the
lowered SQL of every accept file: the operand of each CAST or TRY_CAST to an integer type is a
ROUND, FLOOR or CEIL, an integer literal, a column (an analyst's cast of an integer column; any other
column's is of ROUND: sql/guard.py), a count or a boolean, or a sum, clamp or choice of such values
(a sum of grid steps that ROUND made integral)."""
import pytest
import sqlglot
from sqlglot import exp

from dpsql.plan.public import PublicPlan
from tests.support.paths import GRAMMAR

ACCEPT = sorted((GRAMMAR / "accept").glob("*.sql"))
INTEGERS = exp.DataType.INTEGER_TYPES
ROUNDED = (exp.Round, exp.Floor, exp.Ceil, exp.Count, exp.Column, exp.Boolean, exp.Predicate, exp.Null)
# Operations that keep integral operands integral (a SUM of integral values is integral, however large).
KEEPS = (exp.Sum, exp.Min, exp.Max, exp.Add, exp.Sub, exp.Mul, exp.IntDiv, exp.Neg, exp.Paren, exp.Coalesce,
         exp.Case, exp.If, exp.Cast, exp.Least, exp.Greatest)


def integral(node: exp.Expression) -> bool:
    """Whether ``node`` yields an integral value by construction (see the module's docstring)."""
    if isinstance(node, exp.Literal):   # a key's text ('12') is cast to its integer column's type
        return node.this.strip().lstrip("-").isdigit()
    if isinstance(node, ROUNDED):
        return True
    if isinstance(node, exp.Cast):
        return node.to.is_type(*INTEGERS) or integral(node.this)
    if isinstance(node, exp.Case):
        branches = [i.args["true"] for i in node.args["ifs"]] + [node.args.get("default") or exp.Null()]
        return all(integral(b) for b in branches)
    if isinstance(node, KEEPS):
        return all(integral(c) for c in node.iter_expressions() if not isinstance(c, exp.DataType))
    return False


def rewritten(plan) -> list[str]:
    texts = [t for s in getattr(plan, "stages", ()) for t in rewritten(s.plan)]
    own = getattr(plan, "rewritten_sql", None)
    return texts + ([own] if own and not isinstance(plan, PublicPlan) else [])


def unrounded(sql: str) -> list[str]:
    tree = sqlglot.parse_one(sql, read="duckdb")
    return [c.sql("duckdb")[:120] for c in tree.find_all(exp.Cast)
            if c.to.is_type(*INTEGERS) and not integral(c.this.unnest())]


@pytest.mark.parametrize("path", ACCEPT, ids=lambda p: p.stem)
def test_every_integer_cast_rounds_explicitly(db, path):
    for sql in rewritten(db.explain(path.read_text())):
        assert unrounded(sql) == [], path.name


def test_the_check_finds_a_cast_of_a_fraction():
    assert unrounded("SELECT CAST(x * 0.5 AS BIGINT), CAST(ROUND(x * 0.5) AS BIGINT) FROM t") == \
        ["CAST(x * 0.5 AS BIGINT)"]
