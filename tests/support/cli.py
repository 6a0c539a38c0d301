"""The CLI tests' database and policy: a small DuckDB file of people (user level) and its policy, as the
``--db`` and ``--policy`` arguments (the ``files`` fixture), and a click runner."""
import duckdb
import pytest
import yaml
from click.testing import CliRunner

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


@pytest.fixture
def files(tmp_path):
    """A small DuckDB file and its policy, as the CLI's --db and --policy arguments."""
    db_path = tmp_path / "people.duckdb"
    con = duckdb.connect(str(db_path))
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
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(yaml.safe_dump(POLICY))
    return ["--db", str(db_path), "--policy", str(policy_path)]


@pytest.fixture
def runner():
    return CliRunner()
