"""The tests' own rules (issue 21), read from every module of tests/ with ast:

1. No test file imports another test file, nor conftest.py: what tests share is in tests/support/.
2. No test reaches a private name of dpsql (``db._ledger``, ``monkeypatch.setattr(db, "_plans", ...)``,
   ``from dpsql.x import _y``): what a test needs from inside a connection, dpsql.testing hands it,
   and dpsql.testing is in-process only. The few underscored names a test may use are listed below,
   each with its reason.
3. No test reads the rewritten SQL as text (``"TRY(" in plan.rewritten_sql``, ``.split('"__units"')``,
   ``== "SELECT ..."``): a test finds the node in the parsed tree (tests/support/sql_tree.py) or checks
   the query's answer. The golden files (tools/golden.py) are the one place that pins the text.
"""
from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

from tests.support.paths import TESTS

MODULES = sorted(TESTS.rglob("*.py"))

# Underscored names a test may use: (file under tests/, name) -> why. Nothing of a connection's inside.
ALLOWED_PRIVATE = {
    ("api/test_result.py", "_repr_html_"):
        "IPython's display protocol: Jupyter calls _repr_html_ by that name, and the test renders a Result "
        "the way Jupyter does",
    ("client/test_remote.py", "_repr_html_"):
        "IPython's display protocol, as for api/test_result.py: a remote Result renders as Jupyter calls it",
    ("mechanisms/test_sampler_words.py", "_uniform"):
        "the Mironov rule reads the source of SystemRandomSource's word step to check it is integer-only; "
        "the test reads its text, never calls it",
    ("mechanisms/test_noise.py", "_exit"):
        "os._exit, the documented way for a forked child to end without running the parent's cleanup",
}

# What a string of SQL offers to be searched as text; a list of its parts (split) is text too.
TEXT_METHODS = {"split", "rsplit", "partition", "rpartition", "splitlines", "count", "find", "rfind", "index",
                "startswith", "endswith", "replace", "upper", "lower", "casefold", "strip"}
PATTERN_FUNCTIONS = {"search", "match", "fullmatch", "findall", "finditer", "sub"}


def relative(path: Path) -> str:
    return path.relative_to(TESTS).as_posix()


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)


def imported(node: ast.AST, module: str) -> list[str]:
    """The dotted modules (or names in them) an import statement reads; relative ones resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = module.split(".")[:-node.level]
        base = ".".join(package + ([base] if base else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def imports_of_tests(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """(line, name) of every import of a test module or of conftest."""
    return [(node.lineno, name) for node in ast.walk(tree) for name in imported(node, module)
            if any(part.startswith("test_") or part == "conftest" for part in name.split("."))]


def private_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every underscored attribute read, set or imported, other than one's own
    (``self._x``) and dunders: ``x._y``, ``getattr(x, "_y")``, ``monkeypatch.setattr(x, "_y", ...)``,
    ``from m import _y``."""
    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr) and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom):
            found += [(node.lineno, alias.name) for alias in node.names if private(alias.name)]
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            names = node.args[1:2] if func in ("getattr", "setattr", "delattr", "hasattr") else []
            found += [(node.lineno, arg.value) for arg in names
                      if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and private(arg.value)]
    return found


def _scopes(tree: ast.AST):
    """The module's top-level statements, then each function's body (a function's names are its own)."""
    yield [node for node in tree.body if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.body


def is_text(node: ast.AST, text: set[str]) -> bool:
    """Whether ``node`` is the rewritten SQL's text or a piece of it (``text``: the names bound to one)."""
    if isinstance(node, ast.Attribute) and node.attr == "rewritten_sql":
        return True
    if isinstance(node, ast.Name):
        return node.id in text
    if isinstance(node, (ast.Subscript, ast.Starred)):
        return is_text(node.value, text)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TEXT_METHODS:
        return is_text(node.func.value, text)
    if isinstance(node, ast.BinOp):
        return is_text(node.left, text) or is_text(node.right, text)
    if isinstance(node, ast.JoinedStr):
        return any(is_text(v.value, text) for v in node.values if isinstance(v, ast.FormattedValue))
    return False


def _text_uses(node: ast.AST, text: set[str]) -> list[tuple[int, str]]:
    """Where ``node`` uses the text as text: searched, compared with a string, cut, counted, matched."""
    found = []
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:]):
            if isinstance(op, (ast.In, ast.NotIn)) and is_text(right, text):
                found.append((node.lineno, "searched with in"))
            elif isinstance(op, (ast.Eq, ast.NotEq)) and any(
                    is_text(a, text) and isinstance(b, (ast.Constant, ast.JoinedStr))
                    for a, b in ((left, right), (right, left))):
                found.append((node.lineno, "compared with a string"))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in TEXT_METHODS and is_text(node.func.value, text):
            found.append((node.lineno, f".{node.func.attr}()"))
        elif node.func.attr in PATTERN_FUNCTIONS and any(is_text(a, text) for a in node.args):
            found.append((node.lineno, f"re.{node.func.attr}()"))
    return found


