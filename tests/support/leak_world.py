"""The leak test's world: D, the fixture tables extended with a column of every common type and public
keys on a string, an integer and a boolean column (some of whose declared keys hold no data), and its
adversarial neighbours D' (D plus one person: the types' extremes, NaN, infinities, 1e300,
100k-character strings, multi-byte and combining unicode, NULL, empty strings, extreme dates,
undeclared keys). tests/properties/test_leaks.py checks the three properties on it;
tests/properties/test_differential.py runs the same D against plain DuckDB.
"""
from __future__ import annotations

import copy
import datetime

import duckdb

from tests.support.fixture import POLICY, make_database
from tests.support.leaks import Worlds

TINY = "0.0000000000000000000000000000000001"   # a 34-digit decimal: DuckDB casts the column to DECIMAL(38,34)

# --------------------------------------------------------------------------------------------
# The base database: the fixture's people (row level) and visits (user level), plus typed columns
# --------------------------------------------------------------------------------------------
# (name, DuckDB type, bounds or None): one column of every common type, in both tables.
TYPED_COLUMNS = [
    ("i8", "TINYINT", (-100, 100)),
    ("i16", "SMALLINT", (-1000, 1000)),
    ("i32", "INTEGER", (-10000, 10000)),
    ("i64", "BIGINT", (-10000, 10000)),
    ("i128", "HUGEINT", (-10000, 10000)),
    ("u64", "UBIGINT", (0, 10000)),
    ("dec", "DECIMAL(18,3)", (-1000, 1000)),
    ("f32", "FLOAT", (-100, 100)),
    ("f64", "DOUBLE", (-1000, 1000)),
    ("txt", "VARCHAR", None),
    ("ok", "BOOLEAN", None),
    ("day", "DATE", None),
    ("ts", "TIMESTAMP", None),
]
# Public keys: an integer, a string and a boolean column. Half of grade's and tier's keys hold no
# data in the base database, so a neighbour can be the first in a group (row order must not tell).
GRADES = [1, 2, 3, 4, 5]
TIERS = ["gold", "silver", "bronze", "none"]
FLAGS = [0, 1]
KEY_COLUMNS = [("grade", "INTEGER", GRADES), ("tier", "VARCHAR", TIERS), ("flag", "INTEGER", FLAGS)]

# Base values, a function of a row number n: every value inside its bounds, |integers| < 10**4
# (DuckDB casts a BIGINT compared with a 34-digit decimal to DECIMAL(38,34): only larger values fail).
BASE_VALUES = {
    "i8": "((n * 7) % 61 - 30)::TINYINT",
    "i16": "((n * 13) % 1001 - 500)::SMALLINT",
    "i32": "((n * 17) % 2001 - 1000)::INTEGER",
    "i64": "((n * 19) % 2001 - 1000)::BIGINT",
    "i128": "((n * 23) % 2001 - 1000)::HUGEINT",
    "u64": "((n * 29) % 5000)::UBIGINT",
    "dec": "(((n * 31) % 20001 - 10000) / 20)::DECIMAL(18,3)",
    "f32": "(((n * 37) % 801 - 400) / 8)::FLOAT",
    "f64": "(((n * 41) % 8001 - 4000) / 8)::DOUBLE",
    "txt": "['alpha', 'beta', 'gamma', 'delta', '12', 'x y'][1 + n % 6]",
    "ok": "n % 3 = 0",
    "day": "DATE '2000-01-01' + ((n * 11) % 3000)::INTEGER",
    "ts": "TIMESTAMP '2020-01-01 00:00:00' + to_seconds((n * 3607) % 1000000)",
    "grade": "(1 + n % 3)::INTEGER",                 # keys 4 and 5 are empty
    "tier": "['gold', 'silver'][1 + n % 2]",         # 'bronze' and 'none' are empty
    "flag": "(n % 2)::INTEGER",
}
EXTRA_COLUMNS = list(BASE_VALUES)

LEAK_POLICY = copy.deepcopy(POLICY)
LEAK_POLICY["budget"] = {"epsilon": 1e15, "delta": 0.5}
for _table in ("people", "visits"):
    _columns = LEAK_POLICY["tables"][_table]["columns"]
    for _name, _type, _bounds in TYPED_COLUMNS:
        _columns[_name] = {"lower": _bounds[0], "upper": _bounds[1]} if _bounds else {}
    for _name, _type, _keys in KEY_COLUMNS:
        _columns[_name] = {"keys": list(_keys)}
