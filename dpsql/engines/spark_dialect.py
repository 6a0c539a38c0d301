"""The exact stage printed for Spark SQL: sqlglot's Spark dialect with dpsql's own nodes mapped, and
nothing dropped or changed in meaning (lower/program.py ``split`` gives the stage).

sqlglot's own DuckDB-to-Spark transpiling is wrong in ways that matter here (issue 27): ``TRY(x)``
dropped with a log warning, QUALIFY moved into a subquery with select aliases substituted into the
window. So: every sqlglot "unsupported" is an error (``unsupported_level=IMMEDIATE``), QUALIFY stays
native (Spark 4 has it), and each DuckDB name the lowering writes as an anonymous call is mapped
exactly or refused (DP440, before anything is spent):

* a ``TryOp`` (one operation guarded on its own, its operands total) -> ``TRY_CAST``, ``TRY_ADD``,
  ``TRY_SUBTRACT``, ``TRY_MULTIPLY``, ``TRY_DIVIDE`` (its divisor a NULLIF or a non-zero literal), an
  integer's -x, ABS(x), a // b, a % b in DuckDB's type (sql/number_types.py, from the column types
  sql/guard.py annotated: NULL where DuckDB's TRY is); any other operation refused, with the reason
  where Spark means something else (``UNLIKE``: case maps, regular expressions; DECIMAL and FLOAT
  arithmetic);
* FLOOR and CEIL, a bare ``//`` and ``%``: in DuckDB's type (Spark's FLOOR of a DOUBLE is a BIGINT);
* ``__agg``'s SUMs exact in DECIMAL(38, 0) (DuckDB's HUGEINT; Spark's BIGINT sum overflows under ANSI), as
  three BIGINT sums of 21-bit parts (Spark's DECIMAL sum is 3x slower);
* a number literal past the doubles (``1e400``, an infinity to DuckDB) as ``CAST('Infinity' AS DOUBLE)``;
* ``HASH(...)`` (the keyed rank of a unit's partitions, lower/bounding.py) -> ``XXHASH64(...)`` with
  its sign bit cleared (DuckDB's is unsigned, and the rank is the hash modulo a constant): a
  keyed hash with the same salt parameter, stable under Spark's task retries (its values differ from
  DuckDB's: another valid choice of L partitions, never data-dependent in a way DuckDB's is not);
* HUGEINT -> DECIMAL(38, 0) (both hold a 38-digit total); ``CAST(x AS <integer>)`` of a value that
  may hold a fraction -> ``CAST(ROUND(x) AS ...)``: DuckDB rounds, Spark truncates;
* ``COLLATE C`` (bytes compared) -> ``COLLATE UTF8_BINARY``;
* ``LEAST``, ``GREATEST``, ``ROUND``: the same functions (NULLs skipped, half away from zero);
  ``LIST_MAX(MIN(x, k))`` (the k-th smallest) as ``ARRAY_MAX(MIN_BY(x, x, k))``, ``MIN(x, k)`` (the k
  smallest) as ``MIN_BY(x, x, k)`` and ``UNNEST`` of that list as ``EXPLODE`` (COUNT(DISTINCT));
* ``AS MATERIALIZED`` dropped: the exact stage holds no noise, so a recomputed CTE is the same CTE;
* ``x IN ()`` (a key set that public predicates pruned to nothing, frontend/key_pruning.py), which
  Spark's parser refuses, as its DuckDB value: NULL for a NULL ``x``, else FALSE;
* ``ROUND`` of a DOUBLE (a grid step, ``DoubleRound``) as RINT with a tie moved away from zero (Spark's own
  goes through BigDecimal), and ``REPARTITION(__unit)`` on the rows of a stage whose window numbers a
  unit's partitions: speed only, the same values.

>>> import sqlglot
>>> spark_sql(sqlglot.parse_one("SELECT TRY(CAST(a AS HUGEINT)) FROM t", read="duckdb"))
'SELECT TRY_CAST(a AS DECIMAL(38, 0)) FROM t'
"""
from __future__ import annotations

import math

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, UnsupportedError
from sqlglot.generators.spark import SparkGenerator

from dpsql.lower.program import AGG, UNIT, not_staged
from dpsql.sql.build import DoubleRound, TryOp
from dpsql.sql.number_types import FRACTIONAL as FLOATS, number_type

