"""The one builder of comparisons between two columns (a join's ``a.x = b.y``, an EXISTS/IN
correlation, the link joins dpsql adds, a public lookup), total by construction.

DuckDB compares two values of different types by casting one or both to a common type, and some of
those casts fail on some values (``DATE '9999-12-31'`` as TIMESTAMP_NS, a BIGINT of 1e18 as
DECIMAL(38,20), a DATE of the year 294248 as TIMESTAMP). A failure's presence would depend on one
person's row, so every comparison dpsql writes between two columns comes from ``compare``: given
both operands' exact DuckDB types, ``pairing`` says how each side is written (its ``Form``):

* bare, when no cast can fail: the same type; integers with integers (UHUGEINT with a signed one
  aside); FLOAT with DOUBLE; DECIMALs and integers whose common DECIMAL holds both (at most 38
  digits); DATE with DATE;
* cast explicitly to the common type DuckDB itself would use, under ``TRY_CAST`` on a side whose
  cast can fail. The comparison is then NULL (false) exactly on the rows where DuckDB would fail,
  and DuckDB's own answer everywhere else; it stays an equality of one expression per side, so an
  equality join stays a hash join;
* strings as ``COLLATE C`` on both sides: byte for byte, whatever the columns' collations or the
  connection's ``default_collation`` (a NOCASE column compared as it is would match 'a' and 'A';
  two different collations would be a binder error);
* refused (None, DP306 from ``compare``) for different families, and for TIMESTAMP WITH TIME ZONE
  against anything but itself: that cast depends on the session's time zone.

Each side's ``Form`` also says whether it is exact (distinct values of the column stay distinct): an
identity comparison (a link, a tie, a lookup) matches a row to at most one row of a key that is
unique in the key side's form, so that uniqueness is checked in exactly that form
(``key_form``; engines/duckdb_schema.py), and a plain check suffices when the form is exact.
``tests/sql/test_compare.py`` checks every pair against DuckDB on the types' extreme values.

>>> p = pairing("DATE", "TIMESTAMP_NS"); p.left.apply(exp.column("d")).sql("duckdb"), p.left.exact
('TRY_CAST(d AS TIMESTAMP_NS)', True)
>>> p = pairing("DOUBLE", "BIGINT"); p.right.apply(exp.column("k")).sql("duckdb"), p.right.exact
('CAST(k AS DOUBLE)', False)
>>> pairing("BIGINT", "VARCHAR") is None
True
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.build import cast
from dpsql.sql.positions import span

# Integer types: decimal digits of their largest magnitude, and bits (for exactness as a float).
SIGNED = {"TINYINT": (3, 7), "SMALLINT": (5, 15), "INTEGER": (10, 31), "BIGINT": (19, 63), "HUGEINT": (39, 127)}
UNSIGNED = {"UTINYINT": (3, 8), "USMALLINT": (5, 16), "UINTEGER": (10, 32), "UBIGINT": (20, 64), "UHUGEINT": (39, 128)}
INTEGERS = {**SIGNED, **UNSIGNED}
FLOATS = {"FLOAT": 24, "DOUBLE": 53}             # bits of mantissa: integers up to 2**bits are exact
DECIMAL_DIGITS = {"FLOAT": 6, "DOUBLE": 15}       # decimals of this many digits stay distinct as floats
MAX_DECIMAL = 38
TIMESTAMPS = ("TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP", "TIMESTAMP_NS")   # coarser to finer
ZONED = "TIMESTAMP WITH TIME ZONE"
ALIASES = {"INT": "INTEGER", "INT4": "INTEGER", "SIGNED": "INTEGER", "INT1": "TINYINT", "INT2": "SMALLINT",
           "SHORT": "SMALLINT", "INT8": "BIGINT", "LONG": "BIGINT", "INT128": "HUGEINT", "UINT8": "UTINYINT",
           "UINT16": "USMALLINT", "UINT32": "UINTEGER", "UINT": "UINTEGER", "UINT64": "UBIGINT",
           "UINT128": "UHUGEINT", "REAL": "FLOAT", "FLOAT4": "FLOAT", "FLOAT8": "DOUBLE",
           "DOUBLE PRECISION": "DOUBLE", "TEXT": "VARCHAR", "STRING": "VARCHAR", "CHAR": "VARCHAR",
           "BPCHAR": "VARCHAR", "BOOL": "BOOLEAN", "DATETIME": "TIMESTAMP", "TIMESTAMP WITHOUT TIME ZONE": "TIMESTAMP",
           "TIMESTAMPTZ": ZONED, "NUMERIC": "DECIMAL"}
_DECIMAL = re.compile(r"DECIMAL\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?")


@dataclass(frozen=True)
class Form:
    """How one operand is written: as it is, cast to ``to`` (TRY_CAST when ``fallible``), or
    ``COLLATE C``; ``exact``: distinct values of the operand stay distinct in this form."""
    to: str | None = None
    fallible: bool = False
    collate: bool = False
    exact: bool = True

    def apply(self, node: exp.Expression) -> exp.Expression:
        if self.collate:
            return exp.Collate(this=node, expression=exp.Var(this="C"))
        if self.to is None:
            return node
        written = cast(node, self.to)
        return exp.TryCast(this=written.this, to=written.to) if self.fallible else written


@dataclass(frozen=True)
class Pairing:
    """How each side of a comparison between two types is written."""
    left: Form
    right: Form

    @property
    def total(self) -> bool:
        """Neither side can fail as DuckDB compares them unwritten (a cast it adds itself cannot fail)."""
        return not (self.left.fallible or self.right.fallible)

    def mirrored(self) -> "Pairing":
        return Pairing(self.right, self.left)


BARE = Form()
BYTES = Form(collate=True)


def normal(sql_type: str | None) -> str | None:
    """A DuckDB type in one spelling (``INT8`` -> ``BIGINT``, ``DECIMAL`` -> ``DECIMAL(18,3)``), or None."""
    if not sql_type:
        return None
    text = " ".join(sql_type.strip().upper().split())
    head, paren, rest = text.partition("(")
    head = ALIASES.get(head.strip(), head.strip())
    match = _DECIMAL.fullmatch(head + paren + rest) if head == "DECIMAL" else None
    if match:
        precision = int(match.group(1) or 18)
        scale = int(match.group(2) or (0 if match.group(1) else 3))
        return f"DECIMAL({precision},{scale})"
    return head + paren + rest


def _digits(t: str) -> tuple[int, int] | None:
    """(digits before the point, scale) of an integer or DECIMAL type."""
    if t in INTEGERS:
        return INTEGERS[t][0], 0
    match = _DECIMAL.fullmatch(t)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        return precision - scale, scale
    return None


def _integers(a: str, b: str) -> Pairing | None:
    if a not in INTEGERS or b not in INTEGERS or (b == "UHUGEINT" and a in SIGNED):
        return None   # (the last: the mirrored order)
    if a == "UHUGEINT" and b == "HUGEINT":   # DuckDB compares these two as DOUBLEs
        return Pairing(Form("DOUBLE", exact=False), Form("DOUBLE", exact=False))
    if a == "UHUGEINT" and b in SIGNED:   # DuckDB casts the UHUGEINT to a signed type, which can fail
        return Pairing(Form("HUGEINT", fallible=True), BARE)
    return Pairing(BARE, BARE)


def _floats(a: str, b: str) -> Pairing | None:
    if b not in FLOATS:
        return None
    if a in FLOATS:
        return Pairing(BARE, BARE)   # FLOAT to DOUBLE is exact
    if a in INTEGERS:
        return Pairing(Form(b, exact=INTEGERS[a][1] <= FLOATS[b]), BARE)
    digits = _digits(a)
    if digits is not None:   # a DECIMAL: below 1e38, never past FLOAT's range
        return Pairing(Form(b, exact=sum(digits) <= DECIMAL_DIGITS[b]), BARE)
    return None


def _decimals(a: str, b: str) -> Pairing | None:
    da, db = _digits(a), _digits(b)
    if da is None or db is None or not a.startswith("DECIMAL"):
        return None
    scale = max(da[1], db[1])
    if max(da[0], db[0]) + scale <= MAX_DECIMAL:
        return Pairing(BARE, BARE)   # DuckDB's common DECIMAL holds both
    common = f"DECIMAL({MAX_DECIMAL},{scale})"
    return Pairing(*(Form(common, fallible=d[0] > MAX_DECIMAL - scale) for d in (da, db)))


def _temporals(a: str, b: str) -> Pairing | None:
    if b not in TIMESTAMPS or not (a == "DATE" or a in TIMESTAMPS):
        return None
    if a in TIMESTAMPS and TIMESTAMPS.index(a) > TIMESTAMPS.index(b):
        return None   # the mirrored order casts the coarser one
    return Pairing(Form(b, fallible=True), BARE)   # DATE or the coarser unit, past the finer one's range


RULES = (_integers, _floats, _decimals, _temporals)


def pairing(left: str | None, right: str | None) -> Pairing | None:
    """How a comparison of a ``left`` and a ``right`` column is written, or None: it cannot be made total."""
    a, b = normal(left), normal(right)
    if a is None or b is None:
        return None
    if a == b:
        return Pairing(BYTES, BYTES) if a == "VARCHAR" else Pairing(BARE, BARE)
    for rule in RULES:
        for x, y, flip in ((a, b, False), (b, a, True)):
            found = rule(x, y)
            if found is not None:
                return found.mirrored() if flip else found
    return None


def key_form(own: str | None, other: str | None) -> Form | None:
    """The form in which a column of type ``own`` is compared with one of type ``other``: the form
    its uniqueness is checked in, when it is a referenced key or a looked-up public column."""
    found = pairing(own, other)
    return found.left if found is not None else None


def compare(op: type[exp.Expression], left: exp.Expression, left_type: str | None, right: exp.Expression,
            right_type: str | None, *, node: exp.Expression | None = None, sql: str | None = None) -> exp.Expression:
    """``left <op> right`` written so that no row can make it fail (see the module docstring).

    Raises:
        UnsupportedConstruct (DP306): the two types cannot be compared without a cast that could fail
        and that dpsql cannot guard (different families, a time zone against a naive timestamp).
    """
    found = pairing(left_type, right_type)
    if found is None:
        start, end = span(node, sql) if node is not None else (None, None)
        what = (node if node is not None else op(this=left, expression=right)).sql(dialect="duckdb")
        unknown = [e.sql(dialect="duckdb") for e, t in ((left, left_type), (right, right_type)) if t is None]
        hint = (f"the type of {' and '.join(unknown)} is not known: the policy must declare the column (and the "
                "database hold it) for dpsql to compare it" if unknown else
                "compare columns of one kind: numbers with numbers, text with text, dates and timestamps "
                "with each other (a TIMESTAMP WITH TIME ZONE only with its own type)")
        raise UnsupportedConstruct(
            "DP306", f"{what} compares {left_type or 'an unknown type'} with {right_type or 'an unknown type'}: "
                     "no comparison of these types is sure to succeed on every row", sql=sql, start=start, end=end,
            hint=hint, rule="predicates_type_safe")
    return op(this=found.left.apply(left), expression=found.right.apply(right))
