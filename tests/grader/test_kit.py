"""The students' kit (`autograder.kit.build_kit`): no exercise body in it, and it works.

Works means: the kit imports without `solutions`; a stubbed exercise raises a NotImplementedError
that names the exercise; `coursekit.use` plugs a notebook's class in; and each *source* notebook
(solution regions filled in) runs top to bottom on the kit with every visible and hidden test
passing, as a student's finished notebook would.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import solutions
from autograder.authoring import sync
from autograder.course import catalogue
from autograder.kit import body_lines, build_kit, leaks, stub_message, stubbed

from support import REPO

ROOT = REPO
SOURCE = ROOT / "assignments" / "source"
# Every assignment with a source notebook and a registry of hidden checks.
ASSIGNMENTS = sync.assignments()


@pytest.fixture(scope="module")
def kit_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("release")
    build_kit(folder)
    return folder


def run_in_kit(folder: Path, code: str) -> subprocess.CompletedProcess:
    """Run `code` with a fresh interpreter whose working directory holds coursekit/ (as a student's)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=folder, capture_output=True,
                          text=True, timeout=120)


def test_layout_and_headers(kit_dir):
    kit = kit_dir / "coursekit"
    for rel in ["__init__.py", "testing.py", "engine/__init__.py", "engine/graph.py", "engine/scalar.py",
                "engine/ops/elementwise.py"]:
        assert (kit / rel).is_file(), rel
    if (ROOT / "solutions" / "data.py").exists():
        assert (kit / "data.py").is_file()
    assert not (kit / "engine" / "examples").exists()
    for path in kit.rglob("*.py"):
        assert path.read_text().startswith("# generated "), f"{path} has no 'generated ... do not edit' header"
        assert "do not edit" in path.read_text().split("\n")[0]


def test_no_exercise_body_in_the_kit(kit_dir):
    assert body_lines(), "the registry lists no exercise bodies at all"
    assert leaks(kit_dir / "coursekit") == []
    kit_text = "\n".join(p.read_text() for p in (kit_dir / "coursekit").rglob("*.py"))
    for s in catalogue.in_engine():
        assert repr(stub_message(s)) in kit_text, s.id


def test_no_given_code_shows_an_exercise_answer(kit_dir):
    # The fast stride-1 input gradient rotates the kernel and swaps its channels: exactly what
    # a04's conv2d_backward_derived asks for. It lives with the other fast kernels in the private
    # solutions/ops/_fast.py, which the kit does not ship (its ops run the teaching kernels).
    reference = (Path(solutions.__file__).parent / "ops" / "_fast.py").read_text()
    swap = "[..., ::-1, ::-1].transpose(0, 2, 1, 3, 4)"
    assert swap in reference, "the test's marker line moved: update it"
    assert not (kit_dir / "coursekit" / "engine" / "ops" / "_fast.py").exists()
    for path in (kit_dir / "coursekit").rglob("*.py"):
        assert swap not in path.read_text(), path


