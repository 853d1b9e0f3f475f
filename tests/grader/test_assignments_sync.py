"""The source notebooks of every assignment: in sync with solutions/, well formed for nbgrader.

One source of truth: `python -m autograder.authoring.sync --check` must pass (every solution region equals
the reference body it is generated from). The rest checks the conventions every assignment
follows: per exercise a markdown contract, the solution cell (grade_id = exercise id), a visible
test cell (`<id>-visible`, 0 points) and a hidden one (`<id>-hidden`, the spec's points, nothing
but the name of their check); unique grade_ids; no outputs; no `import solutions`.
"""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import sync
from autograder.course import catalogue, notebook

from support import REPO

ROOT = REPO
SOURCE = ROOT / "assignments" / "source"
# Every assignment with a source notebook and a registry of hidden checks.
ASSIGNMENTS = sync.assignments()
HIDDEN = ('# More checks of "{title}" run when your work is graded: nothing to write or run here.\n'
          '### BEGIN HIDDEN TESTS\n# judged outside the notebook, by the check "{id}" on {name}\n### END HIDDEN TESTS')


def notebooks() -> list[Path]:
    return [SOURCE / a / f"{a}.ipynb" for a in ASSIGNMENTS]


def cells_by_grade_id(path: Path) -> dict[str, nbformat.NotebookNode]:
    nb = nbformat.read(path, as_version=4)
    return {notebook.grade_id(c): c for c in nb.cells if notebook.nbgrader(c)}


nbgrader = notebook.nbgrader


def test_every_registry_has_its_source_notebook():
    """The assignments are discovered from assignments/source/: a registry of hidden checks
    (autograder/exercises/aNN_name.py) without its notebook would silently be left out."""
    registries = catalogue.assignment_names()
    assert registries == ASSIGNMENTS, f"registries {registries}, source notebooks {ASSIGNMENTS}"


def test_sync_check_passes():
    problems = sync.sync(ASSIGNMENTS, write=False)
    assert problems == [], "solution regions drifted from solutions/; run `python -m autograder.authoring.sync`:\n" + \
        "\n".join(problems)


def test_sync_reports_and_repairs_drift(tmp_path):
    root = tmp_path / "source"
    shutil.copytree(SOURCE / "a02_broadcasting", root / "a02_broadcasting")
    path = root / "a02_broadcasting" / "a02_broadcasting.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if nbgrader(c).get("grade_id") == "a02-mul")
    cell.source = cell.source.replace("grad * y, x.shape", "grad * x, x.shape")
    nbformat.write(nb, path)
    problems = sync.sync(["a02_broadcasting"], write=False, root=root)
    assert len(problems) == 1 and "a02-mul" in problems[0] and "Mul.backward differs" in problems[0], problems
    assert sync.sync(["a02_broadcasting"], write=True, root=root) == []
    assert sync.sync(["a02_broadcasting"], write=False, root=root) == []
    assert path.read_text() == (SOURCE / "a02_broadcasting" / "a02_broadcasting.ipynb").read_text()


def test_sync_main_exit_status(capsys):
    assert sync.main(["--check", *ASSIGNMENTS]) == 0
    assert "every solution region matches" in capsys.readouterr().out


@pytest.mark.slow
def test_sync_is_an_autograder_command_on_the_courses_own_source(tmp_path, capsys):
    """`autograder --course C sync` works on C's source/, as the instructor's other commands do."""
    from autograder import cli
    course = tmp_path / "course"
    shutil.copytree(SOURCE / "a02_broadcasting", course / "source" / "a02_broadcasting")
    shutil.copy(SOURCE.parent / "nbgrader_config.py", course)
    path = course / "source" / "a02_broadcasting" / "a02_broadcasting.ipynb"
    path.write_text(path.read_text().replace("grad * y, x.shape", "grad * x, x.shape", 1))
    assert cli.main(["--course", str(course), "sync", "--check", "a02_broadcasting"]) == 1
    assert "Mul.backward differs" in capsys.readouterr().err
    assert cli.main(["--course", str(course), "sync", "a02_broadcasting"]) == 0
    assert cli.main(["--course", str(course), "sync", "--check", "a02_broadcasting"]) == 0
    assert path.read_text() == (SOURCE / "a02_broadcasting" / "a02_broadcasting.ipynb").read_text()


@pytest.mark.parametrize("path", notebooks(), ids=ASSIGNMENTS)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {cell.id} has outputs"


