"""A term's rules on time (issue 41), end to end through the CLI on a scratch course: extensions
(one assignment, or standing), late days spent in due-date order, the due date in the released
notebook, lateness in the feedback; the gradebook, the grades CSV, the LMS files and the class page
checked after each decision.

The course's penalty is nbgrader's "zero" (a late submission loses everything), so each decision
shows as a whole score won or lost.
"""

import csv
import json
import shutil
from datetime import timedelta

import pytest

from autograder.course.term import Term, parse_span, parse_zoned

from support.course import (
    ASSIGNMENT,
    FIXTURE,
    NOTEBOOK,
    SOLUTIONS,
    autograder,
    make_course,
    scores,
    source_notebook,
    submit,
    table,
    use_toy_catalogue,
    with_solution,
)

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]

DUE = "2026-11-21 12:00"
ON_TIME, LATE = "2026-11-20 10:00:00.000000 UTC", "2026-11-22 09:30:00.000000 UTC"   # LATE: 21 h 30 min
SECOND = "a01_toy"  # a copy of the toy assignment, due a week later


@pytest.fixture
def course(tmp_path, monkeypatch):
    use_toy_catalogue(monkeypatch)
    return make_course(tmp_path / "course", penalty="zero")


def release(course, assignment: str, due: str) -> None:
    assert autograder(course, "release", assignment, "--solutions", str(SOLUTIONS), "--due", due) == 0


def written_by_hand(course, assignment: str, student: str) -> None:
    """The formgrader's mark on the written answer: the grade is then complete (and goes to the LMS)."""
    with course.gradebook() as gb:
        grade = gb.find_grade("a00-square-backward-written", NOTEBOOK, assignment, student)
        grade.manual_score, grade.needs_manual_grade = 1, False
        gb.db.commit()


def gradebook(course, assignment: str) -> dict:
    """student -> (extension, seconds late, raw score, penalty) as nbgrader sees them."""
    with course.gradebook() as gb:
        return {s.student.id: (s.extension, s.total_seconds_late, s.score, s.late_submission_penalty)
                for s in gb.find_assignment(assignment).submissions}


