"""Due dates, late penalties, and nbgrader's exchange (JupyterLab's Assignments tab) end to end.

The student's side is driven through ``nbgrader.server_extensions.assignment_list``'s
``AssignmentList``: the object behind the Assignments tab of the students' JupyterLab (its
list, fetch and submit buttons call these methods), reading the student's own
``nbgrader_config.py`` as it does in a real session.
"""

import csv
import getpass
import json

import pytest
from autograder_support import (ASSIGNMENT, NOTEBOOK, SOLUTIONS, autograder, make_course, scores, source_notebook,
                                submit, table, use_toy_registry)
from nbgrader.server_extensions.assignment_list.handlers import AssignmentList
from nbgrader.utils import parse_utc

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]

FULL = {"a00-add-visible": 1, "a00-add-hidden": 2, "a00-square-backward-visible": 1, "a00-square-backward-hidden": 2,
        "a00-square-backward-written": None}  # the written answer waits for a human


@pytest.fixture
def course(tmp_path, monkeypatch):
    use_toy_registry(monkeypatch)
    return make_course(tmp_path / "course")


def _answered(nb: dict) -> dict:
    """The student's notebook with every solution cell answered as the source notebook does."""
    answers = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in source_notebook()["cells"]
               if c["metadata"].get("nbgrader", {}).get("solution")}
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    return nb


def test_due_date_and_late_penalty(course, capsys):
    with open(course.root / "nbgrader_config.py", "a") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS),
                      "--due", "2026-11-20 12:00 Europe/Paris") == 0
    assert "due 2026-11-20 11:00 UTC" in capsys.readouterr().out
    with course.gradebook() as gb:
        assert str(gb.find_assignment(ASSIGNMENT).duedate) == "2026-11-20 11:00:00"

    submit(course, "alice", source_notebook(), timestamp="2026-11-20 10:59:00.000000 UTC")
    submit(course, "bob", source_notebook(), timestamp="2026-11-20 11:30:00.000000 UTC")
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "2") == 0
    rows = table(capsys.readouterr().out)
    assert rows["alice"][:2] == ["6/7", "graded"] and "late" not in rows["alice"][2]
    assert rows["bob"][:3] == ["0/7", "graded", "written answers to grade by hand; 30 min late, penalty 6"]
    assert scores(course, "alice") == FULL and scores(course, "bob") == FULL  # the tests passed for both
    with course.gradebook() as gb:
        alice, bob = gb.find_submission(ASSIGNMENT, "alice"), gb.find_submission(ASSIGNMENT, "bob")
        assert (alice.total_seconds_late, alice.score) == (0, 6)
        assert bob.total_seconds_late == 30 * 60
        assert bob.late_submission_penalty == 6 and bob.score == 6  # "zero": the penalty takes all the points
    assert autograder(course, "report", ASSIGNMENT) == 0
    with open(course.reports_dir(ASSIGNMENT) / "grades.csv") as csv_file:
        report = {row["student"]: row for row in csv.DictReader(csv_file)}
    assert [report["alice"][k] for k in ("score", "raw_score", "late_penalty")] == ["6", "6", "0"]
    assert [report["bob"][k] for k in ("score", "raw_score", "late_penalty")] == ["0", "6", "6"]

    assert autograder(course, "release", ASSIGNMENT, "--due", "next tuesday-ish") == 2
    assert "--due 'next tuesday-ish' is not a date" in capsys.readouterr().err


def test_exchange_release_fetch_submit_collect_grade(course, tmp_path, monkeypatch, capsys):
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    # without an exchange there is nowhere to publish: said before anything is generated
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--exchange") == 2
    assert "no nbgrader exchange" in capsys.readouterr().err
    assert not course.release_dir(ASSIGNMENT).exists()

    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--exchange", str(exchange)) == 0
    assert "published to the nbgrader exchange" in capsys.readouterr().out
    course_id = course.course_id

    # The student's JupyterLab: ~/.jupyter/nbgrader_config.py points at the course's exchange
    # (where the Assignments tab reads its configuration; a hub may use /etc/jupyter instead).
    home = tmp_path / "student-home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(f'c = get_config()\nc.Exchange.root = "{exchange}"\n')
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(home / ".jupyter"))
    monkeypatch.chdir(home)  # the server runs in the student's home: fetched folders land there
    tab = AssignmentList()
    tab.root_dir = str(home)
    listed = tab.list_released_assignments(course_id=course_id)
    assert listed["success"], listed
    assert [(a["assignment_id"], a["status"]) for a in listed["value"]] == [(ASSIGNMENT, "released")]
    assert tab.fetch_assignment(course_id, ASSIGNMENT)["success"]
    fetched = home / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    released = json.loads(fetched.read_text())
    assert "BEGIN SOLUTION" not in fetched.read_text() and "HIDDEN TESTS" not in fetched.read_text()
    fetched.write_text(json.dumps(_answered(released)))
    # the student works on a helper file too: it travels with the submission, is not a notebook
    (home / ASSIGNMENT / "scratch.py").write_text("print('hi')\n")
    assert tab.submit_assignment(course_id, ASSIGNMENT)["success"]
    statuses = {a["status"] for a in tab.list_assignments(course_id=course_id)["value"]}
    assert statuses == {"submitted", "fetched"}

    # The instructor collects from the exchange and grades.
    assert autograder(course, "collect", ASSIGNMENT, str(tmp_path), "--exchange") == 2  # a path or the exchange
    capsys.readouterr()
    assert autograder(course, "collect", ASSIGNMENT, "--exchange", str(exchange)) == 0
    out = capsys.readouterr().out
    student = getpass.getuser()  # the exchange knows students by their login
    assert "1 student(s) imported, 1 file(s) skipped" in out
    assert table(out)[student][:2] == [NOTEBOOK, "new"]
    assert table(out)[f"{student}/scratch.py"] == ["not a notebook file (.ipynb)"]
    # the submission time is the one nbgrader recorded at submit, not the time of collecting
    [inbound] = (exchange / course_id / "inbound").iterdir()
    submitted_at = parse_utc(inbound.name.split("+")[2])
    assert parse_utc((course.submitted_dir(student, ASSIGNMENT) / "timestamp.txt").read_text()) == submitted_at

    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "1") == 0
    assert scores(course, student) == FULL
    # collecting again changes nothing and does not trigger a regrade
    assert autograder(course, "collect", ASSIGNMENT, "--exchange", str(exchange)) == 0
    assert "unchanged" in table(capsys.readouterr().out)[student][1]
