"""Helpers for the autograder's end-to-end tests: the toy course copied into a temporary folder.

The toy course (tests/fixtures/toy_course/) is a two-exercise assignment ``a00_toy`` with its own
hidden checks (exercises/), mutants (mutants/) and reference code (solutions/); the tests run it
with the real ``assignments/nbgrader_config.py`` and real nbgrader.
"""

from __future__ import annotations

import copy
import json
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path

import psutil

from autograder import cli
from autograder.course.directory import Course

from support import REPO

FIXTURE = REPO / "tests" / "fixtures" / "toy_course"
SOLUTIONS = FIXTURE / "solutions"
ASSIGNMENT = "a00_toy"
NOTEBOOK = "a00_toy"
TIMESTAMP = "2026-11-20 10:00:00.000000 UTC"


def use_toy_catalogue(monkeypatch) -> None:
    """Hidden checks and mutants of the toy course; the kernels inherit the variables."""
    monkeypatch.setenv("AUTOGRADER_EXERCISES", str(FIXTURE / "exercises"))
    monkeypatch.setenv("AUTOGRADER_MUTANTS", str(FIXTURE / "mutants"))


def make_course(root: Path, penalty: str | None = None) -> Course:
    """The toy course in ``root``; ``penalty``: nbgrader's late-submission method ("zero": a late
    submission loses everything, a penalty that shows)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    if penalty is not None:
        with (root / "nbgrader_config.py").open("a") as config:
            config.write(f"\nc.LateSubmissionPlugin.penalty_method = {penalty!r}\n")
    shutil.copytree(FIXTURE / "source", root / "source")
    return Course.open(root)


def autograder(course: Course, *args: str) -> int:
    return cli.main(["--course", str(course.root), *args])


def release(course: Course) -> None:
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS)) == 0


def source_notebook() -> dict:
    return json.loads((FIXTURE / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text())


def with_solution(grade_id: str, source: str, nb: dict | None = None) -> dict:
    """A copy of the source notebook whose solution cell ``grade_id`` holds ``source``."""
    nb = copy.deepcopy(nb or source_notebook())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            cell["source"] = source
            return nb
    raise KeyError(grade_id)


def submit(course: Course, student: str, nb: dict | str, timestamp: str = TIMESTAMP) -> Path:
    folder = course.submitted_dir(student, ASSIGNMENT)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{NOTEBOOK}.ipynb").write_text(nb if isinstance(nb, str) else json.dumps(nb))
    (folder / "timestamp.txt").write_text(timestamp)
    return folder


def released_to_exchange(root: Path, monkeypatch) -> Course:
    """The toy course in ``root/course``, released to the exchange folder ``root/exchange`` (its
    ``c.Exchange.root``), as ``autograder release --exchange`` publishes it."""
    use_toy_catalogue(monkeypatch)
    course = make_course(root / "course")
    (root / "exchange").mkdir()
    with open(course.root / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Exchange.root = {str(root / 'exchange')!r}\n")
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--exchange") == 0
    return course


def inbound(course: Course) -> Path:
    """The exchange's inbound folder of the course (``c.Exchange.root`` set in its config)."""
    return Path(course.exchange_config().Exchange.root) / course.course_id / "inbound"


def record(course: Course, student: str, stamp: str | None = None, notebook: bool = True,
           nb: dict | None = None) -> Path:
    """A submission in the exchange as nbgrader's Submit makes it: a folder named for the student,
    the assignment and the time, with the notebook (``nb``, default the source notebook), the time
    and a fresh secret."""
    stamp = stamp or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    folder = inbound(course) / f"{student}+{ASSIGNMENT}+{stamp}+{secrets.token_urlsafe(6)}"
    folder.mkdir()
    if notebook:
        (folder / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb or source_notebook()))
    (folder / "timestamp.txt").write_text(stamp)
    (folder / "submission_secret.txt").write_text(secrets.token_hex(64))
    return folder


def released_notebook(course: Course) -> dict:
    return json.loads((course.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text())


def scores(course: Course, student: str) -> dict[str, float | None]:
    with course.gradebook() as gb:
        submission = gb.find_submission(ASSIGNMENT, student)
        return {g.name: g.auto_score for nb in submission.notebooks for g in nb.grades}


def processes_with_env(name: str, value: str) -> list[psutil.Process]:
    """Live processes whose environment has name=value: the kernels a test started, say."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(name) == value and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def table(out: str) -> dict[str, list[str]]:
    """The rows of the tables the CLI prints, by first column (columns are 2+ spaces apart)."""
    import re

    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 2 and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = cells[1:]
    return rows


def answered(fetched: dict, source: dict, share: float = 1.0, written: bool = True) -> dict:
    """The fetched notebook with the first ``share`` of its answer cells written as a student types
    the reference: each stub nbgrader left for a solution region (``# YOUR CODE HERE``,
    ``raise NotImplementedError()``) becomes the lines of the source notebook's region, and (when
    ``written``) a written answer (a markdown answer cell) the source's text."""
    from autograder.course import notebook
    from autograder.course.regions import cell_regions

    model = {notebook.grade_id(c): c for c in source["cells"] if notebook.is_answer(c)}
    nb = copy.deepcopy(fetched)
    cells = [c for c in nb["cells"] if notebook.grade_id(c) in model and (written or c["cell_type"] == "code")]
    for cell in cells[:round(len(cells) * share)]:
        theirs = notebook.text(model[notebook.grade_id(cell)]["source"])
        if cell["cell_type"] == "markdown":
            cell["source"] = theirs
            continue
        lines, out, bodies = notebook.text(cell["source"]).split("\n"), [], iter(cell_regions(theirs))
        k = 0
        while k < len(lines):
            if [line.strip() for line in lines[k:k + 2]] == ["# YOUR CODE HERE", "raise NotImplementedError()"]:
                out += next(bodies).lines
                k += 2
            else:
                out.append(lines[k])
                k += 1
        assert next(bodies, None) is None, f"{notebook.grade_id(cell)}: a region with no stub for it"
        cell["source"] = "\n".join(out)
    return nb
