"""Totality by construction: the typing that proves no row can make a user expression fail.

After DuckDB has bound the rewritten query, an error, or a string large enough to exhaust memory,
would depend on the rows, and its presence alone would tell neighbouring databases apart. So every
user expression is typed at plan time:

* ``family``: the kind of value it yields (number, string, boolean, temporal), from the columns'
  DuckDB types; an aggregate that needs a number refuses anything else.
* ``is_total``: whether it provably cannot raise on any row (columns, literals, comparisons of one
  safe family, DATE with DATE and TIMESTAMP with TIMESTAMP included, a DECIMAL column with number
  literals that its common type with them holds, choices of one kind, divisions by a divisor never
  0, AND/OR/NOT/IS NULL of those; an operation guarded by sql/guard.py is total too). Every other
  operation is guarded on its own (sql/guard.py ``per_operation``), which turns its error on a row
  into NULL; the functions allowed are those whose errors ``TRY()`` catches.
* ``narrow_dates``: the literals a DATE or TIMESTAMP column is compared with, written in the column's
  type (``d > '2020-06-01'`` and ``d <= TIMESTAMP '1998-09-02 00:00:00'`` compare DATEs), as DuckDB
  itself converts them, so the comparison is total and DuckDB can push it into the scan.
* ``literals_as_doubles``: non-integer number literals become DOUBLE literals (``0.5`` -> ``0.5e0``).
  DuckDB types ``0.5`` as DECIMAL and then casts the other operand to a DECIMAL that a large value
  overflows. (Not folding: constant folding is frontend/fold.py's, before validation.)
* ``string_length``: a bound ``a * S + b`` on the length of a string expression, S the longest
  string a row holds; a query whose strings could grow more than ``MAX_STRING_GROWTH`` times (nested
  REPLACE) is refused.

>>> import sqlglot
>>> types = {"age": "TINYINT", "income": "BIGINT", "zip": "VARCHAR"}.get
>>> is_total(sqlglot.parse_one("age > 5 AND zip = 'x'"), types), is_total(sqlglot.parse_one("-age > 5"), types)
(True, False)
>>> string_length(sqlglot.parse_one("replace(replace(zip, 'a', 'bb'), 'b', 'ccc')"), types)
(6.0, 0.0)
"""
from __future__ import annotations

import datetime
from typing import Callable

from sqlglot import exp

from dpsql.sql.build import TryOp
from dpsql.sql.compare import pairing
from dpsql.sql.number_types import literal_text, number_type
from dpsql.sql.literals import is_date, parse_date, parse_timestamp, temporal_literal, temporal_value
from dpsql.sql.types import BOOLEAN, NUMBER, SAFE_NUMBERS, STRING, TEMPORAL, base_type, temporal_type, type_family

Types = Callable[[str], "str | None"]   # column name -> DuckDB type (None: unknown)

COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
LOGIC = (exp.And, exp.Or, exp.Not)
# Integer literals up to this magnitude compare with every safe column type without an error.
MAX_TOTAL_INTEGER = 2 ** 63 - 1
MAX_STRING_GROWTH = 64          # a string expression may be at most this many times the longest input
MAX_STRING_CONSTANT = 1 << 20   # ... plus this many characters
# Longest text DuckDB makes of a non-string value (a DOUBLE, a HUGEINT, a timestamp with zone).
CAST_TEXT = 64
# UTF-8 case mapping can lengthen a string (e.g. U+023F to U+2C7E: 2 to 3 bytes).
CASE_GROWTH = 2


def _cast_target(node: exp.Cast) -> str:
    to = node.to
    return to.sql(dialect="duckdb").upper() if isinstance(to, exp.DataType) else str(to).upper()


def is_number_literal(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string


def is_integer_literal(node: exp.Expression) -> bool:
    return is_number_literal(node) and node.this.isdigit()


_NUMBER_FUNCS = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Abs, exp.Sign, exp.Round,
                 exp.Floor, exp.Ceil, exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Pow, exp.Length, exp.Year, exp.Month,
                 exp.Day, exp.Quarter, exp.DayOfWeek, exp.DayOfYear, exp.Extract)
