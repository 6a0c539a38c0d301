"""DuckDB's type names: the families a type belongs to, the ranges of its integers, and the
predicates frontend, lower and engines ask of a column's type.

>>> type_family("DECIMAL(18,3)"), type_family("TIMESTAMP_NS"), temporal_type("TIMESTAMP_NS")
('number', 'temporal', None)
>>> is_numeric("DECIMAL(18,3)"), is_string("VARCHAR")
(True, True)
"""
from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

NUMBER, STRING, BOOLEAN, TEMPORAL = "number", "string", "boolean", "temporal"

# Integer and float types whose comparisons with each other and with plain literals never raise
# (checked in DuckDB 2.0). DECIMAL (cast to a common DECIMAL that can overflow) and UHUGEINT
# (cast to signed types) are numbers too, but their comparisons run under TRY().
INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT",
                 # other spellings of the same types (sqlglot prints HUGEINT as INT128)
                 "INT", "INT1", "INT2", "INT4", "INT8", "INT128", "SHORT", "LONG", "SIGNED", "UINT", "UINT8",
                 "UINT16", "UINT32", "UINT64"}
FLOAT_TYPES = {"FLOAT", "DOUBLE", "REAL", "FLOAT4", "FLOAT8", "DOUBLE PRECISION"}
SAFE_NUMBERS = INTEGER_TYPES | FLOAT_TYPES
NUMBERS = SAFE_NUMBERS | {"DECIMAL", "NUMERIC", "UHUGEINT", "UINT128"}
TEMPORALS = {"DATE", "TIME", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS",
             "TIMESTAMPTZ", "INTERVAL"}

# The range of each integer type, by its DuckDB name.
INTEGER_RANGES = {"TINYINT": (-2 ** 7, 2 ** 7 - 1), "SMALLINT": (-2 ** 15, 2 ** 15 - 1),
                  "INTEGER": (-2 ** 31, 2 ** 31 - 1), "BIGINT": (-2 ** 63, 2 ** 63 - 1),
                  "HUGEINT": (-2 ** 127 + 1, 2 ** 127 - 1), "UTINYINT": (0, 2 ** 8 - 1), "USMALLINT": (0, 2 ** 16 - 1),
                  "UINTEGER": (0, 2 ** 32 - 1), "UBIGINT": (0, 2 ** 64 - 1), "UHUGEINT": (0, 2 ** 128 - 1)}


def type_bounds(sql_type: str | None, lower: float, upper: float) -> tuple[str, str] | None:
    """[lower, upper] narrowed to values of ``sql_type`` (integers inward, DECIMAL(p, s) to its scale
    inward, within its range) as literal texts that cast to it exactly; None: not a type that can
    hold them (then clamping happens in DOUBLE).

    >>> type_bounds("TINYINT", -1000, 99.5), type_bounds("DECIMAL(5,2)", 0, 1e9), type_bounds("DOUBLE", 0, 1)
    (('-128', '99'), ('0.00', '999.99'), None)
    """
    base = base_type(sql_type)
    if base in INTEGER_RANGES:
        tmin, tmax = INTEGER_RANGES[base]
        lo, hi = max(math.ceil(lower), tmin), min(math.floor(upper), tmax)
        return (str(lo), str(hi)) if lo <= hi else None
    if base in ("DECIMAL", "NUMERIC"):
        digits = [int(d) for d in re.findall(r"\d+", sql_type)] or [18, 3]
        precision, scale = (digits + [0])[:2]
        unit = Decimal(1).scaleb(-scale)
        largest = Decimal(10) ** (precision - scale) - unit
        try:
            lo = max(Decimal(repr(float(lower))).quantize(unit, rounding=ROUND_CEILING), -largest)
            hi = min(Decimal(repr(float(upper))).quantize(unit, rounding=ROUND_FLOOR), largest)
        except ArithmeticError:   # more digits than a decimal context holds: far outside the type
            return None
        return (str(lo), str(hi)) if lo <= hi else None
    return None


def base_type(sql_type: str | None) -> str | None:
    return sql_type.split("(")[0].strip().upper() if sql_type else None


def type_family(sql_type: str | None) -> str | None:
    base = base_type(sql_type)
    if base is None:
        return None
    if base in NUMBERS:
        return NUMBER
    if base in ("VARCHAR", "TEXT", "CHAR", "STRING"):
        return STRING
    if base in ("BOOLEAN", "BOOL"):
        return BOOLEAN
    if base in TEMPORALS or base.startswith("TIMESTAMP"):
        return TEMPORAL
    return None


# The types the policy's checks accept as numbers (bounds) and strings, as DuckDB's schema names them.
NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                 "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL")
STRING_TYPES = ("VARCHAR",)


def is_numeric(sql_type: str) -> bool:
    return sql_type.split("(")[0] in NUMERIC_TYPES


def is_string(sql_type: str) -> bool:
    return sql_type.split("(")[0] in STRING_TYPES


DATE_TYPES = {"DATE"}
TIMESTAMP_TYPES = {"TIMESTAMP", "TIMESTAMP WITHOUT TIME ZONE", "DATETIME"}


def temporal_type(sql_type: str | None) -> str | None:
    """"DATE" or "TIMESTAMP" for a column of exactly that DuckDB type (not TIMESTAMP_S/MS/NS, not
    WITH TIME ZONE), else None."""
    base = sql_type.strip().upper() if sql_type else ""
    if base in DATE_TYPES:
        return "DATE"
    if base in TIMESTAMP_TYPES:
        return "TIMESTAMP"
    return None
