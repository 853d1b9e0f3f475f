"""autograder release: nbgrader generate_assignment, then a scan that must catch planted leaks."""

import json
import shutil
import subprocess
import sys

import pytest

from autograder.course.codelines import MIN_CHARS, signature

from support.course import (
    ASSIGNMENT,
    NOTEBOOK,
    REPO,
    SOLUTIONS,
    autograder,
    make_course,
    release,
    submit,
    use_toy_catalogue,
)

pytestmark = pytest.mark.xdist_group("autograder")


def test_signature_ignores_trivial_lines_and_formatting():
    assert signature("") is None
    assert signature("    # a comment") is None
    assert signature("import numpy as np") is None
    assert signature("from solutions.ops import unbroadcast") is None
    assert signature("def forward(self, x: NDArray, y: NDArray) -> NDArray:") is None
    assert signature('    """Elementwise product z = x * y, with NumPy broadcasting."""') is None
    assert signature("raise NotImplementedError()") is None
    assert signature("x, y = self.inputs") is None  # too short to mean anything
    long = "return unbroadcast(grad * y, x.shape), unbroadcast(grad * x, y.shape)"
    assert len(long) > MIN_CHARS
    assert signature(long) == signature("  return unbroadcast( grad*y, x.shape ),unbroadcast(grad * x, y.shape)  # why")


@pytest.mark.slow
def test_release_is_clean_and_strips_solutions_and_hidden_tests(tmp_path, capsys):
    course = make_course(tmp_path / "course")
    release(course)
    out = capsys.readouterr().out
    assert "scan clean" in out
    released = (course.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released
    assert 'check("a00-add"' not in released
    # the kernel's own language_info: JupyterLab has nothing to write into it on opening, so the
    # student's fresh notebook does not open marked modified
    from ipykernel.ipkernel import IPythonKernel
    assert json.loads(released)["metadata"]["language_info"] == IPythonKernel.language_info
    with course.gradebook() as gb:  # generate_assignment recorded the assignment for grading
        assert {nb.name for nb in gb.find_assignment(ASSIGNMENT).notebooks} == {NOTEBOOK}


@pytest.mark.slow
def test_release_catches_planted_leaks(tmp_path, capsys):
    course = make_course(tmp_path / "course")
    solutions = tmp_path / "solutions"  # the reference engine: every line of it is secret here
    shutil.copytree(SOLUTIONS, solutions)
    (solutions / "extra.py").write_text("def cube_backward(x, grad):\n    return 3.0 * np.square(x) * grad\n")
    source = course.source_dir(ASSIGNMENT)
    # 1. a helper file released with the notebook: nbgrader never strips anything from it
    (source / "helpers.py").write_text(
        "def helper(x, grad):\n"
        "    ### BEGIN SOLUTION\n"
        "    return 3.0 * np.square(x) * grad  # from the reference engine\n"
        "    ### END SOLUTION\n")
    nb = json.loads((source / f"{NOTEBOOK}.ipynb").read_text())
    # 2. a markdown cell quoting the body of a notebook's solution inside a sentence, reformatted
    nb["cells"].insert(2, {"cell_type": "markdown", "metadata": {}, "source":
                           "Hint: try `grad_x = 2.0*np.asarray(x, dtype=float)*grad` here."})
    # 3. a line that quotes a solution on purpose, marked as allowed
    nb["cells"].insert(3, {"cell_type": "markdown", "metadata": {}, "source":
                           "`return np.asarray(x, dtype=float) + np.asarray(y, dtype=float)  # release-scan: allow`"})
    (source / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb))

    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(solutions)) == 1
    out = capsys.readouterr().out
    assert "RELEASE LEAKS 4 line(s)" in out
    assert "release/a00_toy/helpers.py: line 2: nbgrader marker 'BEGIN SOLUTION'" in out
    assert "release/a00_toy/helpers.py: line 3: same code as solutions/extra.py:2" in out
    assert "release/a00_toy/helpers.py: line 4: nbgrader marker 'END SOLUTION'" in out
    assert "release/a00_toy/a00_toy.ipynb: cell 3 line 1: same code as source/a00_toy/a00_toy.ipynb cell" in out
    assert "release-scan: allow" not in out


