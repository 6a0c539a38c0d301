"""The CLI tests' fixtures: a small DuckDB file and its policy as the CLI's --db and --policy arguments, and
a click runner."""
import duckdb
import pytest
import yaml
from click.testing import CliRunner

from tests.support.cli import POLICY


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
