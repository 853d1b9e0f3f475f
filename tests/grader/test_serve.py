"""The grading service (``autograder serve``) on a scratch course and a real exchange folder, no hub.

Students' submissions are records in the exchange's inbound/ as nbgrader's Submit makes them
(support.course.record); the service is driven one pass at a time (``Service.step``), or as its
own process for the kill -9. Root stands for every student here, as in test_exchange_hostile.py.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pytest

from autograder.commands.serve import Service, State, policy, refuse_account, set_controls, status_rows
from autograder.course import CourseError
from autograder.course.exchange import feedback_name

from support.course import (
    ASSIGNMENT,
    NOTEBOOK,
    autograder,
    inbound,
    record,
    released_to_exchange,
    table,
    with_solution,
)

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]
STRANGER = 4243
WRONG = with_solution("a00-add", "def add(x, y):\n    return x - y\n")


@pytest.fixture
def course(tmp_path, monkeypatch):
    return released_to_exchange(tmp_path, monkeypatch)


def configure(course, text: str) -> None:
    with open(course.root / "nbgrader_config.py", "a") as config:
        config.write("\n" + text + "\n")


def page(course, folder: Path) -> Path:
    """Where the student of the record ``folder`` finds its feedback (their Fetch Feedback)."""
    secret = (folder / "submission_secret.txt").read_text()
    return inbound(course).parent / "feedback" / feedback_name(secret, NOTEBOOK)


def graded(course) -> list[str]:
    return [student for _, student, _, _ in State(course).history]


def score(course, student: str) -> tuple[float, str]:
    with course.gradebook() as gb:
        submission = gb.find_submission(ASSIGNMENT, student)
        return submission.score, str(submission.timestamp)


def test_a_submission_is_graded_and_its_feedback_released_with_no_instructor_command(course):
    first = record(course, "alice", nb=WRONG)
    latest = record(course, "alice")
    service = Service(course)
    assert service.step()
    assert graded(course) == ["alice"]  # the latest only: the first was never graded
    assert score(course, "alice")[0] == 6
    shown = page(course, latest).read_text()
    assert '<div class="submission-note"' in shown and "This feedback is about your submission of" in shown
    stamp = (course.submitted_dir("alice", ASSIGNMENT) / "timestamp.txt").read_text()
    assert stamp[:19] in shown and "The grade that counts is the one of the submission the due date decides" in shown
    assert "BEGIN HIDDEN TESTS" not in shown
    assert not page(course, first).exists()
    # in the student's browser: the math typeset, nothing fetched from elsewhere, and the
    # submission's time rewritten in the reader's own time zone by the page itself
    from support.browser import Chromium

    with Chromium() as chromium:
        seen = chromium.open(page(course, latest).as_uri(), probe="""({
            typeset: document.querySelectorAll('mjx-container').length,
            time: document.querySelector('.submission-note time').textContent})""")
    assert [url for url in seen.requests if not url.startswith(("file:", "data:"))] == []
    assert seen.probe["typeset"] > 0 and not seen.errors, seen.errors
    assert seen.probe["time"] != stamp[:19] + " UTC" and stamp[:4] in seen.probe["time"], seen.probe
    rows = {row[1]: row for row in status_rows(course)}
    assert rows["alice"][2] == "done" and rows["alice"][4] == "6/7; feedback released (full)"
    # nothing new: nothing graded again, and the instructor's commands see the same gradebook
    assert not service.step()
    assert graded(course) == ["alice"]
    assert autograder(course, "grade", ASSIGNMENT) == 0  # "already graded"
    assert autograder(course, "report", ASSIGNMENT) == 0


def test_one_students_resubmissions_never_delay_another(course):
    service = Service(course, jobs=1)
    record(course, "alice", nb=WRONG)
    service.step()
    for attempt in range(50):  # each a notebook of its own: the same one again is not graded again
        record(course, "alice", nb=with_solution("a00-add", f"def add(x, y):\n    return x - y  # try {attempt}\n"))
    record(course, "bob")
    service.step()                       # alice was first in line: her latest of 50, then bob as her worker frees
    assert graded(course) == ["alice", "alice", "bob"]
    record(course, "alice")              # and she goes on submitting
    record(course, "bob", nb=with_solution("a00-add", "def add(x, y):\n    return y + x\n"))  # bob's second try
    record(course, "alice")
    service.step()                       # her latest of two, and bob's
    assert graded(course) == ["alice", "alice", "bob", "alice", "bob"]
    assert score(course, "bob")[0] == 6 and score(course, "alice")[0] == 6
    with course.gradebook() as gb:
        assert len(gb.find_assignment(ASSIGNMENT).submissions) == 2
    assert {e["status"] for e in State(course).students.values()} == {"done"}


def test_those_seen_at_one_look_are_graded_in_the_order_they_submitted(course):
    """With its one worker busy, the service sees a whole grading's arrivals at one look: zoe, who
    submitted first, is graded first, not alice because her name sorts first; the time in a
    record's name is the student's to write, so a record named for the past jumps no one."""
    service = Service(course, jobs=1)
    record(course, "zoe")
    record(course, "alice")
    record(course, "mallory", stamp="2000-01-01 00:00:00.000000 UTC")
    service.step()
    assert graded(course) == ["zoe", "alice", "mallory"]


def test_the_same_notebook_submitted_again_is_not_graded_again_and_gets_its_page(course):
    """Submit pressed twice on an unchanged notebook: the second record has a secret of its own (the
    name of its page), and its page must come; the notebook is not graded a second time."""
    service = Service(course)
    first = record(course, "alice")
    service.step()
    again = record(course, "alice")
    service.step()
    assert graded(course) == ["alice"]
    assert page(course, first).exists() and page(course, again).exists()
    assert State(course).students[f"{ASSIGNMENT}/alice"]["status"] == "done"


def test_a_slow_submission_holds_one_worker_not_the_others(course):
    """Alice's answer loops forever: her grading lasts her exercise's whole time budget. Her worker
    is busy all that time; the other worker goes on taking the students behind her, one after
    the other, instead of waiting for her to finish."""
    from autograder.grading.workers import Limits

    record(course, "alice", nb=with_solution("a00-add", "def add(x, y):\n    while True:\n        pass\n"))
    for student in ("bob", "carol", "dave"):
        record(course, student)
    Service(course, jobs=2, limits=Limits(cell_timeout=20)).step()
    assert graded(course) == ["bob", "carol", "dave", "alice"]
    assert score(course, "alice")[0] < score(course, "dave")[0] == 6


def test_a_submission_made_while_the_older_is_graded_is_graded_next(course, monkeypatch):
    from autograder.commands import collect

    real, newer = collect.collect_exchange, []

    def alice_submits_again(course, assignment, exchange=None, students=None):
        report = real(course, assignment, exchange, students)
        if not newer:  # while her first submission is graded, she submits a right answer
            newer.append(record(course, "alice"))
        return report

    monkeypatch.setattr(collect, "collect_exchange", alice_submits_again)
    record(course, "alice", nb=WRONG)
    Service(course, jobs=2).run(0, once=True)  # her run has a free worker: it looks for new work while she is graded
    assert graded(course) == ["alice", "alice"] and score(course, "alice")[0] == 6
    assert page(course, newer[0]).exists()
    assert State(course).students[f"{ASSIGNMENT}/alice"]["status"] == "done"


def test_the_policy_before_the_due_date(course, capsys):
    assert autograder(course, "release", ASSIGNMENT, "--due", "2030-01-01 12:00") == 0
    configure(course, 'c.FeedbackService.policy = {"a00_toy": {"before_due": "score", "per_hour": 1}}')
    clock = [datetime.now(timezone.utc)]
    service = Service(course, now=lambda: clock[0])
    alice = record(course, "alice", nb=WRONG)
    assert service.step()
    shown = page(course, alice).read_text()
    assert "Score: 3 out of 7" in shown and "due 2030-01-01 12:00 UTC" in shown
    assert "<td>not passed</td>" in shown and "<td>passed</td>" in shown  # add fails, square passes
    assert "hidden" not in shown.replace("the hidden tests are counted, not shown", "")
    # at most one graded submission an hour: the next waits, and the newest is graded when it may
    record(course, "alice", nb=WRONG)
    newest = record(course, "alice")
    assert not service.step()
    assert "at most 1 graded submissions an hour: next at" in State(course).students[f"{ASSIGNMENT}/alice"]["detail"]
    clock[0] += timedelta(hours=1, seconds=1)
    assert service.step()
    assert graded(course) == ["alice", "alice"] and score(course, "alice")[0] == 6
    assert "Score: 6 out of 7" in page(course, newest).read_text()

    # nothing before the due date; the full page once it has passed, graded nothing again
    configure(course, 'c.FeedbackService.policy = {"a00_toy": {"before_due": "none"}}')
    bob = record(course, "bob")
    assert service.step()
    assert not page(course, bob).exists()
    assert State(course).students[f"{ASSIGNMENT}/bob"]["detail"] == "6/7; feedback withheld until the due date"
    clock[0] = datetime(2030, 1, 1, 12, 1, tzinfo=timezone.utc)
    service.run(0, once=True)
    for folder in (bob, newest):  # the full page for everyone, withheld or shown the score only
        assert "submission-note" in page(course, folder).read_text()
        assert "<h1>Feedback: " not in page(course, folder).read_text()
    assert graded(course) == ["alice", "alice", "bob"]

    configure(course, 'c.FeedbackService.policy = {"a00_toy": {"before_due": "all of it"}}')
    with pytest.raises(CourseError, match="before_due is 'all of it', expected one of full, score, none"):
        policy(course, ASSIGNMENT)


def test_an_extension_moves_the_due_date_the_service_keeps_for_that_student(course):
    """Issue 41 in the service: carol's two extra days keep her page withheld past the class's due
    date, and her page names her own due date; dave's is released at the class's."""
    assert autograder(course, "release", ASSIGNMENT, "--due", "2030-01-01 12:00 UTC") == 0
    configure(course, 'c.FeedbackService.policy = {"a00_toy": {"before_due": "none"}}')
    clock = [datetime(2029, 12, 31, 12, 0, tzinfo=timezone.utc)]
    service = Service(course, now=lambda: clock[0])
    carol, dave = record(course, "carol"), record(course, "dave")
    service.run(0, once=True)
    assert not page(course, carol).exists() and not page(course, dave).exists()
    assert autograder(course, "extend", "carol", ASSIGNMENT, "--by", "2d") == 0
    clock[0] = datetime(2030, 1, 1, 12, 1, tzinfo=timezone.utc)  # past the class's due date, not carol's
    service.run(0, once=True)
    assert page(course, dave).exists() and not page(course, carol).exists()
    clock[0] = datetime(2030, 1, 3, 12, 1, tzinfo=timezone.utc)
    service.run(0, once=True)
    assert "due 2030-01-03 12:00 UTC" in page(course, carol).read_text()
    assert sorted(graded(course)) == ["carol", "dave"]  # withheld pages are released, nothing graded again


def test_pause_off_and_status(course, capsys):
    service = Service(course)
    set_controls(course, paused=True)
    record(course, "alice")
    assert not service.step()
    set_controls(course, paused=False, off=[ASSIGNMENT])
    assert not service.step()
    assert autograder(course, "serve", "--on", ASSIGNMENT) == 0
    assert service.step()
    capsys.readouterr()
    assert autograder(course, "serve", "--status") == 0
    out = capsys.readouterr().out
    assert "grading service: not running; assignments off: none" in out
    assert table(out)[ASSIGNMENT][:2] == ["alice", "done"]


def test_never_as_root_nor_as_a_student(course, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(CourseError, match="never runs as root"):
        refuse_account(course)
    monkeypatch.setattr(os, "geteuid", lambda: 65534)  # nobody, made a student of the course
    with course.gradebook() as gb:
        gb.update_or_create_student("nobody")
    with pytest.raises(CourseError, match="never runs as a student, and nobody is a student of this course"):
        refuse_account(course)


def test_a_hostile_inbound_is_refused_as_collect_refuses_it(course):
    honest = record(course, "alice")
    linked = record(course, "carol", notebook=False)
    (linked / f"{NOTEBOOK}.ipynb").symlink_to(course.source_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb")
    pipe = record(course, "bob", notebook=False)
    os.mkfifo(pipe / f"{NOTEBOOK}.ipynb")
    (inbound(course) / f"mallory+{ASSIGNMENT}+2026-11-20 10:00:00.000000 UTC+x").symlink_to(
        course.source_dir(ASSIGNMENT))
    forged = record(course, "heidi")
    for path in [forged, *forged.iterdir()]:
        os.lchown(path, STRANGER, STRANGER)
    try:
        Service(course).run(0, once=True)
    finally:
        for path in [forged, *forged.iterdir()]:
            os.lchown(path, 0, 0)
    rows = {row[1]: row for row in status_rows(course)}
    assert rows["alice"][2] == "done" and page(course, honest).exists()
    assert rows["carol"][2:] and rows["carol"][2] == "refused" and "a symbolic link (not followed)" in rows["carol"][4]
    assert rows["bob"][2] == "refused" and "a named pipe (not opened)" in rows["bob"][4]
    assert rows["mallory"][2] == "refused" and "not a folder (a link or a file): not followed" in rows["mallory"][4]
    assert rows["heidi"][2] == "refused" and "made by uid 4243, not by heidi" in rows["heidi"][4]
    assert sorted(p.parent.name for p in course.root.glob(f"submitted/*/{ASSIGNMENT}")) == ["alice"]
    assert graded(course) == ["alice"]


def test_kill_9_mid_grade_loses_nothing_and_grades_nothing_twice(course):
    records = {student: record(course, student) for student in ("alice", "bob", "carol")}
    code = ("import sys; from autograder.course.directory import Course; "
            "from autograder.commands.serve import Service; Service(Course.open(sys.argv[1]), jobs=1).run(0.2)")
    service = subprocess.Popen([sys.executable, "-c", code, str(course.root)], start_new_session=True)
    state = course.state_dir / "serve" / "state.json"
    try:
        deadline = time.monotonic() + 300
        while not (state.exists() and any(e["status"] == "grading"
                                          for e in json.loads(state.read_text())["students"].values())):
            assert service.poll() is None and time.monotonic() < deadline, "the service never started grading"
            time.sleep(0.1)
        time.sleep(1.5)  # inside the grading of the first student
    finally:
        children = psutil.Process(service.pid).children(recursive=True)
        os.kill(service.pid, signal.SIGKILL)  # the service alone: its workers die with it
        service.wait()
    _, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, f"left behind by the killed service: {alive}"
    before = json.loads(state.read_text())["students"]
    assert any(entry["status"] != "done" for entry in before.values()), "killed too late: everything was done"
    Service(course, jobs=1).run(0.1, once=True)
    for student, folder in records.items():
        assert score(course, student)[0] == 6
        assert page(course, folder).exists()
    with course.gradebook() as gb:
        assert len(gb.find_assignment(ASSIGNMENT).submissions) == 3
    assert all(row[2] == "done" for row in status_rows(course))
    assert sorted(set(graded(course))) == ["alice", "bob", "carol"]


def test_a_submission_that_breaks_the_service_stops_no_one_else(course, monkeypatch):
    from autograder.commands import collect

    real = collect.collect_exchange

    def breaks_on_bob(course, assignment, exchange=None, students=None):
        if "bob" in (students or ()):
            raise RuntimeError("a surprise")
        return real(course, assignment, exchange, students)

    monkeypatch.setattr(collect, "collect_exchange", breaks_on_bob)
    record(course, "bob")
    alice = record(course, "alice")
    Service(course).run(0, once=True)
    rows = {row[1]: row for row in status_rows(course)}
    assert rows["bob"][2:5:2] == ["failed", "the service failed on it: RuntimeError: a surprise"]
    assert rows["alice"][2] == "done" and page(course, alice).exists()
    # the service died while grading bob three times (kill -9, out of memory): not a fourth
    state = State(course)
    state.students[f"{ASSIGNMENT}/bob"].update(status="grading", attempts=3)
    state.save()
    Service(course).run(0, once=True)
    rows = {row[1]: row for row in status_rows(course)}
    assert rows["bob"][2] == "failed" and "stopped while grading this submission 3 times" in rows["bob"][4]


def test_an_ngshare_that_cannot_be_reached_is_told_once_and_looked_at_again(course, monkeypatch, capsys):
    from autograder.course.ngshare import Unreachable

    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-service-token")
    monkeypatch.setattr("autograder.commands.serve._TOLD", set())  # what this process said before
    away = "http://127.0.0.1:9/services/ngshare"  # nothing listens on the discard port
    with pytest.raises(Unreachable, match=f"ngshare at {away} cannot be reached to list the assignments"):
        Service(course, away).run(once=True)  # a cron job's run fails, saying why
    service, stop, looks = Service(course, away), threading.Event(), []
    step = service.step

    def counted():
        looks.append(1)
        if len(looks) == 3:
            stop.set()
        return step()

    service.step = counted
    service.run(interval=0.01, stop=stop)  # the running service keeps looking
    assert len(looks) == 3
    assert capsys.readouterr().err.count("cannot be reached") == 1