def test_grade_ids_are_unique():
    seen: dict[str, str] = {}
    for path in notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            gid = nbgrader(cell).get("grade_id")
            if gid:
                assert gid not in seen, f"grade_id {gid} in {path.name} and {seen[gid]}"
                seen[gid] = path.name


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_exercise_has_solution_visible_and_hidden_cells(assignment):
    path = SOURCE / assignment / f"{assignment}.ipynb"
    cells = cells_by_grade_id(path)
    specs = catalogue.assignment(assignment)
    for s in specs:
        solution, visible, hidden = cells.get(s.id), cells.get(f"{s.id}-visible"), cells.get(f"{s.id}-hidden")
        assert solution is not None and visible is not None and hidden is not None, s.id
        meta = nbgrader(solution)
        assert (meta["solution"], meta["grade"], meta["locked"]) == (True, False, False), s.id
        assert "### BEGIN SOLUTION" in solution.source
        assert re.search(rf"^(class|def) {s.name}\b", solution.source, re.M), f"{s.id} must define {s.name}"
        for test, points in ((visible, 0), (hidden, s.points)):
            meta = nbgrader(test)
            assert meta["grade"] and meta["locked"] and not meta["solution"], meta
            assert meta["points"] == points, (meta["grade_id"], meta["points"], points)
        assert hidden.source == HIDDEN.format(id=s.id, name=s.name, title=s.title)
        assert "HIDDEN" not in visible.source and "autograder" not in visible.source
    # ... and vice versa: every hidden test cell is a registered exercise.
    hidden_ids = {gid[: -len("-hidden")] for gid in cells if gid.endswith("-hidden")}
    assert hidden_ids == {s.id for s in specs}


@pytest.mark.parametrize("path", notebooks(), ids=ASSIGNMENTS)
def test_cell_order_and_layout(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "from coursekit" in code[0].source and "import" in code[0].source
    ids = [nbgrader(c).get("grade_id", "") for c in nb.cells]
    for k, gid in enumerate(ids):
        if gid and nbgrader(nb.cells[k]).get("solution") and nb.cells[k].cell_type == "code":
            assert nb.cells[k - 1].cell_type == "markdown", f"{gid}: the contract comes right before the code"
            assert ids[k + 1] == f"{gid}-visible" and ids[k + 2] == f"{gid}-hidden", gid
    last = nb.cells[-1]
    assert last.cell_type == "markdown" and "Run All" in last.source


@pytest.mark.parametrize("path", notebooks(), ids=ASSIGNMENTS)
def test_written_questions(path):
    nb = nbformat.read(path, as_version=4)
    written = [k for k, c in enumerate(nb.cells) if c.cell_type == "markdown" and nbgrader(c).get("solution")]
    assert written, "each assignment has at least one manually graded question"
    for k in written:
        meta = nbgrader(nb.cells[k])
        assert meta["grade"] and meta["points"] > 0 and meta["grade_id"].endswith("-written")
        question = nb.cells[k - 1]
        assert question.cell_type == "markdown" and not nbgrader(question), \
            "the question text lives in its own cell (nbgrader replaces the whole answer cell)"
        assert "Rubric" in nb.cells[k].source


@pytest.mark.parametrize("path", notebooks(), ids=ASSIGNMENTS)
def test_no_solutions_import_and_test_cells_end_in_a_statement(path):
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        assert not re.search(r"^\s*(import solutions|from solutions\b)", cell.source, re.M), cell.id
        meta = nbgrader(cell)
        if meta.get("grade") and not meta.get("solution"):
            tree = ast.parse(cell.source)
            last = tree.body[-1] if tree.body else None
            # nbgrader reads a test cell's numeric result as partial credit: never end on a value.
            assert not (isinstance(last, ast.Expr) and not isinstance(last.value, ast.Call)), meta["grade_id"]
            if isinstance(last, ast.Expr):
                assert getattr(last.value.func, "id", None) in ("print", "check"), meta["grade_id"]


def test_locate_finds_exact_bodies():
    from autograder.course.regions import RegionError, cell_regions, locate

    source = '''
class Op:
    """Doc."""

    def backward(self,
                 grad,
                 ) -> tuple:
        """Two
        lines."""
        # a comment that belongs to the body
        x = grad

        return x  # trailing

    def forward(self, x): return x


def f(a, b=(1, 2)):
    return a
'''
    body = locate(source, "Op.backward")
    assert body.lines == ("        # a comment that belongs to the body", "        x = grad", "",
                          "        return x  # trailing")
    assert body.text("    ") == ["    # a comment that belongs to the body", "    x = grad", "",
                                "    return x  # trailing"]
    assert locate(source, "f").lines == ("    return a",)
    with pytest.raises(RegionError):
        locate(source, "Op.forward")  # the body shares the signature's line
    with pytest.raises(RegionError):
        locate(source, "Op.missing")

    cell = 'class Op:\n    def backward(self, grad):\n        """Doc."""\n        ### BEGIN SOLUTION\n' \
           '        return grad\n        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n' \
           '        pass\n        ### END SOLUTION\n'
    regions = cell_regions(cell)
    assert [(r.qualname, r.lines) for r in regions] == [("Op.backward", ("        return grad",)),
                                                         ("Op.forward", ("        pass",))]