@pytest.mark.slow
def test_release_ships_the_course_kit_and_grading_uses_it(tmp_path, monkeypatch, capsys):
    """Notebooks that import coursekit get it in the release folder, and when they are graded."""
    use_toy_catalogue(monkeypatch)
    course = make_course(tmp_path / "course")
    path = course.source_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"][1]["source"] = "import numpy as np\nimport coursekit"
    path.write_text(json.dumps(nb))
    release(course)
    kit = course.release_dir(ASSIGNMENT) / "coursekit"
    assert (kit / "__init__.py").is_file() and (kit / "engine").is_dir()
    submit(course, "alice", nb)
    assert autograder(course, "grade", ASSIGNMENT) == 0
    assert "6/7" in capsys.readouterr().out  # `import coursekit` worked in the grading kernel
    assert not (course.autograded_dir("alice", ASSIGNMENT) / "coursekit").exists()  # not copied per student


@pytest.mark.slow
def test_release_all_and_unknown_assignment(tmp_path, capsys):
    course = make_course(tmp_path / "course")
    assert autograder(course, "release", "--all", "--solutions", str(SOLUTIONS)) == 0
    assert autograder(course, "release", "a99_nope", "--solutions", str(SOLUTIONS)) == 2
    assert "no assignment 'a99_nope'" in capsys.readouterr().err


def test_the_generated_kit_is_scanned_like_any_released_file(tmp_path):
    """The kit is generated from solutions/: a line of given code that repeats an answer is a leak."""
    from pathlib import Path

    from autograder import kit
    from autograder.commands.release import scan, secret_index
    from autograder.course.directory import Course

    course = Course.open()
    kit.build_kit(tmp_path)
    index = secret_index(course, "a02_broadcasting", Path(kit.SOLUTIONS))
    assert scan(tmp_path, index, tmp_path) == []
    planted = tmp_path / "coursekit" / "engine" / "ops" / "reduce.py"
    planted.write_text(planted.read_text()
                       + "\n    gx = unbroadcast(grad, x.shape) if self.needs_input_grad[0] else None\n")
    leaks = scan(tmp_path, index, tmp_path)
    assert any(leak.file == "coursekit/engine/ops/reduce.py" and "a02_broadcasting.ipynb" in leak.what
               for leak in leaks), leaks
    assert all("gx = unbroadcast(grad, x.shape)" in leak.text for leak in leaks)


def test_every_kit_shared_line_is_still_in_the_kit():
    """An allow-list entry the kit no longer holds is stale: it would excuse a future leak."""
    from autograder import kit
    from autograder.commands.release import KIT_SHARED_LINES

    lines = {line.strip() for text in kit.kit_files().values() for line in text.split("\n")}
    assert not [line for line in KIT_SHARED_LINES if line not in lines]


@pytest.mark.slow
def test_the_course_releases_as_an_instructor_releases_it(tmp_path):
    """What an instructor does first, with the command line in a fresh copy of the course: every
    assignment of the course releases clean. (A notebook whose instructions spell out its model
    answer, line by line, is refused: the scan is right, the instructions must state the contract.)"""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", course)
    shutil.copytree(REPO / "assignments" / "source", course / "source")
    assignments = sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
    result = subprocess.run([sys.executable, "-m", "autograder", "--course", str(course), "release", "--all"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("scan clean") == len(assignments) and "LEAK" not in result.stdout, result.stdout
    for assignment in assignments:
        assert f"{assignment}: released to" in result.stdout, result.stdout
        assert (course / "release" / assignment / f"{assignment}.ipynb").is_file()
        assert (course / "release" / assignment / "coursekit" / "__init__.py").is_file()
