"""The grader's folders say who runs what (autograder/__init__.py); its imports keep to it.

Every folder of the package stands on one floor, the ground first (FLOORS), and no module imports
one of a later floor, at module level or inside a function: what two floors share lives on the
lower. A folder added to the package has to take a floor, or the test fails. And no module of the
package comes back to itself through its imports: every import statement of a module counts,
wherever it stands (in a function, under ``if TYPE_CHECKING:``), so a circle cannot hide behind an
import made late.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

from support import REPO

PACKAGE = REPO / "autograder"
# From the ground up; a floor's folders may import each other, and any folder of a floor beneath.
# "" is the package's own __init__.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("", "course", "sandbox"),              # the course's data (its catalogue included); the sandbox's side
    ("kit",),                               # the students' engine, built from solutions/ and the catalogue
    ("judge",),                             # the trusted judge
    ("exercises", "mutants", "grading"),    # the checks and mutants the judge runs; the grading run
    ("analytics",),                         # what the report shows, from what grading recorded
    ("commands",),                          # the instructor's commands
    ("authoring",),                         # for whoever writes the course (autograder check, sync)
    ("cli", "__main__"),                    # the command line
)
# Not modules of the package: nbgrader's configuration files, and the files the kit ships as they
# are (their relative imports are the students' coursekit package's).
NOT_MODULES = ("templates", "kit/shipped")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in package.rglob("*.py")
            if "__pycache__" not in p.parts and not any(p.is_relative_to(package / d) for d in NOT_MODULES)}


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
def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    known = set(modules(package))
    return {name: imports_of(path.read_text(), name, path.name == "__init__.py", known)
            for name, path in modules(package).items()}


def folder(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def floor_of(floors: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    """folder -> its floor's number (0 the ground); a folder named on two floors is an error."""
    numbered = [(name, number) for number, names in enumerate(floors) for name in names]
    twice = sorted({name for name, _ in numbered if [n for n, _ in numbered].count(name) > 1})
    assert not twice, f"folders on two floors: {twice}"
    return dict(numbered)


def upward(edges: dict[str, set[str]], floors: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import of a module from a later floor than its own, one line each ("a imports b")."""
    number = floor_of(floors)
    return [f"{name} (floor {number[folder(name)]}) imports {target} (floor {number[folder(target)]})"
            for name, targets in sorted(edges.items()) for target in sorted(targets)
            if number[folder(target)] > number[folder(name)]]


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


def test_every_folder_of_the_package_stands_on_one_floor():
    folders = {folder(name) for name in modules()}
    named = set(floor_of(FLOORS))
    assert folders - named == set(), "folders on no floor (give each a place in FLOORS)"
    assert named - folders == set(), "floors name folders the package does not have"


def test_no_module_imports_a_later_floor():
    assert upward(graph(), FLOORS) == []
    # the test reads what it should: the command line imports the commands, inside its functions,
    # and the judge the catalogue, beneath it
    assert "autograder.commands.grade" in graph()["autograder.cli"]
    assert "autograder.course.catalogue" in graph()["autograder.judge.judge"]


def test_the_floor_test_fails_when_a_lower_floor_imports_a_higher_one(tmp_path):
    package = tmp_path / "house"
    for path, source in {"__init__.py": "", "course/__init__.py": "", "commands/__init__.py": "",
                         "commands/grade.py": "from house.course import data\n",
                         "course/data.py": "def f():\n    from ..commands import grade\n"}.items():
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(source)
    floors = (("", "course"), ("commands",))
    assert upward(graph(package), floors) == ["house.course.data (floor 0) imports house.commands.grade (floor 1)"]
    # the same package with the import going down is clean
    (package / "course/data.py").write_text("X = 1\n")
    graph.cache_clear()
    modules.cache_clear()
    assert upward(graph(package), floors) == []


def test_no_module_comes_back_to_itself_through_its_imports():
    assert circles(graph()) == []


def test_the_course_data_and_the_judge_import_none_of_nbgraders_applications():
    """The trusted worker reads the course's data (the catalogue) and judges: nbgrader's applications
    (imported with the course directory, on the instructor's side) are not loaded into it."""
    code = ("import sys, autograder.course.catalogue, autograder.judge.worker\n"
            "print(sorted(m for m in sys.modules if m.startswith('nbgrader.apps')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # the test sees what it should: the course directory does load them
    code = code.replace("autograder.judge.worker", "autograder.course.directory")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'nbgrader.apps'" in out
