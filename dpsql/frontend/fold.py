"""Constant folding at plan time: expressions of literals only become one literal, with DuckDB's
exact semantics.

``DATE '1998-12-01' - INTERVAL '90' DAY`` becomes ``TIMESTAMP '1998-09-02 00:00:00'`` (DuckDB's
DATE +- INTERVAL is a TIMESTAMP; months clamp to the month's end: ``DATE '2021-01-31' + INTERVAL 1
MONTH`` is 2021-02-28), ``0.06 - 0.01`` becomes ``0.05``, ``-(3)`` becomes ``-3``, ``1 < 2`` TRUE.
It runs after parse and flatten, before validation, so the validator sees literals; an INTERVAL this
pass does not fold stays in the query and is refused there (no INTERVAL arithmetic on columns).

What folds, each checked against DuckDB itself in ``tests/frontend/test_folding.py``:

* integers (INTEGER, BIGINT: the type DuckDB gives the literal): ``+ - * // % -x``, ``/`` (a DOUBLE);
  nothing that overflows its type or divides by zero: DuckDB would raise, so that stays as written;
* DECIMAL literals (``0.05``) with DuckDB's widths and scales for ``+ - *`` (up to 38 digits), ``/``
  as a DOUBLE; DOUBLE literals (``1e2``) and anything mixed with one, as DOUBLE (finite results only);
* comparisons of two numbers, two strings, two booleans, two dates or timestamps;
* ``DATE`` / ``TIMESTAMP`` literals +- ``INTERVAL 'n' DAY|WEEK|MONTH|QUARTER|YEAR`` (n an integer),
  DATE +- integer (a DATE), DATE - DATE (days), within the years 1 to 9999.

A folded value keeps DuckDB's type: where its literal would be typed differently (an integer literal
DuckDB may narrow to the other operand's type, ``tinyint_col + (1 + 1)`` must not become TINYINT
arithmetic), it is written ``CAST(2 AS INT)``, except where only its value matters (comparisons,
conditions). The new node keeps the position of the text it replaces, so errors still point
into the SQL as written. The roots of GROUP BY and ORDER BY items are not folded (``GROUP BY 1 + 1``
is not ``GROUP BY 2``, an ordinal).

>>> from dpsql.frontend.parse import parse
>>> sql = "SELECT COUNT(*) FROM t WHERE d <= DATE '1998-12-01' - INTERVAL '90' DAY AND x BETWEEN 0.06 - 0.01 AND -(3)"
>>> fold_constants(parse(sql), sql).sql("duckdb")
"SELECT COUNT(*) FROM t WHERE d <= CAST('1998-09-02 00:00:00' AS TIMESTAMP) AND x BETWEEN 0.05 AND -3"
"""
from __future__ import annotations

import calendar
import datetime
import math
import operator
import re
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any, Callable

from sqlglot import exp

from dpsql.sql.literals import is_date, temporal_literal, temporal_value
from dpsql.sql.positions import span

INTEGER, BIGINT, DECIMAL, DOUBLE = "INTEGER", "BIGINT", "DECIMAL", "DOUBLE"
BOOLEAN, VARCHAR, DATE, TIMESTAMP, INTERVAL = "BOOLEAN", "VARCHAR", "DATE", "TIMESTAMP", "INTERVAL"
INTEGER_RANGE = {INTEGER: (-2 ** 31, 2 ** 31 - 1), BIGINT: (-2 ** 63, 2 ** 63 - 1)}
DECIMAL_WIDTH = {INTEGER: 10, BIGINT: 19}   # an integer operand of DECIMAL arithmetic
MAX_DECIMAL_WIDTH = 38
EXACT = Context(prec=100)                  # more digits than any DECIMAL(38, s) result needs
# DECIMAL -> DOUBLE rounds once (as DuckDB's cast does) while the unscaled value and the power of ten
# are both exact doubles; past that the two roundings could differ, and nothing folds.
DOUBLE_EXACT = 2 ** 53
INTERVAL_UNITS = {"DAY": (0, 1), "DAYS": (0, 1), "WEEK": (0, 7), "WEEKS": (0, 7), "MONTH": (1, 0),
                  "MONTHS": (1, 0), "QUARTER": (3, 0), "QUARTERS": (3, 0), "YEAR": (12, 0), "YEARS": (12, 0)}
