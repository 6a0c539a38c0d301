"""Where things are in the repository, and its pyproject.toml: every test finds files through here, so
a test file can move between the packages of tests/ without a path in it changing."""
from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:   # pragma: no cover - the dependency dpsql itself declares for Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
GRAMMAR = ROOT / "grammar"
ACCEPT = GRAMMAR / "accept"
BENCHMARKS = ROOT / "benchmarks"
TOOLS = ROOT / "tools"
PACKAGE = ROOT / "dpsql"


def pyproject() -> dict:
    """pyproject.toml, parsed."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def layers_contract() -> dict:
    """The layers contract of ``[tool.importlinter]`` (the one written down for lint-imports)."""
    (contract,) = [c for c in pyproject()["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return contract