LEAK_POLICY["tables"]["people"]["columns"]["active"] = {"keys": [False, True]}   # a boolean with public keys
for _table in ("people", "visits"):   # date bounds: public keys derived from them (YEAR(day), date_trunc)
    LEAK_POLICY["tables"][_table]["columns"]["day"] = {"lower": datetime.date(2000, 1, 1),
                                                       "upper": datetime.date(2008, 12, 31)}
    LEAK_POLICY["tables"][_table]["columns"]["ts"] = {"lower": datetime.datetime(2020, 1, 1),
                                                      "upper": datetime.datetime(2020, 1, 31, 12)}

# The engine's resources: one thread (two shared cores; the same row order, so the same base rows, in
# every world) and a memory limit for what DuckDB accounts for (not strings: see BLOW_UPS).
ENGINE_SETTINGS = ("SET threads = 1", "SET memory_limit = '1GB'", "SET preserve_insertion_order = true")


def extend(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Add the typed and key columns to the fixture's tables (people by id, visits by row number)."""
    values = ", ".join(f"{expr} AS {name}" for name, expr in BASE_VALUES.items())
    con.execute(f"CREATE OR REPLACE TABLE people AS SELECT p.*, {values} "
                f"FROM (SELECT *, id AS n FROM people) p")
    con.execute("ALTER TABLE people DROP COLUMN n")
    con.execute(f"CREATE OR REPLACE TABLE visits AS SELECT v.*, {values} "
                f"FROM (SELECT *, row_number() OVER () + 5000 AS n FROM visits) v")
    con.execute("ALTER TABLE visits DROP COLUMN n")
    return con


def make_base_database() -> duckdb.DuckDBPyConnection:
    con = make_database()
    for statement in ENGINE_SETTINGS:
        con.execute(statement)
    return extend(con)


# --------------------------------------------------------------------------------------------
# Adversarial neighbours: one person added, with extreme values in every column
# --------------------------------------------------------------------------------------------
HUGE = "repeat('ß', 100000)"                    # 100k characters, 200k bytes
COMBINING = "repeat('e' || chr(769), 5000) || chr(128512)"   # e + combining acute, then an emoji
UNICODE = "'Straße ΣΊΣΥΦΟΣ ﬁ İ ǅ ' || chr(1114111)"

# Each neighbour: SQL literals for the added person's columns (absent: the ordinary value below).
ORDINARY = {
    "age": "40", "sex": "'F'", "state": "'CA'", "income": "500.0", "zip": "'00001'", "joined": "DATE '2020-06-01'",
    "active": "true", "clinic": "'a'", "cost": "10.0",
    "i8": "1", "i16": "1", "i32": "1", "i64": "1", "i128": "1", "u64": "1", "dec": "1.5", "f32": "1.5",
    "f64": "1.5", "txt": "'alpha'", "ok": "true", "day": "DATE '2010-01-01'",
    "ts": "TIMESTAMP '2020-06-01 12:00:00'", "grade": "1", "tier": "'gold'", "flag": "1",
}
NEIGHBOURS = {
    # in range, but in groups the base leaves empty (public grade 5, tier 'bronze'; a new zip)
    "ordinary-in-empty-groups": {"grade": "5", "tier": "'bronze'", "zip": "'99999'", "txt": "'omega'"},
    "type-minimum": {
        "age": "-9223372036854775808", "income": "-1e300", "sex": "'F'", "state": "'CA'", "zip": "''",
        "joined": "'5877642-06-25 (BC)'::DATE", "active": "false", "cost": "-1.7976931348623157e308",
        "i8": "-128", "i16": "-32768", "i32": "-2147483648", "i64": "-9223372036854775808",
        "i128": "(-170141183460469231731687303715884105727)::HUGEINT - 1", "u64": "0",
        "dec": "-999999999999999.999", "f32": "'-3.4028235e38'::FLOAT", "f64": "-1.7976931348623157e308",
        "txt": "''", "ok": "false", "day": "'5877642-06-25 (BC)'::DATE",
        "ts": "'290309-12-22 (BC) 00:00:00'::TIMESTAMP", "grade": "-2147483648", "tier": "''",
        "flag": "-2147483648",
    },
    "type-maximum": {
        "age": "9223372036854775807", "income": "1e300", "sex": "'M'", "state": "'TX'", "zip": HUGE,
        "joined": "'5881580-07-10'::DATE", "active": "true", "cost": "1.7976931348623157e308",
        "i8": "127", "i16": "32767", "i32": "2147483647", "i64": "9223372036854775807",
        "i128": "170141183460469231731687303715884105727::HUGEINT", "u64": "18446744073709551615",
        "dec": "999999999999999.999", "f32": "'3.4028235e38'::FLOAT", "f64": "1.7976931348623157e308",
        "txt": HUGE, "ok": "true", "day": "'5881580-07-10'::DATE",
        "ts": "'294247-01-10 04:00:54.775806'::TIMESTAMP", "grade": "4", "tier": "'bronze'", "flag": "0",
    },
    "nan": {
        "income": "'nan'::DOUBLE", "cost": "'nan'::DOUBLE", "f32": "'nan'::FLOAT", "f64": "'nan'::DOUBLE",
        "txt": COMBINING, "zip": COMBINING, "day": "'infinity'::DATE", "ts": "'infinity'::TIMESTAMP",
        "joined": "'infinity'::DATE", "sex": "'ß'", "state": "'WA'", "tier": "'GOLD'", "grade": "0",
        "clinic": "'z'",
    },
    "infinity": {
        "income": "'inf'::DOUBLE", "cost": "'-inf'::DOUBLE", "f32": "'-inf'::FLOAT", "f64": "'inf'::DOUBLE",
        "txt": UNICODE, "zip": "'1e400'", "day": "'-infinity'::DATE", "ts": "'-infinity'::TIMESTAMP",
        "joined": "'-infinity'::DATE", "i64": "10000", "age": "100000", "i8": "-101", "u64": "10001",
        "dec": "-1000.001", "grade": "3", "tier": "'none'",
    },
    "null": {name: "NULL" for name in ORDINARY},
}
VISITS_ROWS = 300            # the heavy person's rows at user level
PERSON = 100                 # visits.person_id of the added person (the base has 0..99)
NEIGHBOUR_IDS = list(NEIGHBOURS) + ["mixed"]


def person_value(neighbour: str, column: str, row: int) -> str:
    """The added person's value of ``column`` in its ``row``-th row (people: row 0 only)."""
    if neighbour == "mixed":   # each row takes another neighbour's values, cycling
        others = list(NEIGHBOURS)
        return person_value(others[row % len(others)], column, row)
    spec = NEIGHBOURS[neighbour]
    if column in spec:
        return spec[column]
    return ORDINARY[column]


def visits_keys(row: int) -> dict[str, str]:
    """The heavy person's groups: every clinic (and an undeclared one and NULL), every grade and tier."""
    clinic = ["'a'", "'b'", "'c'", "'z'", "NULL"][row % 5]
    grade = ["1", "2", "3", "4", "5", "9", "NULL"][row % 7]
    tier = ["'gold'", "'silver'", "'bronze'", "'none'", "'GOLD'", "NULL"][row % 6]
    flag = ["0", "1", "2", "NULL"][row % 4]
    return {"clinic": clinic, "grade": grade, "tier": tier, "flag": flag}


def add_neighbour(con: duckdb.DuckDBPyConnection, neighbour: str) -> duckdb.DuckDBPyConnection:
    """Add one person to both tables: one row to people, VISITS_ROWS rows to visits."""
    people = ["id", "ssn", "age", "sex", "state", "income", "zip", "joined", "active", *EXTRA_COLUMNS]
    row = {"id": "1000", "ssn": "'ssn-1000'"} | {c: person_value(neighbour, c, 0) for c in people[2:]}
    con.execute(f"INSERT INTO people ({', '.join(people)}) SELECT {', '.join(row[c] for c in people)}")
    visits = ["person_id", "clinic", "cost", *EXTRA_COLUMNS]
    selects = []
    for i in range(VISITS_ROWS):
        values = {c: person_value(neighbour, c, i) for c in visits[1:]}
        # spread over groups, except in every other row of the NULL person (NULL keys there) and every
        # third row of the ordinary one (grade 5, tier 'bronze': groups the base leaves empty)
        if not (neighbour == "null" and i % 2 == 0) and not (neighbour == "ordinary-in-empty-groups" and i % 3 == 0):
            values |= visits_keys(i)
        selects.append(f"({PERSON}, {', '.join(values[c] for c in visits[1:])})")
    con.execute(f"INSERT INTO visits ({', '.join(visits)}) VALUES " + ", ".join(selects))
    return con


class TypedWorlds(Worlds):
    """D and the adversarial neighbours of this module (the checks: tests/support/leaks.py)."""

    def __init__(self, policy: dict = LEAK_POLICY, neighbours=NEIGHBOUR_IDS, build=None, add=None):
        super().__init__(policy, neighbours, build or make_base_database, add or add_neighbour)