def read_csv(path) -> dict[str, dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    key = "student" if "student" in rows[0] else "Email address"
    return {row[key]: row for row in rows}


def test_extensions_move_the_due_date_everywhere_and_bad_input_changes_nothing(course, tmp_path, capsys):
    release(course, ASSIGNMENT, DUE)
    first = json.loads((course.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text())["cells"][0]
    assert first["cell_type"] == "markdown" and "Due Saturday 2026-11-21 12:00 UTC" in "".join(first["source"])
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email,canvas_id\n" + "".join(
        f"{s},{s.title()},Doe,{s}@uni.example,{100 + i}\n" for i, s in enumerate(("alice", "bob", "dave", "erin"))))
    assert autograder(course, "students", "import", str(roster)) == 0
    for student in ("alice", "bob", "dave", "erin"):
        submit(course, student, source_notebook(), LATE)
    # given before grading: erin's applies when she is graded
    assert autograder(course, "extend", "erin", ASSIGNMENT, "--by", "1d") == 0
    assert "applies when they are graded" in capsys.readouterr().out
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "2") == 0
    for student in ("alice", "bob", "dave", "erin"):
        written_by_hand(course, ASSIGNMENT, student)
    before = gradebook(course, ASSIGNMENT)
    assert before["erin"][:2] == (timedelta(days=1), 0) and not before["erin"][3]
    # late: "zero" took all the auto-graded points (the written one was marked after, as in the formgrader)
    assert before["alice"][1:] == (21.5 * 3600, 7, 6)

    # bad input: one sentence each, nothing written
    term = (course.state_dir / "term.json").read_text()
    capsys.readouterr()
    for args, said in [
        (("zed", ASSIGNMENT, "--by", "1d"), "no student 'zed'"),
        (("alice", ASSIGNMENT, "--until", "2026-11-22 10:00"), "has no time zone"),
        (("alice", ASSIGNMENT, "--until", "2026-11-21 11:00 UTC"), "not after the due date of a00_toy"),
        (("alice", ASSIGNMENT, "--until", "2026-11-22 10:00 Mars/Olympus"), "'Mars/Olympus' is not a time zone"),
        (("alice", ASSIGNMENT, "--by", "2 weeks"), "is not a length of time"),
        (("alice", "--until", "2026-11-23 10:00 UTC"), "--until is a date of one assignment"),
    ]:
        assert autograder(course, "extend", *args) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1 and "Traceback" not in err
    assert (course.state_dir / "term.json").read_text() == term and gradebook(course, ASSIGNMENT) == before

    # after grading: the penalty is re-applied from the stored scores, nobody judged again
    marker = (course.state_dir / "graded" / ASSIGNMENT / "alice.json").read_text()
    autograded = course.autograded_dir("alice", ASSIGNMENT) / f"{NOTEBOOK}.ipynb"
    stamp = autograded.stat().st_mtime_ns
    # Paris is an hour ahead: 10:00 there is 09:00 UTC, before she handed in; 11:00 is after
    assert autograder(course, "extend", "alice", ASSIGNMENT, "--until", "2026-11-22 10:00 Europe/Paris") == 0
    assert gradebook(course, ASSIGNMENT)["alice"][3] == 7
    assert autograder(course, "extend", "alice", ASSIGNMENT, "--until", "2026-11-22 11:00 Europe/Paris") == 0
    assert table(capsys.readouterr().out)["a00_toy"][:4] == ["2026-11-21 12:00", "2026-11-22 10:00", "on time", "0"]
    assert autograder(course, "extend", "bob", "--by", "1d") == 0       # a standing accommodation
    after = gradebook(course, ASSIGNMENT)
    assert after["alice"] == (timedelta(hours=22), 0, 7, 0)
    assert after["bob"] == (timedelta(days=1), 0, 7, 0)
    assert after["dave"] == before["dave"]                               # nobody else moved
    assert (course.state_dir / "graded" / ASSIGNMENT / "alice.json").read_text() == marker
    assert autograded.stat().st_mtime_ns == stamp

    # a regrade keeps them (the rules live in the course, not in one run); dave's penalty now takes
    # the written point too
    assert autograder(course, "grade", ASSIGNMENT, "--students", "alice,dave", "--force") == 0
    assert gradebook(course, ASSIGNMENT)["alice"] == after["alice"]
    assert gradebook(course, ASSIGNMENT)["dave"][3] == 7
    for student in ("alice", "dave"):  # nbgrader asks a human to look again at a regraded written answer
        written_by_hand(course, ASSIGNMENT, student)

    # the grades CSV, the LMS files, the class page count dave alone as late
    capsys.readouterr()
    assert autograder(course, "report", ASSIGNMENT) == 0
    folder = course.reports_dir(ASSIGNMENT)
    grades = read_csv(folder / "grades.csv")
    assert [grades[s]["score"] for s in ("alice", "bob", "dave", "erin")] == ["7", "7", "0", "7"]
    assert grades["alice"]["due_date"] == "2026-11-22 10:00" and grades["dave"]["due_date"] == "2026-11-21 12:00"
    canvas = {row[1]: row[5] for row in csv.reader(open(folder / "canvas_grades.csv", encoding="utf-8"))}
    assert [canvas[i] for i in ("100", "101", "102", "103")] == ["7", "7", "0", "7"]
    moodle = read_csv(folder / "moodle_grades.csv")
    assert "due date 2026-11-22 10:00 UTC (extended)" in moodle["alice@uni.example"]["Feedback"]
    assert "late penalty 7" in moodle["dave@uni.example"]["Feedback"]
    page = json.loads((folder / "class_report.json").read_text())
    assert [s["student"] for s in page["students"] if s["seconds_late"] > 0] == ["dave"]
    assert "4 graded, 0 whose grading failed, 1 late" in (folder / "class_report.html").read_text()

    # the feedback says how late, from the student's own due date
    assert autograder(course, "feedback", ASSIGNMENT) == 0
    dave = (course.feedback_dir("dave", ASSIGNMENT) / f"{NOTEBOOK}.html").read_text()
    alice = (course.feedback_dir("alice", ASSIGNMENT) / f"{NOTEBOOK}.html").read_text()
    assert "Handed in 21 h 30 min after the due date, 2026-11-21 12:00 UTC." in dave
    assert "Handed in" not in alice

    # taken back: the penalty returns, on the scores as they stand (the written point included)
    assert autograder(course, "extend", "alice", ASSIGNMENT, "--remove") == 0
    assert gradebook(course, ASSIGNMENT)["alice"] == (None, 21.5 * 3600, 7, 7)


