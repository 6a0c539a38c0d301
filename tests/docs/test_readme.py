"""Every code block of README.md runs as written (issue 25, item 13), in order, section by section, each
section in a fresh copy of what ``dpsql demo --dir D`` writes (demo.duckdb, policy.yaml):

- ``python``: exec'd, one namespace per section, in the section's directory; what it prints is kept;
- ``shell``: run by bash (``set -e``; a leading ``$ `` prompt dropped) with ``dpsql`` the real command line
  of this checkout (``python3 -m dpsql.cli``, never another installed dpsql);
- ``yaml`` / ``toml``: written to the file ``<!-- file: NAME -->`` names, else parsed (yaml as a policy:
  dpsql's load-time checks, DP501);
- ``text``: what the block above printed, compared with its numbers and widths left out (the noise
  changes them); or ``<!-- checked: ... -->``: a synopsis whose options must be in ``--help``, a layout
  whose folders must exist.

A block that cannot run as written says why in ``<!-- not run: ... -->`` just above it; they are counted.
"""
from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import dpsql
from dpsql import testing
from dpsql.cli.config import read_config
from dpsql.policy import load_policy
from tests.support.paths import ROOT, tomllib
from tests.support.readme import Block, blocks, normalised_table

README = (ROOT / "README.md").read_text()
BLOCKS = blocks(README)
SECTIONS = list(dict.fromkeys(b.section for b in BLOCKS if not b.marker.startswith("not run:")))
NOT_RUN = 6   # the two set-up commands (they install), dpsql serve (it serves until stopped), dpsql.remote
#               (a server and a token), pyspark's install and a Spark session (Java; marker spark runs the
#               same): each one more is a block that no test runs


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """``dpsql demo --dir`` once, through the command line: the README's starting point."""
    directory = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "dpsql.cli", "demo", "--dir", str(directory)],
                          capture_output=True, text=True, env=_env(directory), timeout=300)
    assert done.returncode == 0, done.stderr
    return directory


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    """A folder holding ``dpsql``: this checkout's command line under this interpreter."""
    folder = tmp_path_factory.mktemp("bin")
    (folder / "dpsql").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dpsql.cli "$@"\n')
    (folder / "dpsql").chmod(0o755)
    return folder


def _env(folder: Path, shim: Path | None = None) -> dict:
    path = f"{shim}{os.pathsep}{os.environ['PATH']}" if shim else os.environ["PATH"]
    return {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path, "COLUMNS": "200", "HOME": str(folder)}


def test_every_block_is_of_a_kind_this_test_runs():
    kinds = {"python", "shell", "yaml", "toml", "text"}
    assert [b.where for b in BLOCKS if b.language not in kinds] == []
    assert [b.where for b in BLOCKS if b.marker and not re.match(r"(not run|file|checked): ", b.marker)] == []
    assert sum(b.marker.startswith("not run:") for b in BLOCKS) == NOT_RUN


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s or "top")
def test_the_sections_blocks_run_as_written(section, demo, shim, tmp_path, monkeypatch):
    here = tmp_path / "demo"
    shutil.copytree(demo, here)
    monkeypatch.chdir(here)
    namespace: dict = {"__name__": "readme"}
    printed = ""
    for block in (b for b in BLOCKS if b.section == section and not b.marker.startswith("not run:")):
        printed = _run(block, here, shim, namespace, printed)


def _run(block: Block, here: Path, shim: Path, namespace: dict, printed: str) -> str:
    """Runs one block; returns what it printed (a ``text`` block is compared with the block's before)."""
    if block.marker.startswith("file: "):
        (here / block.marker[len("file: "):]).write_text(block.text)
    elif block.language == "python":
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.text, block.where, "exec"), namespace)
        return out.getvalue()
    elif block.language == "shell":
        script = "set -e\n" + re.sub(r"^\$ ", "", block.text, flags=re.M)
        done = subprocess.run(["bash", "-c", script], cwd=here, capture_output=True, text=True,
                              env=_env(here, shim), timeout=300)
        assert done.returncode == 0, f"{block.where}\n{block.text}\n{done.stderr}"
        return done.stdout
    elif block.language == "yaml":
        load_policy(yaml.safe_load(block.text))
    elif block.language == "toml":
        tomllib.loads(block.text)
    elif block.marker.startswith("checked: every option"):
        _options_are_in_help(block.text, shim, here)
    elif block.marker.startswith("checked: every folder"):
        _folders_exist(block.text)
    else:
        assert normalised_table(block.text) == normalised_table(printed), block.where
    return ""


def _options_are_in_help(synopsis: str, shim: Path, here: Path) -> None:
    """Each command of the synopsis (a line ``dpsql CMD ...`` and the indented lines after it): its
    options and the choices listed for them are in ``dpsql CMD --help``."""
    for command, text in re.findall(r"^dpsql (\w+)(.*?)(?=^dpsql |\Z)", synopsis, re.M | re.S):
        shown = subprocess.run([str(shim / "dpsql"), command, "--help"], capture_output=True, text=True,
                               env=_env(here, shim), timeout=120).stdout
        for option in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", text):
            assert re.search(rf"(?<![\w-]){re.escape(option)}\b", shown), (command, option)
        for choices in re.findall(r"\|([a-z|]+)\]", text):
            assert all(choice in shown for choice in choices.split("|")), (command, choices)


def _folders_exist(layout: str) -> None:
    """Each line that starts with folders (``dpsql/server/ cli/``: cli/ beside server/) names ones that
    exist."""
    for line in layout.splitlines():
        if line[:1].strip():
            first, *more = itertools.takewhile(lambda word: word.endswith("/"), line.split())
            for folder in (first, *(str(Path(first).parent / name) for name in more)):
                assert (ROOT / folder).is_dir(), folder


def test_the_readmes_dpsql_toml_points_at_the_demos_files(demo, tmp_path):
    """The defaults file of "Results out", written beside the demo's files, names them."""
    (toml,) = [b for b in BLOCKS if b.language == "toml"]
    (tmp_path / "dpsql.toml").write_text(toml.text)
    config = read_config(tmp_path / "dpsql.toml")
    assert {Path(config[k]).name for k in ("db", "policy")} == {"demo.duckdb", "policy.yaml"}
    assert all((demo / Path(config[k]).name).exists() for k in ("db", "policy"))


def test_the_data_in_files_are_the_policys_tables(demo, tmp_path, monkeypatch):
    """The files the "Data in" section makes hold what its sources.yaml reads: exact counts, no noise."""
    shutil.copytree(demo, tmp_path / "d")
    monkeypatch.chdir(tmp_path / "d")
    section = [b for b in BLOCKS if b.section == "Data in"]
    exec(section[0].text, {})
    (tmp_path / "d" / "sources.yaml").write_text(section[1].text)
    db = dpsql.connect(policy="sources.yaml", ledger=":memory:")
    exact = testing.duckdb_connection(db)
    years = exact.execute("SELECT year, COUNT(*) > 0 FROM visits GROUP BY year ORDER BY year").fetchall()
    assert years == [(2023, True), (2024, True)]
    assert exact.execute("SELECT COUNT(*) FROM clinics").fetchone() == (5,)
