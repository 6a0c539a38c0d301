"""The CLI tests' policy over a small table of people (user level), its table (``people_database``) and a
query on it; tests/cli/conftest.py writes them to files (the ``files`` fixture), and so does
tests/publish/conftest.py (a release's database)."""
import duckdb

POLICY = {
    "version": 1,
    "budget": {"epsilon": 10.0, "delta": 1.0e-6},
    "default_epsilon": 1.0,
    "tables": {
        "people": {
            "privacy_unit": "person_id",
            "max_groups_per_unit": 1,
            "max_rows_per_unit": 1,
            "columns": {
                "person_id": {"identifier": True},
                "ssn": {"identifier": True},
                "age": {"type": "int", "lower": 0, "upper": 100},
                "income": {"type": "float", "lower": 0, "upper": 100000},
                "sex": {"keys": ["F", "M"]},
                "zip": {},
            },
        },
    },
}

COUNT_BY_SEX = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


def people_database(path) -> None:
    """500 people (the CLI tests' table) in a new DuckDB file at ``path``."""
    con = duckdb.connect(str(path))
    con.execute("""
        CREATE TABLE people AS
        SELECT i AS person_id,
               printf('%03d-%02d-%04d', i % 997, i % 89, i) AS ssn,
               (i * 7) % 90 AS age,
               CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
               CAST((i * 1013) % 120000 AS DOUBLE) AS income,
               printf('%05d', 10000 + i % 13) AS zip
        FROM range(1, 501) t(i)
    """)
    con.close()