def sql_text_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, how) of every place the rewritten SQL is used as text. A name bound to the text (or to a
    piece of it: a split, a slice) counts as the text, in the function that binds it."""
    found = []
    for scope in _scopes(tree):
        text: set[str] = set()
        for statement in scope:
            for node in ast.walk(statement):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                        and is_text(node.value, text):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    text |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                found += _text_uses(node, text)
    return sorted(set(found))


def _all(rule) -> list[str]:
    out = []
    for path in MODULES:
        tree = ast.parse(path.read_text(), str(path))
        args = (tree, module_name(path)) if rule is imports_of_tests else (tree,)
        out += [f"tests/{relative(path)}:{line} {what}" for line, what in rule(*args)
                if rule is not private_names or (relative(path), what) not in ALLOWED_PRIVATE]
    return out


def test_no_test_file_imports_another_or_conftest():
    assert len(MODULES) > 60   # the rule reads the suite at all
    assert _all(imports_of_tests) == []


def test_no_test_reaches_a_private_name():
    assert _all(private_names) == []


@pytest.mark.parametrize("path", sorted((TESTS / "support").rglob("*.py")), ids=lambda p: relative(p))
def test_the_support_modules_examples_run(path):
    assert doctest.testmod(importlib.import_module(module_name(path))).failed == 0


def test_every_allowed_private_name_is_still_used():
    used = {(relative(p), name) for p in MODULES for _, name in private_names(ast.parse(p.read_text()))}
    assert set(ALLOWED_PRIVATE) <= used, set(ALLOWED_PRIVATE) - used


def test_no_test_reads_the_rewritten_sql_as_text():
    assert _all(sql_text_reads) == []


# Each rule catches what it is for (and lets the right way through).
@pytest.mark.parametrize("rule, source, caught", [
    (imports_of_tests, "from tests.frontend.test_joins import POLICY", True),
    (imports_of_tests, "import test_fuzz", True),
    (imports_of_tests, "from conftest import refusal", True),
    (imports_of_tests, "from . import test_cli", True),
    (imports_of_tests, "from tests.support.tpch import POLICY", False),
    (private_names, "db._ledger.add_analyst('a', 1)", True),
    (private_names, "monkeypatch.setattr(db, '_plans', None)", True),
    (private_names, "from dpsql.engines.duckdb_schema import _UNIQUE_CHECKED", True),
    (private_names, "self._cache = {}", False),
    (private_names, "testing.ledger(db).add_analyst('a', 1)", False),
    (sql_text_reads, "assert 'TRY(' in plan.rewritten_sql", True),
    (sql_text_reads, "sql = plan.rewritten_sql\nassert 'HASH(' not in sql.upper()", True),
    (sql_text_reads, "rows, rest = plan.rewritten_sql.split('__units', 1)\nassert ' IN (' in rows", True),
    (sql_text_reads, "assert plan.rewritten_sql == 'SELECT 1'", True),
    (sql_text_reads, "assert re.search('x', plan.rewritten_sql)", True),
    (sql_text_reads, "tree = sqlglot.parse_one(plan.rewritten_sql)\nassert tree.find(exp.Try)", False),
    (sql_text_reads, "assert testing.bind(db, plan.rewritten_sql) is not None", False),
])
def test_the_rules_catch_what_they_are_for(rule, source, caught):
    tree = ast.parse("def test_it():\n" + "".join(f"    {line}\n" for line in source.splitlines()))
    args = (tree, "tests.cli.test_x") if rule is imports_of_tests else (tree,)
    assert bool(rule(*args)) is caught