_STRING_FUNCS = (exp.Lower, exp.Upper, exp.Trim, exp.Substring, exp.Concat, exp.DPipe, exp.Left, exp.Right,
                 exp.Replace)
_BOOLEAN_FUNCS = (*COMPARISONS, *LOGIC, exp.Like, exp.ILike, exp.StartsWith, exp.Contains, exp.RegexpLike,
                  exp.IsNan, exp.IsInf, exp.In, exp.Between, exp.Is)
_CHOICES = (exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least)


def _branches(node: exp.Expression) -> list[exp.Expression]:
    """The expressions a CASE/IF/COALESCE/NULLIF/GREATEST/LEAST may return."""
    if isinstance(node, exp.Case):
        return [i.args.get("true") for i in node.args.get("ifs", [])] + [node.args.get("default")]
    if isinstance(node, exp.If):
        return [node.args.get("true"), node.args.get("false")]
    if isinstance(node, exp.Nullif):
        return [node.this]
    return [node.this, *node.expressions]


def family(node: exp.Expression | None, types: Types) -> str | None:
    """The kind of value ``node`` yields: NUMBER, STRING, BOOLEAN, TEMPORAL, "null", or None (unknown/mixed)."""
    if node is None or isinstance(node, exp.Null):
        return "null"
    if isinstance(node, (exp.Paren, TryOp)):
        return family(node.this, types)
    if isinstance(node, exp.Column):
        return type_family(types(node.name.lower()))
    if isinstance(node, exp.Literal):
        return STRING if node.is_string else NUMBER
    if isinstance(node, exp.Boolean):
        return BOOLEAN
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return type_family(_cast_target(node))
    if isinstance(node, (exp.Add, exp.Sub)):
        # DATE + INTEGER is a DATE; a string operand is cast (and may fail): not a number for sure.
        kinds = {family(node.this, types), family(node.expression, types)} - {"null"}
        if TEMPORAL in kinds:
            return TEMPORAL
        return NUMBER if kinds <= {NUMBER, BOOLEAN} else None
    if isinstance(node, _NUMBER_FUNCS):
        return NUMBER
    if isinstance(node, _STRING_FUNCS):
        return STRING
    if isinstance(node, _BOOLEAN_FUNCS):
        return BOOLEAN
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        return TEMPORAL
    if isinstance(node, _CHOICES):
        kinds = {family(b, types) for b in _branches(node)} - {"null"}
        return kinds.pop() if len(kinds) == 1 else ("null" if not kinds else None)
    return None


# Comparable kinds besides the families: a DATE and a TIMESTAMP column or literal (each only with its own).
DATE_KIND, TIMESTAMP_KIND = "date", "timestamp"


def _safe_operand(node: exp.Expression, types: Types) -> str | None:
    """The family of a column or plain literal whose comparisons in that family cannot raise, else None."""
    if isinstance(node, exp.Paren):
        return _safe_operand(node.this, types)
    value = temporal_value(node)   # a DATE or TIMESTAMP literal that DuckDB reads as that value
    if value is not None:
        return DATE_KIND if is_date(value) else TIMESTAMP_KIND
    if isinstance(node, exp.Neg) and is_number_literal(node.this):
        # -1.5e0 as 1.5e0; an integer down to BIGINT's smallest
        return NUMBER if not node.this.this.isdigit() or int(node.this.this) <= MAX_TOTAL_INTEGER + 1 else None
    if is_number_literal(node):
        # An integer literal compares with any safe column; a non-integer one is written as a DOUBLE.
        text = node.this
        return NUMBER if not text.isdigit() or int(text) <= MAX_TOTAL_INTEGER else None
    if isinstance(node, exp.Literal):
        return STRING
    if isinstance(node, exp.Boolean):
        return BOOLEAN
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Column):
        return _type_kind(types(node.name.lower()))
    if isinstance(node, exp.TryCast) and is_total(node.this, types):
        return _type_kind(_cast_target(node))   # a value of the target type, or NULL
    if isinstance(node, TryOp):
        return _guarded_kind(node.this, types)
    if isinstance(node, (_SAME_NUMBER, _DOUBLE_RESULT)) and is_total(node, types):
        return _guarded_kind(node, types)
    if isinstance(node, _CHOICES):
        return _choice_kind(node, types)
    if isinstance(node, (*_STRING_OPERATIONS, exp.Length)) and is_total(node, types):
        return STRING if isinstance(node, _STRING_OPERATIONS) else NUMBER   # LENGTH: a BIGINT
    if isinstance(node, exp.Cast) and is_total(node, types):
        return _type_kind(_cast_target(node))   # a number as DOUBLE (a stage's released value: stages.literal)
    return NUMBER if _calendar_part(node, types) else None   # a BIGINT, total itself


