"""The exact stage printed for Spark SQL: sqlglot's Spark dialect with dpsql's own nodes mapped, and
nothing dropped or changed in meaning (lower/program.py ``split`` gives the stage).

sqlglot's own DuckDB-to-Spark transpiling is wrong in ways that matter here (issue 27): ``TRY(x)``
dropped with a log warning, QUALIFY moved into a subquery with select aliases substituted into the
window. So: every sqlglot "unsupported" is an error (``unsupported_level=IMMEDIATE``), QUALIFY stays
native (Spark 4 has it), and each DuckDB name the lowering writes as an anonymous call is mapped
exactly or refused (DP440, before anything is spent):

* a ``TryOp`` (one operation guarded on its own, its operands total) -> ``TRY_CAST``, ``TRY_ADD``,
  ``TRY_SUBTRACT``, ``TRY_MULTIPLY``, ``TRY_DIVIDE`` (its divisor a NULLIF or a non-zero literal), any
  other operation refused;
* ``HASH(...)`` (the keyed rank of a unit's partitions, lower/bounding.py) -> ``XXHASH64(...)`` with
  its sign bit cleared (DuckDB's is unsigned, and the rank is the hash modulo a constant): a
  keyed hash with the same salt parameter, stable under Spark's task retries (its values differ from
  DuckDB's: another valid choice of L partitions, never data-dependent in a way DuckDB's is not);
* HUGEINT -> DECIMAL(38, 0) (both hold a 38-digit total); ``CAST(x AS <integer>)`` of a value that
  may hold a fraction -> ``CAST(ROUND(x) AS ...)``: DuckDB rounds, Spark truncates;
* ``COLLATE C`` (bytes compared) -> ``COLLATE UTF8_BINARY``;
* ``LEAST``, ``GREATEST``, ``ROUND``: the same functions (NULLs skipped, half away from zero);
* ``AS MATERIALIZED`` dropped: the exact stage holds no noise, so a recomputed CTE is the same CTE;
* ``x IN ()`` (a key set that public predicates pruned to nothing, frontend/key_pruning.py), which
  Spark's parser refuses, as its DuckDB value: NULL for a NULL ``x``, else FALSE.

>>> import sqlglot
>>> spark_sql(sqlglot.parse_one("SELECT TRY(CAST(a AS HUGEINT)) FROM t", read="duckdb"))
'SELECT TRY_CAST(a AS DECIMAL(38, 0)) FROM t'
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, UnsupportedError
from sqlglot.generators.spark import SparkGenerator

from dpsql.lower.program import not_staged
from dpsql.sql.build import TryOp

# TRY around one arithmetic operation: its Spark function that gives NULL where DuckDB's TRY does.
TRY_OPERATIONS = {exp.Add: "TRY_ADD", exp.Sub: "TRY_SUBTRACT", exp.Mul: "TRY_MULTIPLY"}
SAME = ("LEAST", "GREATEST", "ROUND")   # same name, same meaning (NULLs skipped; half away from zero)
INTEGERS = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT)
FRACTIONAL = (exp.DType.DOUBLE, exp.DType.FLOAT, exp.DType.DECIMAL)


def _try_op(self: SparkGenerator, node: exp.Try) -> str:
    """One operation guarded on its own (sql/guard.py ``per_operation`` writes a TryOp; a public read
    printed and parsed again, lower/keys.py, gives sqlglot's Try around the same one operation): its
    operands total already, a divisor that may be 0 a NULLIF. Spark's function of that operation, NULL
    where DuckDB's TRY is; anything else refused."""
    inner = node.this
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Cast):
        return self.sql(exp.TryCast(this=inner.this, to=inner.to, safe=True))
    if type(inner) in TRY_OPERATIONS:
        return self.func(TRY_OPERATIONS[type(inner)], inner.this, inner.expression)
    if isinstance(inner, exp.Div):
        return self.func("TRY_DIVIDE", inner.this, inner.expression)
    raise UnsupportedError(f"TRY around {type(inner).__name__} ({inner.sql('duckdb')[:80]})")


def _anonymous(self: SparkGenerator, call: exp.Anonymous) -> str:
    name = call.name.upper()
    if name == "HASH":   # non-negative, as DuckDB's UBIGINT hash: a rank's modulo stays in [0, RANKS)
        return f"({self.func('XXHASH64', *call.expressions)} & {2 ** 63 - 1})"
    if name in SAME:
        return self.func(name, *call.expressions)
    raise UnsupportedError(f"{name}() has no Spark equivalent dpsql prints")


