"""The README's exit codes, per code and per command (issue 25, item 8): 0 answered, 2 refused by dpsql,
3 a set-up error (policy, database, ledger, a file named that does not exist, the analyst's missing
token), 1 anything else (usage errors included). Also where the CLI finds its SQL, its ledger and its
data: stdin piped without an argument, DPSQL_LEDGER and dpsql.toml for budget, a policy of sources."""
from __future__ import annotations

import json

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from dpsql.cli import commands as cli
from tests.support.cli import COUNT_BY_SEX, POLICY


def invoke(*args, input=None, env=None):
    return CliRunner().invoke(cli.main, list(args), input=input, env=env, catch_exceptions=False)


@pytest.mark.parametrize("command", ["query", "explain"])
def test_a_missing_database_or_policy_file_is_a_set_up_error(files, tmp_path, command):
    db, policy = files[1], files[3]
    for args, code in ((["--db", str(tmp_path / "nope.duckdb"), "--policy", policy], "DP503"),
                       (["--db", db, "--policy", str(tmp_path / "nope.yaml")], "DP501")):
        result = invoke(command, COUNT_BY_SEX, *args)
        assert result.exit_code == 3, result.output
        assert f"error[{code}]" in result.stderr and "nope." in result.stderr and "hint: " in result.stderr
        assert result.stdout == "" and "Traceback" not in result.stderr


def test_files_named_by_the_environment_are_checked_alike(files, tmp_path):
    result = invoke("query", COUNT_BY_SEX, env={"DPSQL_DB": str(tmp_path / "gone.duckdb"), "DPSQL_POLICY": files[3]})
    assert result.exit_code == 3 and "error[DP503]" in result.stderr and "gone.duckdb" in result.stderr


def test_serve_and_budget_check_their_files_as_set_up_errors(files, tmp_path):
    missing = str(tmp_path / "nope.yaml")
    assert invoke("serve", "--db", files[1], "--policy", missing).exit_code == 3
    assert invoke("budget", "--policy", missing, "--db", files[1]).exit_code == 3
    assert invoke("budget", "--db", str(tmp_path / "nope.duckdb")).exit_code == 3


def test_each_exit_code_of_query(files, tmp_path):
    ledger = str(tmp_path / "b.sqlite")
    assert invoke("query", COUNT_BY_SEX, *files, "--ledger", ledger).exit_code == 0
    assert invoke("query", "SELECT ssn FROM people", *files, "--ledger", ledger).exit_code == 2
    assert invoke("query", COUNT_BY_SEX, *files, "--ledger", ledger, "--epsilon", "1000").exit_code == 2   # DP402
    (tmp_path / "bad.sqlite").write_text("not a ledger")
    assert invoke("query", COUNT_BY_SEX, *files, "--ledger", str(tmp_path / "bad.sqlite")).exit_code == 3   # DP406
    assert invoke("query", COUNT_BY_SEX, *files, "--format", "xml").exit_code == 1   # usage


def test_the_analysts_missing_token_is_a_set_up_error():
    result = invoke("query", COUNT_BY_SEX, "--server", "http://127.0.0.1:9",
                    env={"DPSQL_TOKEN": "", "DPSQL_TOKEN_FILE": "/nonexistent"})
    assert result.exit_code == 3 and "error[DP410]" in result.stderr and "DPSQL_TOKEN" in result.stderr


@pytest.mark.parametrize("stdin", [COUNT_BY_SEX, COUNT_BY_SEX + "\n"])
def test_sql_piped_without_an_argument_is_read(files, tmp_path, stdin):
    result = invoke("query", *files, "--ledger", str(tmp_path / "b.sqlite"), "--format", "json", input=stdin)
    assert result.exit_code == 0, result.output
    assert [r["sex"] for r in json.loads(result.stdout)] == ["F", "M"]


@pytest.mark.parametrize("args, input, said", [
    ([], "", "stdin is empty"), (["   "], None, "the argument is empty"), (["-"], "\n", "stdin is empty")])
def test_no_sql_at_all_is_a_usage_error_that_says_so(files, args, input, said):
    result = invoke("query", *args, *files, input=input)
    assert result.exit_code == 1 and said in result.stderr and "not both" not in result.stderr


def test_budget_finds_its_ledger_as_query_does(files, tmp_path, monkeypatch):
    ledger = tmp_path / "spent.sqlite"
    assert invoke("query", COUNT_BY_SEX, *files, "--ledger", str(ledger), "--epsilon", "0.25").exit_code == 0
    by_env = invoke("budget", "--format", "json", env={"DPSQL_LEDGER": str(ledger)})
    assert by_env.exit_code == 0, by_env.output
    assert json.loads(by_env.stdout)["spent"]["epsilon"] == 0.25
    (tmp_path / "dpsql.toml").write_text('ledger = "spent.sqlite"\n')
    monkeypatch.chdir(tmp_path)
    by_file = invoke("budget", "--format", "json", env={"DPSQL_LEDGER": "", "DPSQL_DB": ""})
    assert by_file.exit_code == 0, by_file.output
    assert json.loads(by_file.stdout)["spent"]["epsilon"] == 0.25