WHOLE = re.compile(r"-?\d+")
NUMBERS = (INTEGER, BIGINT, DECIMAL, DOUBLE)
# Where a folded value stands alone: only its value matters, so a plain literal is exact.
# (An output keeps its exact type: ``SELECT 0.05 + 0.01`` is a DECIMAL(4,2) in DuckDB.)
VALUE_CONTEXTS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In, exp.Is, exp.Where,
                  exp.Having, exp.Limit, exp.Offset, exp.And, exp.Or, exp.Not)


@dataclass(frozen=True)
class Const:
    """A literal's value and its DuckDB type (DECIMAL with its width and scale; INTERVAL as (months, days))."""
    type: str
    value: Any
    width: int = 0
    scale: int = 0
    literal: bool = False   # a number literal as written, or negated: DuckDB fits it to the other operand


def fold_constants(statement: exp.Expression, sql: str) -> exp.Expression:
    """Replace every maximal expression of literals only by its value (in place; returned)."""
    if not isinstance(statement, exp.Select):
        return statement
    values = _values(statement)
    _fold_below(statement, sql, values)
    for interval in statement.find_all(exp.Interval):
        _locate(interval, sql)   # left for validation to refuse: give its caret the INTERVAL text
    return statement


def _fold_below(node: exp.Expression, sql: str, values: dict[int, Const | None]) -> None:
    for child in list(node.iter_expressions()):
        if not _replace(child, sql, values.get(id(child))):
            _fold_below(child, sql, values)


def _replace(node: exp.Expression, sql: str, value: Const | None) -> bool:
    """Replace ``node`` by its value if it is an operation of literals; whether it was replaced."""
    if value is None or value.type in (INTERVAL, VARCHAR) or _canonical(node) or _ordinal_position(node):
        return False
    start, end = span(node, sql)
    literal = literal_of(value, exact_type=not _value_context(node))
    for leaf in literal.walk():
        if isinstance(leaf, (exp.Literal, exp.Boolean)) and start is not None:
            leaf.meta.update(start=start, end=end)
    node.replace(literal)
    return True


_INTERVAL_TEXT = re.compile(r"\bINTERVAL\s*(?:'(?:[^']|'')*'|[\w.+-]+|\([^()]*\))(?:\s*[A-Za-z]+\b)?", re.I)


def _locate(interval: exp.Interval, sql: str) -> None:
    """Positions for an INTERVAL (sqlglot keeps none for ``INTERVAL 1 DAY``): the INTERVAL text
    after its left neighbour, or before its right one."""
    parent = interval.parent
    if not sql or not isinstance(parent, exp.Binary):
        return
    if interval.arg_key == "expression":
        after = span(parent.this, sql)[1]
        found = _INTERVAL_TEXT.search(sql, after + 1) if after is not None else None
    else:
        before = span(parent.expression, sql)[0]
        found = None
        for match in _INTERVAL_TEXT.finditer(sql, 0, before if before is not None else 0):
            found = match
    if found is not None:
        interval.meta.update(start=found.start(), end=found.end() - 1)