def test_kit_runs_without_solutions_and_stubs_explain_themselves(kit_dir):
    # each stub says its exercise's title and its notebook, in the words of autograder.kit.stub_message
    said = {what: stub_message(catalogue.exercise(what)) for what in ("a01-run-backward", "a02-mul", "a01-add",
                                                                      "a02-softmax")}
    assert all(" · " in message for message in said.values()), said
    result = run_in_kit(kit_dir, f"SAID = {said!r}\n" + textwrap.dedent("""
        import sys
        import numpy as np
        from coursekit.engine import Tensor
        from coursekit.engine.scalar import Value
        from coursekit.testing import gradcheck
        x = Tensor(np.ones((2, 3)), requires_grad=True)
        y = x * 2.0                      # trivial forwards are kept
        assert y.data.sum() == 12.0
        from coursekit.engine.ops.elementwise import Mul
        from coursekit.testing import op_grads
        for what, run in [("a01-run-backward", lambda: y.backward(np.ones((2, 3)))),
                          ("a02-mul", lambda: op_grads(Mul, x, x)),
                          ("a01-add", lambda: Value(1.0) + Value(2.0)),
                          ("a02-softmax", lambda: x.softmax(axis=1))]:
            try:
                run()
            except NotImplementedError as error:
                assert str(error) == SAID[what], error
            else:
                raise AssertionError(f"{what} is not stubbed")
        assert not [m for m in sys.modules if m.split(".")[0] == "solutions"], "the kit imported solutions"
        print("ok")
    """))
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_use_plugs_a_notebook_class_into_the_kit(kit_dir):
    result = run_in_kit(kit_dir, """
        import numpy as np
        from coursekit import use
        from coursekit.engine import Function, Tensor
        from coursekit.engine.scalar import Value

        def unbroadcast(grad, shape):
            lead = grad.ndim - len(shape)
            axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                              if n == 1 and grad.shape[lead + i] != 1)
            return grad.sum(axis=axes, keepdims=True).reshape(shape)

        class Mul(Function):
            def forward(self, x, y):
                return x * y
            def backward(self, grad):
                x, y = self.inputs
                return unbroadcast(grad * y, x.shape), unbroadcast(grad * x, y.shape)

        use(unbroadcast, Mul)
        from coursekit.engine.ops import elementwise
        from coursekit.testing import op_grads
        x = Tensor(np.ones((4, 3)), requires_grad=True)
        y = Tensor(np.arange(3.0), requires_grad=True)
        assert (x * y).grad_fn.__class__ is Mul  # the engine's `*` now runs the notebook's Mul
        gx, gy = op_grads(elementwise.Mul, x, y)
        assert gy.data.tolist() == [4.0, 4.0, 4.0]

        def add(a, b):                         # the scalar `add`, not the tensor op `add`
            a, b = (v if isinstance(v, Value) else Value(v) for v in (a, b))
            return Value(a.data + b.data, (a, b), "+")
        use(add)
        assert (Value(1.0) + 2.0).data == 3.0
        try:
            use(lambda x: x)
        except ValueError as error:
            assert "use:" in str(error)
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def _execute(notebook: Path, folder: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    client.execute()
    return nb


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def _errors(nb) -> list[tuple[str, str, str]]:
    return [(_grade_id(c) or c.get("id", "?"), o.ename, o.evalue) for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if o.output_type == "error"]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_notebook_runs_on_the_kit(assignment, tmp_path):
    """With the solutions filled in, every cell runs: visible tests print, hidden tests pass."""
    notebook = SOURCE / assignment / f"{assignment}.ipynb"
    if any(s.whole_engine for s in catalogue.assignment(assignment)):
        # The capstone runs on the whole engine: a student who finished every earlier assignment
        # with the reference answers, their notebooks beside this one, as the kit finds them.
        for earlier in ASSIGNMENTS:
            if earlier < assignment:
                (tmp_path / earlier).mkdir()
                shutil.copy(SOURCE / earlier / f"{earlier}.ipynb", tmp_path / earlier)
        tmp_path = tmp_path / assignment
        tmp_path.mkdir()
    else:
        # Every other assignment: its visible tests need nothing of another assignment, so they
        # pass with every other exercise of the course still a stub (no earlier notebook here).
        pass
    shutil.copy(notebook, tmp_path)
    build_kit(tmp_path)
    nb = nbformat.read(tmp_path / notebook.name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(  # what a student has: the kit, never the reference
        "import sys\nassert not [m for m in sys.modules if m.split('.')[0] in ('solutions', 'autograder')]"))
    nbformat.write(nb, tmp_path / notebook.name)
    nb = _execute(tmp_path / notebook.name, tmp_path)
    prefix = assignment.split("_", 1)[0]

    def excused(error) -> bool:
        """An ungraded demo cell that needs an earlier assignment (no earlier notebook is beside
        this one) stops with the stub's message naming that exercise; a test cell never may."""
        cell, ename, evalue = error
        is_test = cell.endswith("-visible") or "-hidden" in cell
        stub = stubbed(evalue)
        return not is_test and ename == "NotImplementedError" and stub is not None and stub.prefix != prefix

    errors = [e for e in _errors(nb) if not excused(e)]
    assert errors == []
    for cell in nb.cells:
        if _grade_id(cell).endswith("-visible"):
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            assert "visible tests passed" in text, _grade_id(cell)
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"], \
                f"{_grade_id(cell) or cell.id} writes to stderr (nbgrader fails a test cell that does)"


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A scratch copy of the course with both assignments generated by nbgrader (student versions)."""
    from autograder.course.directory import Course

    root = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "assignments" / "nbgrader_config.py", root)
    for assignment in ASSIGNMENTS:
        shutil.copytree(SOURCE / assignment, root / "source" / assignment)
    course = Course.open(root, f"sqlite:///{root / 'gradebook.db'}")
    for assignment in ASSIGNMENTS:
        result = course.api().generate_assignment(assignment, force=True, create=True)
        assert result["success"], result.get("log")
    return root / "release"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_notebook_runs_and_fails_only_with_not_implemented(assignment, released):
    """nbgrader's student version, with the kit beside it, runs top to bottom: the only errors
    are NotImplementedError from the exercises (no crash in given code), every visible test fails
    that way, and neither solutions nor hidden tests are in it."""
    folder = released / assignment
    text = (folder / f"{assignment}.ipynb").read_text()
    for marker in ("BEGIN SOLUTION", "HIDDEN TESTS", "autograder.judge", "Model answer", "import solutions"):
        assert marker not in text, marker
    build_kit(folder)
    nb = _execute(folder / f"{assignment}.ipynb", folder)
    errors = _errors(nb)
    assert errors, "the released notebook ran without a single NotImplementedError"
    assert {e[1] for e in errors} == {"NotImplementedError"}, errors
    failed = {e[0] for e in errors}
    visible = {_grade_id(c) for c in nb.cells if _grade_id(c).endswith("-visible")}
    assert visible <= failed, f"visible tests that pass without an answer: {sorted(visible - failed)}"
    assert json.loads(text)["cells"][0]["cell_type"] == "markdown"
