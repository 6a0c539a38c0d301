"""docs/architecture.md stays true: every path and code name it cites exists, every module of dpsql/ is
named, the pipeline lists the frontend's passes in the order the planner calls them, and the
layers are pyproject.toml's."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import textwrap
from pathlib import Path

from dpsql.api.planner import Planner
from tests.support.paths import ROOT, layers_contract

DOC = (ROOT / "docs" / "architecture.md").read_text()
# A file path: under dpsql/ unless it starts with another top-level folder; a bare name is a module
# beside dpsql's packages (limits.py) or a test file (test_joins.py, in whichever package of tests/).
PATH = re.compile(r"(?<![\w./-])((?:[a-z_]+/)*[a-z_]+\.py)\b")
TOP = ("dpsql/", "tests/", "tools/", "benchmarks/", "docs/", "grammar/")
# A cited name: backticked identifiers right after a backticked path (`lower/bounding.py` `rows_cte`,
# `frontend/rules/structure.py` `ALLOWED_NODES`, `CAST_TYPES`).
CITE = re.compile(r"`((?:[a-z_]+/)*[a-z_]+\.py)`((?:(?:,|\s+and)?\s+`[A-Za-z_][\w.]*`)+)")


def file_of(path: str) -> Path:
    if path.startswith(TOP):
        return ROOT / path
    if "/" not in path and path.startswith("test_"):
        found = sorted((ROOT / "tests").rglob(path))
        assert len(found) <= 1, f"{path} names {len(found)} test files"
        return found[0] if found else ROOT / "tests" / path
    return ROOT / "dpsql" / path


def module_of(path: str):
    relative = file_of(path).relative_to(ROOT).with_suffix("")
    return importlib.import_module(".".join(relative.parts))


def defines(module, dotted: str) -> bool:
    """Whether ``dotted`` names something in ``module``: an attribute chain from the module, or from
    one of its classes (a method: ``engines/duckdb.py`` ``unique``)."""
    owners = [module] + [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    for owner in owners:
        value = owner
        for part in dotted.split("."):
            value = getattr(value, part, None)
            if value is None:
                break
        if value is not None:
            return True
    return False


def test_every_path_it_cites_exists():
    missing = sorted({p for p in PATH.findall(DOC) if not file_of(p).exists()})
    assert not missing, missing


def test_every_name_it_cites_after_a_module_exists():
    cited = [(path, name) for path, names in CITE.findall(DOC) if file_of(path).is_relative_to(ROOT / "dpsql")
             for name in re.findall(r"`([A-Za-z_][\w.]*)`", names) if not name.endswith(".py")]
    assert len(cited) > 50   # the check reads the citations at all
    missing = [f"{path} {name}" for path, name in cited if not defines(module_of(path), name)]
    assert not missing, missing


def test_every_module_is_named():
    named = {file_of(p) for p in PATH.findall(DOC)}
    modules = {p for p in (ROOT / "dpsql").rglob("*.py") if p.name != "__init__.py"}
    assert not modules - named, sorted(str(p.relative_to(ROOT)) for p in modules - named)


def _pipeline() -> str:
    return DOC.split("## The pipeline")[1].split("```")[1]


def _called_modules() -> list[str]:
    """The frontend, plan and lower modules ``Planner.lowered`` calls, in the order they
    run (a call's arguments before the call), as paths under dpsql/."""
    imported = {}   # a name planner.py imports -> the module it comes from (or is)
    for node in ast.parse(inspect.getsource(inspect.getmodule(Planner))).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpsql."):
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                imported[alias.asname or alias.name] = whole if _is_module(whole) else node.module
    order: list[str] = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            visit(child)
        if isinstance(node, ast.Call):
            func = node.func.value if isinstance(node.func, ast.Attribute) else node.func
            module = imported.get(func.id) if isinstance(func, ast.Name) else None
            path = "/".join(module.split(".")[1:]) + ".py" if module else None
            if path and path.split("/")[0] in ("frontend", "plan", "lower") and path not in order:
                order.append(path)

    visit(ast.parse(textwrap.dedent(inspect.getsource(Planner.lowered))))
    return order


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ImportError:
        return False


def test_the_pipeline_lists_the_passes_in_the_order_they_run():
    called = _called_modules()
    assert {"frontend/per_person.py", "frontend/joins.py", "frontend/validate.py", "plan/build.py",
            "lower/rewrite.py"} <= set(called), called
    pipeline = _pipeline()
    positions = [pipeline.find(path) for path in called]
    assert -1 not in positions, [p for p, at in zip(called, positions) if at == -1]
    assert positions == sorted(positions), [p for _, p in sorted(zip(positions, called))]


def test_every_frontend_module_is_in_the_pipeline():
    pipeline = _pipeline()
    frontend = sorted(str(p.relative_to(ROOT / "dpsql")) for p in (ROOT / "dpsql" / "frontend").rglob("*.py")
                      if p.name != "__init__.py" and "rules" not in p.parts)
    assert [p for p in frontend if p not in pipeline] == []


def test_the_layers_are_the_contracts():
    block = DOC.split("## Layers")[1].split("```")[1]
    assert block.strip().splitlines() == layers_contract()["layers"]
