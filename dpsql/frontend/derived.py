"""Public group keys derived from a column's declared bounds, never from the data (issue 12, item 4).

A GROUP BY item that reads a column without declared keys is released through DP partition
selection (it needs delta), unless its groups follow from the policy alone:

* ``YEAR(d)``, ``EXTRACT(YEAR FROM d)``, ``date_trunc('year'|'quarter'|'month', d)`` of a DATE or
  TIMESTAMP column with date bounds: one group per year (quarter, month) the bounds touch
  (``o_orderdate`` in 1992-01-01..1998-12-31: the years 1992..1998);
* ``FLOOR(x / w)`` and, for an integer column, ``x // w`` (w a positive whole number) of a column with
  number bounds: one group per bin of width w the bounds touch (``age`` in 0..100, ``FLOOR(age / 10) *
  10``: 0, 10, ..., 100).

The column may sit only inside such calendar functions or bins (one kind throughout the item); the
item may do anything with their value (``FLOOR(age / 10) * 10``, ``YEAR(d) - 1990``). For each group
one value of the column in it stands for the group (the start of the period, the bin's lower end
clipped to the bounds): the key domain is the item's expression over those values, computed by the
engine from these literals (``lower/keys.py key_domain``, as for declared keys), so it has DuckDB's
exact types and values. Rows outside the periods or bins the bounds touch are dropped (``condition``),
as rows whose value is not a declared key are. A domain of more than ``MAX_DERIVED_KEYS`` groups is
not derived (``TooManyKeys``): the item is then a private key, refused without delta (DP304).

Two more things follow from the policy and the query alone: a ``CASE``/``IF`` item whose branches
are all literals has those literals as its groups (``literal_branches``), and a number column whose
keys are numbers is bounded by them (``key_bounds``).

>>> import datetime, sqlglot
>>> from dpsql.policy import ColumnPolicy
>>> d = ColumnPolicy("d", dates=(datetime.date(1992, 3, 1), datetime.date(1998, 12, 31)), sql_type="DATE")
>>> keys = derive(sqlglot.parse_one("EXTRACT(YEAR FROM d)", read="duckdb"), d)
>>> keys.description, len(keys.values), keys.condition.sql("duckdb")
('years 1992..1998 from the bounds of d (1992-03-01..1998-12-31)', 7, "d BETWEEN CAST('1992-01-01' AS DATE) AND CAST('1998-12-31' AS DATE)")
>>> age = ColumnPolicy("age", lower=0, upper=100, sql_type="BIGINT")
>>> derive(sqlglot.parse_one("FLOOR(age / 10) * 10", read="duckdb"), age).values
(0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
"""
from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

from sqlglot import exp

import dataclasses

from dpsql.sql.literals import temporal_literal
from dpsql.sql.types import BOOLEAN, INTEGER_TYPES, NUMBER, base_type, temporal_type, type_family
from dpsql.policy.bounds import MAX_BOUND
from dpsql.policy.model import ColumnPolicy, TablePolicy

MAX_DERIVED_KEYS = 10_000   # groups one derived GROUP BY column may release
MONTHS = {"YEAR": 12, "QUARTER": 3, "MONTH": 1}   # the calendar periods, in months
PERIOD_NAMES = {"YEAR": "years", "QUARTER": "quarters", "MONTH": "months"}


@dataclass(frozen=True)
class DerivedKeys:
    """The groups of one column of a GROUP BY item, from the column's bounds alone."""
    column: str
    values: tuple                  # one value of the column per group, in its type: the item over them is the domain
    condition: exp.Expression      # over the column: the rows the groups hold (others are dropped)
    description: str               # for explain: "years 1992..1998 from the bounds of o_orderdate (...)"


@dataclass(frozen=True)
class TooManyKeys:
    """The bounds would give more than MAX_DERIVED_KEYS groups: nothing is derived."""
    column: str
    count: int
    description: str


def derive(expression: exp.Expression, column: ColumnPolicy) -> DerivedKeys | TooManyKeys | None:
    """The groups ``column`` contributes to the GROUP BY item ``expression`` (unqualified), derived from
    its declared bounds, or None when the item does not use it as a calendar period or a bin."""
    use = _use(expression, column.name)
    if use is None:
        return None
    kind, parameter = use
    temporal = temporal_type(column.sql_type)
    if kind == "calendar" and column.dates is not None and temporal is not None:
        return _periods(column, parameter, temporal)
    if kind in ("floor", "trunc") and column.bounded:
        return _bins(column, kind, parameter)
    return None


