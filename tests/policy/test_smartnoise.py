"""SmartNoise metadata in, SmartNoise's queries run (issue 14, item 6).

``dpsql policy import smartnoise.yaml`` converts SmartNoise SQL's table metadata into a dpsql policy
(dpsql/policy/smartnoise.py); SmartNoise's own PUMS test queries (benchmarks/smartnoise/pums_queries.sql)
then run unchanged against a PUMS-like table. The full corpus and its report:
``benchmarks/smartnoise/run_pums.py``; here a subset, each with the outcome it must keep.
"""
import importlib.util
import os
import subprocess
import sys

import duckdb
import pytest
import yaml
from click.testing import CliRunner

import dpsql
from dpsql.cli import main
from dpsql.policy import load_policy
from dpsql.policy.smartnoise import convert, distinct_values, load_metadata
from tests.support.paths import ROOT

BENCH = ROOT / "benchmarks" / "smartnoise"
PUMS_META = {"PUMS": {"PUMS": {"PUMS": {
    "row_privacy": True, "rows": 1000,
    "age": {"type": "int", "lower": 0, "upper": 100}, "sex": {"type": "string"},
    "income": {"type": "float", "lower": 0, "upper": 500000}, "married": {"type": "boolean"}}}}}


def meta(**table) -> dict:
    return {"": {"S": {"T": table}}}


def run_pums():
    spec = importlib.util.spec_from_file_location("run_pums", BENCH / "run_pums.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_pums"] = module
    spec.loader.exec_module(module)
    return module


# --- the conversion --------------------------------------------------------------------------------

def test_row_privacy_and_bounds_carry_over():
    policy, notes = convert(PUMS_META, epsilon=3.0, delta=1e-5)
    assert policy["budget"] == {"epsilon": 3.0, "delta": 1e-5}
    assert policy["tables"] == {"pums": {"privacy_unit": "row", "columns": {
        "age": {"type": "int", "lower": 0, "upper": 100}, "sex": {},
        "income": {"type": "float", "lower": 0.0, "upper": 500000.0}, "married": {}}}}
    assert notes == []


def test_the_private_id_is_the_unit_and_max_ids_bounds_each_person():
    policy, notes = convert(meta(max_ids=3, PersonID={"type": "int", "private_id": True},
                                 x={"type": "int", "lower": 0, "upper": 9}))
    table = policy["tables"]["t"]
    assert table["privacy_unit"] == "personid" and table["columns"]["personid"] == {"identifier": True}
    assert table["max_groups_per_unit"] == table["max_rows_per_unit"] == 3
    assert any("max_ids 3" in n for n in notes)
    assert load_policy(policy).tables["t"].max_rows_per_unit == 3


def test_a_table_under_duckdbs_schema_main_is_queried_bare_and_says_so():
    """Issue 25 item 11: imported under schema main, FROM main.people was refused (DP201) with no hint.
    It stays refused (main. could name another relation than the policy's: a TEMP table of the same name
    comes first; sql/schemas.py), now with a note at import and a hint that names the fix."""
    metadata = {"db": {"main": {"people": {"row_privacy": True, "age": {"type": "int", "lower": 0, "upper": 100}}}}}
    policy, notes = convert(metadata)
    assert any("write FROM people, not FROM main.people" in n for n in notes)
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT range % 90 AS age FROM range(50)")
    db = dpsql.connect(con, policy=policy, ledger=":memory:")
    assert "dpsql plan for:" in str(db.explain("SELECT COUNT(*) AS n FROM people"))
    for sql in ("SELECT COUNT(*) AS n FROM main.people", "SELECT COUNT(*) AS n FROM memory.main.people p"):
        with pytest.raises(dpsql.DpsqlError) as refused:
            db.explain(sql)
        assert refused.value.code == "DP201" and refused.value.hint.startswith("write FROM people (without its ")


def test_the_bundled_pums_metadata_converts():
    policy, _ = convert(load_metadata(BENCH / "PUMS_pid.yaml"))
    table = load_policy(policy).tables["pums"]
    assert table.privacy_unit == "pid" and table.columns["income"].upper == 500000
    assert policy["default_delta"] > 0   # SmartNoise censors rare groups by default: partition selection


def test_censor_dims_false_reads_the_keys_from_a_database():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS uid, ['a', 'b'][1 + range % 2] AS g, range % 10 AS k "
                "FROM range(50)")
    spec = dict(censor_dims=False, uid={"type": "int", "private_id": True}, g={"type": "string"},
                k={"type": "int", "lower": 0, "upper": 9})
    policy, notes = convert(meta(**spec), keys_from=distinct_values(con))
    columns = policy["tables"]["t"]["columns"]
    assert columns["g"]["keys"] == ["a", "b"] and columns["k"]["keys"] == {"range": [0, 9]}
    assert any("2 keys read from the data" in n for n in notes)
    _, notes = convert(meta(**spec))
    assert any("no keys for g" in n for n in notes)