# TRY around one arithmetic operation: its Spark function that gives NULL where DuckDB's TRY does.
TRY_OPERATIONS = {exp.Add: "TRY_ADD", exp.Sub: "TRY_SUBTRACT", exp.Mul: "TRY_MULTIPLY"}
SIGNED_PRINTED = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT")   # DuckDB's integer types Spark holds
NARROW = ("TINYINT", "SMALLINT")   # Spark widens their arithmetic with an INT literal to INT
# What means something else on Spark, and why it is refused (DP440) rather than answered otherwise.
UNLIKE = {
    exp.Lower: ": Spark maps case by Java's full rules ('İ' -> 'i̇', a final 'Σ' -> 'ς'), DuckDB one "
               "character to one ('İ' -> 'i')",
    exp.Upper: ": Spark maps case by Java's full rules ('ß' -> 'SS', 'ŉ' -> 'ʼN'), DuckDB one character to one "
               "('ß' -> 'ẞ')",
    exp.RegexpLike: ": regular expressions are RE2's on DuckDB and Java's on Spark (classes, escapes and what "
                    "is an error differ)",
}
SAME = ("LEAST", "GREATEST", "ROUND")   # same name, same meaning (NULLs skipped; half away from zero)
INTEGERS = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT)
FRACTIONAL = (exp.DType.DOUBLE, exp.DType.FLOAT, exp.DType.DECIMAL)


def _try_op(self: SparkGenerator, node: exp.Try) -> str:
    """One operation guarded on its own (sql/guard.py ``per_operation`` writes a TryOp; a public read
    printed and parsed again, lower/keys.py, gives sqlglot's Try around the same one operation): its
    operands total already, a divisor that may be 0 a NULLIF. Spark's expression of that operation, NULL
    exactly where DuckDB's TRY is and in DuckDB's type; anything else refused."""
    inner = node.this
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Cast):
        return self.sql(exp.TryCast(this=inner.this, to=inner.to, safe=True))
    kind = number_type(inner, _annotated_only)
    if isinstance(inner, exp.Div):   # in DOUBLE where DuckDB divides in DOUBLE (_arithmetic)
        operands = [exp.Cast(this=o.copy(), to=exp.DataType.build("DOUBLE")) if kind == "DOUBLE" else o
                    for o in (inner.this, inner.expression)]
        return self.func("TRY_DIVIDE", *operands)
    if type(inner) in TRY_OPERATIONS and kind in (*SIGNED_PRINTED, "DOUBLE"):
        written = self.func(TRY_OPERATIONS[type(inner)], inner.this, inner.expression)
        return f"TRY_CAST({written} AS {kind})" if kind in NARROW else written
    if isinstance(inner, (exp.Neg, exp.Abs, exp.IntDiv, exp.Mod)) and kind in SIGNED_PRINTED:
        return _integer_op(self, inner, kind)
    if isinstance(inner, (exp.IntDiv, exp.Mod)) and kind in FLOATS:
        return _fractional_division(self, inner, kind)
    # DECIMAL arithmetic overflows at DuckDB's result precision, Spark's is wider; a FLOAT's Spark computes
    # in DOUBLE: neither is NULL where DuckDB's TRY is
    raise UnsupportedError(f"TRY around {type(inner).__name__} of {kind or 'a DECIMAL or unknown type'} "
                           f"({inner.sql('duckdb')[:80]}){UNLIKE.get(type(inner), '')}")


def _annotated_only(name: str) -> None:
    """Column types come from the nodes sql/guard.py annotated (the printer has no policy)."""
    return None


def _integer_op(self: SparkGenerator, node: exp.Expression, kind: str) -> str:
    """DuckDB's integer -x, ABS(x), a // b, a % b under TRY, in its type ``kind``: NULL where the result
    leaves the type (-x, ABS(x) of the smallest; the smallest // -1), else the value. Spark's ``div`` is a
    BIGINT that fails on the smallest BIGINT // -1 under ANSI; its ``%`` of a TINYINT an INT."""
    zero = f"CAST(0 AS {kind})"   # try_subtract in the operand's own type: NULL past its range
    a = self.sql(node, "this")
    if isinstance(node, exp.Neg):
        return f"TRY_SUBTRACT({zero}, {a})"
    if isinstance(node, exp.Abs):
        return f"CASE WHEN {a} < 0 THEN TRY_SUBTRACT({zero}, {a}) ELSE {a} END"
    b = self.sql(node, "expression")
    if isinstance(node, exp.Mod):   # the sign of a, as DuckDB's; the smallest % -1 is 0 on both
        return f"CAST(TRY_MOD({a}, {b}) AS {kind})"
    return f"CASE WHEN {b} = -1 THEN TRY_CAST(TRY_SUBTRACT(0, {a}) AS {kind}) ELSE CAST({a} DIV {b} AS {kind}) END"


