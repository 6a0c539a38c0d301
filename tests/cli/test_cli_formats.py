"""The CLI's ways in and out (README: Shell): every output format, -o FILE, -f FILE, defaults from
the environment and dpsql.toml, warnings on stderr, and exit codes (0 answered, 2 refused, 3 set-up
error, 1 other failure) through click's runner and through a real process."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pyarrow.parquet as pq
import pytest

from dpsql.cli import commands as cli
from tests.support.cli import COUNT_BY_SEX as SQL
from tests.support.paths import ROOT
from dpsql.api.display import interval_note


@pytest.fixture(autouse=True)
def clean_setup(monkeypatch, tmp_path):
    """No DPSQL_* variable and no dpsql.toml from the developer's shell: each test sets its own."""
    for var in ("DPSQL_DB", "DPSQL_POLICY", "DPSQL_LEDGER"):
        monkeypatch.delenv(var, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


def run(runner, *args, input=None, env=None):
    return runner.invoke(cli.main, list(args), input=input, env=env, catch_exceptions=False)


def answered(runner, *args, **kw):
    result = run(runner, *args, **kw)
    assert result.exit_code == 0, result.stderr
    return result


# --- formats -------------------------------------------------------------------------------------------

def test_every_text_format_holds_the_same_answer(runner, files):
    # An identical query is replayed at no cost: every format shows the one released answer.
    rows = json.loads(answered(runner, "query", SQL, *files, "--format", "json").stdout)
    expected = [(r["sex"], r["n"]) for r in rows]
    ndjson = answered(runner, "query", SQL, *files, "--format", "ndjson").stdout
    assert [tuple(json.loads(line).values()) for line in ndjson.splitlines()] == expected
    table = list(csv.reader(io.StringIO(answered(runner, "query", SQL, *files, "--format", "csv").stdout)))
    assert table[0] == ["sex", "n"] and [(r[0], int(r[1])) for r in table[1:]] == expected
    markdown = answered(runner, "query", SQL, *files, "--format", "markdown").stdout.splitlines()
    assert markdown[:2] == ["| sex | n |", "| :-- | --: |"]
    assert markdown[2:] == [f"| {sex} | {n} |" for sex, n in expected]
    text = answered(runner, "query", SQL, *files).stdout.splitlines()
    assert text[1].split() == ["│", "sex", "│", "n", "│"] and "2 rows" in text
    assert [(line.split()[1], int(line.split()[3])) for line in text[4:6]] == expected


def test_parquet_needs_an_output_file_and_is_refused_before_anything_is_spent(runner, files, tmp_path):
    ledger = tmp_path / "budget.sqlite"
    result = run(runner, "query", SQL, *files, "--format", "parquet", "--ledger", str(ledger))
    assert result.exit_code == 1 and "pass -o FILE.parquet" in result.stderr and result.stdout == ""
    assert not ledger.exists()


def test_output_file_by_suffix(runner, files, tmp_path):
    rows = json.loads(answered(runner, "query", SQL, *files, "--format", "json").stdout)
    out = tmp_path / "answer.parquet"
    result = answered(runner, "query", SQL, *files, "-o", str(out))
    assert result.stdout == "" and pq.read_table(out).to_pylist() == rows
    out = tmp_path / "answer.csv"
    answered(runner, "query", SQL, *files, "-o", str(out))
    assert out.read_text().splitlines()[0] == "sex,n"
    out = tmp_path / "answer.txt"
    answered(runner, "query", SQL, *files, "-o", str(out), "--format", "ndjson")   # --format wins
    assert json.loads(out.read_text().splitlines()[0])["sex"] == "F"


def test_a_refusal_leaves_the_output_file_as_it_was(runner, files, tmp_path):
    out = tmp_path / "answer.csv"
    out.write_text("earlier answer\n")
    result = run(runner, "query", "SELECT ssn FROM people", *files, "-o", str(out))
    assert result.exit_code == 2 and out.read_text() == "earlier answer\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".answer")] == []


@pytest.mark.parametrize("command", ["query", "explain"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_spent(runner, files, tmp_path, command):
    """Issue 25 item 7: -o into a missing folder charged the budget, then failed with a traceback naming a
    temporary file."""
    ledger = tmp_path / "budget.sqlite"
    result = run(runner, command, SQL, *files, "--ledger", str(ledger), "-o", str(tmp_path / "nowhere" / "a.csv"))
    assert result.exit_code == 1 and "nothing was spent" in result.stderr and "nowhere" in result.stderr
    assert "Traceback" not in result.stderr and ".a.csv." not in result.stderr
    assert not ledger.exists()


def test_an_answer_that_cannot_be_written_after_its_charge_says_a_rerun_is_free(runner, files, tmp_path,
                                                                                  monkeypatch):
    from dpsql.cli import output

    def full_disk(data, path):
        raise OSError(28, "No space left on device")
    ledger, out = tmp_path / "budget.sqlite", tmp_path / "a.csv"
    with monkeypatch.context() as patched:
        patched.setattr(output, "write", full_disk)
        result = run(runner, "query", SQL, *files, "--ledger", str(ledger), "-o", str(out))
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "No space left on device" in result.stderr and "run again returns it at no cost" in result.stderr
    again = answered(runner, "query", SQL, *files, "--ledger", str(ledger), "-o", str(out))
    assert "no budget spent" in again.stderr and out.read_text().startswith("sex,n")


def test_explain_writes_its_plan_to_a_file(runner, files, tmp_path):
    out = tmp_path / "plan.txt"
    result = answered(runner, "explain", SQL, *files, "-o", str(out))
    assert result.stdout == "" and "rewritten SQL" in out.read_text()


# --- SQL from a file ------------------------------------------------------------------------------------

def test_sql_from_a_file_or_stdin(runner, files, tmp_path):
    script = tmp_path / "report.sql"
    script.write_text("-- the count by sex\n" + SQL + "\n")
    from_file = json.loads(answered(runner, "query", "-f", str(script), *files, "--format", "json").stdout)
    from_stdin = json.loads(answered(runner, "query", "-f", "-", *files, "--format", "json", input=SQL).stdout)
    assert [r["sex"] for r in from_file] == [r["sex"] for r in from_stdin] == ["F", "M"]
    assert "rewritten SQL" in answered(runner, "explain", "--file", str(script), *files).stdout


def test_sql_given_twice_or_not_at_all_is_a_usage_error(runner, files, tmp_path):
    script = tmp_path / "report.sql"
    script.write_text(SQL)
    for args in (["query", SQL, "-f", str(script)], ["query"], ["explain"]):
        result = run(runner, *args, *files)
        assert result.exit_code == 1 and "-f FILE" in result.stderr, args


# --- defaults from the environment and dpsql.toml --------------------------------------------------------

def _split(files):
    return files[1], files[3]   # the database and policy paths


def test_defaults_from_the_environment(runner, files, tmp_path):
    db, policy = _split(files)
    ledger = tmp_path / "env-ledger.sqlite"
    env = {"DPSQL_DB": db, "DPSQL_POLICY": policy, "DPSQL_LEDGER": str(ledger)}
    answered(runner, "query", SQL, env=env)
    assert ledger.exists()
    assert "rewritten SQL" in answered(runner, "explain", SQL, env=env).stdout
    # An option wins over the environment.
    other = tmp_path / "option-ledger.sqlite"
    answered(runner, "query", SQL, "--ledger", str(other), env=env)
    assert other.exists()


def test_defaults_from_dpsql_toml_here(runner, files):
    db, policy = _split(files)
    Path("dpsql.toml").write_text(f'db = "{db}"\npolicy = "{policy}"\nledger = "here.sqlite"\n')
    answered(runner, "query", SQL)
    assert Path("here.sqlite").exists()   # relative to the file


def test_defaults_from_dpsql_toml_beside_the_database(runner, files, tmp_path):
    db, policy = _split(files)
    beside = Path(db).parent / "dpsql.toml"
    beside.write_text(f'policy = "{Path(policy).name}"\nledger = "beside.sqlite"\n')
    answered(runner, "query", SQL, "--db", db)
    assert (Path(db).parent / "beside.sqlite").exists()
    # The current directory's file names the database; the one beside it gives the rest.
    Path("dpsql.toml").write_text(f'db = "{db}"\n')
    answered(runner, "explain", SQL)


@pytest.mark.parametrize("content, message", [
    ('db = "x.duckdb"\npolcy = "p.yaml"\n', "unknown setting 'polcy'"),
    ("db = [unclosed\n", "cannot read it as TOML"),
    ("db = 3\n", "db must be a path in quotes"),
])
def test_a_bad_dpsql_toml_is_a_usage_error(runner, files, content, message):
    Path("dpsql.toml").write_text(content)
    result = run(runner, "query", SQL)
    assert result.exit_code == 1 and message in result.stderr and result.stdout == ""


def test_no_database_anywhere_says_every_way_to_give_one(runner):
    result = run(runner, "query", SQL)
    assert result.exit_code == 1
    assert "pass --db FILE, set DPSQL_DB, or write db" in result.stderr


# --- warnings and suggestions on stderr ------------------------------------------------------------------

def test_a_tiny_epsilon_warns_on_stderr(runner, files):
    result = answered(runner, "query", SQL, *files, "--epsilon", "1e-12", "--format", "json")
    assert "warning: epsilon 1e-12 is so small that the noise dwarfs any plausible answer" in result.stderr
    assert len(json.loads(result.stdout)) == 2
    result = answered(runner, "explain", SQL, *files, "--epsilon", "1e-12")
    assert "warning: epsilon 1e-12" in result.stderr


def test_partition_selection_warns_without_a_number(runner, files):
    result = answered(runner, "query", "SELECT zip, COUNT(*) AS n FROM people GROUP BY zip", *files,
                      "--delta", "1e-7", "--format", "json")
    assert "warning: groups with few people are suppressed" in result.stderr


def test_a_typo_gets_a_suggestion(runner, files):
    result = run(runner, "query", "SELECT AVG(incme) FROM people", *files)
    assert result.exit_code == 2 and "did you mean 'income'?" in result.stderr


# --- exit codes ------------------------------------------------------------------------------------------

def _broken_policy(tmp_path) -> str:
    path = tmp_path / "broken.yaml"
    path.write_text("tables: {people: {privacy_unit: 3}}\n")
    return str(path)


def test_exit_codes_through_click(runner, files, tmp_path):
    db, policy = _split(files)
    assert run(runner, "query", SQL, *files).exit_code == 0
    assert run(runner, "query", "SELECT ssn FROM people", *files).exit_code == 2           # refused
    assert run(runner, "query", SQL, *files, "--epsilon", "1000", "--fresh").exit_code == 2   # DP402
    assert run(runner, "query", SQL, "--db", db, "--policy", _broken_policy(tmp_path)).exit_code == 3
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not a ledger" * 100)
    assert run(runner, "query", SQL, *files, "--ledger", str(corrupt)).exit_code == 3       # DP406
    assert run(runner, "query", SQL, *files, "--no-such-option").exit_code == 1


def _process(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSQL_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", "from dpsql.cli import main; main()", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_exit_codes_of_a_real_process(files, tmp_path):
    db, policy = _split(files)
    ok = _process("query", SQL, *files, "--format", "csv", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.splitlines()[0] == "sex,n", ok.stderr
    refused = _process("query", "SELECT AVG(incme) FROM people", *files, cwd=tmp_path)
    assert refused.returncode == 2 and "error[DP202]" in refused.stderr and refused.stdout == ""
    setup = _process("query", SQL, "--db", db, "--policy", _broken_policy(tmp_path), cwd=tmp_path)
    assert setup.returncode == 3 and "error[DP501]" in setup.stderr and setup.stdout == ""
    usage = _process("query", SQL, "--format", "yaml", *files, cwd=tmp_path)
    assert usage.returncode == 1 and "Traceback" not in usage.stderr


# --- help -------------------------------------------------------------------------------------------------

def _commands(group: click.Group, path=()):
    for name, command in sorted(group.commands.items()):
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def test_every_command_has_an_example_in_its_help(runner):
    for path, _ in [((), cli.main), *_commands(cli.main)]:
        result = run(runner, *path, "--help")
        assert result.exit_code == 0 and "Example" in result.stdout, f"dpsql {' '.join(path)} --help"
        assert "dpsql " in result.stdout.split("Example", 1)[1], f"dpsql {' '.join(path)} --help"


# --- issue 25, item 10: the command line's niggles --------------------------------------------------------

def test_version(runner):
    import dpsql
    result = answered(runner, "--version")
    assert result.stdout == f"dpsql {dpsql.__version__}\n"


def test_a_tsv_output_is_tab_separated(runner, files, tmp_path):
    rows = json.loads(answered(runner, "query", SQL, *files, "--format", "json").stdout)
    out = tmp_path / "answer.tsv"
    answered(runner, "query", SQL, *files, "-o", str(out))
    lines = out.read_text().splitlines()
    assert lines[0] == "sex\tn" and lines[1:] == [f"{r['sex']}\t{r['n']}" for r in rows]
    assert answered(runner, "query", SQL, *files, "--format", "tsv").stdout.splitlines() == lines


def test_shell_completion_as_the_readme_documents_it(runner):
    readme = (ROOT / "README.md").read_text()
    assert 'eval "$(_DPSQL_COMPLETE=bash_source dpsql)"' in readme
    script = runner.invoke(cli.main, [], prog_name="dpsql", env={"_DPSQL_COMPLETE": "bash_source"})
    assert script.exit_code == 0 and "_dpsql_completion" in script.stdout
    words = runner.invoke(cli.main, [], prog_name="dpsql",
                          env={"_DPSQL_COMPLETE": "bash_complete", "COMP_WORDS": "dpsql que", "COMP_CWORD": "1"})
    assert "plain,query" in words.stdout


def test_explain_leaves_the_rewritten_sql_out_unless_asked(runner, files):
    short = answered(runner, "explain", SQL, *files).stdout
    assert "measurements:" in short and "rewritten SQL: " in short and "line(s), shown with --sql" in short
    assert '"__rows"' not in short
    full = answered(runner, "explain", SQL, *files, "--sql").stdout
    assert full.startswith(short.rsplit("rewritten SQL:", 1)[0]) and '"__rows"' in full


def test_explain_as_json(runner, files):
    doc = json.loads(answered(runner, "explain", SQL, *files, "--epsilon", "0.5", "--format", "json").stdout)
    assert doc["epsilon"] == 0.5 and [o["name"] for o in doc["outputs"]] == ["sex", "n"]
    assert doc["outputs"][1]["expected_error"] > 0 and doc["budget_before"]["readable"] is True
    assert doc["text"].startswith("dpsql plan for: ") and "rewritten_sql" not in doc
    assert "__rows" in json.loads(answered(runner, "explain", SQL, *files, "--format", "json", "--sql").stdout)[
        "rewritten_sql"]


def test_the_plan_does_not_echo_the_sqls_comment_header(runner, files, tmp_path):
    script = tmp_path / "report.sql"
    script.write_text("-- monthly report: people by sex\n/* owner: alice */\n" + SQL + "\n")
    plan = answered(runner, "explain", "-f", str(script), *files).stdout
    assert plan.splitlines()[0] == f"dpsql plan for: {SQL}"


def test_the_table_fits_the_terminal_with_the_noisy_marks_and_footer(runner, files):
    wide = "SELECT sex, COUNT(*) AS n, AVG(income) AS income, AVG(age) AS age, SUM(income) AS total FROM people " \
           "GROUP BY sex"
    full = answered(runner, "query", wide, *files, "--ci", "0.95").stdout.splitlines()
    assert max(map(len, full)) > 100 and "~ noisy: differentially private (epsilon 1, delta 0)" in full
    assert "[low, high]: " + interval_note(0.95) in full, "the footer says what the intervals cover"
    narrow = answered(runner, "query", wide, *files, "--ci", "0.95", env={"COLUMNS": "80"}).stdout.splitlines()
    assert max(map(len, narrow)) <= 80 and narrow[1].split()[:4] == ["│", "sex", "│", "n"]
    assert "│ … │" in narrow[1] and narrow[-1].endswith("columns left out to fit 80 characters")
    assert "~ noisy: differentially private (epsilon 1, delta 0); replayed at no cost" in narrow


def test_sql_that_opens_with_a_comment_is_not_taken_for_an_option(runner, files):
    plan = answered(runner, "explain", "-- monthly report\n" + SQL, *files, "--epsilon", "0.5").stdout
    assert plan.splitlines()[0] == f"dpsql plan for: {SQL}" and "budget: epsilon 0.5" in plan
