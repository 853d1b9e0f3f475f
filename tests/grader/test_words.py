"""What the course ships to students says only words the course taught (issue 39, item 4).

Scanned for the internal vocabulary (grade ids, the course's module names, private names, folder
slugs, Python's internals: tests/support/words.py, with each allowed exception and why): the
released notebooks as `autograder release` makes them, the line their first code cell prints, the
feedback pages of a wrong and of a blank submission, and Validate's answer on a half-done notebook.
A test of the scanner shows it catches each kind of word.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from autograder import cli
from autograder.course import catalogue, notebook
from autograder.course.directory import Course
from autograder.mutants import apply_mutant, load_mutants

from support import REPO
from support.words import (
    ALLOWED,
    book_python_names,
    code_words,
    defined_names,
    internal_words,
    notebook_words,
)

SOURCE = REPO / "assignments" / "source"
ASSIGNMENTS = catalogue.assignment_names()
COURSE_NAME = yaml.safe_load((REPO / "_config.yml").read_text())["title"]
BOOK_NAMES = book_python_names(REPO / "book")
# a02 is the assignment the new student met; the others are scanned by `make test`
EACH = [pytest.param(a, marks=() if a == "a02_broadcasting" else pytest.mark.slow) for a in ASSIGNMENTS]

pytestmark = pytest.mark.xdist_group("words")


# -- the scanner ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "rule"), [
    ("Grade cell: a02-unbroadcast-hidden", "grade id"),
    ("Grade cell: a02-unbroadcast-hidden", "Python internal"),
    ("coursekit: 0 of your answers; still to do: a02-add (coursekit.status() says why)", "module name"),
    ("in that notebook, coursekit.use(Sum) plugs it in", "module name"),
    ("the grader (autograder/judge/judge.py) could not check it", "module name"),
    ("from solutions.ops import Mul", "module name"),
    ("autograder.course.nbgrader_glue raised", "module name"),
    ("implement Mul in your notebook a02_broadcasting", "folder slug"),
    ("the course autograd-course", "folder slug"),
    ("self._loaded is empty", "private name"),
    ("Traceback (most recent call last):", "Python internal"),
    ("KeyError: 'x'", "Python internal"),
    ("sys.modules['coursekit']", "Python internal"),
])
def test_the_scanner_finds_each_kind_of_internal_word(text, rule):
    assert rule in {hit.rule for hit in internal_words(text)}, (text, internal_words(text))


def test_the_scanner_reads_code_as_its_words_and_leaves_taught_words_alone():
    imports = "import numpy as np\nfrom coursekit.engine.ops.activation import _stable_logsumexp\n"
    assert [hit.word for hit in internal_words(code_words(imports))] == ["_stable_logsumexp"]
    test = 'assert_close(y, 1.0, msg="see a02-mul")  # a02_broadcasting\n'
    assert {hit.rule for hit in internal_words(code_words(test))} == {"grade id", "folder slug"}
    assert internal_words("x = _private + 1  # plain code is not read as words") != []
    assert internal_words(code_words("x = _private + 1\n")) == []
    # what is taught: paths in the student's home, math, the notebook's own names, the book's names
    assert internal_words("open `../a01_graphs/a01_graphs.ipynb`, or the folder a01_graphs/") == []
    assert internal_words(r"$x_i$ and $\text{fan\_in}$") == []
    assert internal_words("`self._backward` of each Value", taught=defined_names(["v._backward = f\n"])) == []
    assert internal_words("raise ValueError naming the shapes", taught=frozenset({"ValueError"})) == []
    assert internal_words("replace `raise NotImplementedError()` by your code") == []
    # the kit's API is taught in a notebook's prose, not in what the course prints
    assert internal_words("`coursekit.status()` lists them", kit_api=True) == []
    assert internal_words("`coursekit.status()` lists them") != []


def test_every_allowed_exception_says_why():
    for rule, word, why in ALLOWED:
        assert rule in {"grade id", "module name", "private name", "folder slug", "Python internal"}, rule
        assert word and len(why) > 40, (rule, word, why)


def test_the_book_defines_the_words_the_course_prints():
    """'the engine' and 'the course kit' are in what the kit, the judge and Validate say: the
    glossary defines both."""
    glossary = (REPO / "book" / "glossary.md").read_text()
    for term in ("engine", "course kit"):
        assert f"\n{term}\n  " in glossary, term


# -- the notebooks ----------------------------------------------------------------------------------
def _scan_notebook(nb: dict, name: str) -> list:
    code = [notebook.text(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    taught = defined_names(code) | BOOK_NAMES
    return [hit for where, text in notebook_words(nb)
            for hit in internal_words(text, f"{name} {where}", taught, kit_api=True)]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_source_notebooks_say_only_taught_words(assignment):
    """The quick check (`make check`): the source of what is released."""
    nb = notebook.read(SOURCE / assignment / f"{assignment}.ipynb")
    for cell in nb.cells:  # as nbgrader releases it: no solution, no hidden test
        cell.source = notebook.released(cell)
    hits = _scan_notebook(nb, assignment)
    assert not hits, "\n".join(map(str, hits))


def _released(tmp_path_factory, assignment: str) -> Path:
    """The assignment released by the CLI, as an instructor releases it, in a scratch course."""
    root = tmp_path_factory.mktemp(f"course-{assignment}")
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(SOURCE / assignment, root / "source" / assignment)
    assert cli.main(["--course", str(root), "release", assignment]) == 0
    return Course.open(root).release_dir(assignment)


@pytest.mark.parametrize("assignment", EACH)
def test_a_released_notebook_and_its_first_cell_say_only_taught_words(assignment, tmp_path_factory):
    folder = _released(tmp_path_factory, assignment)
    nb = json.loads((folder / f"{assignment}.ipynb").read_text())
    hits = _scan_notebook(nb, assignment)
    assert not hits, "\n".join(map(str, hits))
    first = notebook.text(nb["cells"][0]["source"])
    assert first.startswith(f"# {assignment[:3]} · ") and f"*{COURSE_NAME}*" in first, first[:300]

    # the line the first code cell prints (the kit loading the student's answers), as the student runs it
    imports = next(notebook.text(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    ran = subprocess.run([sys.executable, "-c", imports], cwd=folder, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    status = ran.stdout.strip()
    assert status.startswith("Your exercises from your notebooks: 0 done and in use; still to do: "), status
    first_exercise = catalogue.assignment(assignment)[0]
    assert first_exercise.title in status, status
    hits = internal_words(status, "the first cell's output")
    assert not hits, "\n".join(map(str, hits))


# -- the feedback pages ---------------------------------------------------------------------------
def _page_words(html: str) -> list[tuple[str, str]]:
    """What the feedback page says in its own words: its title, its summary (each exercise's title,
    points and the judge's message), each graded cell's label and each error shown under a cell.
    The rest is the student's own notebook (scanned above as released)."""
    page = BeautifulSoup(html, "html.parser")
    out = [("title", page.title.get_text() if page.title else ""), ("summary", page.header.get_text("\n"))]
    out += [("cell label", label.get_text(" ")) for label in page.select(".nbgrader-label")]
    out += [("error", error.get_text("\n")) for error in page.select(".output_error, .output_stderr")]
    return out


@pytest.mark.slow
def test_the_feedback_of_a_wrong_and_a_blank_submission_says_only_taught_words(tmp_path):
    assignment = "a02_broadcasting"
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(SOURCE / assignment, root / "source" / assignment)
    course = Course.open(root)
    assert cli.main(["--course", str(root), "release", assignment]) == 0
    source = {assignment: notebook.read(SOURCE / assignment / f"{assignment}.ipynb")}
    mutant = load_mutants(assignment)[0]
    _, wrong = apply_mutant(source, mutant, assignment)
    blank = (course.release_dir(assignment) / f"{assignment}.ipynb").read_text()
    for student, nb in (("wrong", json.dumps(wrong)), ("blank", blank)):
        folder = course.submitted_dir(student, assignment)
        folder.mkdir(parents=True)
        (folder / f"{assignment}.ipynb").write_text(nb)
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    assert cli.main(["--course", str(root), "grade", assignment, "--jobs", "2"]) == 0
    assert cli.main(["--course", str(root), "feedback", assignment]) == 0
    heading = notebook.text(source[assignment].cells[0].source).split("\n")[0].removeprefix("# ")
    for student in ("wrong", "blank"):
        html = (course.root / "feedback" / student / assignment / f"{assignment}.html").read_text()
        words = _page_words(html)
        assert dict(words)["title"] == heading, words[0]
        summary = dict(words)["summary"].strip()
        assert summary.startswith(heading + ":"), summary[:200]
        assert "Hidden test of " in "\n".join(text for where, text in words if where == "cell label")
        hits = [hit for where, text in words for hit in internal_words(text, f"{student}'s feedback {where}")]
        assert not hits, "\n".join(map(str, hits))
    blank_summary = dict(_page_words((course.root / "feedback" / "blank" / assignment / f"{assignment}.html")
                                     .read_text()))["summary"]
    assert "not done yet: its cell still raises NotImplementedError() where your code goes" in blank_summary


# -- Validate ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_validate_says_which_exercises_are_unfinished_in_a_sentence_each(tmp_path_factory, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "deploy" / "hub" / "student" / "python"))
    from autograd_validate import CourseValidator

    assignment = "a02_broadcasting"
    folder = _released(tmp_path_factory, assignment)
    path = folder / f"{assignment}.ipynb"
    released, source = notebook.read(path), notebook.read(SOURCE / assignment / f"{assignment}.ipynb")
    done = catalogue.assignment(assignment)[0]  # the first exercise answered, the rest as released
    answer = next(c for c in source.cells if notebook.grade_id(c) == done.id)
    for cell in released.cells:
        if notebook.grade_id(cell) == done.id:
            cell.source = "\n".join(line for line in notebook.text(answer.source).split("\n")
                                     if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    notebook.write(released, path)

    results = CourseValidator().validate(str(path))
    failed = results["failed"]
    headings = [entry["source"] for entry in failed]
    assert len(headings) == len(set(headings)), headings  # one entry per exercise, not per cell
    assert not [h for h in headings if done.title in h], failed[0]  # the one done is not listed
    assert headings[0].startswith("Exercise · Add"), headings
    # its own cell as released, or an exercise of an earlier assignment it needs (the kit's stub says which)
    written = [entry for entry in failed if entry["source"].startswith("Written question")]
    assert [entry["raw_error"] for entry in written] == [
        "not answered yet: write your answer where its cell says YOUR ANSWER HERE"], failed
    assert all(entry["raw_error"].startswith("not done yet: its cell still raises NotImplementedError()")
               or " is an exercise you have not done yet: write it in your notebook a01 · " in entry["raw_error"]
               for entry in failed if entry not in written), failed
    assert failed[0]["raw_error"].startswith("not done yet"), failed[0]
    for entry in failed:
        assert "\n" not in entry["raw_error"] and len(entry["raw_error"]) < 400, entry  # a sentence, not a dump
        hits = internal_words(entry["source"] + "\n" + entry["raw_error"], "Validate")
        assert not hits, "\n".join(map(str, hits))


def test_the_students_server_validates_with_the_course_validator(monkeypatch):
    """The extension the students' jupyter_server_config.json enables points nbgrader's Validate
    handler at CourseValidator (the handler builds its validator from that module name)."""
    monkeypatch.syspath_prepend(str(REPO / "deploy" / "hub" / "student" / "python"))
    import autograd_validate
    from nbgrader.server_extensions.validate_assignment import handlers

    config = json.loads((REPO / "deploy" / "hub" / "student" / "jupyter_server_config.json").read_text())
    assert config["ServerApp"]["jpserver_extensions"]["autograd_validate"] is True
    monkeypatch.setattr(handlers, "Validator", handlers.Validator)  # put back after the test
    autograd_validate._load_jupyter_server_extension(None)
    assert handlers.Validator is autograd_validate.CourseValidator
