"""The DuckDB type of a number expression, where a few plain rules give it exactly: what the totality
typing (sql/totality.py) asks of an operand (a DOUBLE cannot overflow where an integer can), and what
an engine that types operations otherwise (Spark: FLOOR of a DOUBLE is a BIGINT, ``div`` a BIGINT,
``try_add`` of a TINYINT an INT) prints to give DuckDB's type and value (engines/spark_dialect.py).
None where a rule is missing: the caller then keeps the operation guarded, or refuses it.

A column's type comes from ``types`` or, once sql/guard.py has written an expression, from the
column node itself (``annotated``: the type travels with the lowered tree, never printed).
Checked against DuckDB's own ``typeof`` in tests/sql/test_number_types.py.

>>> import sqlglot
>>> types = {"ti": "TINYINT", "bi": "BIGINT", "d": "DOUBLE", "de": "DECIMAL(18,3)"}.get
>>> [number_type(sqlglot.parse_one(t), types) for t in ("ti + 50", "ti + 500", "FLOOR(bi)", "-d", "FLOOR(de)")]
['TINYINT', None, 'DOUBLE', 'DOUBLE', 'DECIMAL(18,0)']
"""
from __future__ import annotations

import functools
from typing import Callable

from sqlglot import exp
from sqlglot.errors import ParseError

from dpsql.sql.build import TryOp
from dpsql.sql.types import INTEGER_RANGES, base_type

Types = Callable[[str], "str | None"]

SIGNED = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT")   # narrowest first
FRACTIONAL = ("FLOAT", "DOUBLE")
# Other spellings (sqlglot prints DuckDB's INTEGER as INT, HUGEINT as INT128).
_SPELLINGS = {"INT": "INTEGER", "INT4": "INTEGER", "SIGNED": "INTEGER", "INT1": "TINYINT", "INT2": "SMALLINT",
              "SHORT": "SMALLINT", "INT8": "BIGINT", "LONG": "BIGINT", "INT128": "HUGEINT", "REAL": "FLOAT",
              "FLOAT4": "FLOAT", "FLOAT8": "DOUBLE", "DOUBLE PRECISION": "DOUBLE", "NUMERIC": "DECIMAL"}
_KEEP = (exp.Neg, exp.Abs)   # the operand's type
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.IntDiv, exp.Mod)
_CHOICES = (exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least)


def canonical(sql_type: str | None) -> str | None:
    """DuckDB's own name of a number type (``INT`` -> ``INTEGER``; a DECIMAL keeps its precision)."""
    base = base_type(sql_type)
    if base is None:
        return None
    name = _SPELLINGS.get(base, base)
    if name == "DECIMAL":
        return "DECIMAL" + sql_type[sql_type.index("("):].replace(" ", "") if "(" in sql_type else "DECIMAL(18,3)"
    return name


def annotated(node: exp.Expression, types: Types) -> exp.Expression:
    """``node`` with each column's DuckDB type set on it (in place), for what prints it later."""
    for column in node.find_all(exp.Column):
        found = _data_type(types(column.name.lower()))
        if found is not None:
            column.type = found
    return node


@functools.lru_cache(maxsize=256)
def _data_type(sql_type: str | None) -> exp.DataType | None:
    """A type node, built once per name (parsing a type is costly; nothing changes it in place)."""
    try:
        return exp.DataType.build(sql_type, dialect="duckdb") if sql_type else None
    except ParseError:
        return None


def number_type(node: exp.Expression | None, types: Types) -> str | None:
    """DuckDB's type of ``node``, a number expression, or None where these rules do not say."""
    if node is None:
        return None
    node = node.unnest()
    if isinstance(node, TryOp):
        return number_type(node.this, types)
    if isinstance(node, exp.Column):
        own = node.type
        return canonical(types(node.name.lower()) or (own.sql("duckdb") if own is not None else None))
    if literal_text(node) is not None:
        return _literal_type(literal_text(node))
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return canonical(node.to.sql("duckdb"))
    if isinstance(node, exp.Div):
        return _division(number_type(node.this, types), number_type(node.expression, types))
    if isinstance(node, _KEEP):
        return number_type(node.this, types)
    if isinstance(node, (exp.Floor, exp.Ceil)) and not node.args.get("decimals"):
        return _rounded_type(number_type(node.this, types))
    if isinstance(node, _ARITHMETIC):
        return _arithmetic(node, types)
    if isinstance(node, _CHOICES):
        return _common(node, types)
    return None