def _type_kind(sql_type: str | None) -> str | None:
    """The comparable kind of a value of ``sql_type``: a safe number, a DATE, a TIMESTAMP, a string or a
    boolean; None for the rest (DECIMAL, UHUGEINT, other temporals), whose comparisons can cast."""
    if base_type(sql_type) in SAFE_NUMBERS:
        return NUMBER
    temporal = temporal_type(sql_type)
    if temporal is not None:
        return DATE_KIND if temporal == "DATE" else TIMESTAMP_KIND
    kind = type_family(sql_type)
    return kind if kind in (STRING, BOOLEAN) else None


# Operations whose result is a safe number when their operands are (an integer type, widened, or a
# DOUBLE: never a DECIMAL, which a non-integer literal operand would make it).
_SAME_NUMBER = (exp.Add, exp.Sub, exp.Mul, exp.IntDiv, exp.Mod, exp.Neg, exp.Abs, exp.Sign, exp.Round, exp.Floor,
                exp.Ceil)
# Operations DuckDB computes in DOUBLE whatever number types their operands have.
_DOUBLE_RESULT = (exp.Div, exp.Sqrt, exp.Ln, exp.Log, exp.Exp, exp.Pow)


def _guarded_kind(node: exp.Expression, types: Types) -> str | None:
    """The comparable kind of TRY(node): NULL where it failed, else a value of node's own type."""
    node = node.unnest()
    operands = [c for c in node.iter_expressions()]
    if isinstance(node, _SAME_NUMBER):
        safe = all(_safe_operand(o, types) == NUMBER and not _decimal_literal(o) for o in operands)
        return NUMBER if safe else None
    if isinstance(node, _DOUBLE_RESULT):
        return NUMBER if all(family(o, types) == NUMBER for o in operands) else None
    if isinstance(node, exp.Length):
        return NUMBER   # a BIGINT, whatever it measures
    kind = family(node, types)
    return kind if kind in (STRING, BOOLEAN) else None


def _decimal_literal(node: exp.Expression) -> bool:
    """A number literal DuckDB reads as a DECIMAL (``0.5``; not ``5``, not ``0.5e0``)."""
    node = node.unnest()
    node = node.this if isinstance(node, exp.Neg) else node
    return is_number_literal(node) and not node.this.isdigit() and "e" not in node.this.lower()


def _choice_kind(node: exp.Expression, types: Types) -> str | None:
    """The comparable kind of a CASE/IF/COALESCE/NULLIF/GREATEST/LEAST that cannot fail: its
    conditions booleans, its operands total and of one kind, so DuckDB's common type of them is a
    cast that cannot fail (integers widened, or to DOUBLE; never a string to a number)."""
    conditions = [i.this for i in node.args.get("ifs", [])] if isinstance(node, exp.Case) else (
        [node.this] if isinstance(node, exp.If) else [])
    operands = _branches(node) + ([node.expression] if isinstance(node, exp.Nullif) else [])
    if not all(is_total(c, types) and family(c, types) in (BOOLEAN, "null") for c in conditions):
        return None
    if not all(is_total(o, types) and not _decimal_literal(o) for o in operands if o is not None):
        return None
    kinds = {_safe_operand(o, types) if o is not None else "null" for o in operands} - {"null"}
    if None in kinds or len(kinds) > 1:
        return None
    return kinds.pop() if kinds else "null"


def _operands(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, COMPARISONS):
        return [node.this, node.expression]
    if isinstance(node, exp.Between):
        return [node.this, node.args.get("low"), node.args.get("high")]
    return [node.this, *node.expressions]