def _fractional_division(self: SparkGenerator, node: exp.Expression, kind: str) -> str:
    """DuckDB's a // b of a FLOAT or DOUBLE is a / b in that type (no flooring; Spark's ``div`` refuses
    doubles), its a % b C's fmod (Java's %); the divisor is never 0 here (a literal, or NULLIF)."""
    written = f"({_doubles(self, node, '/' if isinstance(node, exp.IntDiv) else '%')})"
    return written if kind == "DOUBLE" else f"CAST({written} AS {kind})"


def _int_div(self: SparkGenerator, node: exp.IntDiv) -> str:
    """A bare a // b (sql/totality.py: a literal divisor other than 0 and -1) in DuckDB's type."""
    kind = number_type(node, _annotated_only)
    if kind in FLOATS:
        return _fractional_division(self, node, kind)
    written = self.binary(node, "DIV")
    # Untyped: the lowering's own division of wide integers (sql/build.py WIDE_INTEGER, DECIMAL(38,0) on
    # Spark); a user's bare // is typed (sql/totality.py asks number_type before calling it total).
    return f"CAST({written} AS {kind})" if kind in SIGNED_PRINTED and kind != "BIGINT" else written


def _mod(self: SparkGenerator, node: exp.Mod) -> str:
    """A bare a % b: DuckDB's type (Spark's % of a TINYINT by an INT literal is an INT)."""
    kind = number_type(node, _annotated_only)
    if kind in FLOATS:
        return _fractional_division(self, node, kind)
    written = self.binary(node, "%")
    return f"CAST({written} AS {kind})" if kind in NARROW else written


def _floor(self: SparkGenerator, node: exp.Floor | exp.Ceil) -> str:
    """DuckDB's FLOOR/CEIL keep a DOUBLE a DOUBLE (infinities, NaN and -0.0 included), make an integer a
    DOUBLE and a DECIMAL(p, s) a DECIMAL(p, 0); Spark's are BIGINTs (a DOUBLE past 2^63 saturated). A
    DOUBLE of magnitude 2^52 or more has no fraction: it is its own floor; below, Spark's BIGINT is exact."""
    name = "FLOOR" if isinstance(node, exp.Floor) else "CEIL"
    operand, kind = node.this, number_type(node.this, _annotated_only)
    if node.args.get("decimals") or kind is None or kind not in (*SIGNED_PRINTED, *FLOATS) and \
            not kind.startswith("DECIMAL("):
        raise UnsupportedError(f"{name} of {kind or 'an unknown type'} ({node.sql('duckdb')[:80]})")
    a = self.sql(operand)
    if kind in SIGNED_PRINTED:
        return f"CAST({a} AS DOUBLE)"
    if kind.startswith("DECIMAL("):
        return f"CAST({name}({a}) AS {kind.split(',')[0]}, 0))"
    x = f"CAST({a} AS DOUBLE)"
    # CEIL of a DOUBLE in (-1, 0) is -0.0 on DuckDB (C's ceil), Spark's BIGINT 0 is +0.0
    negative_zero = f" WHEN {x} < 0 AND {x} > -1 THEN CAST('-0.0' AS DOUBLE)" if name == "CEIL" else ""
    written = (f"CASE WHEN {x} = 0 OR NOT ABS({x}) < {2 ** 52} THEN {x}{negative_zero} "
               f"ELSE CAST({name}({x}) AS DOUBLE) END")
    return written if kind == "DOUBLE" else f"CAST({written} AS FLOAT)"