def _canonical(node: exp.Expression) -> bool:
    """Already a literal as written: a number, a string, a boolean, ``-n``, ``DATE 'x'``, NULL, or a
    parenthesised one (left as written)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        node = node.this
    return isinstance(node, (exp.Literal, exp.Boolean, exp.Null)) or temporal_value(node) is not None


def _ordinal_position(node: exp.Expression) -> bool:
    """The root of a GROUP BY or ORDER BY item: a literal integer there is a position."""
    return isinstance(node.parent, exp.Group) or (isinstance(node.parent, exp.Ordered) and node.arg_key == "this")


def _value_context(node: exp.Expression) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return isinstance(parent, VALUE_CONTEXTS)


# --- values ------------------------------------------------------------------------------------------

def evaluate(node: exp.Expression | None) -> Const | None:
    """The value of an expression of literals only, as DuckDB computes it, or None (not foldable, or
    DuckDB would raise)."""
    return None if node is None else _values(node).get(id(node))


def _values(root: exp.Expression) -> dict[int, Const | None]:
    """The value of every node of the tree, children first (each computed once)."""
    values: dict[int, Const | None] = {}
    for node in reversed(list(root.walk())):
        values[id(node)] = _value(node, lambda child: values.get(id(child)) if child is not None else None)
    return values


def _value(node: exp.Expression, of: Callable[[exp.Expression | None], Const | None]) -> Const | None:
    if isinstance(node, exp.Paren):
        return of(node.this)
    if isinstance(node, exp.Neg):
        return _negate(of(node.this))
    if not isinstance(node, (*_BINARY, *_COMPARE)):
        return _leaf(node)
    a, b = of(node.this), of(node.expression)
    if a is None or b is None:
        return None
    if type(node) in _COMPARE:
        return _compare(a, b, _COMPARE[type(node)])
    if isinstance(node, (exp.Add, exp.Sub)):
        moved = _calendar(a, b, subtract=isinstance(node, exp.Sub))
        if moved is not None or {a.type, b.type} & {DATE, TIMESTAMP, INTERVAL}:
            return moved
    return _arithmetic(type(node), a, b)


def _leaf(node: exp.Expression) -> Const | None:
    if isinstance(node, exp.Boolean):
        return Const(BOOLEAN, bool(node.this))
    if isinstance(node, exp.Literal):
        return Const(VARCHAR, node.this) if node.is_string else _number(node.this)
    if isinstance(node, exp.Interval):
        return _interval(node)
    value = temporal_value(node)
    if value is None:
        return None
    return Const(DATE, value) if is_date(value) else Const(TIMESTAMP, value)


def _number(text: str) -> Const | None:
    """A number literal as DuckDB types it: INTEGER/BIGINT, DECIMAL(width, scale), or DOUBLE (an exponent)."""
    if text.isdigit():
        value = int(text)
        for kind in (INTEGER, BIGINT):
            if value <= INTEGER_RANGE[kind][1]:
                return Const(kind, value, literal=True)
        return None   # HUGEINT and wider: not folded
    if re.fullmatch(r"\d*\.\d+|\d+\.\d*", text):
        whole, _, fraction = text.partition(".")
        width = len(whole.lstrip("0") or "0") + len(fraction)
        if width > MAX_DECIMAL_WIDTH:
            return None   # DuckDB reads it as a DOUBLE: not folded
        return Const(DECIMAL, Decimal(text), width, len(fraction), literal=True)
    try:
        value = float(text)
    except ValueError:
        return None
    return Const(DOUBLE, value, literal=True) if math.isfinite(value) else None


def _interval(node: exp.Interval) -> Const | None:
    """``INTERVAL 'n' unit`` (n a whole number, unit a day, week, month, quarter or year) as (months, days)."""
    count, unit = node.this, node.args.get("unit")
    if not isinstance(count, exp.Literal) or not WHOLE.fullmatch(count.this.strip()) or unit is None:
        return None
    factor = INTERVAL_UNITS.get(unit.name.upper())
    if factor is None:
        return None
    n = int(count.this.strip())
    return Const(INTERVAL, (n * factor[0], n * factor[1]))


# --- numbers -----------------------------------------------------------------------------------------

_BINARY = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod)
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: operator.eq, exp.NEQ: operator.ne, exp.GT: operator.gt, exp.GTE: operator.ge, exp.LT: operator.lt,
    exp.LTE: operator.le}


def _integer(kind: str, value: int) -> Const | None:
    lo, hi = INTEGER_RANGE[kind]
    return Const(kind, value) if lo <= value <= hi else None   # DuckDB raises on overflow


def _wider(a: Const, b: Const) -> str:
    return BIGINT if BIGINT in (a.type, b.type) else INTEGER


def _as_decimal(c: Const) -> tuple[Decimal, int, int]:
    if c.type == DECIMAL:
        return c.value, c.width, c.scale
    return Decimal(c.value), DECIMAL_WIDTH[c.type], 0


def _as_double(c: Const) -> float | None:
    if c.type == DOUBLE:
        return c.value
    if c.type == DECIMAL:
        unscaled = c.value.copy_abs().scaleb(c.scale, context=EXACT)
        if unscaled >= DOUBLE_EXACT or c.scale > 22:
            return None
    return float(c.value)


def _double(value: float | None) -> Const | None:
    return Const(DOUBLE, value) if value is not None and math.isfinite(value) else None


def _negate(c: Const | None) -> Const | None:
    if c is None or c.type not in NUMBERS:
        return None
    negated = c.value.copy_negate() if isinstance(c.value, Decimal) else -c.value   # exact, no context
    if c.literal:   # -(3) is the literal -3 in DuckDB, of the type of 3
        return Const(c.type, negated, c.width, c.scale, literal=True)
    if c.type in INTEGER_RANGE:
        return _integer(c.type, negated)
    return Const(c.type, negated, c.width, c.scale)


def _arithmetic(op: type, a: Const, b: Const) -> Const | None:
    if a.type not in NUMBERS or b.type not in NUMBERS:
        return None
    if op is exp.Div or DOUBLE in (a.type, b.type):
        return _in_doubles(op, a, b)
    if DECIMAL in (a.type, b.type):
        return _in_decimals(op, a, b)
    kind = _wider(a, b)
    if op in (exp.IntDiv, exp.Mod):
        if b.value == 0:
            return None   # DuckDB raises
        quotient = abs(a.value) // abs(b.value) * (1 if (a.value < 0) == (b.value < 0) else -1)   # toward zero
        return _integer(kind, quotient if op is exp.IntDiv else a.value - b.value * quotient)
    return _integer(kind, {exp.Add: operator.add, exp.Sub: operator.sub, exp.Mul: operator.mul}[op](a.value, b.value))


def _in_doubles(op: type, a: Const, b: Const) -> Const | None:
    x, y = _as_double(a), _as_double(b)
    if x is None or y is None or op in (exp.IntDiv, exp.Mod):
        return None   # DOUBLE // and % are not what they are for integers in DuckDB: left alone
    if op is exp.Div:
        return _double(x / y) if y != 0 else None
    return _double({exp.Add: operator.add, exp.Sub: operator.sub, exp.Mul: operator.mul}[op](x, y))


def _in_decimals(op: type, a: Const, b: Const) -> Const | None:
    """DuckDB's DECIMAL rules: + and - keep the larger scale and add a digit, * adds widths and scales
    (at most 18 digits when both operands have at most 18)."""
    (x, wx, sx), (y, wy, sy) = _as_decimal(a), _as_decimal(b)
    if op is exp.Mul:
        width, scale, value = wx + wy, sx + sy, EXACT.multiply(x, y)
        if wx <= 18 and wy <= 18 and width > 18:
            # DuckDB multiplies two 64-bit DECIMALs in DECIMAL(18, s1 + s2) and raises on overflow
            width = 18
            if scale > width or value.copy_abs() >= Decimal(10) ** (width - scale):
                return None
    elif op in (exp.Add, exp.Sub):
        scale = max(sx, sy)
        width = max(wx - sx, wy - sy) + scale + 1
        value = EXACT.add(x, y) if op is exp.Add else EXACT.subtract(x, y)
    else:
        return None   # DECIMAL // and % : left to DuckDB
    if width > MAX_DECIMAL_WIDTH:
        return None
    return Const(DECIMAL, value.quantize(Decimal(1).scaleb(-scale), context=EXACT), width, scale)


def _compare(a: Const, b: Const, op: Callable[[Any, Any], bool]) -> Const | None:
    if a.type in NUMBERS and b.type in NUMBERS:
        if DOUBLE in (a.type, b.type):
            x, y = _as_double(a), _as_double(b)
            return None if x is None or y is None else Const(BOOLEAN, op(x, y))
        return Const(BOOLEAN, op(a.value, b.value))
    if a.type == b.type == VARCHAR:
        return Const(BOOLEAN, op(a.value.encode(), b.value.encode()))   # DuckDB compares bytes
    if a.type == b.type == BOOLEAN:
        return Const(BOOLEAN, op(a.value, b.value))
    if {a.type, b.type} <= {DATE, TIMESTAMP}:
        return Const(BOOLEAN, op(_instant(a.value), _instant(b.value)))
    return None


# --- dates -------------------------------------------------------------------------------------------

def _instant(value: datetime.date) -> datetime.datetime:
    return value if isinstance(value, datetime.datetime) else datetime.datetime(value.year, value.month, value.day)


def _calendar(a: Const, b: Const, subtract: bool) -> Const | None:
    """DATE/TIMESTAMP +- INTERVAL (a TIMESTAMP), DATE +- INTEGER (a DATE), DATE - DATE (days, BIGINT)."""
    if not subtract and a.type in (INTERVAL, INTEGER, BIGINT):
        a, b = b, a   # INTERVAL + DATE, 5 + DATE
    try:
        if a.type in (DATE, TIMESTAMP) and b.type == INTERVAL:
            months, days = b.value
            sign = -1 if subtract else 1
            return Const(TIMESTAMP, _add_months(_instant(a.value), sign * months) + datetime.timedelta(days=sign * days))
        if a.type == DATE and _an_integer(b):
            return Const(DATE, a.value + datetime.timedelta(days=-b.value if subtract else b.value))
        if a.type == b.type == DATE and subtract:
            return Const(BIGINT, (a.value - b.value).days)
    except (OverflowError, ValueError):
        return None   # beyond the years 1 to 9999: left to DuckDB
    return None


def _an_integer(c: Const) -> bool:
    """An INTEGER (DuckDB has no DATE + BIGINT), or a literal that fits one (DuckDB types it so there)."""
    lo, hi = INTEGER_RANGE[INTEGER]
    return c.type == INTEGER or (c.type == BIGINT and c.literal and lo <= c.value <= hi)


def _add_months(t: datetime.datetime, months: int) -> datetime.datetime:
    """DuckDB's month arithmetic: the same day in the target month, or its last day if shorter."""
    index = t.year * 12 + (t.month - 1) + months
    year, month = divmod(index, 12)
    day = min(t.day, calendar.monthrange(year, month + 1)[1]) if 1 <= year <= 9999 else t.day
    return t.replace(year=year, month=month + 1, day=day)


