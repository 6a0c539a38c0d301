"""The scheduled job of examples/nightly_release.py (issue 26, item 6): run twice, it writes the same files
and the second run spends nothing (a retry of a finished release is free)."""
from __future__ import annotations

import importlib.util
import json

import pytest

import dpsql
from dpsql.cli.demo import build_dataset
from tests.support.paths import ROOT


def job():
    spec = importlib.util.spec_from_file_location("nightly_release", ROOT / "examples" / "nightly_release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_nightly_job_run_twice_writes_the_same_files_and_spends_once(tmp_path, capsys):
    db = build_dataset(tmp_path / "demo.duckdb", rows=2000)
    policy, out, task = tmp_path / "policy.yaml", tmp_path / "release", job()
    first = task.publish_release(str(db), str(policy), str(out))
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    assert first["spent_epsilon"] == 1.0 and first["replayed"] == [] and len(first["files"]) == 4
    spent = dpsql.connect(str(db), policy=str(policy)).budget.spent_epsilon
    assert task.main(["--db", str(db), "--policy", str(policy), "--out", str(out)]) == 0   # the retry
    second = json.loads(capsys.readouterr().out)
    assert second["spent_epsilon"] == 0 and sorted(second["replayed"]) == sorted(s["name"] for s in task.SPEC["statistics"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == written
    assert dpsql.connect(str(db), policy=str(policy)).budget.spent_epsilon == spent == pytest.approx(1.0)
