"""The fixture database and its policy: a row-level table (people), a user-level one (visits), a table
reaching its person through visits (prescriptions) and a public one (clinics; its beds are NULL in every
row: no bounds to read from it).

Self-contained (DuckDB only): tools/golden.py and benchmarks/ load this file by path, so the golden
files and the planning benchmark run on the database the tests use.
"""
import duckdb


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
        CREATE TABLE clinics AS SELECT clinic, region, doctors, NULL::DOUBLE AS beds FROM (VALUES ('a', 'north', 3),
            ('b', 'south', 5), ('c', 'north', 2)) AS c(clinic, region, doctors)""")
    return con
