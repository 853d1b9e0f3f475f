"""The student's own engine across assignments (coursekit/answers.py, from autograder/kit/shipped/answers.py).

A kit released into `aNN_name/coursekit/` loads, when imported, the student's answers from every
assignment notebook beside it (its own included) and plugs them into the engine. An exercise not
done, or whose cell fails, stays the kit's stub, whose error names the exercise and its notebook.
The judge's kit never looks for notebooks: grading stays per exercise.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograder import kit
from autograder.course import catalogue, notebook
from autograder.kit import build_kit
from autograder.kit.shipped.answers import answer_cells

from support import REPO

ROOT = REPO
SOURCE = ROOT / "assignments" / "source"


def _cell(nb: dict, grade_id: str) -> dict:
    return next(c for c in nb["cells"] if notebook.grade_id(c) == grade_id)


def _set_region(cell: dict, body: str) -> None:
    """Replace the cell's solution region(s) by `body`, as nbgrader's release or a student would."""
    cell["source"] = notebook.typed_in(cell["source"], body)


def test_typing_into_a_region_replaces_it_markers_and_all_and_leaves_an_unclosed_one():
    source = ("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n\n"
              "def g(x):\n    ### BEGIN SOLUTION\n    return -x\n")
    assert notebook.typed_in(source) == "def f(x):\n    return x\n\n" + source.split("\n\n", 1)[1]
    assert notebook.typed_in(source, "return 2 * x") == "def f(x):\n    return 2 * x\n\n" + source.split("\n\n", 1)[1]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A student's home: a01 and a02 done except a02's GetItem (not done) and Div (broken), a03's kit."""
    home = tmp_path_factory.mktemp("home")
    for assignment in ("a01_graphs", "a02_broadcasting"):
        (home / assignment).mkdir()
        shutil.copy(SOURCE / assignment / f"{assignment}.ipynb", home / assignment)
    path = home / "a02_broadcasting" / "a02_broadcasting.ipynb"
    nb = json.loads(path.read_text())
    _set_region(_cell(nb, "a02-getitem"), "# YOUR CODE HERE\nraise NotImplementedError()")
    _set_region(_cell(nb, "a02-div"), "return grad / (")   # a syntax error
    mul = _cell(nb, "a02-mul")
    mul["source"] = "".join(mul["source"]) + "\n\nMul.written_by = 'the student'\n"
    path.write_text(json.dumps(nb))
    (home / "a03_im2col").mkdir()
    build_kit(home / "a03_im2col")
    return home


def run_in(folder: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=folder, capture_output=True,
                          text=True, timeout=120)


def test_the_cells_loaded_are_imports_given_and_answers():
    nb = json.loads((SOURCE / "a02_broadcasting" / "a02_broadcasting.ipynb").read_text())
    ids = [grade_id for grade_id, _ in answer_cells(nb["cells"], "a02_broadcasting")]
    assert ids[0] == "a02-imports"
    assert "a02-mul" in ids and "a02-getitem" in ids
    assert not [i for i in ids if i.endswith(("-visible", "-hidden"))], "test cells are never loaded"
    assert "a02-together-demo" not in ids, "demo cells are not loaded"


def test_a_later_assignment_runs_on_the_earlier_answers(home):
    said = {what: kit.stub_message(catalogue.exercise(what)) for what in ("a02-getitem", "a02-div")}
    result = run_in(home / "a03_im2col", f"SAID = {said!r}\n" + textwrap.dedent("""
        import numpy as np
        import coursekit
        from coursekit.engine import Tensor
        from coursekit.engine.ops import elementwise, shape

        assert getattr(elementwise.Mul, "written_by", None) == "the student", "a02's Mul is not the student's"
        x = Tensor(np.ones((2, 3)), requires_grad=True)
        (x * Tensor(np.arange(3.0))).sum().backward()
        assert x.grad.data.tolist() == [[0.0, 1.0, 2.0]] * 2
        for what, run in [("a02-getitem", lambda: x[0].sum().backward()),
                          ("a02-div", lambda: (x / 2.0).sum().backward())]:
            try:
                x.grad = None
                run()
            except NotImplementedError as error:
                assert str(error) == SAID[what] and "a02 · Broadcasting" in str(error), error
            else:
                raise AssertionError(f"{what} ran without the student's answer")
        coursekit.status()
    """))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # the exercises by their titles, as the notebooks name them, never their grade ids
    assert lines[0].startswith("Your exercises from your notebooks: ") and "Div" in lines[0] \
        and "GetItem" in lines[0] and "a02-" not in lines[0], lines[0]
    table = {line.split()[0]: line for line in lines[1:]}
    assert table["Mul"].endswith("a02 · Broadcasting and the gradients of tensor ops: yours"), table["Mul"]
    assert table["GetItem"].endswith(": not done"), table["GetItem"]
    assert "SyntaxError" in table["Div"]
    assert table[catalogue.exercise("a01-backward").title].endswith(": yours")