# --- literals ----------------------------------------------------------------------------------------

def literal_of(value: Const, exact_type: bool = True) -> exp.Expression:
    """The literal of a value: ``3``, ``-3``, ``0.05``, ``0.5e0`` (a DOUBLE), TRUE, ``DATE 'x'``,
    ``TIMESTAMP 'x'``; with ``exact_type``, integers and decimals as CASTs to their DuckDB type."""
    if value.type == BOOLEAN:
        return exp.Boolean(this=value.value)
    if value.type in (DATE, TIMESTAMP):
        return temporal_literal(value.value)
    if value.type == DOUBLE:
        text = repr(abs(value.value))
        text = text if "e" in text else f"{text}e0"
    elif value.type == DECIMAL:
        text = format(value.value.copy_abs(), "f")   # abs() would round to 28 digits
        text = text if "." in text else f"{text}."   # 5. is a DECIMAL(1,0); 5 would be an integer
    else:
        text = str(abs(value.value))
    literal: exp.Expression = exp.Literal.number(text)
    if math.copysign(1.0, value.value) < 0 if value.type == DOUBLE else value.value < 0:
        literal = exp.Neg(this=literal)
    if exact_type and value.type != DOUBLE and not value.literal:
        to = "INT" if value.type == INTEGER else value.type if value.type == BIGINT else \
            f"DECIMAL({value.width}, {value.scale})"
        literal = exp.Cast(this=literal, to=exp.DataType.build(to))
    return literal