def key_bounds(table: TablePolicy) -> TablePolicy:
    """The table with bounds implied by declared keys: a numeric (or BOOLEAN) column whose keys are
    all its values may be clamped to [min, max] of them (``married: {keys: [0, 1]}`` makes
    ``AVG(married)`` summable). Read from the policy alone; declared bounds win. A column whose
    keys are not numbers (a VARCHAR column with keys [1, 2]) gets none.

    >>> t = TablePolicy("t", "row", columns={"m": ColumnPolicy("m", keys=(0, 1), sql_type="BIGINT")})
    >>> key_bounds(t).columns["m"].lower, key_bounds(t).columns["m"].upper
    (0.0, 1.0)
    """
    implied = {}
    for name, column in table.columns.items():
        if column.keys is None or column.bounded or column.dates is not None or \
                type_family(column.sql_type) not in (NUMBER, BOOLEAN):
            continue
        try:
            values = [float(k) for k in column.keys]
        except (TypeError, ValueError):   # keys not converted to the column's type (not bound yet)
            continue
        if all(math.isfinite(v) and abs(v) <= MAX_BOUND for v in values):
            implied[name] = dataclasses.replace(column, lower=min(values), upper=max(values))
    return dataclasses.replace(table, columns={**table.columns, **implied}) if implied else table


def literal_branches(expression: exp.Expression) -> tuple[exp.Expression, ...] | None:
    """The values a GROUP BY item ``CASE WHEN ... THEN <literal> ... [ELSE <literal>] END`` (or
    ``IF(c, <literal>, <literal>)``) can take, NULL included when no ELSE says otherwise; None when
    some branch is not a literal. Whatever its conditions read, a row's value is one of them (or NULL
    where the CASE fails on it, under TRY: a group outside these, never released), so these groups
    follow from the query alone, as a fixed set of filtered counts would.

    >>> [b.sql() for b in literal_branches(exp.maybe_parse("CASE WHEN age < 18 THEN 'child' END"))]
    ["'child'", 'NULL']
    """
    while isinstance(expression, exp.Paren):
        expression = expression.this
    if isinstance(expression, exp.Case):
        values = [i.args.get("true") for i in expression.args.get("ifs") or []]
        values.append(expression.args.get("default") or exp.Null())
    elif isinstance(expression, exp.If):
        values = [expression.args.get("true"), expression.args.get("false") or exp.Null()]
    else:
        return None
    if not values[:-1] or not all(_is_literal(v) for v in values):
        return None
    return tuple(dict.fromkeys(v.unnest() for v in values))


def branch_choice(branches: tuple[exp.Expression, ...], index: exp.Expression) -> exp.Expression:
    """``CASE index WHEN 0 THEN b0 WHEN 1 THEN b1 ... END``: the item's branches as one expression of
    DuckDB's common type of them, which is the CASE's own type (so its groups join with the rows')."""
    return exp.Case(this=index, ifs=[exp.If(this=exp.Literal.number(i), true=b.copy()) for i, b in enumerate(branches)])


def _is_literal(node: exp.Expression | None) -> bool:
    node = node.unnest() if node is not None else None
    if isinstance(node, exp.Neg):
        node = node.this
        return isinstance(node, exp.Literal) and not node.is_string
    return isinstance(node, (exp.Literal, exp.Boolean, exp.Null))


# --- recognising the item ----------------------------------------------------------------------------

def _use(expression: exp.Expression, name: str) -> tuple[str, object] | None:
    """("calendar", unit) or ("floor"/"trunc", width) if every reference to the column sits in such a
    period or bin, all alike; else None."""
    uses = {_context(c) for c in expression.find_all(exp.Column) if c.name.lower() == name}
    return uses.pop() if len(uses) == 1 and None not in uses else None


def _up(node: exp.Expression) -> tuple[exp.Expression, exp.Expression | None]:
    """The node's parent past parentheses, and the child of that parent on the way (the node or a Paren)."""
    child, parent = node, node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    return child, parent


def _context(column: exp.Column) -> tuple[str, object] | None:
    child, parent = _up(column)
    if parent is None:
        return None
    if isinstance(parent, exp.Year) and child.arg_key == "this":
        return "calendar", "YEAR"
    if isinstance(parent, exp.Extract) and child.arg_key == "expression" and parent.this.name.upper() == "YEAR":
        return "calendar", "YEAR"
    if isinstance(parent, (exp.TimestampTrunc, exp.DateTrunc)) and child.arg_key == "this":
        unit = parent.args.get("unit")
        return ("calendar", unit.name.upper()) if unit is not None and unit.name.upper() in MONTHS else None
    width = _width(parent.args.get("expression")) if child.arg_key == "this" else None
    if width is None:
        return None
    if isinstance(parent, exp.IntDiv):
        return "trunc", width
    division, outer = _up(parent)
    if isinstance(parent, exp.Div) and isinstance(outer, exp.Floor) and division.arg_key == "this" and \
            outer.args.get("decimals") is None:
        return "floor", width
    return None