def _arithmetic(self: SparkGenerator, node: exp.Binary) -> str:
    """Arithmetic of FLOATs: DuckDB's is in FLOAT (3.4e38 * 3 is infinity), Spark's in DOUBLE: refused. A
    division DuckDB computes in DOUBLE, whatever its operands (a DECIMAL's too: the same values as
    CAST(a AS DOUBLE) / CAST(b AS DOUBLE) on the adversarial extremes), Spark in DOUBLE too; its DECIMAL
    quotient would differ, and overflow under ANSI (999999999999999.999 / 0.001 in DECIMAL(18,3))."""
    kind = number_type(node, _annotated_only)
    if kind == "FLOAT":
        raise UnsupportedError(f"FLOAT arithmetic, which Spark computes in DOUBLE ({node.sql('duckdb')[:80]})")
    if isinstance(node, exp.Div) and kind == "DOUBLE":
        return f"({_doubles(self, node, '/')})"
    return getattr(SparkGenerator, f"{type(node).__name__.lower()}_sql")(self, node)


def _doubles(self: SparkGenerator, node: exp.Binary, op: str) -> str:
    return f"CAST({self.sql(node, 'this')} AS DOUBLE) {op} CAST({self.sql(node, 'expression')} AS DOUBLE)"


def _round(self: SparkGenerator, node: exp.Round) -> str:
    """ROUND(x) of a DOUBLE (a grid step the lowering wrote, or a typed DOUBLE), half away from zero as on
    DuckDB: Spark's ROUND of a DOUBLE goes through BigDecimal (4x slower than RINT on 10M rows, the most of
    a row-level SUM's exact stage), so RINT (half to even) with a tie moved away from zero. Exact: for
    |x| < 2^52, x - RINT(x) is exact (Sterbenz); past it x is whole. -0.0, infinities and NaN stay as
    DuckDB's ROUND keeps them (the ELSE branch adds nothing). Any other ROUND is Spark's own."""
    if node.args.get("decimals") is not None or not (isinstance(node, DoubleRound) or
                                                     number_type(node.this, _annotated_only) == "DOUBLE"):
        return self.function_fallback_sql(exp.Round(this=node.this, decimals=node.args.get("decimals")))
    x = f"({self.sql(node, 'this')})"
    r = f"RINT({x})"
    return (f"CASE WHEN {x} - {r} = 0.5 AND {x} > 0 THEN {r} + 1 WHEN {r} - {x} = 0.5 AND {x} < 0 THEN {r} - 1 "
            f"ELSE {r} END")


PART_BITS = 21   # a BIGINT summed as three parts of at most 21 bits: exact in BIGINT up to 2^42 rows


def _sum(self: SparkGenerator, node: exp.Sum) -> str:
    """``__agg``'s totals of the units' BIGINT values (each up to 2^62, lower/noise.py saturates the total
    before the noise) exact in DECIMAL(38, 0), as DuckDB sums a BIGINT in HUGEINT: Spark's SUM of a BIGINT
    is a BIGINT, and under ANSI it would fail the job, after the charge, exactly when enough units match.
    Summed as three BIGINT sums of the value's 21-bit parts (v = hi * 2^42 + mid * 2^21 + lo; hi by an
    arithmetic shift, so negatives too), each below 2^21 per row, so a sum overflows only past 2^42 rows,
    joined in DECIMAL(38, 0) once per partition: Spark's SUM of a DECIMAL(38, 0) goes through BigDecimal
    per row (3x slower on 10M rows, the most of a row-level SUM's exact stage)."""
    cte = node.find_ancestor(exp.CTE)
    if cte is None or cte.alias != AGG or isinstance(node.this, exp.Distinct):
        return self.function_fallback_sql(node)
    v = f"CAST({self.sql(node, 'this')} AS BIGINT)"   # an integer already: an INT's shift would wrap at 32
    mask, total = 2 ** PART_BITS - 1, "DECIMAL(38, 0)"
    hi, mid, lo = f"({v} >> {2 * PART_BITS})", f"(({v} >> {PART_BITS}) & {mask})", f"({v} & {mask})"
    return (f"(CAST(SUM({hi}) AS {total}) * {2 ** (2 * PART_BITS)} + CAST(SUM({mid}) AS {total}) * {2 ** PART_BITS}"
            f" + CAST(SUM({lo}) AS {total}))")


