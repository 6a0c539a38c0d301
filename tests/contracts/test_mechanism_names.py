"""Nothing outside dpsql/mechanisms/ names a mechanism (issue 22): plans, lowering, explain, the engine
and the API ask the registry (mechanisms/base.py: ``MECHANISMS``, ``OPTIONS``, ``choose``), so a new
mechanism is added in that package alone. Checked on the code itself: every identifier, attribute and
string literal that is not a docstring or a comment, in every module of dpsql/ outside mechanisms/.
"""
import ast
import re

from tests.support.paths import ROOT

NAMES = re.compile(r"laplace|gaussian", re.IGNORECASE)
PACKAGE = ROOT / "dpsql"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings (a module's, a class's, a function's)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _named(source: str) -> list[tuple[int, str]]:
    """(line, text) of every identifier or non-docstring string literal naming a mechanism."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts = [node.value]
        elif isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            texts = [node.name]
        elif isinstance(node, ast.alias):
            texts = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            texts = [node.module or ""]
        hits += [(getattr(node, "lineno", 0), t) for t in texts if NAMES.search(t)]
    return hits


def test_no_module_outside_mechanisms_names_a_mechanism():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "mechanisms") in path.parents:
            continue
        offenders += [f"{path.relative_to(ROOT)}:{line}: {text!r}" for line, text in _named(path.read_text())]
    assert not offenders, "\n".join(offenders)


def test_the_check_catches_a_name_a_string_and_an_import():
    planted = '"""A docstring may say discrete Laplace."""\n' \
              "from dpsql.mechanisms.base import DISCRETE_LAPLACE\n" \
              "scale = DISCRETE_LAPLACE.calibrate(1, 1)\n" \
              "name = 'discrete Gaussian'  # a comment may say Gaussian too\n"
    assert sorted(line for line, _ in _named(planted)) == [2, 3, 4]
