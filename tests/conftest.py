"""Shared fixtures: a small in-memory database with a row-level and a user-level table, and its policy."""
import copy
import os

import duckdb
import numpy as np
import pytest

import dpsql



def examples(n: int) -> int:
    """A property test's example count: ``n`` in the default run, times DPSQL_EXAMPLES for a thorough
    one (``DPSQL_EXAMPLES=10 python3 -m pytest tests/test_sensitivity.py``)."""
    return max(1, round(n * float(os.environ.get("DPSQL_EXAMPLES", "1"))))


POLICY = {
    "version": 1,
    "budget": {"epsilon": 1000.0, "delta": 1e-6},
    "default_epsilon": 1.0,
    "tables": {
        "people": {
            "privacy_unit": "row",
            "columns": {
                "ssn": {"identifier": True},
                "age": {"type": "int", "lower": 0, "upper": 100},
                "income": {"type": "float", "lower": 0, "upper": 1000},
                "sex": {"keys": ["F", "M"]},
                "state": {"keys": ["CA", "NY", "TX"]},
                "zip": {},
                "joined": {},
                "active": {},
            },
        },
        "visits": {
            "privacy_unit": "person_id",
            "max_groups_per_unit": 2,
            "max_rows_per_unit": 3,
            "columns": {
                "clinic": {"keys": ["a", "b", "c"]},
                "cost": {"type": "float", "lower": 0, "upper": 50},
            },
        },
        # Joins: a prescription reaches its person through its visit; clinics hold nobody's data.
        "prescriptions": {
            "privacy_unit": {"via": "visit_id", "references": "visits.visit_id"},
            "max_groups_per_unit": 2,
            "max_rows_per_unit": 5,
            "columns": {
                "drug": {"keys": ["x", "y", "z"]},
                "dose": {"type": "float", "lower": 0, "upper": 10},
            },
        },
        "clinics": {"public": True},
    },
}


def make_database() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("""
        CREATE TABLE people AS SELECT
            range AS id, 'ssn-' || range AS ssn, (range * 7) % 90 AS age,
            CASE WHEN range % 3 = 0 THEN 'F' ELSE 'M' END AS sex,
            ['CA', 'NY', 'TX', 'WA'][1 + range % 4] AS state,
            CASE WHEN range % 10 = 0 THEN NULL ELSE ((range * 37) % 1200)::DOUBLE END AS income,
            lpad(((range * 13) % 50)::VARCHAR, 5, '0') AS zip,
            DATE '2020-01-01' + (range % 700)::INTEGER AS joined,
            range % 2 = 0 AS active
        FROM range(1000)""")
    con.execute("""
        CREATE TABLE visits AS SELECT
            range % 100 AS person_id, ['a', 'b', 'c'][1 + (range // 7) % 3] AS clinic,
            ((range * 11) % 70)::DOUBLE AS cost, range AS visit_id
        FROM range(2000)""")
    con.execute("""
        CREATE TABLE prescriptions AS SELECT
            (range * 7) % 2000 AS visit_id, ['x', 'y', 'z'][1 + range % 3] AS drug, ((range * 3) % 12)::DOUBLE AS dose
        FROM range(3000)""")
    con.execute("""
        CREATE TABLE clinics AS SELECT * FROM (VALUES ('a', 'north', 3), ('b', 'south', 5), ('c', 'north', 2))
            AS c(clinic, region, doctors)""")
    return con


@pytest.fixture
def policy():
    return copy.deepcopy(POLICY)


@pytest.fixture
def raw():
    """The owner's unrestricted connection (for exact answers in tests)."""
    return make_database()


@pytest.fixture
def db(raw, policy):
    """A private connection over ``raw`` with a seeded generator (trusted test API)."""
    return dpsql.connect(raw, ledger=":memory:", policy=policy, rng=np.random.default_rng(20261125))


def refusal(db, sql, **kw):
    """The DpsqlError a query raises (fails the test if it is answered)."""
    with pytest.raises(dpsql.DpsqlError) as info:
        db.sql(sql, **kw)
    return info.value
