"""The layer contract, in the test suite: imports run one way down the layers of pyproject.toml
(``[tool.importlinter]``, which ``lint-imports`` checks in CI), and no modules or packages import
each other in a cycle. Every import counts: at module level, under ``TYPE_CHECKING``, and inside a
function, as the reviewers' checker counts them. The list is read from pyproject.toml: it is written
down once."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.paths import PACKAGE, ROOT, layers_contract

FACE = "dpsql"   # the package face re-exports the public names; it is no layer of its own


def layers() -> list[list[str]]:
    """The layers contract of pyproject.toml, highest first: each layer's packages (``a | b``)."""
    contract = layers_contract()
    assert contract["containers"] == [FACE]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def modules() -> dict[str, Path]:
    """Every module of dpsql by dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imported(source: str, module: str, is_package: bool, known) -> list[tuple[str, int]]:
    """(dpsql module, line) for every import in ``source``: ast.walk reaches imports in functions and
    under ``if TYPE_CHECKING:`` as well as at the top. ``from a import b`` is module ``a.b`` when
    there is one, else ``a``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".") + (["__init__"] if is_package else [])
            prefix = ".".join(base[: len(base) - node.level] + ([node.module] if node.module else [])) \
                if node.level else node.module or ""
            targets = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                out.append((target, node.lineno))
    return out


def graph() -> dict[str, dict[str, int]]:
    """module -> {imported dpsql module: line}."""
    known = modules()
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for name, path in known.items():
        for target, line in imported(path.read_text(), name, path.name == "__init__.py", known):
            edges[name].setdefault(target, line)
    return edges


def package(module: str) -> str:
    """The first-level package (or top-level module) a module belongs to: its layer's unit."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else FACE


def cycles(nodes, edges) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def test_the_reader_sees_every_kind_of_import():
    source = ("from typing import TYPE_CHECKING\nimport dpsql.errors\nif TYPE_CHECKING:\n"
              "    from dpsql.plan.model import Plan\n"
              "def f():\n    from dpsql.api import replay\n    from ..limits import Deadline\n")
    known = set(modules())
    found = {t for t, _ in imported(source, "dpsql.sql.build", False, known)}
    assert found == {"dpsql.errors", "dpsql.plan.model", "dpsql.api.replay", "dpsql.limits"}


def test_every_package_is_in_exactly_one_layer():
    listed = [name for layer in layers() for name in layer]
    assert len(listed) == len(set(listed)), listed
    present = {package(m) for m in modules()} - {FACE}
    assert present == set(listed), f"not in a layer: {present - set(listed)}; no such package: {set(listed) - present}"


def test_imports_run_down_the_layers():
    """A module imports only from layers below its own, never a sibling of its layer, never a
    layer above: a piece a lower layer needs moves down."""
    rank = {name: i for i, layer in enumerate(layers()) for name in layer}
    backward = []
    for module, targets in graph().items():
        for target, line in targets.items():
            a, b = package(module), package(target)
            if FACE in (a, b) or a == b:
                continue
            if rank[a] >= rank[b]:
                backward.append(f"{module} -> {target} (line {line}): {a} may not import {b}")
    assert not backward, "\n".join(sorted(backward))


def test_only_the_top_layer_imports_the_face():
    """``import dpsql`` reaches everything the face re-exports (the client, the api): only a layer
    above them all may use it, or a chain through it would run across the layers."""
    top = set(layers()[0])
    users = sorted(f"{m} (line {targets[FACE]})" for m, targets in graph().items()
                   if FACE in targets and m != FACE and package(m) not in top)
    assert not users, users


@pytest.mark.parametrize("level", ["module", "package"])
def test_no_cycles(level):
    unit = package if level == "package" else (lambda module: module)
    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph().items():
        edges[unit(module)] |= {unit(t) for t in targets if unit(t) != unit(module)}
    edges = {a: bs - {FACE} for a, bs in edges.items() if a != FACE}
    assert cycles(set(edges) | {t for ts in edges.values() for t in ts}, edges) == []
