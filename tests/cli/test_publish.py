"""``dpsql publish`` (issue 26, items 3 and 5): the release written to -o DIR, --dry-run, --quiet, progress
on stderr, and the exit codes an orchestrator acts on: 0 published, 2 refused or over budget (nothing
spent), 3 a set-up error (the spec), 4 incomplete (a statistic failed after its charge), 1 usage."""
from __future__ import annotations

import contextlib
import io
import json
import os

import duckdb
import pytest
import yaml
from click.testing import CliRunner

import dpsql
from dpsql import testing
from dpsql.cli import commands as cli
from dpsql.cli import publish_cmd

SPEC = {"title": "people", "budget": {"epsilon": 2.0, "delta": 1e-6}, "statistics": [
    {"name": "by_sex", "sql": "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", "weight": 2},
    # adults only: another frame than by_sex's, so each runs alone (lower/shared.py)
    {"name": "ages", "sql": "SELECT sex, AVG(age) AS age FROM people WHERE age >= 18 GROUP BY sex"}]}


def invoke(*args, env=None):
    return CliRunner().invoke(cli.main, ["publish", *map(str, args)], env=env, catch_exceptions=False)


@pytest.fixture
def release(tmp_path):
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def ledger_of(files) -> str:
    return files[1] + ".dpsql-ledger.sqlite"


def test_publish_writes_the_release_and_a_rerun_replays_it(files, release, tmp_path):
    out = tmp_path / "out"
    first = invoke(release, *files, "-o", out)
    assert first.exit_code == 0, first.stderr
    assert "published 2 of 2 statistics" in first.stdout and "(2 charged, 0 replayed free)" in first.stdout
    assert ["planned by_sex", "planned ages"] == first.stderr.splitlines()[:2]   # progress, not a terminal
    assert sorted(os.listdir(out)) == ["ages.parquet", "by_sex.parquet", "manifest.json", "report.html", "report.md"]
    again = invoke(release, *files, "-o", out)
    assert again.exit_code == 0 and "spent epsilon=0, delta=0 (0 charged, 2 replayed free)" in again.stdout
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_dry_run_prints_the_plan_and_spends_nothing(files, release, tmp_path):
    result = invoke(release, *files, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "by_sex: epsilon=1.33333 (67% of the release)" in result.stdout
    assert "n (count): expected error" in result.stdout and "it fits" in result.stdout
    assert not os.path.exists(ledger_of(files)) and not (tmp_path / "out").exists()
    invoke(release, *files, "-o", tmp_path / "out")
    assert "by_sex: replays free" in invoke(release, *files, "--dry-run", "-o", tmp_path / "out").stdout


def test_quiet_prints_nothing(files, release, tmp_path):
    result = invoke(release, *files, "-o", tmp_path / "out", "--quiet")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize("change, code, fragment", [
    ({"budget": {"epsilon": 20.0}}, 2, "error[DP402]"),
    ({"statistics": [{"name": "x", "sql": "SELECT ssn, COUNT(*) AS n FROM people GROUP BY ssn"}]}, 2,
     "statement 'x' of the batch"),
    ({"statistics": [{"name": "a b", "sql": "SELECT COUNT(*) FROM people"}]}, 3, "error[DP526]"),
    ({"budget": {"epsilon": -1}}, 3, "error[DP525]"),
])
def test_a_release_refused_or_broken_exits_2_or_3_and_spends_nothing(files, tmp_path, change, code, fragment):
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **change}))
    result = invoke(path, *files, "-o", tmp_path / "out", "--quiet")
    assert result.exit_code == code and fragment in result.stderr and result.stdout == ""
    assert not os.path.exists(ledger_of(files)) or dpsql.connect(files[1], policy=files[3]).budget.queries == 0


def test_a_dry_run_that_does_not_fit_exits_2(files, tmp_path):
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "budget": {"epsilon": 20.0}}))
    result = invoke(path, *files, "--dry-run")
    assert result.exit_code == 2 and "it does NOT fit" in result.stdout


def test_usage_errors_exit_1(files, release):
    assert invoke(release, *files).exit_code == 1   # no -o and no --dry-run
    assert invoke(release, *files, "-o", "x", "--format", "xlsx").exit_code == 1


def test_a_statistic_that_fails_after_its_charge_exits_4(files, release, tmp_path, monkeypatch):
    """The engine fails on the second statistic: it stays spent, the first is written; re-running resumes."""
    opened = dpsql.connect
    with contextlib.ExitStack() as stack:
        runs: list[int] = []

        def failing(*args, **kwargs):
            db = opened(*args, **kwargs)

            def second_fails():   # the second statistic's draw: each runs its draw, then its outputs
                runs.append(1)
                if len(runs) == 3:
                    raise duckdb.IOException("disk gone")
            stack.enter_context(testing.before_run(db, second_fails))
            return db
        monkeypatch.setattr(dpsql, "connect", failing)
        result = invoke(release, *files, "-o", tmp_path / "out")
    assert result.exit_code == publish_cmd.EXIT_INCOMPLETE == 4
    assert "failed after its charge (spent): ages: DP900" in result.stdout and "re-run" in result.stdout
    monkeypatch.setattr(dpsql, "connect", opened)
    resumed = invoke(release, *files, "-o", tmp_path / "out")
    assert resumed.exit_code == 0 and "(1 charged, 1 replayed free)" in resumed.stdout


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_rich_and_quiet_is_silent():
    shown = Terminal()
    with publish_cmd.progress(2, False, stream=shown) as step:
        for phase, name in (("plan", "a"), ("plan", "b"), ("run", ""), ("write", ""), ("report", "")):
            step(phase, name)
    assert "\x1b[" in shown.getvalue() and "planned" in shown.getvalue()   # drawn with rich, then cleared
    silent = Terminal()
    with publish_cmd.progress(2, True, stream=silent) as step:
        step("plan", "a")
    assert silent.getvalue() == ""
