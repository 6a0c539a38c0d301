"""``dpsql randomize`` end to end: a small CSV and a Parquet file in, a Parquet file or a DuckDB table out
with its parameters written and read back, the policy entries printed, bad input refused with its code."""
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from dpsql.api.randomize import read_parameters
from dpsql.cli import commands as cli
from dpsql.policy import load_policy

CSV = "id,smoker,region\n" + "".join(f"{i},{'true' if i % 3 else 'false'},{'NSEW'[i % 4]}\n" for i in range(30))


def invoke(runner, *args):
    return runner.invoke(cli.main, ["randomize", *map(str, args)], catch_exceptions=False)


def test_a_csv_randomized_into_parquet_prints_the_policy_entries_it_reads_back(runner, tmp_path):
    (tmp_path / "survey.csv").write_text(CSV)
    out = tmp_path / "survey_rr.parquet"
    result = invoke(runner, tmp_path / "survey.csv", "-c", "smoker", "-c", "region", "--domain", "region=N,S,E,W",
                    "--epsilon", "1.5", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "Warner randomized response over 2 categories, epsilon 1.5 per respondent" in result.stderr
    entries = yaml.safe_load(result.stdout)
    assert entries == {"local_model": True, "columns": {
        "smoker": {"randomized": {"epsilon": 1.5, "domain": [False, True]}},
        "region": {"randomized": {"epsilon": 1.5, "domain": ["N", "S", "E", "W"]}}}}
    params = read_parameters(out)
    assert params["region"]["categories"] == 4 and params["smoker"]["type"] == "BOOLEAN"
    table = pq.read_table(out)
    assert table.column("id").to_pylist() == list(range(30))
    assert set(table.column("region").to_pylist()) <= set("NSEW")
    # What it printed is a valid policy for the new table.
    policy = load_policy({"budget": {"epsilon": 1}, "tables": {"survey_rr": {"privacy_unit": "id", **entries}}})
    assert policy.tables["survey_rr"].columns["region"].randomized == 1.5


def test_a_parquet_file_randomized_into_a_duckdb_table_with_the_policy_keys(runner, tmp_path):
    pq.write_table(pa.table({"id": [1, 2, 3, 4], "sex": ["F", "M", "F", "M"]}), tmp_path / "people.parquet")
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"budget": {"epsilon": 1}, "tables": {"people": {
        "privacy_unit": "id", "columns": {"sex": {"keys": ["F", "M"]}}}}}))
    out = tmp_path / "out.duckdb"
    result = invoke(runner, tmp_path / "people.parquet", "-c", "sex", "--epsilon", "2", "--policy",
                    tmp_path / "policy.yaml", "-o", out, "--output-table", "people_rr")
    assert result.exit_code == 0, result.stderr
    assert read_parameters(out, "people_rr")["sex"]["domain"] == ["F", "M"]
    with duckdb.connect(str(out)) as con:
        assert con.execute("SELECT count(*) FROM people_rr WHERE sex IN ('F', 'M')").fetchall() == [(4,)]


def test_bad_input_is_refused_with_its_code_and_exit_code(runner, tmp_path):
    (tmp_path / "survey.csv").write_text(CSV)
    out = tmp_path / "o.parquet"
    unknown = invoke(runner, tmp_path / "survey.csv", "-c", "height", "--epsilon", "1", "-o", out)
    assert unknown.exit_code == 3 and "error[DP510]" in unknown.stderr and "no column 'height'" in unknown.stderr
    no_domain = invoke(runner, tmp_path / "survey.csv", "-c", "region", "--epsilon", "1", "-o", out)
    assert no_domain.exit_code == 3 and "error[DP511]" in no_domain.stderr and "--domain region=" in no_domain.stderr
    missing = invoke(runner, tmp_path / "survey.csv", "-c", "region", "--domain", "region=N,S,E", "--epsilon", "1",
                     "-o", out)
    assert missing.exit_code == 3 and "error[DP512]" in missing.stderr and "'W', outside its domain" in missing.stderr
    zero = invoke(runner, tmp_path / "survey.csv", "-c", "smoker", "--epsilon", "0", "-o", out)
    assert zero.exit_code == 2 and "error[DP401]" in zero.stderr
    malformed = invoke(runner, tmp_path / "survey.csv", "-c", "region", "--domain", "region", "--epsilon", "1",
                       "-o", out)
    assert malformed.exit_code == 1 and "COLUMN=A,B" in malformed.stderr
    assert not out.exists() and all(r.stdout == "" for r in (unknown, no_domain, missing, zero, malformed))


def test_the_randomized_file_answers_counts_in_the_local_model(runner, tmp_path):
    """randomize, paste the printed entries into a policy, query: the debiased counts, no budget spent."""
    (tmp_path / "survey.csv").write_text(CSV)
    out = tmp_path / "survey_rr.parquet"
    printed = invoke(runner, tmp_path / "survey.csv", "-c", "region", "--domain", "region=N,S,E,W", "--epsilon", "1",
                     "-o", out).stdout
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"budget": {"epsilon": 1}, "tables": {
        "survey_rr": {"privacy_unit": "id", **yaml.safe_load(printed)}}}))
    args = ["--db", str(out), "--policy", str(tmp_path / "policy.yaml"), "--ledger", str(tmp_path / "l.sqlite")]
    query = "SELECT region, COUNT(*) AS n FROM survey_rr GROUP BY region"
    answered = runner.invoke(cli.main, ["query", query, *args, "--format", "csv"], catch_exceptions=False)
    assert answered.exit_code == 0, answered.stderr
    assert "note: local model: epsilon 1 per respondent (4-ary randomized response of survey_rr.region)" \
        in answered.stderr
    assert answered.stdout.splitlines()[0] == "region,n,n_variance,n_ci_low,n_ci_high"
    assert [line.split(",")[0] for line in answered.stdout.splitlines()[1:]] == list("NSEW")
    budget = runner.invoke(cli.main, ["budget", "--ledger", str(tmp_path / "l.sqlite"), "--format", "json"])
    assert '"spent"' in budget.stdout and yaml.safe_load(budget.stdout)["spent"]["epsilon"] == 0
