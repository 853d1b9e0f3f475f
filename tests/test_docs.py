"""The documentation's examples are the real API: a new author who copies them gets working code.

assignments/README.md shows how to write an exercise's hidden check and a mutant. Its examples are
run here: the check's imports, its `@graded(...)` declaration (which must declare the course's real
exercise), and the mutant catalogue (which must apply to the real source notebook).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from autograder import spec as spec_module
from autograder.selfcheck import _read_notebooks, apply_mutant

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "assignments" / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def block_with(needle: str) -> str:
    blocks = [b for b in python_blocks(README.read_text()) if needle in b]
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
    real = {s.id: s for s in spec_module.load(assignment)}
    assert exercise_id in real, f"the README's example declares {exercise_id}, which {assignment} does not have"
    declared = spec_module.Spec(exercise_id, args[1] if len(args) > 1 else kwargs.get("source"),
                                tuple(kwargs.get("regions", ())), kwargs.get("points", 2))
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