def is_total(node: exp.Expression | None, types: Types) -> bool:
    """Whether evaluating ``node`` can never raise, whatever a row holds (else sql/guard.py guards its
    operations that can)."""
    if node is None:
        return True
    if isinstance(node, exp.Paren):
        return is_total(node.this, types)
    if isinstance(node, (exp.Column, exp.Literal, exp.Boolean, exp.Null, TryOp)):
        return True   # TryOp: NULL where its one operation fails, its operands total (sql/guard.py)
    if isinstance(node, exp.TryCast):
        return is_total(node.this, types)   # NULL where the cast fails
    if isinstance(node, exp.Cast) and _cast_target(node) == "DOUBLE":
        return family(node.this, types) == NUMBER and is_total(node.this, types)   # every number has a DOUBLE
    if isinstance(node, exp.Neg) and is_number_literal(node.this):
        return True   # a constant
    if isinstance(node, exp.Div):
        # DuckDB divides numbers in DOUBLE (no error); a divisor that may be 0 is NULLIF(d, 0) (sql/guard.py)
        return all(family(o, types) == NUMBER and is_total(o, types) for o in (node.this, node.expression)) \
            and nonzero_divisor(node.expression)
    if isinstance(node, exp.Nullif) and _is_zero(node.expression):
        return family(node.this, types) == NUMBER and is_total(node.this, types)   # x = 0: no cast can fail
    if isinstance(node, _CHOICES):
        return _choice_kind(node, types) is not None
    if isinstance(node, LOGIC):
        # Operands are cast to BOOLEAN: total only when they already are booleans.
        children = [c for c in (node.this, node.args.get("expression")) if c is not None]
        return all(is_total(c, types) and family(c, types) in (BOOLEAN, "null") for c in children)
    if isinstance(node, exp.Is):
        return isinstance(node.expression, exp.Null) and is_total(node.this, types)
    if isinstance(node, (exp.Like, exp.ILike, exp.StartsWith, exp.Contains)) and not node.args.get("escape"):
        # A string column matched against a string literal: no cast, no pattern error (no ESCAPE).
        return _safe_operand(node.this, types) == STRING and isinstance(node.expression, exp.Literal) \
            and node.expression.is_string
    if isinstance(node, COMPARISONS) and all(isinstance(o.unnest(), exp.Column) for o in _operands(node)):
        # Two columns: the comparison builder's pairing says whether DuckDB's own cast can fail.
        found = pairing(*(types(o.unnest().name.lower()) for o in _operands(node)))
        return found is not None and found.total
    if isinstance(node, (*COMPARISONS, exp.Between)) or (
            isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest")):
        if _decimal_with_literals(node, types):
            return True
        kinds = {_safe_operand(o, types) for o in _operands(node)}
        return None not in kinds and len(kinds - {"null"}) <= 1
    return _total_operation(node, types) or _calendar_part(node, types)


# String operations DuckDB computes on any string without an error (how long their result may grow is
# frontend/rules/expressions.py's bounded_strings, refused before planning: string_too_long).
_STRING_OPERATIONS = (exp.Lower, exp.Upper, exp.Replace)
# A number operation that cannot fail where its result type says so: DOUBLE arithmetic is IEEE's
# (FLOAT's too, but Spark computes it in DOUBLE: kept guarded, its TryOp refused there) (an overflow is an infinity, 0 * inf a NaN, never an error), the negation or absolute value
# of a DECIMAL has the digits of its operand, FLOOR and CEIL of any number fit their result's type
# (an integer is converted to DOUBLE; ROUND keeps it), ROUND too (half away from zero).
_IEEE = (exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Abs)


def _total_operation(node: exp.Expression, types: Types) -> bool:
    """The string and number operations above, their operands total of their family; an integer
    division or remainder by an integer literal other than 0 (and, for ``//``, -1: the smallest
    integer's quotient by -1 overflows; its remainder is 0); tests/sql/test_totality.py tries each on
    the extremes of every type."""
    operands = [o for o in node.iter_expressions()]
    want = STRING if isinstance(node, (*_STRING_OPERATIONS, exp.Length)) else NUMBER
    if not all(family(o, types) == want and is_total(o, types) for o in operands[:1]):
        return False
    if isinstance(node, _STRING_OPERATIONS + (exp.Length,)):
        return isinstance(node, (exp.Lower, exp.Upper, exp.Length)) and len(operands) == 1 or all(
            isinstance(o, exp.Literal) and o.is_string for o in operands[1:])
    if isinstance(node, (exp.Floor, exp.Ceil, exp.Round)):   # ROUND(x) too (sql/guard.py writes it before a cast)
        return len(operands) == 1 and number_type(operands[0], types) is not None
    if isinstance(node, _IEEE):
        kind = number_type(node, types) or ""
        exact = kind == "DOUBLE" or isinstance(node, (exp.Neg, exp.Abs)) and (kind == "FLOAT" or kind.startswith("DECIMAL"))
        return exact and all(family(o, types) == NUMBER and is_total(o, types) for o in operands)
    if isinstance(node, (exp.IntDiv, exp.Mod)):
        divisor = node.expression.unnest()
        value = _integer_value(divisor)
        return value not in (None, 0) and (value != -1 or isinstance(node, exp.Mod)) and \
            number_type(node, types) is not None
    return False


def _integer_value(node: exp.Expression) -> int | None:
    """The value of a (negated) integer literal."""
    text = literal_text(node)
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def _is_zero(node: exp.Expression) -> bool:
    return is_number_literal(node) and float(node.this) == 0


def nonzero_divisor(node: exp.Expression) -> bool:
    """A divisor that is never 0: a number literal other than 0, NULLIF(d, 0), or the ratio rule's
    ``CASE WHEN d > 0 THEN d END`` (plan/outputs.py ``ratios``): NULL where d would be 0."""
    node = node.unnest()
    literal = node.this if isinstance(node, exp.Neg) else node
    if is_number_literal(literal):
        return float(literal.this) != 0
    if isinstance(node, exp.Case) and len(node.args.get("ifs", [])) == 1 and node.args.get("default") is None:
        when = node.args["ifs"][0]
        test = when.this
        return isinstance(test, exp.GT) and _is_zero(test.expression) and test.this == when.args.get("true")
    return isinstance(node, exp.Nullif) and _is_zero(node.expression)


def _literal_type(node: exp.Expression) -> str | None:
    """The type DuckDB reads a (negated) number literal as: DOUBLE (``0.05e0``), DECIMAL(p, s) of its
    own digits (``24``, ``0.05``: DuckDB widens such a literal only as far as its digits need); a
    number literal cast to DOUBLE (an earlier stage's released value, frontend/stages.py) a DOUBLE."""
    node = node.this if isinstance(node, exp.Neg) else node
    if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast) and _cast_target(node) == "DOUBLE":
        return "DOUBLE" if _literal_type(node.this) is not None else None
    if not is_number_literal(node):
        return None
    if "e" in node.this.lower():
        return "DOUBLE"
    whole, _, fraction = node.this.partition(".")
    if not (whole + fraction).isdigit():
        return None
    return f"DECIMAL({max(len(whole.lstrip('0')) + len(fraction), 1)},{len(fraction)})"


