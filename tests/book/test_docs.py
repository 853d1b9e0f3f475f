"""The documentation's examples are the real API: a new author who copies them gets working code.

assignments/README.md shows how to write an exercise's hidden check and a mutant. Its examples are
run here: the check's imports, its `@graded(...)` declaration (which must declare the course's real
exercise), and the mutant catalogue (which must apply to the real source notebook).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from autograder.authoring.selfcheck import _read_notebooks
from autograder.course import catalogue
from autograder.mutants import apply_mutant

from support import REPO

ROOT = REPO
README = ROOT / "assignments" / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def block_with(needle: str) -> str:
    # the walk-through that adds a new exercise (a02-sqrt) is followed by tests/grader/test_adding_an_exercise.py
    text = README.read_text()
    start = text.index("## Adding an exercise, step by step")
    text = text[:start] + text[text.index("\n## ", start + 1):]
    blocks = [b for b in python_blocks(text) if needle in b]
    assert len(blocks) == 1, f"assignments/README.md should have one python example with {needle!r}"
    return blocks[0]


def test_the_readme_check_example_declares_a_real_exercise():
    source = block_with("@graded(")
    tree = ast.parse(source)
    imports = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
    namespace: dict = {}
    exec(compile(imports, str(README), "exec"), namespace)  # every name the example imports exists
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    call = check.decorator_list[0]
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "graded"
    args = [ast.literal_eval(a) for a in call.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    exercise_id = args[0]
    assignment = next(p.name for p in (ROOT / "assignments" / "source").iterdir()
                      if p.name.startswith(exercise_id.split("-")[0] + "_"))
    real = {s.id: s for s in catalogue.assignment(assignment)}
    assert exercise_id in real, f"the README's example declares {exercise_id}, which {assignment} does not have"
    declared = catalogue.Spec(exercise_id, args[1] if len(args) > 1 else kwargs.get("source"),
                                tuple(kwargs.get("regions", ())), kwargs.get("points", 2),
                                drives=tuple(kwargs.get("drives", ())), diagnosed_by=tuple(kwargs.get("diagnose", ())))
    assert declared == real[exercise_id], f"README: {declared}\nreal:   {real[exercise_id]}"


def test_the_readme_mutant_example_applies_to_the_real_notebook():
    namespace: dict = {}
    exec(compile(block_with("MUTANTS = ["), str(README), "exec"), namespace)
    mutants = namespace["MUTANTS"]
    assert mutants
    for mutant in mutants:
        assignment = next(p.name for p in (ROOT / "assignments" / "source").iterdir()
                          if p.name.startswith(mutant.exercise.split("-")[0] + "_"))
        notebooks = _read_notebooks(ROOT / "assignments" / "source" / assignment)
        name, mutated = apply_mutant(notebooks, mutant, assignment)  # CourseError unless `find` occurs once
        assert mutated != notebooks[name]


# -- the engine modules' headers: "Book: ... Assignment: ... Tests: ..." name real files -----------------

ENGINE = ROOT / "solutions"
HEADED = sorted(p for p in ENGINE.rglob("*.py")
                if p.name != "__init__.py" and p.name != "_fast.py" and "examples" not in p.parts
                and p.name not in ("overrides.py", "testing.py"))


def header(module: Path) -> str:
    doc = ast.get_docstring(ast.parse(module.read_text())) or ""
    return " ".join(doc.split())


def test_every_engine_module_names_its_chapter_and_tests():
    for module in HEADED:
        text = header(module)
        where = module.relative_to(ROOT)
        assert re.search(r"Book: chapters? \d", text), f"{where}: no 'Book: chapter N (`book/NN_name.md`)' header"
        assert re.search(r"`book/\d\d_\w+\.md`", text), f"{where}: the Book header names no chapter file"
        assert re.search(r"Tests: `tests/\w+/\w+\.py`", text), f"{where}: no 'Tests: `tests/<area>/...py`' header"


def test_the_paths_in_module_headers_exist_and_agree_with_the_chapter_numbers():
    for module in sorted(ENGINE.rglob("*.py")):
        text = header(module)
        where = module.relative_to(ROOT)
        for path in re.findall(r"`((?:book|tests|assignments|benchmarks)/[\w/.-]+)`", text):
            assert (ROOT / path).exists(), f"{where} names {path}, which does not exist"
        if "Book:" in text:
            book = text[text.index("Book:"):].split("Tests:")[0].split("Assignment")[0]
            said = {n for pair in re.findall(r"chapters? (\d)(?: and (\d))?", book) for n in pair if n}
            files = {str(int(n)) for n in re.findall(r"`book/(\d\d)_\w+\.md`", book)}
            assert said == files, f"{where}: 'chapter(s) {sorted(said)}' but files {sorted(files)}"
        for assignment in re.findall(r"Assignment: a(\d\d)", text):
            found = list((ROOT / "assignments" / "source").glob(f"a{assignment}_*"))
            assert found, f"{where}: no assignment a{assignment}"


def test_no_module_is_hidden_by_a_name_its_package_exports():
    """`import solutions.ops.linalg as m` gives the module: `import a.b as m` reads attribute b of a,
    so a package that exported a function named like one of its modules would hand out the function
    (as `solutions.ops.matmul` once did, which silently disabled a check that imported the module)."""
    import importlib
    import pkgutil
    import types

    import autograder
    import solutions

    hidden = []
    for package in (solutions, autograder):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            parent_name, _, leaf = info.name.rpartition(".")
            module = importlib.import_module(info.name)
            value = getattr(importlib.import_module(parent_name), leaf)
            if value is not module:
                hidden.append(f"{info.name} is hidden by a {type(value).__name__}")
            assert isinstance(module, types.ModuleType)
    assert not hidden, hidden


def test_the_op_namespace_exports_ops_not_modules():
    import solutions.ops as ops

    assert "linalg" not in ops.__all__ and "kernels" not in ops.__all__
    assert {"matmul", "softmax", "einsum", "MatMul", "conv2d", "max_pool2d"} <= set(ops.__all__)
    assert all(callable(getattr(ops, name)) for name in ops.__all__)
