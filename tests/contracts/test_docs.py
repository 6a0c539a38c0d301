"""The docs are tested: every module's examples run, README's commands are the ones CI runs."""
import doctest
import importlib
import pkgutil
import re

import pytest

import dpsql
from tests.support.paths import ROOT

MODULES = sorted(m.name for m in pkgutil.walk_packages(dpsql.__path__, "dpsql."))


@pytest.mark.parametrize("name", MODULES)
def test_module_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_module_has_a_docstring():
    for name in MODULES:
        assert importlib.import_module(name).__doc__, name


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up on a fresh machine")[1].split("\n## ")[0]
    commands = re.findall(r"```shell\n(.+?)\n```", setup)
    assert len(commands) == 2
    assert "dpsql demo" in commands[0] and "pytest" in commands[1]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_every_error_code_raised_is_documented():
    documented = set(re.findall(r"\| (DP\d{3}) \|", (ROOT / "grammar" / "README.md").read_text()))
    raised = set()
    for path in (ROOT / "dpsql").rglob("*.py"):
        raised |= set(re.findall(r'"(DP\d{3})"', path.read_text()))
    assert raised <= documented, raised - documented
