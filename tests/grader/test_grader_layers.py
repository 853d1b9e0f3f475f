"""The grader's folders say who runs what (autograder/__init__.py); its imports keep to it.

judge/, course/, grading/, sandbox/ and kit/ are beneath the instructor's commands: none of their
modules imports commands/, authoring/ or cli.py, at module level or inside a function (what is
shared lives beneath them). And no module of the package comes back to itself through its imports:
every import statement of a module counts, wherever it stands (in a function, under
``if TYPE_CHECKING:``), so a circle cannot hide behind an import made late.
"""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from support import REPO

PACKAGE = REPO / "autograder"
BENEATH = ("judge", "course", "grading", "sandbox", "kit")
ABOVE = ("commands", "authoring", "cli")
# Not modules of the package: nbgrader's configuration files, and the files the kit ships as they
# are (their relative imports are the students' coursekit package's).
NOT_MODULES = (PACKAGE / "templates", PACKAGE / "kit" / "shipped")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")
            if "__pycache__" not in p.parts and not any(p.is_relative_to(d) for d in NOT_MODULES)}


def imports_of(source: str, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that the code of module ``name`` imports, anywhere in it. ``from P
    import M`` imports the module P.M when there is one, else (a name of P) P itself; the package
    that holds a module is not counted (Python imports it first, whoever asks)."""
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a module a.b: a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@cache
def graph() -> dict[str, set[str]]:
    known = set(modules())
    return {name: imports_of(path.read_text(), name, path.name == "__init__.py", known)
            for name, path in modules().items()}


def folder(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_parser_sees_every_kind_of_import():
    known = {"autograder.commands.release", "autograder.commands", "autograder.judge.scrub", "autograder.judge",
             "autograder.course.codelines", "autograder.course"}
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import autograder.commands.release\n"
              "def f():\n    from ..course import codelines\n    from autograder.commands.release import signature\n")
    assert imports_of(source, "autograder.judge.scrub", False, known) == {
        "autograder.commands.release", "autograder.course.codelines"}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_nothing_beneath_the_commands_imports_them():
    upward = [f"{name} imports {target}" for name, targets in graph().items() if folder(name) in BENEATH
              for target in sorted(targets) if folder(target) in ABOVE]
    assert not upward, "\n".join(upward)
    # the test reads what it should: the command line imports the commands, inside its functions
    assert "autograder.commands.grade" in graph()["autograder.cli"]


def test_no_module_comes_back_to_itself_through_its_imports():
    assert circles(graph()) == []
