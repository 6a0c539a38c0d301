"""The release tests' fixtures: a small DuckDB file of people and its policy (tests/support/cli.py), and a
release spec over them."""
import pytest
import yaml

from tests.support.cli import POLICY, people_database


@pytest.fixture
def people(tmp_path):
    """(database, policy) paths: 500 people, a total budget of epsilon 10, delta 1e-6."""
    db_path, policy_path = tmp_path / "people.duckdb", tmp_path / "policy.yaml"
    people_database(db_path)
    policy_path.write_text(yaml.safe_dump(POLICY))
    return str(db_path), str(policy_path)


@pytest.fixture
def spec():
    """Three statistics under epsilon 2: a weighted count, an average and a sum, an explicit epsilon."""
    return {"title": "people", "budget": {"epsilon": 2.0, "delta": 1e-6}, "statistics": [
        {"name": "by_sex", "sql": "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", "weight": 2},
        # adults only: another frame than by_sex's, so each runs alone (lower/shared.py), and the tests that
        # fail or kill the engine's third run hit income's draw
        {"name": "income", "sql": "SELECT sex, AVG(income) AS inc, SUM(income) AS total FROM people WHERE age >= 18 "
                                  "GROUP BY sex"},
        {"name": "total", "sql": "SELECT COUNT(*) AS n FROM people", "epsilon": 0.5}]}
