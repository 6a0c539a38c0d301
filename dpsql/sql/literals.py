"""DATE and TIMESTAMP literals: read strictly, written in one form.

A date literal is ``DATE 'YYYY-MM-DD'`` and a timestamp literal ``TIMESTAMP 'YYYY-MM-DD[ HH:MM:SS[.f]]'``
(sqlglot reads both as a CAST of a string). Only texts of exactly these forms, naming a real day of
the years 1 to 9999, count as literals here: DuckDB reads every such text, as the same value
(``tests/frontend/test_folding.py`` checks it), so a literal accepted here cannot fail to convert,
whatever the data. Anything else (``DATE '2020-02-30'``, ``'infinity'``, other spellings) is left to DuckDB, under
TRY() where it could fail.

>>> import sqlglot
>>> temporal_value(sqlglot.parse_one("DATE '2020-02-29'", read="duckdb"))
datetime.date(2020, 2, 29)
>>> temporal_value(sqlglot.parse_one("DATE '2021-02-29'", read="duckdb")) is None
True
>>> temporal_literal(datetime.datetime(1998, 9, 2)).sql("duckdb")
"CAST('1998-09-02 00:00:00' AS TIMESTAMP)"
"""
from __future__ import annotations

import datetime
import re

from sqlglot import exp

from dpsql.sql.build import cast

DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")
TIMESTAMP_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?")
_TIMESTAMP_DTYPES = (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.DATETIME)


def parse_date(text: str) -> datetime.date | None:
    """The day a ``YYYY-MM-DD`` text names, or None (another form, or no such day)."""
    if not DATE_TEXT.fullmatch(text):
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        return None


def parse_timestamp(text: str) -> datetime.datetime | None:
    """The instant a ``YYYY-MM-DD[ HH:MM:SS[.ffffff]]`` text names, or None."""
    if not TIMESTAMP_TEXT.fullmatch(text):
        return None
    date, _, time = text.partition(" ")
    day = parse_date(date)
    if day is None:
        return None
    if not time:
        return datetime.datetime(day.year, day.month, day.day)
    clock, _, fraction = time.partition(".")
    try:
        hour, minute, second = (int(p) for p in clock.split(":"))
        return datetime.datetime(day.year, day.month, day.day, hour, minute, second, int(fraction.ljust(6, "0")))
    except ValueError:
        return None


def is_date(value) -> bool:
    """A ``datetime.date`` that is not a ``datetime.datetime`` (Python's datetime is a date too)."""
    return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)


def temporal_value(node: exp.Expression | None) -> datetime.date | datetime.datetime | None:
    """The value of a strict DATE literal (a ``date``) or TIMESTAMP literal (a ``datetime``), else None."""
    if not isinstance(node, exp.Cast) or not isinstance(node.this, exp.Literal) or not node.this.is_string:
        return None
    to = node.to
    if not isinstance(to, exp.DataType) or to.expressions:
        return None
    if to.this == exp.DataType.Type.DATE:
        return parse_date(node.this.this)
    if to.this in _TIMESTAMP_DTYPES:
        return parse_timestamp(node.this.this)
    return None


def text_of(value: datetime.date | datetime.datetime) -> str:
    """The literal text of a date (``1998-09-02``) or timestamp (``1998-09-02 00:00:00[.ffffff]``)."""
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return value.isoformat()


def temporal_literal(value: datetime.date | datetime.datetime) -> exp.Cast:
    """``DATE 'x'`` for a date, ``TIMESTAMP 'x'`` for a datetime (printed as CASTs)."""
    kind = "TIMESTAMP" if isinstance(value, datetime.datetime) else "DATE"
    return exp.Cast(this=exp.Literal.string(text_of(value)), to=exp.DataType.build(kind))


def key_text(value) -> str:
    """A key as SQL text that casts back to itself (booleans lower-case, dates in ISO form)."""
    if isinstance(value, bool):
        return str(value).lower()
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def key_literal(value, sql_type: str) -> exp.Expression:
    """A declared key as a literal of its column's type (keys were checked to cast cleanly at connect)."""
    return cast(exp.Literal.string(key_text(value)), sql_type)