def _decimal_with_literals(node: exp.Expression, types: Types) -> bool:
    """A DECIMAL column compared with number literals only (TPC-H's ``l_quantity < 24``, ``l_discount
    BETWEEN 0.05e0 AND 0.07e0``), where the comparison builder's pairing of the column with the
    literals' common type casts nothing that can fail: DuckDB casts all of them to DOUBLE when one is a
    DOUBLE (a DECIMAL never overflows it), else to one DECIMAL that holds every integer part and the
    largest scale in 38 digits. Past that, the cast of a literal fails, on every row that reaches it:
    its presence would say whether any row does (TRY() stays; tests/sql/test_totality.py)."""
    operands = [o.unnest() for o in _operands(node) if o is not None]
    columns = [types(o.name.lower()) for o in operands if isinstance(o, exp.Column)]
    literals = [_literal_type(o) for o in operands if not isinstance(o, exp.Column)]
    if len(columns) != 1 or base_type(columns[0]) not in ("DECIMAL", "NUMERIC") or not literals or None in literals:
        return False
    if "DOUBLE" in literals:
        common = "DOUBLE"
    else:
        parts = [(int(p) - int(s), int(s)) for p, s in (t[8:-1].split(",") for t in literals if t is not None)]
        whole, scale = max(w for w, _ in parts), max(s for _, s in parts)
        common = f"DECIMAL({whole + scale},{scale})"
    found = pairing(columns[0], common)
    return found is not None and found.total