def _literal(self: SparkGenerator, node: exp.Literal) -> str:
    """A number literal past the doubles' range (DuckDB reads 1e400 as infinity; Spark refuses to parse it)."""
    if not node.is_string and "e" in node.this.lower() and math.isinf(float(node.this)):
        return "CAST('Infinity' AS DOUBLE)"
    return SparkGenerator.literal_sql(self, node)


def _unlike(self: SparkGenerator, node: exp.Expression) -> str:
    raise UnsupportedError(f"{type(node).__name__.upper()}{UNLIKE[type(node)]}")


def _anonymous(self: SparkGenerator, call: exp.Anonymous) -> str:
    name = call.name.upper()
    if name == "HASH":   # non-negative, as DuckDB's UBIGINT hash: a rank's modulo stays in [0, RANKS)
        return f"({self.func('XXHASH64', *call.expressions)} & {2 ** 63 - 1})"
    if name in SAME or name == "REPARTITION" and isinstance(call.parent, exp.Hint):   # _by_unit's hint
        return self.func(name, *call.expressions)
    if name == "FLOOR" and len(call.expressions) == 1 and isinstance(call.parent, exp.Cast) and \
            call.parent.to.this in INTEGERS:
        # a quantile's leaf index (plan/exact.py leaf_index), cast to an integer at once: Spark's BIGINT
        # floor is DuckDB's DOUBLE one wherever the cast of it holds (the index lies in [0, 65536])
        return self.func("FLOOR", *call.expressions)
    if name == "LIST_MAX" and len(call.expressions) == 1 and _smallest(call.expressions[0]):
        # a unit's L-th smallest rank (lower/bounding.py __cut): DuckDB's MIN(x, L) keeps the L smallest
        # values, duplicates included, in a bounded heap; Spark's MIN_BY(x, x, L) the same (k <= 100000)
        least = call.expressions[0]
        return self.func("ARRAY_MAX", self.func("MIN_BY", least.this, least.this, least.args["count"]))
    raise UnsupportedError(f"{name}() has no Spark equivalent dpsql prints")


def _min(self: SparkGenerator, node: exp.Min) -> str:
    """MIN(x); DuckDB's MIN(x, k) (a unit's k smallest distinct values, lower/distinct.py) as Spark's
    MIN_BY(x, x, k): both a bounded heap of the k smallest, in the same order of values."""
    if node.args.get("count") is None:
        return self.func("MIN", node.this)
    if not _smallest(node):
        raise UnsupportedError(f"MIN(x, {node.args['count'].sql()}): Spark's MIN_BY keeps at most 100000")
    return self.func("MIN_BY", node.this, node.this, node.args["count"])


def _unnest(self: SparkGenerator, node: exp.Unnest) -> str:
    """UNNEST(list) as a projection (lower/distinct.py: one row per kept value) is Spark's EXPLODE; no
    other UNNEST is printed."""
    if len(node.expressions) != 1 or not isinstance(node.parent, (exp.Alias, exp.Select)) or node.args.get("offset"):
        raise UnsupportedError("UNNEST other than of one list in a SELECT")
    return self.func("EXPLODE", node.expressions[0])


def _smallest(node: exp.Expression) -> bool:
    """DuckDB's MIN(x, k): the k smallest values, k a literal Spark's MIN_BY takes (at most 100000)."""
    count = node.args.get("count") if isinstance(node, exp.Min) else None
    return isinstance(count, exp.Literal) and count.is_int and 0 < int(count.this) <= 100_000


def _cast(self: SparkGenerator, cast: exp.Cast) -> str:
    """A cast to an integer type rounds first unless its operand is whole already (DuckDB rounds)."""
    if cast.to.this in INTEGERS and not _whole(cast.this):
        # a SUM of DOUBLEs (plan/exact.py bounded_unit_sum types its operand) by RINT (_round), per pair
        doubles = isinstance(cast.this, exp.Sum) and number_type(cast.this.this, _annotated_only) in FLOATS
        rounded = DoubleRound(this=cast.this.copy()) if doubles else exp.Anonymous(this="ROUND",
                                                                                    expressions=[cast.this.copy()])
        cast = exp.Cast(this=rounded, to=cast.to.copy())
    return self.cast_sql(cast)