def _cast(self: SparkGenerator, cast: exp.Cast) -> str:
    """A cast to an integer type rounds first unless its operand is whole already (DuckDB rounds)."""
    if cast.to.this in INTEGERS and not _whole(cast.this):
        cast = exp.Cast(this=exp.Anonymous(this="ROUND", expressions=[cast.this.copy()]), to=cast.to.copy())
    return self.cast_sql(cast)


def _try_cast(self: SparkGenerator, cast: exp.TryCast) -> str:
    """DuckDB's TRY_CAST (sql/guard.py writes it for a cast that may fail) is Spark's TRY_CAST: NULL where
    the value does not convert; sqlglot prints a TryCast without ``safe`` as a plain CAST, which fails
    the job under ANSI. Not rounded here, its operand's type unknown (a string's ROUND fails under ANSI):
    sql/guard.py writes ROUND inside a cast of a number to an integer type already."""
    return f"TRY_CAST({self.sql(cast, 'this')} AS {self.sql(cast, 'to')})"


def _whole(node: exp.Expression) -> bool:
    """A value with no fraction: rounded, an integer literal, a count, or a cast to an integer type."""
    if isinstance(node, exp.Anonymous) and node.name.upper() == "ROUND" and len(node.expressions) == 1:
        return True
    if isinstance(node, exp.Cast):
        return node.to.this in INTEGERS or node.to.this == exp.DType.INT128
    return isinstance(node, (exp.Count, exp.RowNumber)) or (isinstance(node, exp.Literal) and node.is_int)


def _collate(self: SparkGenerator, node: exp.Collate) -> str:
    """DuckDB's binary collation C (sql/compare.py writes it) is Spark's UTF8_BINARY; no other is printed."""
    if node.expression.name.upper() != "C":
        raise UnsupportedError(f"collation {node.expression.name!r}")
    return f"{self.sql(node, 'this')} COLLATE UTF8_BINARY"


def _datatype(self: SparkGenerator, node: exp.DataType) -> str:
    if node.this in (exp.DType.INT128, exp.DType.UINT128):
        return "DECIMAL(38, 0)"
    return SparkGenerator.datatype_sql(self, node)


def _cte(self: SparkGenerator, cte: exp.CTE) -> str:
    """AS MATERIALIZED dropped: recomputing an exact stage's CTE gives the same rows (no noise in it)."""
    return f"{self.sql(cte, 'alias')} AS {self.wrap(cte.this)}"


def _in(self: SparkGenerator, node: exp.In) -> str:
    """An empty IN list as DuckDB evaluates it (NULL IN () is NULL, 1 IN () FALSE); the rest as Spark's."""
    if node.expressions or any(node.args.get(k) for k in ("query", "unnest", "field")):
        return self.in_sql(node)
    null = exp.If(this=exp.Is(this=node.this.copy(), expression=exp.Null()),
                  true=exp.Cast(this=exp.Null(), to=exp.DataType.build("BOOLEAN")))
    return self.sql(exp.Paren(this=exp.Case(ifs=[null], default=exp.false())))


class DpsqlSparkGenerator(SparkGenerator):
    TRANSFORMS = {
        **SparkGenerator.TRANSFORMS,
        exp.Anonymous: _anonymous,
        exp.Cast: _cast,
        exp.TryCast: _try_cast,
        exp.CTE: _cte,
        exp.Collate: _collate,
        exp.DataType: _datatype,
        exp.In: _in,
        exp.Try: _try_op,
        TryOp: _try_op,
    }
    # QUALIFY printed as written (Spark 4 has it): no subquery, no alias substituted into the window.
    TRANSFORMS.pop(exp.Select, None)


class DpsqlSpark(Spark):
    Generator = DpsqlSparkGenerator


def spark_sql(stage: exp.Expression) -> str:
    """``stage`` printed for Spark, or DP440 when something in it has no exact Spark form."""
    try:
        return DpsqlSpark().generate(stage, copy=True, unsupported_level=ErrorLevel.IMMEDIATE)
    except UnsupportedError as e:
        raise not_staged(f"the exact stage uses what dpsql does not print for Spark: {e}") from None