def literal_text(node: exp.Expression) -> str | None:
    """The text of a (negated) number literal, sign included."""
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + node.this.this
    return node.this if isinstance(node, exp.Literal) and not node.is_string else None


def _literal_type(text: str) -> str | None:
    if "e" in text.lower():
        return "DOUBLE"
    whole, point, fraction = text.lstrip("-").partition(".")
    if point:   # a DECIMAL of the digits as written (0.001: DECIMAL(4,3); .5: DECIMAL(1,1); 5.: DECIMAL(1,0))
        digits = len(whole) + len(fraction)
        plain = (whole + fraction).isdigit() and not whole.startswith("00") and digits <= 38
        return f"DECIMAL({digits},{len(fraction)})" if plain else None
    if not whole.isdigit():
        return None
    return "INTEGER" if _fits(int(text), "INTEGER") else ("BIGINT" if _fits(int(text), "BIGINT") else None)


def _fits(value: int, sql_type: str) -> bool:
    low, high = INTEGER_RANGES[sql_type]
    return low <= value <= high


def _division(left: str | None, right: str | None) -> str | None:
    """DuckDB divides in DOUBLE, but a FLOAT by a FLOAT, an integer or a DECIMAL in FLOAT."""
    if left is None or right is None:
        return None
    if "FLOAT" in (left, right):   # with a DECIMAL too (1.5::FLOAT / 0.001 is a FLOAT)
        return "FLOAT" if all(t in ("FLOAT", *SIGNED) or t.startswith("DECIMAL(") for t in (left, right)) else None
    return "DOUBLE"


def _rounded_type(operand: str | None) -> str | None:
    """FLOOR/CEIL: an integer operand as DOUBLE, a FLOAT or DOUBLE kept, DECIMAL(p, s) as DECIMAL(p, 0)."""
    if operand in SIGNED:
        return "DOUBLE"
    if operand in FRACTIONAL:
        return operand
    if operand is not None and operand.startswith("DECIMAL("):
        return operand.split(",")[0] + ",0)"
    return None


def _arithmetic(node: exp.Expression, types: Types) -> str | None:
    """Two signed integers: the wider; an integer literal takes the other operand's type when it fits
    (DuckDB's integer literals adapt: TINYINT + 50 is a TINYINT, TINYINT + 500 an INTEGER); a FLOAT
    or DOUBLE operand with an integer: that one (DuckDB's ``//`` of them divides, as ``/``)."""
    left, right = node.this, node.expression
    texts = [(o, literal_text(o.unnest()) or "") for o in (left, right)]
    literal = [int(t) for _, t in texts if t.lstrip("-").isdigit()]
    kinds = [number_type(o, types) for o, t in texts if not t.lstrip("-").isdigit()]
    if None in kinds or not kinds:
        return None
    if any(k in FRACTIONAL for k in kinds):
        if not all(k in FRACTIONAL + SIGNED for k in kinds):
            return None
        return "DOUBLE" if "DOUBLE" in kinds else "FLOAT"
    if not all(k in SIGNED for k in kinds):
        return None
    widest = max(kinds, key=SIGNED.index)
    return widest if all(_fits(v, widest) for v in literal) else None


def _common(node: exp.Expression, types: Types) -> str | None:
    """A choice whose every non-NULL branch has one type (the lowering's clamps: CASE WHEN x < CAST('0'
    AS BIGINT) THEN CAST('0' AS BIGINT) ... ELSE x END)."""
    if isinstance(node, exp.Case):
        branches = [i.args.get("true") for i in node.args.get("ifs", [])] + [node.args.get("default")]
    elif isinstance(node, exp.If):
        branches = [node.args.get("true"), node.args.get("false")]
    elif isinstance(node, exp.Nullif):
        branches = [node.this]
    else:
        branches = [node.this, *node.expressions]
    found = {number_type(b, types) for b in branches if b is not None and not isinstance(b.unnest(), exp.Null)}
    return found.pop() if len(found) == 1 else None
