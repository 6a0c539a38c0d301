"""A release spec (issue 26, item 3): read from YAML or a dict, checked whole; every refusal names the
entry, has its code (DP524-DP527) and a hint, and spends nothing."""
from __future__ import annotations

import os

import pytest

import dpsql
from dpsql import Statement
from dpsql.errors import ReleaseError
from dpsql.publish.spec import load_spec
from tests.support.checks import DELETE, edited


def test_a_spec_reads_from_yaml_as_from_a_dict(tmp_path, spec):
    path = tmp_path / "release.yaml"
    path.write_text(
        "title: people\n"
        "budget: {epsilon: 2.0, delta: 1.0e-6}\n"
        "statistics:\n"
        "  - name: by_sex\n"
        "    sql: SELECT sex, COUNT(*) AS n FROM people GROUP BY sex\n"
        "    weight: 2\n"
        "  - name: income\n"
        "    sql: SELECT sex, AVG(income) AS inc, SUM(income) AS total FROM people WHERE age >= 18 GROUP BY sex\n"
        "  - name: total\n"
        "    sql: SELECT COUNT(*) AS n FROM people\n"
        "    epsilon: 0.5\n")
    assert load_spec(path) == load_spec(spec)


def test_the_split_is_the_batchs(spec):
    """Explicit epsilons first, the rest by weight: as ``db.sql_batch`` splits the same statements."""
    found = load_spec(spec)
    assert [round(e, 12) for e, _ in found.shares()] == [1.0, 0.5, 0.5]
    assert found.ci == 0.95 and [s.name for s in found.statistics] == ["by_sex", "income", "total"]
    assert isinstance(found.statistics[0].statement(), Statement)


BROKEN = [
    ("nope", 1, "DP524", "unknown key 'nope'"),
    ("ci", 1.5, "DP524", "ci must be a finite number"),
    ("budget", DELETE, "DP525", "budget is required"),
    ("budget", [1], "DP525", "budget must be a mapping"),
    ("budget.epsilon", 0, "DP525", "budget.epsilon must be a finite number"),
    ("budget.epsilon", float("inf"), "DP525", "budget.epsilon"),
    ("budget.delta", 1.0, "DP525", "budget.delta"),
    ("statistics", [], "DP526", "statistics must be a non-empty list"),
    ("statistics.0", "SELECT 1", "DP526", "statistics[0] must be a mapping"),
    ("statistics.0.name", "../etc/x", "DP526", "statistics[0].name must be"),
    ("statistics.0.name", "a.b", "DP526", "statistics[0].name must be"),
    ("statistics.0.name", DELETE, "DP526", "statistics[0].name must be"),
    ("statistics.1.name", "BY_SEX", "DP526", "'BY_SEX' is named twice"),
    ("statistics.0.sql", " ", "DP526", "statistic 'by_sex': sql"),
    ("statistics.0.weight", -1, "DP526", "statistic 'by_sex': weight"),
    ("statistics.0.weight", True, "DP526", "statistic 'by_sex': weight"),
    ("statistics.0.epsilon", 1.0, "DP526", "both a weight and an epsilon"),
    ("statistics.0.delta", 2.0, "DP526", "statistic 'by_sex': delta"),
    ("statistics.0.colour", "red", "DP526", "unknown key 'colour'"),
    ("statistics.2.epsilon", 5.0, "DP527", "add up to 5.0, more than the batch's 2.0"),
]


@pytest.mark.parametrize("path, value, code, fragment", BROKEN, ids=[f"{p}-{c}" for p, _, c, _ in BROKEN])
def test_a_broken_spec_is_refused_naming_the_entry(spec, path, value, code, fragment):
    with pytest.raises(ReleaseError) as refused:
        load_spec(edited(spec, path, value))
    assert refused.value.code == code and fragment in refused.value.message
    assert refused.value.hint and refused.value.exit_code == 3   # a set-up error: fix the spec


@pytest.mark.parametrize("text, fragment", [("budget: [", "not valid YAML"), ("- 1\n- 2\n", "must be a mapping")])
def test_a_file_that_is_not_a_spec_is_refused(tmp_path, text, fragment):
    path = tmp_path / "release.yaml"
    path.write_text(text)
    with pytest.raises(ReleaseError, match=fragment):
        load_spec(path)
    with pytest.raises(ReleaseError, match="cannot read release spec"):
        load_spec(tmp_path / "missing.yaml")


def test_a_broken_spec_spends_nothing_and_writes_nothing(tmp_path, people, spec):
    db = dpsql.connect(people[0], policy=people[1])
    out = tmp_path / "out"
    with pytest.raises(ReleaseError):
        dpsql.publish(edited(spec, "statistics.2.epsilon", 5.0), db, out)
    assert db.budget.spent_epsilon == 0 and db.budget.queries == 0
    assert not out.exists() and not os.path.exists(f"{db.ledger.path}.publish-key")


def test_an_output_that_cannot_be_written_is_refused_before_anything_is_spent(tmp_path, people, spec):
    db = dpsql.connect(people[0], policy=people[1])
    (tmp_path / "file").write_text("")
    for out, fmt in ((tmp_path / "file", "parquet"), (tmp_path / "out", "xlsx")):
        for dry_run in (False, True):
            with pytest.raises(ReleaseError) as refused:
                dpsql.publish(spec, db, out, format=fmt, dry_run=dry_run and fmt == "xlsx")
            assert refused.value.code == "DP528" and refused.value.hint
    assert db.budget.queries == 0 and not (tmp_path / "out").exists()


def test_publish_needs_a_policy_with_a_path_and_none_with_a_connection(tmp_path, people, spec):
    with pytest.raises(ReleaseError, match="needs policy="):
        dpsql.publish(spec, people[0], tmp_path)
    with pytest.raises(ReleaseError, match="not with a connection"):
        dpsql.publish(spec, dpsql.connect(people[0], policy=people[1]), tmp_path, policy=people[1])