@pytest.fixture
def sources(tmp_path):
    """A policy whose one table is read from its source: a Parquet file beside it; no database."""
    con = duckdb.connect()
    con.execute(f"COPY (SELECT i AS person_id, 'x' || i AS ssn, i % 90 AS age, "
                f"CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, 1000.0 * (i % 7) AS income, '1' AS zip "
                f"FROM range(1, 301) t(i)) TO '{tmp_path / 'people.parquet'}' (FORMAT parquet)")
    policy = yaml.safe_load(yaml.safe_dump(POLICY))
    policy["tables"]["people"]["source"] = "people.parquet"
    (tmp_path / "sources.yaml").write_text(yaml.safe_dump(policy))
    return str(tmp_path / "sources.yaml"), str(tmp_path / "budget.sqlite")


@pytest.mark.parametrize("db", [[], ["--db", ":memory:"]])
def test_a_policy_of_sources_needs_no_database(sources, db):
    policy, ledger = sources
    result = invoke("query", COUNT_BY_SEX, *db, "--policy", policy, "--ledger", ledger, "--format", "json")
    assert result.exit_code == 0, result.output
    assert [r["sex"] for r in json.loads(result.stdout)] == ["F", "M"]
    plan = invoke("explain", COUNT_BY_SEX, *db, "--policy", policy, "--ledger", ledger)
    assert plan.exit_code == 0 and "dpsql plan for:" in plan.stdout
    unledgered = invoke("query", COUNT_BY_SEX, *db, "--policy", policy)
    assert unledgered.exit_code == 3 and "error[DP403]" in unledgered.stderr


def test_a_policy_without_sources_still_needs_a_database(files):
    result = invoke("query", COUNT_BY_SEX, "--policy", files[3], env={"DPSQL_DB": ""})
    assert result.exit_code == 1 and "no db: pass --db FILE" in result.stderr


def test_serve_opens_a_policy_of_sources_without_a_database(sources, monkeypatch):
    import dpsql.server.run as run_module
    served = {}
    monkeypatch.setattr(run_module, "serve", lambda *args, **kwargs: served.update(args=args))
    policy, ledger = sources
    result = invoke("serve", "--policy", policy, "--ledger", ledger)
    assert result.exit_code == 0, result.output
    assert served["args"] == (None, policy, ledger)


@pytest.mark.parametrize("args, code", [
    (["analyst", "add", "alice", "--epsilon", "1", "--ledger", "{tmp}/b.sqlite", "--policy", "{tmp}/nope.yaml"],
     "DP501"),
    (["ledger", "rebind", "--ledger", "{tmp}/b.sqlite", "--policy", "{tmp}/nope.yaml", "--yes"], "DP501"),
    (["policy", "import", "{tmp}/nope.yaml"], "DP501"),
    (["randomize", "{tmp}/nope.parquet", "-c", "sex", "--epsilon", "1", "-o", "{tmp}/out.parquet"], "DP505")])
def test_every_command_says_a_missing_file_is_a_set_up_error(tmp_path, args, code):
    result = invoke(*[a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 3 and f"error[{code}]" in result.stderr and "nope." in result.stderr


@pytest.mark.parametrize("command", ["query", "serve"])
def test_a_database_beside_engine_spark_is_a_set_up_error_before_spark_starts(files, command, monkeypatch):
    """Spark reads the policy's sources, never a DuckDB file: answering from them instead of the --db named
    would answer another question, so the pair is refused (exit 3) before a Spark session is asked for."""
    from dpsql.cli import spark
    monkeypatch.setattr(spark, "spark_session", lambda master: pytest.fail("a Spark session was started"))
    args = [COUNT_BY_SEX] if command == "query" else []
    result = invoke(command, *args, *files, "--engine", "spark", "--ledger", "budget.sqlite")
    assert result.exit_code == 3, result.output
    assert "error[DP503]" in result.stderr and "--engine spark does not read the database" in result.stderr
    assert "hint: drop --db" in result.stderr and "serving" not in result.stderr


@pytest.mark.parametrize("command", ["query", "serve"])
def test_engine_spark_without_pyspark_is_a_set_up_error(sources, command, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)   # import fails as when pyspark is not installed
    policy, ledger = sources
    args = [COUNT_BY_SEX] if command == "query" else []
    result = invoke(command, *args, "--policy", policy, "--engine", "spark", "--ledger", ledger)
    assert result.exit_code == 3, result.output
    assert "error[DP503]" in result.stderr and "needs pyspark" in result.stderr
    assert "pip install 'dpsql[spark]'" in result.stderr and "Traceback" not in result.stderr
