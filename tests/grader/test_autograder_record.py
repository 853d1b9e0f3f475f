"""Recording a student in one transaction (issue 33): the same gradebook as nbgrader's own way, and
nothing half-written when the grader is killed in the middle of a student.

nbgrader's way (its SaveAutoGrades and AssignLatePenalties, a commit per cell) is kept as the
reference in benchmarks/bench_grading.py (``record_as_nbgrader``), which times the two side by side.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from sqlalchemy.exc import SAWarning

from autograder.commands.grade import grade
from autograder.grading.record import Ledger, write_grades

from support.course import (
    ASSIGNMENT,
    REPO,
    SOLUTIONS,
    autograder,
    make_course,
    released_notebook,
    source_notebook,
    submit,
    table,
    use_toy_catalogue,
    with_solution,
)

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_grading import fresh_gradebook, record_as_nbgrader  # noqa: E402

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]

WRONG_ADD = "def add(x, y):\n    return x - y\n"
ON_TIME, LATE = "2026-11-20 10:00:00.000000 UTC", "2026-11-22 09:30:00.000000 UTC"


@pytest.fixture
def course(tmp_path, monkeypatch):
    use_toy_catalogue(monkeypatch)
    course = make_course(tmp_path / "course", penalty="zero")
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--due", "2026-11-21 12:00") == 0
    return course


def dump(course) -> dict:
    """Everything a student's recording writes, keyed by names (row ids are random)."""
    with course.gradebook() as gb:
        out = {}
        for submission in gb.find_assignment(ASSIGNMENT).submissions:
            out[submission.student.id] = {
                "timestamp": submission.timestamp, "seconds late": submission.total_seconds_late,
                "score": submission.score, "penalty": submission.late_submission_penalty,
                "needs manual grade": submission.needs_manual_grade,
                "notebooks": {nb.name: {
                    "penalty": nb.late_submission_penalty,
                    "grades": {g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade)
                               for g in nb.grades},
                    "comments": {c.name: (c.auto_comment, c.manual_comment) for c in nb.comments},
                } for nb in submission.notebooks},
            }
        return out


def record_all(course, path: str) -> None:
    config = course.config()
    ledger = Ledger(course, ASSIGNMENT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        for student in ("alice", "bob", "carol", "dave"):
            autograded = course.autograded_dir(student, ASSIGNMENT)
            stamp = course.coursedir().get_existing_timestamp(str(course.submitted_dir(student, ASSIGNMENT)))
            if path == "nbgrader":
                record_as_nbgrader(course, ASSIGNMENT, student, autograded, stamp, config)
            else:
                write_grades(ledger.gradebook(), course, ASSIGNMENT, student, autograded, stamp, config)
    ledger.close()


def grade_by_hand(course) -> None:
    """The instructor grades alice's written answer and comments bob's code in the formgrader."""
    with course.gradebook() as gb:
        gb.find_grade("a00-square-backward-written", "a00_toy", ASSIGNMENT, "alice").manual_score = 1
        gb.find_comment("a00-add", "a00_toy", ASSIGNMENT, "bob").manual_comment = "x - y is a difference"
        gb.db.commit()


def test_one_transaction_writes_what_nbgrader_writes(course):
    submit(course, "alice", source_notebook(), ON_TIME)                          # everything right
    submit(course, "bob", with_solution("a00-add", WRONG_ADD), LATE)             # one wrong, late: penalty
    submit(course, "carol", released_notebook(course), ON_TIME)                  # nothing done
    submit(course, "dave", source_notebook(), LATE)                              # all right but late
    outcomes = {o.student: o for o in grade(course, ASSIGNMENT, jobs=2, progress=False)}
    assert {o.status for o in outcomes.values()} == {"graded"}
    graded_by_grade = dump(course)

    dumps = {}
    for path in ("nbgrader", "one transaction"):
        fresh_gradebook(course, ASSIGNMENT)
        record_all(course, path)
        grade_by_hand(course)
        record_all(course, path)  # a regrade after manual grading keeps the instructor's marks
        dumps[path] = dump(course)
    assert dumps["one transaction"] == dumps["nbgrader"]

    got = dumps["one transaction"]
    # what this compared holds the cases that matter: late penalties, a manual grade and comment kept
    assert got["bob"]["seconds late"] > 0 and got["bob"]["penalty"] == got["bob"]["score"] > 0
    assert got["dave"]["penalty"] == got["dave"]["score"] == 6
    assert got["alice"]["penalty"] == 0 and got["alice"]["score"] == 7
    written = got["alice"]["notebooks"]["a00_toy"]["grades"]["a00-square-backward-written"]
    assert written[1] == 1 and written[3] is True  # nbgrader flags an autograded cell with a manual grade
    assert got["bob"]["notebooks"]["a00_toy"]["comments"]["a00-add"][1] == "x - y is a difference"
    assert got["carol"]["score"] == 0
    # and grade itself wrote the same as nbgrader's way, before the manual grading
    assert graded_by_grade["bob"]["score"] == 3 and graded_by_grade["bob"]["penalty"] == 3


def _rows(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return {table: con.execute(f"select count(*) from {table}").fetchone()[0]
                for table in ("student", "submitted_assignment", "submitted_notebook", "grade", "comment")}


def test_kill_9_inside_a_students_transaction_leaves_nothing_of_them_and_a_rerun_records_all(course, tmp_path,
                                                                                              capsys):
    for student in ("s1", "s2", "s3"):
        submit(course, student, source_notebook())
    empty = _rows(Path(course.db_url.removeprefix("sqlite:///")))
    # The grader, killed by SIGKILL once the first student's grades are written to the database but
    # not committed: right before the late penalties, the transaction's last step.
    killed = textwrap.dedent(f"""
        import os, signal, sys
        from autograder.course import nbgrader_glue
        from autograder import cli
        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        nbgrader_glue.AssignLatePenaltiesTo.preprocess = die
        sys.exit(cli.main(["--course", {str(course.root)!r}, "grade", {ASSIGNMENT!r}, "--jobs", "1"]))
    """)
    with open(tmp_path / "grader.log", "w") as log:
        done = subprocess.run([sys.executable, "-c", killed], stdout=log, stderr=log, env={**os.environ}, timeout=600)
    assert done.returncode == -signal.SIGKILL, (tmp_path / "grader.log").read_text()[-3000:]
    # SQLite rolls the open transaction back (its journal) at the next connection: none of s1's rows
    assert _rows(Path(course.db_url.removeprefix("sqlite:///"))) == empty
    assert not list((course.state_dir / "graded" / ASSIGNMENT).glob("*.json"))

    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "2") == 0
    rows = table(capsys.readouterr().out)
    assert [rows[s][:2] for s in ("s1", "s2", "s3")] == [["6/7", "graded"]] * 3
    after = _rows(Path(course.db_url.removeprefix("sqlite:///")))
    assert after == {"student": 3, "submitted_assignment": 3, "submitted_notebook": 3, "grade": 15, "comment": 9}