def test_no_earlier_notebooks_no_loading(tmp_path):
    (tmp_path / "a03_im2col").mkdir()
    build_kit(tmp_path / "a03_im2col")
    result = run_in(tmp_path / "a03_im2col", """
        import coursekit
        coursekit.status()
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("No answers loaded: none of your assignment notebooks"), result.stdout


def test_explicit_load_from_elsewhere(home, tmp_path):
    build_kit(tmp_path)        # a kit outside any assignment folder loads nothing by itself
    result = run_in(tmp_path, f"""
        import coursekit
        answers = coursekit.load_answers({str(home)!r}, before="a03_im2col", quiet=True)
        print(sorted(a.exercise for a in answers if a.status == "yours")[:2])
    """)
    assert result.returncode == 0, result.stderr
    assert "['a01-add', 'a01-backward']" in result.stdout


def diagnose_with_mutant(home: Path, assignment: str, mutant_id: str) -> list[str]:
    """diagnose()'s problem lines in a06's kit, with a01-a05's reference notebooks beside it except
    that `assignment`'s carries the named mutant (a classic mistake of the catalogue)."""
    from autograder.mutants import apply_mutant, load_mutants

    for name in sorted(p.name for p in SOURCE.iterdir() if p.name < "a06"):
        (home / name).mkdir()
        shutil.copy(SOURCE / name / f"{name}.ipynb", home / name)
    mutant = next(m for m in load_mutants(assignment) if m.id == mutant_id)
    notebooks = {assignment: json.loads((SOURCE / assignment / f"{assignment}.ipynb").read_text())}
    _, broken = apply_mutant(notebooks, mutant, assignment)
    (home / assignment / f"{assignment}.ipynb").write_text(json.dumps(broken))
    (home / "a06_training").mkdir()
    build_kit(home / "a06_training")
    result = run_in(home / "a06_training", """
        import coursekit
        for line in coursekit.diagnose(quiet=True):
            print(line)
    """)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[1:]  # after the loader's summary line


def test_diagnose_names_a_broken_earlier_op(tmp_path):
    """A student whose a02 Mul gradient multiplies by the wrong input: the capstone's kit says so."""
    problems = diagnose_with_mutant(tmp_path, "a02_broadcasting", "mul-swapped")
    # its exercises by their titles: "[exercises: Mul, unbroadcast]"
    assert any(line.startswith("x * y") and "[exercises: Mul, unbroadcast]" in line for line in problems), problems
    assert not [line for line in problems if "a0" in line or "NotImplementedError" in line], problems


def test_each_piece_diagnose_checks_is_named_by_the_exercises_it_is_made_of(tmp_path):
    """`@graded(..., diagnose=...)` states which pieces an exercise is part of; the kit lists them:
    every piece diagnose() checks has its exercises, and no exercise names a piece it does not check."""
    from autograder.course import catalogue

    build_kit(tmp_path)
    result = run_in(tmp_path, """
        from coursekit._exercises import DIAGNOSED
        from coursekit.answers import _cases
        print(sorted(what for what, _ in _cases()) == sorted(DIAGNOSED))
        print(DIAGNOSED["x * y (broadcast)"], len(DIAGNOSED["conv2d"]))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", f"('a02-mul', 'a02-unbroadcast') {len(catalogue.assignment('a03'))}"]


def test_use_reaches_the_engines_own_subclasses(tmp_path):
    """AdamW is the engine's subclass of Adam: plugging in the student's Adam must reach it too."""
    build_kit(tmp_path)
    result = run_in(tmp_path, """
        from coursekit import use
        from coursekit.engine import optim

        class Adam(optim.Optimizer):
            def _update(self, p, grad, state, group):
                return "the student's"

        use(Adam)
        assert optim.Adam is Adam and optim.AdamW.__mro__[1] is Adam, optim.AdamW.__mro__
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_diagnose_checks_that_col2im_is_the_adjoint_of_im2col(tmp_path):
    """A col2im that assigns instead of adding (a03 mutant): diagnose's adjoint check names it. It reads
    both kernels from `coursekit.engine.ops.im2col`, the module (no function of the package hides it)."""
    problems = diagnose_with_mutant(tmp_path, "a03_im2col", "col2im-assigns")
    assert any(line.startswith("im2col / col2im") and "adjoint" in line for line in problems), problems


def test_every_notebook_beside_is_loaded_this_ones_and_later_ones_included(tmp_path):
    """A chapter opened in a01_graphs/ runs on the student's a03 convolution: the kit of any
    assignment loads every assignment notebook beside it, its own (as last saved) included."""
    for assignment in ("a01_graphs", "a02_broadcasting", "a03_im2col"):
        (tmp_path / assignment).mkdir()
        shutil.copy(SOURCE / assignment / f"{assignment}.ipynb", tmp_path / assignment)
    build_kit(tmp_path / "a01_graphs")
    result = run_in(tmp_path / "a01_graphs", """
        import coursekit
        coursekit.status()
    """)
    assert result.returncode == 0, result.stderr
    rows = [re.fullmatch(r"(\S.*?) +(a\d\d) · .*: (\w[\w ]*)", line) for line in result.stdout.splitlines()[1:]]
    assert all(rows), result.stdout
    assert {row[2] for row in rows} == {"a01", "a02", "a03"}, result.stdout
    assert {row[3] for row in rows} == {"yours"}, result.stdout
    assert result.stdout.startswith(f"Your exercises from your notebooks: {len(rows)} done and in use\n")


@pytest.mark.slow
def test_the_training_command_runs_the_capstones_own_answer(tmp_path):
    """`python -m coursekit.engine.training` in a06_training/ trains with the train_step of a06's
    notebook (runpy runs the module as a second copy, `__main__`: it must run the one answers reach)."""
    for name in sorted(p.name for p in SOURCE.iterdir() if p.name < "a06"):  # the model and the data
        (tmp_path / name).mkdir()
        shutil.copy(SOURCE / name / f"{name}.ipynb", tmp_path / name)
    (tmp_path / "a06_training").mkdir()
    nb = json.loads((SOURCE / "a06_training" / "a06_training.ipynb").read_text())
    _set_region(_cell(nb, "a06-train-step"), "raise RuntimeError(\"the student's train_step ran\")")
    (tmp_path / "a06_training" / "a06_training.ipynb").write_text(json.dumps(nb))
    build_kit(tmp_path / "a06_training")
    result = subprocess.run([sys.executable, "-m", "coursekit.engine.training", "--model", "cnn", "--no-progress",
                             "--out", str(tmp_path / "out")], cwd=tmp_path / "a06_training", capture_output=True,
                            text=True, timeout=300)
    assert "RuntimeError: the student's train_step ran" in result.stderr, result.stderr[-3000:]
    assert "found in sys.modules" not in result.stderr, "runpy's warning about the module loaded twice"


def test_the_judges_kit_never_loads_notebooks():
    """Grading isolation: the sandbox's kit (kit_modules) gets exactly the answers the judge sends;
    it never looks for notebooks by itself, as the students' kit does when imported."""
    from autograder.course import catalogue
    from autograder.kit import kit_files, kit_modules

    # The kit's __init__ is one shipped file: it loads the notebooks when its table says so.
    package = kit_files()[Path("coursekit") / "__init__.py"]
    assert "if AUTOLOAD:\n    # " in package and package.count("autoload()") == 1
    assert "\nAUTOLOAD = True\n" in kit_files()[Path("coursekit") / "_exercises.py"]
    specs = catalogue.assignment("a02_broadcasting")
    for stubbed in ([], specs[:1], specs):
        modules = kit_modules(stubbed)
        assert modules["coursekit"][1] == package
        assert "\nAUTOLOAD = False\n" in modules["coursekit._exercises"][1]