def _width(node: exp.Expression | None) -> int | None:
    """A positive whole number literal."""
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit() and int(node.this) > 0:
        return int(node.this)
    return None


# --- calendar periods --------------------------------------------------------------------------------

def _period(moment: datetime.date, months: int) -> int:
    return (moment.year * 12 + moment.month - 1) // months


def _start(period: int, months: int) -> datetime.date:
    year, month = divmod(period * months, 12)
    return datetime.date(year, month + 1, 1)


def _label(period: int, unit: str) -> str:
    start = _start(period, MONTHS[unit])
    if unit == "YEAR":
        return str(start.year)
    return f"{start.year}-Q{(start.month - 1) // 3 + 1}" if unit == "QUARTER" else f"{start.year}-{start.month:02d}"


def _periods(column: ColumnPolicy, unit: str, temporal: str) -> DerivedKeys | TooManyKeys:
    """One group per period the bounds touch, stood for by its first day (its midnight for a TIMESTAMP)."""
    lo, hi = column.dates
    months = MONTHS[unit]
    first, last = _period(lo, months), _period(hi, months)
    description = (f"{PERIOD_NAMES[unit]} {_label(first, unit)}..{_label(last, unit)} from the bounds of "
                   f"{column.name} ({lo}..{hi})")
    if last - first + 1 > MAX_DERIVED_KEYS:
        return TooManyKeys(column.name, last - first + 1, description)
    starts = [_start(p, months) for p in range(first, last + 1)]
    end = _start(last + 1, months) - datetime.timedelta(days=1) if last < _period(datetime.date.max, months) \
        else datetime.date.max
    low: datetime.date = starts[0]
    if temporal == "TIMESTAMP":
        starts = [datetime.datetime.combine(s, datetime.time()) for s in starts]
        low, end = starts[0], datetime.datetime.combine(end, datetime.time.max)
    condition = exp.Between(this=exp.column(column.name), low=temporal_literal(low), high=temporal_literal(end))
    return DerivedKeys(column.name, tuple(starts), condition, description)


# --- bins --------------------------------------------------------------------------------------------

def _truncated(x: int, width: int) -> int:
    """DuckDB's integer ``x // width``: the quotient rounded toward zero."""
    return abs(x) // width * (1 if x >= 0 else -1)


def _bins(column: ColumnPolicy, kind: str, width: int) -> DerivedKeys | TooManyKeys | None:
    """One group per bin of ``width`` the bounds touch, stood for by its lower end (clipped to the bounds)."""
    lo, hi = column.lower, column.upper
    integer = base_type(column.sql_type) in INTEGER_TYPES
    if integer:
        lo, hi = math.ceil(lo), math.floor(hi)
    if lo > hi or (kind == "trunc" and not integer):
        return None   # no integer within the bounds; DuckDB's // of a non-integer is a plain division
    index = (lambda x: _truncated(x, width)) if kind == "trunc" else (lambda x: math.floor(x / width))
    first, last = index(lo), index(hi)
    binned = f"{column.name} // {width}" if kind == "trunc" else f"FLOOR({column.name} / {width})"
    description = (f"{last - first + 1} bins {binned} = {first}..{last} from the bounds of {column.name} "
                   f"({lo:g}..{hi:g})")
    if last - first + 1 > MAX_DERIVED_KEYS:
        return TooManyKeys(column.name, last - first + 1, description)
    values = tuple(min(max(b * width, lo), hi) for b in range(first, last + 1))
    if kind == "floor":   # floor(x / w) in [first, last]  <=>  first * w <= x < (last + 1) * w
        condition = exp.and_(exp.GTE(this=exp.column(column.name), expression=_number(first * width)),
                             exp.LT(this=exp.column(column.name), expression=_number((last + 1) * width)))
    else:                 # trunc(x / w) in [first, last] for an integer x
        low = first * width if first > 0 else (first - 1) * width + 1
        high = (last + 1) * width - 1 if last >= 0 else last * width
        condition = exp.Between(this=exp.column(column.name), low=_number(low), high=_number(high))
    return DerivedKeys(column.name, values, condition, description)


def _number(value: int) -> exp.Expression:
    literal = exp.Literal.number(abs(value))
    return exp.Neg(this=literal) if value < 0 else literal
