"""The CLI tests' fixtures: a small DuckDB file and its policy as the CLI's --db and --policy arguments, and
a click runner."""
import pytest
import yaml
from click.testing import CliRunner

from tests.support.cli import POLICY, people_database


@pytest.fixture
def files(tmp_path):
    """A small DuckDB file and its policy, as the CLI's --db and --policy arguments."""
    db_path = tmp_path / "people.duckdb"
    people_database(db_path)
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(yaml.safe_dump(POLICY))
    return ["--db", str(db_path), "--policy", str(policy_path)]


@pytest.fixture
def runner():
    return CliRunner()
