"""Grading under attack: hostile, broken and honest submissions of a02 graded in one batch.

Each submission is what a student could hand in: the released notebook (nothing answered) or
the reference answers, plus an attack in a cell, an answer or the notebook's structure. One
`autograder grade` run grades them all, with honest controls among them (a victim is graded
last, after every attack). Asserted for each: the exact auto-graded score; for all: every
student graded (no crash, no hang), a rerun changes nothing, nothing outside the sandboxes was
written, no process outlived grading, and the feedback carries no hidden test, no grader
secret, no temporary path and no flood.
"""
from __future__ import annotations

import copy
import json
import re
import shutil
import socket
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from autograder.course.directory import Course

from support import REPO
from support.attacks import (
    ASSIGNMENT,
    NOTEBOOK,
    SECRET,
    answer_of,
    auto_scores,
    digest,
    listing,
    nbgrader,
    orphaned_sandbox_processes,
    source,
    submissions,
    with_answer,
    with_cell,
)
from support.course import autograder, table

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]


def test_hostile_submissions_earn_nothing_honest_ones_lose_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUTOGRADER_SECRET", SECRET)
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(REPO / "assignments" / "source" / ASSIGNMENT, root / "source" / ASSIGNMENT)
    course = Course.open(root)
    assert autograder(course, "release", ASSIGNMENT) == 0
    released = json.loads((course.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text())

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            received.append(conn.recv(100) or b"(connected)")
            conn.close()
    thread = threading.Thread(target=listen, daemon=True)
    thread.start()

    expected = {}
    for student, (nb, score) in submissions(course, released, listener.getsockname()[1]).items():
        folder = course.submitted_dir(student, ASSIGNMENT)
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.ipynb").write_text(nb if isinstance(nb, str) else json.dumps(nb))
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
        expected[student] = score
    assert len(expected) >= 40

    protected = [REPO / "solutions", REPO / "autograder", REPO / "assignments" / "source",
                 course.source_dir(ASSIGNMENT)]
    before = digest(protected)
    site_packages = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site_before, home_before = listing(site_packages), listing(Path.home() / ".ipython")
    course_before = listing(course.root)

    status = autograder(course, "grade", ASSIGNMENT, "--jobs", "2", "--cell-timeout", "10")  # a02 judges in < 1 s
    rows = table(capsys.readouterr().out)
    stop.set()
    assert status == 0, rows
    assert {s: rows[s][1] for s in expected} == {s: "graded" for s in expected}
    got = auto_scores(course)
    assert {s: got[s] for s in expected} == expected

    # nothing lost on a rerun, nothing duplicated
    assert autograder(course, "grade", ASSIGNMENT) == 0
    assert {r[1] for s, r in table(capsys.readouterr().out).items() if s in expected} == {"already graded"}
    assert auto_scores(course) == got

    # nothing outside the sandboxes was touched, nothing outlived grading, nothing left the machine
    assert digest(protected) == before
    assert listing(site_packages) == site_before and listing(Path.home() / ".ipython") == home_before
    new = {p for p in listing(course.root) - course_before
           if not p.startswith(("autograded", "submitted", ".autograder", "gradebook.db"))}
    assert new == set(), new
    assert orphaned_sandbox_processes() == []
    assert received == []

    # feedback: the student's cells and the judge's messages; no hidden test, no secret, no flood
    assert autograder(course, "feedback", ASSIGNMENT) == 0
    for student in expected:
        page = course.feedback_dir(student, ASSIGNMENT) / f"{NOTEBOOK}.html"
        html = page.read_text()
        assert len(html) < 3_000_000, (student, len(html))
        for forbidden in ("BEGIN HIDDEN TESTS\n# judged", "judged outside the notebook", SECRET, "autograder-grade-",
                          "yyyyyyyyyy" * 100, "zzzzzzzzzz" * 100):
            assert forbidden not in html, (student, forbidden)
    victim = (course.feedback_dir("atk-environment", ASSIGNMENT) / f"{NOTEBOOK}.html").read_text()
    assert "your code raised ValueError" in victim  # the judge's message is there, the environment is not
    assert "xxxxxxxxxx" * 300 not in (course.feedback_dir("huge-message", ASSIGNMENT) / f"{NOTEBOOK}.html").read_text()
    restored = nbformat.read(course.autograded_dir("struct-deleted", ASSIGNMENT) / f"{NOTEBOOK}.ipynb", as_version=4)
    assert [nbgrader(c).get("grade_id") for c in restored.cells if nbgrader(c)] == \
        [nbgrader(c).get("grade_id") for c in source()["cells"] if nbgrader(c)]


def test_a_hung_cell_is_skipped_for_the_exercises_below_it_and_waited_on_once(tmp_path, monkeypatch):
    """nbgrader interrupts a cell at its time limit and goes on; so does the judge. A scratch cell
    that hangs costs nothing; an answer cell that hangs costs its own exercise only; either is
    run (and waited on) in one sandbox only, the exercises below it run without it."""
    import autograder.judge.submission as grading
    from autograder.judge.bubblewrap import Sandbox

    ref = source()
    source_dir = tmp_path / "source" / ASSIGNMENT
    source_dir.mkdir(parents=True)
    (source_dir / f"{NOTEBOOK}.ipynb").write_text(json.dumps(ref))
    hang = "while True:\n    pass\n"
    cases = {"scratch": (with_cell(ref, hang, after="a02-mul-hidden"), set()),
             "answer": (with_answer(ref, "a02-mul", answer_of(ref, "a02-mul") + "\n" + hang), {"a02-mul"})}
    original = grading.judge
    runs_with_the_hang: list[str] = []

    def counting(exercise, cells, **kwargs):
        runs_with_the_hang.extend(exercise for _, text in cells if text.rstrip().endswith("pass"))
        return original(exercise, cells, **kwargs)
    monkeypatch.setattr(grading, "judge", counting)
    for name, (nb, failing) in cases.items():
        runs_with_the_hang.clear()
        submitted = tmp_path / name / "submitted"
        submitted.mkdir(parents=True)
        (submitted / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb))
        result = grading.grade_submission(source_dir, submitted, tmp_path / name / "out", sandbox=Sandbox(), budget=5)
        verdicts = result["notebooks"][NOTEBOOK]
        assert {e for e, v in verdicts.items() if not v["passed"]} == failing, verdicts
        assert len(runs_with_the_hang) == 1, runs_with_the_hang
        for exercise in failing:
            assert "ran over the time limit of 5 s while running your cell a02-mul" in verdicts[exercise]["message"]
        out = nbformat.read(tmp_path / name / "out" / f"{NOTEBOOK}.ipynb", as_version=4)
        notes = [o["evalue"] for c in out.cells if c.cell_type == "code" for o in c.outputs
                 if o["ename"] != "Incorrect"]
        assert len(notes) == (0 if failing else 1) and all("interrupted and skipped" in n for n in notes), notes


