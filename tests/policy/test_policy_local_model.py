"""A local-model table in the policy (policy/loading.py): ``local_model: true`` and its columns'
``randomized: {epsilon, domain}``, checked whole, the domain becoming the column's keys, and the ledger's
policy document naming both only when declared."""
import pytest

from dpsql.accounting.identity import policy_document
from dpsql.errors import PolicyError
from dpsql.policy import load_policy


def policy(table: dict) -> dict:
    return {"budget": {"epsilon": 1}, "tables": {"survey": {"privacy_unit": "id", **table}}}


SMOKER = {"randomized": {"epsilon": 1.5, "domain": [False, True]}}


def test_a_randomized_column_has_its_epsilon_and_its_domain_as_keys():
    loaded = load_policy(policy({"local_model": True, "columns": {"smoker": SMOKER, "age": {"lower": 0, "upper": 9},
                                                                  "region": {"keys": ["N", "S"],
                                                                             "randomized": {"epsilon": 2}}}}))
    table = loaded.tables["survey"]
    assert table.local_model and table.columns["smoker"].randomized == 1.5
    assert table.columns["smoker"].keys == (False, True) and table.columns["region"].keys == ("N", "S")
    assert table.columns["age"].randomized is None


@pytest.mark.parametrize("table, path, words", [
    ({"columns": {"smoker": SMOKER}}, "tables.survey.columns.smoker.randomized", "local_model: true"),
    ({"local_model": True, "columns": {}}, "tables.survey.local_model", "needs a randomized column"),
    ({"local_model": "yes", "columns": {"smoker": SMOKER}}, "tables.survey.local_model", "true or false"),
    ({"local_model": True, "columns": {"smoker": {"randomized": {"domain": [0, 1]}}}},
     "tables.survey.columns.smoker.randomized.epsilon", "is required"),
    ({"local_model": True, "columns": {"smoker": {"randomized": {"epsilon": 0, "domain": [0, 1]}}}},
     "tables.survey.columns.smoker.randomized.epsilon", "> 0"),
    ({"local_model": True, "columns": {"smoker": {"randomized": {"epsilon": 1}}}},
     "tables.survey.columns.smoker.randomized.domain", "2 to 256 categories"),
    ({"local_model": True, "columns": {"smoker": {"randomized": {"epsilon": 1, "domain": [0, 0]}}}},
     "tables.survey.columns.smoker.randomized.domain", "repeat"),
    ({"local_model": True, "columns": {"smoker": {"keys": [0, 1], "randomized": {"epsilon": 1, "domain": [0, 2]}}}},
     "tables.survey.columns.smoker.randomized.domain", "differs from the column's keys"),
    ({"local_model": True, "columns": {"smoker": {"randomized": {"epsilon": 1, "domain": {"range": [0, 300]}}}}},
     "tables.survey.columns.smoker.randomized.domain", "2 to 256 categories"),
    ({"local_model": True, "columns": {"smoker": {**SMOKER, "identifier": True}}},
     "tables.survey.columns.smoker", "identifier column"),
])
def test_a_bad_declaration_is_refused_with_its_path(table, path, words):
    with pytest.raises(PolicyError) as info:
        load_policy(policy(table))
    assert info.value.code == "DP501" and f"invalid policy: {path}:" in info.value.message
    assert words in info.value.message


def test_a_public_table_has_no_randomized_columns():
    with pytest.raises(PolicyError, match="tables.n.local_model"):
        load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "id"}, "n": {
            "public": True, "local_model": True}}})
    with pytest.raises(PolicyError, match="tables.n.columns.c.randomized"):
        load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "id"}, "n": {
            "public": True, "columns": {"c": SMOKER}}}})


def test_the_ledger_document_names_the_local_model_only_where_declared():
    plain = policy_document(load_policy(policy({"columns": {"smoker": {"keys": [False, True]}}})))
    local = policy_document(load_policy(policy({"local_model": True, "columns": {"smoker": SMOKER}})))
    assert "local_model" not in plain["tables"]["survey"]
    assert "randomized" not in plain["tables"]["survey"]["columns"]["smoker"]
    assert local["tables"]["survey"]["local_model"] is True
    assert local["tables"]["survey"]["columns"]["smoker"]["randomized"] == 1.5
