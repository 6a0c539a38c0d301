"""The policy: loaded from YAML or a dict, validated whole, errors name the bad entry's path."""
import duckdb
import pytest
import yaml

import dpsql
from dpsql import testing
from dpsql.errors import PolicyError
from dpsql.policy import load_policy
from dpsql.engines.duckdb_schema import bind_schema
from tests.support.checks import DELETE, edited
from tests.support.fixture import POLICY, make_database


def broken(path, value):
    """POLICY with the entry at a dotted path replaced (or deleted when value is DELETE)."""
    return edited(POLICY, path, value)


def test_loads_yaml_and_dict_identically(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(POLICY))
    assert load_policy(path) == load_policy(POLICY)


def test_privacy_unit_is_always_an_identifier():
    table = load_policy(POLICY).tables["visits"]
    assert table.is_identifier("person_id")
    assert (table.max_groups_per_unit, table.max_rows_per_unit) == (2, 3)


@pytest.mark.parametrize("path, value, message", [
    ("tables.people.columns.age.lower", "zero", "tables.people.columns.age.lower: must be a number"),
    ("tables.people.columns.age.lower", 200, "tables.people.columns.age.lower: must be <= upper"),
    ("tables.people.columns.age.upper", float("inf"), "tables.people.columns.age.upper: must be finite"),
    ("tables.people.columns.age.upper", DELETE, "tables.people.columns.age: lower and upper must be given together"),
    ("tables.people.columns.sex.keys", [], "tables.people.columns.sex.keys: must be a non-empty list"),
    ("tables.people.columns.sex.keys", ["F", "F"], "tables.people.columns.sex.keys: must not repeat a key"),
    ("tables.people.columns.sex.keys", ["F", None], "tables.people.columns.sex.keys[1]: must be a non-null scalar"),
    ("tables.people.columns.ssn.colour", "red", "tables.people.columns.ssn.colour: unknown entry"),
    ("tables.people.privacy_unit", DELETE, "tables.people.privacy_unit: is required"),
    ("tables.visits.max_groups_per_unit", 0, "tables.visits.max_groups_per_unit: must be > 0"),
    ("tables.visits.max_rows_per_unit", 1.5, "tables.visits.max_rows_per_unit: must be a whole number"),
    ("tables.people.max_rows_per_unit", 2, "tables.people.privacy_unit: with `row`"),
    ("budget.epsilon", -1, "budget.epsilon: must be > 0"),
    ("budget.delta", 1.0, "budget.delta: must be < 1"),
    ("budget", DELETE, "budget: is required"),
    ("tables", {}, "tables: at least one private table is required"),
    ("version", 2, "version: must be 1"),
    ("surprise", 1, "surprise: unknown entry"),
])
def test_invalid_policy_is_refused_with_the_path(path, value, message):
    with pytest.raises(PolicyError) as info:
        load_policy(broken(path, value))
    assert info.value.code == "DP501"
    assert message in info.value.message


def test_unreadable_or_malformed_file(tmp_path):
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: [unclosed")
    with pytest.raises(PolicyError, match="not valid YAML"):
        load_policy(bad)


@pytest.mark.parametrize("path, value, message", [
    ("tables.people.columns.height", {"lower": 0, "upper": 3}, "column 'height' does not exist"),
    ("tables.nobody", {"privacy_unit": "row"}, "table 'nobody'"),
    ("tables.people.columns.zip", {"lower": 0, "upper": 3}, "bounds need a numeric column"),
    ("tables.people.columns.age", {"keys": ["ten", "20"]}, "keys.*do not all convert to BIGINT"),
    ("tables.visits.privacy_unit", "patient", "column 'patient' does not exist"),
])
def test_policy_checked_against_the_schema(path, value, message):
    with pytest.raises(PolicyError, match=message) as info:
        dpsql.connect(make_database(), ledger=":memory:", policy=broken(path, value))
    assert info.value.code == "DP502"


def test_keys_are_converted_to_the_column_type():
    policy = broken("tables.people.columns.age", {"keys": [10, "20"]})
    bound = bind_schema(load_policy(policy), make_database())
    assert bound.tables["people"].columns["age"].keys == (10, 20)


def test_missing_database_file_is_a_clean_error(tmp_path):
    with pytest.raises(PolicyError, match="does not exist"):
        dpsql.connect(tmp_path / "nope.duckdb", policy=POLICY)


def test_a_database_path_is_opened_read_only(tmp_path):
    path = tmp_path / "people.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people AS SELECT 1 AS id")
    con.close()
    db = dpsql.connect(path, policy={"budget": {"epsilon": 1}, "tables": {"people": {"privacy_unit": "id"}}})
    assert db.sql("SELECT COUNT(*) FROM people").columns == ["count_star()"]
    assert testing.duckdb_connection(db).execute("SELECT current_setting('access_mode')").fetchone()[0].lower() == "read_only"