def test_a_cpu_hog_graded_beside_an_honest_student_costs_them_nothing(tmp_path, capsys):
    """With --jobs 2, a submission whose every answer forks as many busy processes as it may and
    spins must not make the honest a01 graded beside it time out: each sandbox's budget runs on
    its own clock (the CPU time of its process tree, or the wall time it was not kept off the CPU)."""
    assignment = "a01_graphs"
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(REPO / "assignments" / "source" / assignment, root / "source" / assignment)
    course = Course.open(root)
    assert autograder(course, "release", assignment) == 0
    ref = json.loads((root / "source" / assignment / f"{assignment}.ipynb").read_text())
    # every answer, when the check calls it, forks as many busy processes as it may and spins
    hog_body = ("    import os\n    for _ in range(200):\n        try:\n            if os.fork() == 0:\n"
                "                while True:\n                    pass\n        except OSError:\n            break\n"
                "    while True:\n        pass\n")
    hog = copy.deepcopy(ref)
    for cell in hog["cells"]:
        if cell["cell_type"] == "code" and nbgrader(cell).get("solution"):
            name = re.search(r"^(?:def|class) (\w+)", "".join(cell["source"]), re.M).group(1)
            cell["source"] = f"def {name}(*args, **kwargs):\n{hog_body}"
    full = sum(float(nbgrader(c).get("points", 0)) for c in ref["cells"]
               if nbgrader(c).get("grade") and not nbgrader(c).get("solution"))
    for student, nb in (("hog", hog), ("honest", ref)):
        folder = course.submitted_dir(student, assignment)
        folder.mkdir(parents=True)
        (folder / f"{assignment}.ipynb").write_text(json.dumps(nb))
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")

    # 5 s budgets (a01's heaviest exercise, backward, took 1.9 s of wall time judged alone at load 11, and
    # its sandbox's clock counts less): the hog spins through all eleven in half the time 10 s budgets
    # took, and the shorter the budget, the less room a budget on the wall clock would leave the honest
    # student.
    status = autograder(course, "grade", assignment, "--jobs", "2", "--cell-timeout", "5")
    rows = table(capsys.readouterr().out)
    assert status == 0 and rows["honest"][1] == rows["hog"][1] == "graded", rows
    with course.gradebook() as gb:
        scores = {s.student.id: sum(g.auto_score or 0 for nb in s.notebooks for g in nb.grades
                                    if not g.name.endswith("-written"))
                  for s in gb.find_assignment(assignment).submissions}
    assert scores == {"honest": full, "hog": 0}
    assert orphaned_sandbox_processes() == []


def test_what_the_sandbox_says_it_runs_is_a_label_the_judge_sent(tmp_path):
    """A cell that writes its own "running" frame on the channel, then hangs: before, its text became
    the label of the time-out and reached the note on a skipped cell, which no scrub reads (issue 29,
    section 5: no text of the sandbox's choosing leaves through any message). Now an unknown label is
    ignored: the time-out names the cell that really hung."""
    import autograder.judge.submission as grading
    from autograder.judge.bubblewrap import Sandbox

    ref = source()
    source_dir = tmp_path / "source" / ASSIGNMENT
    source_dir.mkdir(parents=True)
    (source_dir / f"{NOTEBOOK}.ipynb").write_text(json.dumps(ref))
    first = next(i for i, c in enumerate(ref["cells"]) if c["cell_type"] == "code" and not nbgrader(c))
    marker = "FORGED-LABEL-3f9a"
    forge = ("import os, stat, sys\nimport wire\n"
             f"label = {marker!r} + ' while running your cell cell {first + 1}'\n"
             "for fd in range(3, 32):\n    try:\n        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
             "            wire.write(fd, wire.pack({'running': label}, []))\n    except OSError:\n        pass\n"
             "while True:\n    pass\n")
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    (submitted / f"{NOTEBOOK}.ipynb").write_text(json.dumps(with_cell(ref, forge, after="a02-mul-hidden")))
    result = grading.grade_submission(source_dir, submitted, tmp_path / "out", sandbox=Sandbox(), budget=5)
    messages = [v["message"] for v in result["notebooks"][NOTEBOOK].values()]
    out = nbformat.read(tmp_path / "out" / f"{NOTEBOOK}.ipynb", as_version=4)
    notes = [o["evalue"] for c in out.cells if c.cell_type == "code" for o in c.outputs]
    assert not [text for text in messages + notes if marker in text]
    assert any("interrupted and skipped" in note for note in notes)  # the forging cell hung, and was skipped