@pytest.mark.parametrize("metadata, where", [
    (meta(a={"type": "int", "private_id": True}, b={"type": "int", "private_id": True}), "compound private_id"),
    (meta(row_privacy=True, max_ids=2, a={"type": "int"}), "T.max_ids"),
    (meta(row_privacy=True, a={"type": "money"}), "S.T.a.type"),
    (meta(row_privacy=True, a={"type": "int", "lower": 0}), "S.T.a: lower and upper"),
    (meta(a={"type": "int"}), "no table has a private_id"),
    ({"": {"A": {"T": {"row_privacy": True}}, "B": {"t": {"row_privacy": True}}}}, "a second table named 't'"),
    ({"x": {}, "y": {}}, "expected one collection"),
])
def test_metadata_without_a_dpsql_equivalent_is_refused_naming_it(metadata, where):
    with pytest.raises(dpsql.DpsqlError) as info:
        convert(metadata)
    assert info.value.code == "DP501" and where in str(info.value)


def test_what_has_no_equivalent_is_noted_or_left_out():
    policy, notes = convert({"engine": "postgres", "": {
        "S": {"T": {"row_privacy": True, '"Sale-Amount"': {"type": "float", "lower": 0, "upper": 9, "sensitivity": 3},
                    "blob": {"type": "unknown"}},
              "Hidden": {"x": {"type": "int"}}}}})
    assert set(policy["tables"]) == {"t"}
    assert set(policy["tables"]["t"]["columns"]) == {"sale-amount"}
    assert any("Hidden" in n and "left out" in n for n in notes)
    assert any("sensitivity" in n for n in notes) and any("blob" in n for n in notes)


# --- the command line --------------------------------------------------------------------------------

def test_policy_import_prints_a_policy_dpsql_loads(tmp_path):
    path = tmp_path / "pums.yaml"
    path.write_text(yaml.safe_dump(PUMS_META))
    result = CliRunner().invoke(main, ["policy", "import", str(path), "--epsilon", "5"])
    assert result.exit_code == 0, result.output
    loaded = load_policy(yaml.safe_load(result.stdout))
    assert loaded.budget_epsilon == 5 and loaded.tables["pums"].row_level
    assert result.stdout.startswith("# dpsql policy converted from SmartNoise metadata pums.yaml")


def test_policy_import_writes_a_file_and_reports_bad_metadata(tmp_path):
    out = tmp_path / "policy.yaml"
    result = CliRunner().invoke(main, ["policy", "import", str(BENCH / "PUMS_pid.yaml"), "-o", str(out)])
    assert result.exit_code == 0 and load_policy(out).tables["pums"].privacy_unit == "pid"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(meta(a={"type": "int"})))
    result = CliRunner().invoke(main, ["policy", "import", str(bad)])
    assert result.exit_code != 0 and "DP501" in result.output and not result.stdout.strip().startswith("version")


def test_policy_import_as_a_real_process_then_a_query(tmp_path):
    out = tmp_path / "policy.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", "from dpsql.cli import main; main()", "policy", "import",
                           str(BENCH / "PUMS_pid.yaml"), "-o", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    con = run_pums().database(None, rows=300)
    db = dpsql.connect(con, ledger=":memory:", policy=str(out))
    [(n, mean)] = db.sql("SELECT TOP 3 COUNT(*) AS n, AVG(income) FROM PUMS.PUMS").fetchall()
    assert mean is not None and n is not None


# --- SmartNoise's own queries -------------------------------------------------------------------------

# A subset of the corpus, each with the outcome it has today (the whole corpus: run_pums.py).
EXPECTED = {
    "001": "answered",  # COUNT(*), COUNT(sex), COUNT(age)
    "008": "DP201",     # PUMS.PUMS_null: a table the metadata does not describe
    "010": "answered",  # VAR(age), VAR(income) GROUP BY sex (partition selection)
    "014": "answered",  # COUNT(DISTINCT age): age has no keys, L*C
    "016": "answered",  # STD(age)
    "020": "DP301",     # CONCAT(age, educ): a raw value per row
    "028": "answered",  # TOP 5 educ, AVG(income)
    "029": "answered",  # COUNT(married), AVG(age)
    "036": "DP103",     # PI(), RAND(): RAND is never allowed
    "037": "answered",  # GROUP BY married, CASE WHEN age > 90 THEN 1 ELSE 0 END
    "038": "answered",  # SUM(Age + Income): SmartNoise refuses it
    "039": "DP305",     # SUM(SUM(age))
    "042": "DP206",     # a self-join on pid
    "048": "answered",  # PUMS.PUMS.PUMS
    "050": "answered",  # income, COUNT(pid): a row count
    "090": "answered",  # ORDER BY COUNT(pid)
    "113": "answered",  # WHERE age > 90 AND educ = '8'
    "129": "answered",  # WHERE sex = True
    "132": "answered",  # WHERE educ IN (2, 3) GROUP BY educ
}


def test_a_subset_of_smartnoise_queries_keeps_its_outcomes():
    module = run_pums()
    corpus = {q.number: q for q in module.queries()}
    assert len(corpus) == 136
    results = module.run(only=[corpus[n] for n in EXPECTED], rows=300)
    assert results == EXPECTED