def _try_cast(self: SparkGenerator, cast: exp.TryCast) -> str:
    """DuckDB's TRY_CAST (sql/guard.py writes it for a cast that may fail) is Spark's TRY_CAST: NULL where
    the value does not convert; sqlglot prints a TryCast without ``safe`` as a plain CAST, which fails
    the job under ANSI. Not rounded here, its operand's type unknown (a string's ROUND fails under ANSI):
    sql/guard.py writes ROUND inside a cast of a number to an integer type already."""
    return f"TRY_CAST({self.sql(cast, 'this')} AS {self.sql(cast, 'to')})"


def _whole(node: exp.Expression) -> bool:
    """A value with no fraction: rounded or floored, an integer literal, a count, a boolean, a cast to an
    integer type, or of such values only: a CASE's every branch, +, -, * and // of them (a unit's capped sum,
    plan/exact.py bounded_unit_sum: its cast needs no ROUND, which Spark computes in BigDecimal)."""
    node = node.unnest()
    if isinstance(node, exp.Case):
        return all(_whole(i.args["true"]) for i in node.args.get("ifs", [])) and _whole(node.args.get("default"))
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.IntDiv)):
        return _whole(node.this) and _whole(node.expression)
    if isinstance(node, exp.Neg):
        return _whole(node.this)
    if isinstance(node, exp.Anonymous) and node.name.upper() in ("ROUND", "FLOOR") and len(node.expressions) == 1:
        return True
    if isinstance(node, exp.Round) and node.args.get("decimals") is None:
        return True
    if isinstance(node, exp.Cast):
        return node.to.this in INTEGERS or node.to.this == exp.DType.INT128
    # a boolean (lower/bounding.py's __declared > L) casts to 1 or 0 on both engines; Spark has no ROUND of it
    booleans = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)
    return isinstance(node, (exp.Count, exp.RowNumber, *booleans)) or (isinstance(node, exp.Literal) and node.is_int)


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
        exp.IntDiv: _int_div,
        exp.Mod: _mod,
        exp.Floor: _floor,
        exp.Ceil: _floor,
        exp.Literal: _literal,
        exp.Sum: _sum,
        exp.Round: _round,
        DoubleRound: _round,
        exp.Min: _min,
        exp.Unnest: _unnest,
        **{kind: _arithmetic for kind in (exp.Add, exp.Sub, exp.Mul, exp.Div)},
        **{kind: _unlike for kind in UNLIKE},
    }
    # QUALIFY printed as written (Spark 4 has it): no subquery, no alias substituted into the window.
    TRANSFORMS.pop(exp.Select, None)


class DpsqlSpark(Spark):
    Generator = DpsqlSparkGenerator


def _by_unit(stage: exp.Expression) -> exp.Expression:
    """A stage that numbers each unit's partitions in a window (lower/bounding.py __bounded: PARTITION BY
    __unit) with its rows hash-partitioned by the unit where the unit is named (``REPARTITION(__unit)``
    on __rows): the per-(unit, key) aggregation and the window then share one shuffle of the rows
    instead of two (Spark's hash partitioning by the unit serves a grouping by (unit, key) and a window by
    unit). Physical only: the same rows. Measured in benchmarks/spark (10M rows, dpsql over the floor):
    the user-level COUNT 1.46x -> 1.14x, the SUM 2.29x -> 1.31x. Any other stage is printed as it is
    (partial aggregation before the shuffle is cheaper there)."""
    if not any([p.name for p in w.args.get("partition_by") or []] == [UNIT] for w in stage.find_all(exp.Window)):
        return stage
    stage = stage.copy()
    for cte in stage.find_all(exp.CTE):   # the first that has the unit (__rows: it may read it from a subquery)
        body = cte.this
        if isinstance(body, exp.Select) and any(p.alias_or_name == UNIT for p in body.expressions):
            body.set("hint", exp.Hint(expressions=[exp.Anonymous(this="REPARTITION",
                                                                 expressions=[exp.column(UNIT, quoted=True)])]))
            break
    return stage


def spark_sql(stage: exp.Expression) -> str:
    """``stage`` printed for Spark, or DP440 when something in it has no exact Spark form."""
    try:
        return DpsqlSpark().generate(_by_unit(stage), copy=True, unsupported_level=ErrorLevel.IMMEDIATE)
    except UnsupportedError as e:
        raise not_staged(f"the exact stage uses what dpsql does not print for Spark: {e}") from None