CALENDAR_FUNCTIONS = (exp.Year, exp.Month, exp.Day, exp.Quarter, exp.DayOfWeek, exp.DayOfYear)
CALENDAR_PARTS = {"YEAR", "MONTH", "DAY", "QUARTER", "DOW", "DOY", "WEEK", "ISODOW"}


def _calendar_part(node: exp.Expression, types: Types) -> bool:
    """YEAR(d), EXTRACT(MONTH FROM d), ...: a calendar field of a DATE or TIMESTAMP column is total
    (NULL for +-infinity; every representable day has one; tests/sql/test_totality.py tries the extremes).
    Bare, not under TRY(), DuckDB keeps the column's statistics: TPC-H Q9's year key then groups as a
    small integer, as the plain query's does."""
    if isinstance(node, exp.Extract):
        part, column = node.this, node.expression
        if not isinstance(part, exp.Var) or part.name.upper() not in CALENDAR_PARTS:
            return False
    elif isinstance(node, CALENDAR_FUNCTIONS):
        column = node.this
    else:
        return False
    return isinstance(column, exp.Column) and temporal_type(types(column.name.lower())) is not None


def literals_as_doubles(node: exp.Expression) -> exp.Expression:
    """Non-integer number literals compared with something, as DOUBLE (``0.5e0``): never a DECIMAL
    the other operand is cast to (in place). Elsewhere (``age + 0.5``, under TRY()) a literal keeps
    DuckDB's DECIMAL semantics (``CAST(2.5 AS INT)`` is 3; as a DOUBLE it would be 2)."""
    for literal in list(node.find_all(exp.Literal)):
        text = literal.this
        parent = literal.parent.parent if isinstance(literal.parent, exp.Neg) else literal.parent
        if not literal.is_string and not text.isdigit() and "e" not in text.lower() and \
                isinstance(parent, (*COMPARISONS, exp.Between, exp.In)):
            literal.set("this", f"{text}e0")
    return node


def narrow_dates(node: exp.Expression, types: Types) -> exp.Expression:
    """In every comparison, BETWEEN and IN whose columns are all DATE (or all TIMESTAMP), the literals
    that DuckDB converts to the column's type become literals of that type (in place; returned):

    * a DATE column: a string literal naming a day (``'2020-06-01'``) becomes ``DATE 'x'``, and in a
      comparison (``<``, ``=``, ...) or BETWEEN so does a TIMESTAMP literal at midnight (what ``DATE 'x'
      - INTERVAL 'n' DAY`` folds to);
    * a TIMESTAMP column: a DATE literal becomes ``TIMESTAMP 'x 00:00:00'``, a string literal naming
      an instant ``TIMESTAMP 'x'``.

    The comparison keeps its value on every row: DuckDB casts a string literal to the column's type
    and a DATE literal to a TIMESTAMP at midnight, and compares a DATE column with a TIMESTAMP at
    midnight as the two days (its optimizer narrows the literal). In IN it casts the column instead,
    which fails past the year 294247, so IN keeps the TIMESTAMP; BETWEEN casts the column too, but
    ``a BETWEEN l AND h`` is SQL's ``a >= l AND a <= h``, and those two comparisons narrow: a DATE
    BETWEEN a TIMESTAMP at midnight is then total on both engines (DuckDB's TRY(BETWEEN) was NULL
    past the year 294247, where the comparisons have their value; Spark has no TRY for it).
    ``tests/sql/test_totality.py`` checks it on the calendar's extremes and infinities.
    """
    for pred in list(node.find_all(*COMPARISONS, exp.Between, exp.In)):
        if isinstance(pred, exp.In) and (pred.args.get("query") or pred.args.get("unnest")):
            continue
        operands = [o for o in _operands(pred) if o is not None]
        columns = {temporal_type(types(o.unnest().name.lower())) for o in operands if isinstance(o.unnest(), exp.Column)}
        if len(columns) != 1 or None in columns:
            continue
        target = columns.pop()
        for operand in operands:
            value = _as_temporal(operand.unnest(), target, comparison=isinstance(pred, (*COMPARISONS, exp.Between)))
            if value is not None:
                operand.unnest().replace(temporal_literal(value))
    return node