def test_late_days_are_spent_in_due_date_order_once_and_as_the_instructor_says(course, capsys):
    shutil.copytree(course.source_dir(ASSIGNMENT), course.source_dir(SECOND))
    release(course, ASSIGNMENT, DUE)
    release(course, SECOND, "2026-11-28 12:00")
    submit(course, "frank", source_notebook(), LATE)                              # 21 h 30 late: 1 day
    folder = course.submitted_dir("frank", SECOND)
    shutil.copytree(course.submitted_dir("frank", ASSIGNMENT), folder)
    (folder / "timestamp.txt").write_text("2026-11-29 18:00:00.000000 UTC")       # 30 h late: 2 days
    assert autograder(course, "late-days", "--budget", "2") == 0

    # graded out of order: the second alone spends both days, then the first takes its day back
    assert autograder(course, "grade", SECOND, "--jobs", "1") == 0
    assert gradebook(course, SECOND)["frank"][:2] == (timedelta(days=2), 0)
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "1") == 0
    first, second = gradebook(course, ASSIGNMENT)["frank"], gradebook(course, SECOND)["frank"]
    assert first[0] == timedelta(days=1) and first[3] == 0
    assert second[0] is None and second[1] == 30 * 3600 and second[3] == second[2] == 6  # 6 auto-graded points
    capsys.readouterr()
    assert autograder(course, "report", SECOND) == 0
    rows = table(capsys.readouterr().out)
    assert rows["frank"] == ["1", "1", "a00_toy 1", "a01_toy: 2 late day(s) needed, 1 left: the late penalty applies"]

    # a regrade spends nothing twice
    assert autograder(course, "grade", ASSIGNMENT, "--force", "--jobs", "1") == 0
    assert gradebook(course, ASSIGNMENT)["frank"] == first and gradebook(course, SECOND)["frank"] == second

    # the instructor moves them: none on the first, so the second is covered
    assert autograder(course, "late-days", "frank", ASSIGNMENT, "--spend", "0") == 0
    assert table(capsys.readouterr().out)["frank"][:3] == ["2", "0", "a01_toy 2"]
    assert gradebook(course, ASSIGNMENT)["frank"][3] == 6 and gradebook(course, SECOND)["frank"][3] == 0
    grades = read_csv(course.reports_dir(SECOND) / "grades.csv")   # written before the move
    assert (grades["frank"]["late_days"], grades["frank"]["late_days_left"]) == ("0", "1")
    assert autograder(course, "report", SECOND) == 0
    grades = read_csv(course.reports_dir(SECOND) / "grades.csv")
    assert [grades["frank"][k] for k in ("score", "late_days", "late_days_used", "late_days_left")] == \
        ["6", "2", "2", "0"]

    # more than the budget: one sentence, nothing changed
    term = (course.state_dir / "term.json").read_text()
    assert autograder(course, "late-days", "frank", ASSIGNMENT, "--spend", "1") == 2
    assert "frank has 0 late day(s) left of 2 (spent elsewhere: 2): cannot spend 1 on a00_toy" \
        in capsys.readouterr().err
    assert (course.state_dir / "term.json").read_text() == term


def test_the_rules_as_written():
    assert parse_zoned("2026-12-03 17:00 Europe/Paris").isoformat() == "2026-12-03T16:00:00"
    assert parse_zoned("2026-12-03T17:00+01:00").isoformat() == "2026-12-03T16:00:00"
    assert parse_span("1d12h") == ("seconds", 129600) and parse_span("50%") == ("percent", 50)
    # +50 % of the time from release to due date; the larger of the standing and the assignment's
    from datetime import datetime
    term = Term(standing={"ann": {"percent": 50}}, extensions={"ann": {"a": {"seconds": 3600}}},
                opens={"a": "2026-11-01T12:00:00"})
    assert term.base_extension("ann", "a", datetime(2026, 11, 11, 12)) == 5 * 86400
    assert term.base_extension("ann", "b", datetime(2026, 11, 11, 12)) == 0   # released before opens were kept


