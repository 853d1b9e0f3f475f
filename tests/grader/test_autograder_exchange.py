"""Due dates, late penalties, and nbgrader's exchange (JupyterLab's Assignments tab) end to end.

The student's side is a real JupyterLab server (this venv's, with nbgrader's extensions as the
requirements install them) in the student's home, driven over HTTP through the endpoints that
the Assignments tab's list, Fetch and Submit buttons call, with the student's own
``~/.jupyter/nbgrader_config.py``.
"""

import contextlib
import csv
import getpass
import json
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from nbgrader.utils import parse_utc

from autograder.course import notebook

from support.course import (
    ASSIGNMENT,
    NOTEBOOK,
    SOLUTIONS,
    autograder,
    make_course,
    scores,
    source_notebook,
    submit,
    table,
    use_toy_catalogue,
)
from support.jupyter import jupyter_server

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]

FULL = {"a00-add-visible": 1, "a00-add-hidden": 2, "a00-square-backward-visible": 1, "a00-square-backward-hidden": 2,
        "a00-square-backward-written": None}  # the written answer waits for a human


@pytest.fixture
def course(tmp_path, monkeypatch):
    use_toy_catalogue(monkeypatch)
    return make_course(tmp_path / "course")


def _answered(nb: dict) -> dict:
    """The student's notebook with every solution cell answered as the source notebook does."""
    answers = {notebook.grade_id(c): c["source"] for c in source_notebook()["cells"] if notebook.is_answer(c)}
    for cell in nb["cells"]:
        if notebook.grade_id(cell) in answers:
            cell["source"] = answers[notebook.grade_id(cell)]
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


@contextlib.contextmanager
def jupyterlab(home: Path):
    """A JupyterLab server of the student's (this venv's, nbgrader extensions included) in ``home``.

    Yields ``request(method, path) -> body``, authenticated with the server's token.
    """
    with jupyter_server(home, None, None, env={"JUPYTER_CONFIG_DIR": str(home / ".jupyter")}) as (base, token):
        def request(method: str, path: str) -> str:
            req = urllib.request.Request(f"{base}{path}", method=method, data=b"" if method == "POST" else None,
                                         headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(req, timeout=60) as response:
                return response.read().decode()

        yield request


def test_exchange_release_fetch_submit_collect_grade(course, tmp_path, capsys):
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    # without an exchange there is nowhere to publish: said before anything is generated
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--exchange") == 2
    assert "no nbgrader exchange" in capsys.readouterr().err
    assert not course.release_dir(ASSIGNMENT).exists()

    # a helper file the release ships beside the notebook (as the course kit is): fetched with it
    # and submitted back, it is expected and not listed as skipped
    (course.root / "source" / ASSIGNMENT / "helpers").mkdir()
    (course.root / "source" / ASSIGNMENT / "helpers" / "plotting.py").write_text("WIDTH = 80\n")
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--exchange", str(exchange)) == 0
    assert "published to the nbgrader exchange" in capsys.readouterr().out
    assert (course.release_dir(ASSIGNMENT) / "helpers" / "plotting.py").is_file()
    course_id = course.course_id

    # The student's JupyterLab, a real server: ~/.jupyter/nbgrader_config.py points at the
    # course's exchange (a hub may use /etc/jupyter instead); the server runs in their home.
    home = tmp_path / "student-home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(f'c = get_config()\nc.Exchange.root = "{exchange}"\n')
    with jupyterlab(home) as lab:
        assert "@jupyter/nbgrader" in lab("GET", "/lab")  # the Assignments tab's plugin is in the page
        listed = json.loads(lab("GET", f"/assignments?course_id={course_id}"))
        assert listed["success"], listed
        assert [(a["assignment_id"], a["status"]) for a in listed["value"]] == [(ASSIGNMENT, "released")]
        query = f"?course_id={course_id}&assignment_id={ASSIGNMENT}"
        assert {a["status"] for a in json.loads(lab("POST", "/assignments/fetch" + query))["value"]} == {"fetched"}
        fetched = home / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        text = fetched.read_text()
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
        fetched.write_text(json.dumps(_answered(json.loads(text))))
        # a helper file of the student's travels with the submission; it is not a notebook
        (home / ASSIGNMENT / "scratch.py").write_text("print('hi')\n")
        submitted = json.loads(lab("POST", "/assignments/submit" + query))
        assert {a["status"] for a in submitted["value"]} == {"submitted", "fetched"}, submitted

        # The instructor collects from the exchange and grades.
        assert autograder(course, "collect", ASSIGNMENT, str(tmp_path), "--exchange") == 2  # a path or the exchange
        capsys.readouterr()
        assert autograder(course, "collect", ASSIGNMENT, "--exchange", str(exchange)) == 0
        out = capsys.readouterr().out
        student = getpass.getuser()  # the exchange knows students by their login
        assert "1 student(s) imported, 1 file(s) skipped" in out
        assert table(out)[student][:2] == [NOTEBOOK, "new"]
        [record] = (exchange / course_id / "inbound").iterdir()
        assert table(out)[f"{record.name}/scratch.py"] == ["not a notebook file (.ipynb)"]
        assert f"released helper files ignored: {student} 1" in out and "plotting.py" not in out
        # the submission time is when its files landed in the exchange (their change times, which
        # no student can set): a moment after the time nbgrader wrote at submit, long before this collect
        submitted_at = parse_utc(record.name.split("+")[2])
        stored = course.submitted_dir(student, ASSIGNMENT)
        landed = parse_utc((stored / "timestamp.txt").read_text())
        assert submitted_at <= landed <= submitted_at + timedelta(seconds=5), (submitted_at, landed)
        # the secret that names the student's feedback in the exchange stays with the submission
        assert (stored / "submission_secret.txt").read_text() == (record / "submission_secret.txt").read_text()

        assert autograder(course, "grade", ASSIGNMENT, "--jobs", "1") == 0
        assert scores(course, student) == FULL
        # collecting again changes nothing and does not trigger a regrade
        assert autograder(course, "collect", ASSIGNMENT, "--exchange", str(exchange)) == 0
        assert "unchanged" in table(capsys.readouterr().out)[student][1]

        # Feedback goes back through the exchange, and the Fetch Feedback button brings it home.
        assert autograder(course, "feedback", ASSIGNMENT, "--exchange", str(exchange)) == 0
        out = capsys.readouterr().out
        assert "feedback released to the nbgrader exchange" in out
        # the written answer is not graded yet: the instructor is told, in a sentence naming the assignment
        assert f"1 written answer waits to be graded by hand in {ASSIGNMENT}: its feedback shows no score" in out
        fetched_feedback = json.loads(lab("POST", "/assignments/fetch_feedback" + query))
        assert fetched_feedback["success"], fetched_feedback
    [page] = (home / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK}.html")
    html = page.read_text()
    # the page travels alone (release_feedback copies *.html only): MathJax is inside it
    assert "mathjax/" not in html and 'src="mathjax' not in html
    assert '<script id="MathJax-script">' in html and "MathJax" in html and len(html) > 1_000_000
    assert "maxMacros: 100" in html and "maxBuffer: 2048" in html  # the bounds still hold