def _as_temporal(node: exp.Expression, target: str, comparison: bool):
    """The value of a literal in ``target`` type (DATE or TIMESTAMP), if DuckDB converts it exactly."""
    if isinstance(node, exp.Literal) and node.is_string:
        return parse_date(node.this) if target == "DATE" else parse_timestamp(node.this)
    value = temporal_value(node)
    if value is None:
        return None
    if target == "TIMESTAMP" and is_date(value):
        return parse_timestamp(value.isoformat())
    if target == "DATE" and comparison and isinstance(value, datetime.datetime) and value.time() == datetime.time():
        return value.date()
    return None


def string_length(node: exp.Expression | None, types: Types, seen: list | None = None) -> tuple[float, float] | None:
    """(a, b): ``node``'s text is at most a * S + b characters long, S the longest string of the row;
    None when no such bound follows (a REPLACE whose pattern or replacement is not a literal).
    ``seen`` collects the bound of every sub-expression (a large inner string counts even when only
    its length is used)."""
    bound = _length(node, types, seen if seen is not None else [])
    if seen is not None:
        seen.append(bound)
    return bound


def _length(node: exp.Expression | None, types: Types, seen: list) -> tuple[float, float] | None:
    if node is None or isinstance(node, (exp.Null, exp.Boolean)):
        return (0.0, 0.0)
    if isinstance(node, exp.Literal):
        return (0.0, float(len(node.this)))
    if isinstance(node, exp.Column):
        return (1.0, 0.0) if family(node, types) in (STRING, None) else (0.0, float(CAST_TEXT))
    if isinstance(node, exp.Replace):
        pattern, replacement = node.expression, node.args.get("replacement")
        inner = string_length(node.this, types, seen)
        if inner is None or not (isinstance(pattern, exp.Literal) and pattern.is_string and pattern.this) or not (
                replacement is None or (isinstance(replacement, exp.Literal) and replacement.is_string)):
            return None
        # Each match of a non-empty pattern (>= len(pattern) characters) becomes len(replacement).
        factor = max(1.0, len(replacement.this if replacement is not None else "") / len(pattern.this))
        return (inner[0] * factor, inner[1] * factor)
    parts = [string_length(c, types, seen) for c in node.iter_expressions()]
    if None in parts:
        return None
    if isinstance(node, exp.Paren):
        return parts[0]
    if family(node, types) not in (STRING, None) and not isinstance(node, _CHOICES):
        return (0.0, float(CAST_TEXT))   # a number, boolean or date: short as text, whatever its inputs
    if isinstance(node, (exp.Concat, exp.DPipe)):
        return (sum(p[0] for p in parts), sum(p[1] for p in parts))
    if isinstance(node, (exp.Lower, exp.Upper)):
        return (parts[0][0] * CASE_GROWTH, parts[0][1] * CASE_GROWTH)
    if isinstance(node, (exp.Substring, exp.Left, exp.Right, exp.Trim)):
        return parts[0]   # a part of its first argument
    # Substrings, trims and choices: no longer than the longest of their inputs.
    return (max((p[0] for p in parts), default=0.0), max((p[1] for p in parts), default=0.0))


def string_too_long(node: exp.Expression, types: Types) -> str | None:
    """Why ``node`` could build a string too large to be safe, or None."""
    seen: list = []
    if string_length(node, types, seen) is None or None in seen:
        return "REPLACE takes a non-empty string literal pattern and a string literal replacement"
    a, b = max(p[0] for p in seen), max(p[1] for p in seen)
    if a > MAX_STRING_GROWTH or b > MAX_STRING_CONSTANT:
        return (f"it could build a string {a:g} times as long as the longest value in a row (at most "
                f"{MAX_STRING_GROWTH} allowed): whether it ran out of memory would depend on the data")
    return None