def test_a_regrade_after_a_fix_says_who_gained_and_lost_and_keeps_scores_set_by_hand(course, tmp_path, monkeypatch,
                                                                                       capsys):
    # the term started with a broken check: it wanted x - y
    checks = tmp_path / "exercises"
    shutil.copytree(FIXTURE / "exercises", checks)
    check = checks / "a00_toy.py"
    right = "if not np.allclose(out, x + y):"
    check.write_text(check.read_text().replace(right, "if not np.allclose(out, x - y):"))
    monkeypatch.setenv("AUTOGRADER_EXERCISES", str(checks))
    release(course, ASSIGNMENT, DUE)
    difference = with_solution("a00-add", "def add(x, y):\n    return np.asarray(x) - np.asarray(y)\n")
    for student, nb in (("ann", difference), ("ben", source_notebook()), ("cai", difference)):
        submit(course, student, nb, ON_TIME)
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "2") == 0
    with course.gradebook() as gb:   # the instructor read cai's answer and gave full marks by hand
        gb.find_grade("a00-add-hidden", NOTEBOOK, ASSIGNMENT, "cai").manual_score = 2
        gb.db.commit()

    assert autograder(course, "grade", ASSIGNMENT, "--regrade", "--exercise", "a00-nope") == 2
    assert "no exercise 'a00-nope' in a00_toy" in capsys.readouterr().err
    check.write_text(check.read_text().replace("if not np.allclose(out, x - y):", right))   # the fix
    capsys.readouterr()
    assert autograder(course, "grade", ASSIGNMENT, "--regrade", "--exercise", "a00-add", "--jobs", "2") == 0
    out = capsys.readouterr().out
    assert "regrade on a00-add: 2 result(s) changed for 2 student(s)" in out
    changes = read_csv(course.reports_dir(ASSIGNMENT) / "regrade.csv")
    assert (changes["ann"]["old"], changes["ann"]["new"]) == ("3", "0")
    assert (changes["ben"]["old"], changes["ben"]["new"]) == ("0", "3")
    assert changes["ann"]["old message"] == "" and "wrong values" in changes["ann"]["new message"]
    assert "wrong values" in changes["ben"]["old message"] and changes["ben"]["new message"] == ""
    assert table(out)["cai"][:2] == ["a00-add", "2"]   # kept (2 by hand + 0 on the visible test), and listed
    assert scores(course, "cai")["a00-add-hidden"] == 0                      # what the judge now says...
    with course.gradebook() as gb:                                           # ...under the instructor's mark
        assert gb.find_grade("a00-add-hidden", NOTEBOOK, ASSIGNMENT, "cai").score == 2
    kept = sorted((course.state_dir / "regrades").glob(f"{ASSIGNMENT}-*.json"))
    assert json.loads(kept[-1].read_text())["ben"]["a00-add"]["score"] == 0
    assert f"autograder feedback {ASSIGNMENT} --students ann,ben" in out

    # the feedback of those two, and nobody else's
    assert autograder(course, "feedback", ASSIGNMENT, "--students", "ann,ben") == 0
    assert [s for s in ("ann", "ben", "cai") if course.feedback_dir(s, ASSIGNMENT).is_dir()] == ["ann", "ben"]


def test_late_days_follow_the_due_dates_not_the_order_of_grading():
    from datetime import datetime
    from types import SimpleNamespace

    from autograder.course.term import _outcome

    def sub(name, due_day, late_hours):
        due = datetime(2026, 11, due_day, 12)
        return SimpleNamespace(assignment=SimpleNamespace(name=name, duedate=due),
                               timestamp=due + timedelta(hours=late_hours))

    handed_in = [sub("a03", 20, 30), sub("a01", 6, 10), sub("a02", 13, 0)]  # as the gradebook lists them
    spent = {s.assignment: (s.late_days, s.short) for s in _outcome(Term(budget=2), "ann", handed_in)}
    assert spent == {"a01": (1, ""), "a02": (0, ""),
                     "a03": (0, "2 late day(s) needed, 1 left: the late penalty applies")}
    pinned = Term(budget=3, spend={"ann": {"a01": 0}})
    assert [s.late_days for s in _outcome(pinned, "ann", handed_in)] == [0, 0, 2]
    pinned.budget = None  # late days taken away from the course: a pin spends nothing either
    assert [s.extension for s in _outcome(pinned, "ann", handed_in)] == [0, 0, 0]
