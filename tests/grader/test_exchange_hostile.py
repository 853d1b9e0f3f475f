"""The exchange read as a class's machine must read it: every student writes into inbound/, and
no record may speak for another student, back-date itself, reach a file through a link, or stop
the collect of the others (autograder.course.exchange).

Records are laid out as nbgrader's submit leaves them (``<student>+<assignment>+<time>+<random>/``
with the notebook, timestamp.txt and submission_secret.txt); the hostile ones are what a student
can make of their own folder afterwards. The hub test (tests/deploy/test_semester.py) makes them as real
students, through their own accounts; here root stands for every student (the collector's own
records count for anyone), and a uid with no account for a student who is not who the name says.
"""
from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timedelta, timezone

import pytest

from autograder.course import exchange as exchange_module

from support.course import (
    ASSIGNMENT,
    NOTEBOOK,
    autograder,
    inbound,
    record,
    released_to_exchange,
    source_notebook,
    table,
)

pytestmark = [pytest.mark.xdist_group("autograder")]
STRANGER = 4243  # a uid with no account: a student who is not the one the record names


@pytest.fixture
def course(tmp_path, monkeypatch):
    return released_to_exchange(tmp_path, monkeypatch)


def test_no_record_speaks_for_another_reaches_through_a_link_or_stops_the_collect(course, tmp_path, capsys):
    honest = record(course, "alice")
    # B's name on a folder another account made: refused, named
    forged = record(course, "heidi")
    for path in [forged, *forged.iterdir()]:
        os.lchown(path, STRANGER, STRANGER)
    try:
        _collect_the_hostile_class(course, tmp_path, capsys, honest, forged)
    finally:
        for path in [forged, *forged.iterdir()]:
            os.lchown(path, 0, 0)  # nothing left to a uid the next useradd hands to a stranger


def _collect_the_hostile_class(course, tmp_path, capsys, honest, forged):
    # a folder named for another student inside one's own record: not that student's submission
    nested = record(course, "frank")
    (nested / "grace").mkdir()
    (nested / "grace" / f"{NOTEBOOK}.ipynb").write_text(json.dumps(source_notebook()))
    # links: to the instructor's source notebook, to /dev/zero, a secret linked to a root-only file
    source = course.source_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb"
    linked = record(course, "carol", notebook=False)
    (linked / f"{NOTEBOOK}.ipynb").symlink_to(source)
    zero = record(course, "dave", notebook=False)
    (zero / f"{NOTEBOOK}.ipynb").symlink_to("/dev/zero")
    secret_root = tmp_path / "root-only"
    secret_root.write_text("root's secret\n")
    secret_root.chmod(0o600)
    leaky = record(course, "judy")
    (leaky / "submission_secret.txt").unlink()
    (leaky / "submission_secret.txt").symlink_to(secret_root)
    # a named pipe where the notebook should be (reading it would block the collect forever)
    pipe = record(course, "bob", notebook=False)
    os.mkfifo(pipe / f"{NOTEBOOK}.ipynb")
    # a record that is itself a link, to the instructor's source folder
    (inbound(course) / f"mallory+{ASSIGNMENT}+2026-11-20 10:00:00.000000 UTC+x").symlink_to(source.parent)
    # forty nested 120-character folders beside an honest notebook; a name whose time is not a
    # time; a timestamp.txt that is not a time; a 250-character id
    deep = record(course, "erin")
    level = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(40):  # past PATH_MAX: made one folder at a time, as a shell's `cd` and `mkdir` would
        os.mkdir("d" * 120, dir_fd=level)
        inner = os.open("d" * 120, os.O_RDONLY | os.O_DIRECTORY, dir_fd=level)
        os.close(level)
        level = inner
    os.close(level)
    odd = record(course, "ivan", stamp="not-a-time")
    (odd / "timestamp.txt").write_text("the twelfth of never")
    record(course, "x" * 200)

    assert autograder(course, "collect", ASSIGNMENT, "--exchange") == 0
    out = capsys.readouterr().out
    rows = table(out)
    imported = {s for s in ("alice", "frank", "erin", "ivan", "judy") if rows.get(s, [""])[0] == NOTEBOOK}
    assert imported == {"alice", "frank", "erin", "ivan", "judy"}, out
    assert sorted(p.parent.name for p in course.root.glob(f"submitted/*/{ASSIGNMENT}")) == \
        ["alice", "erin", "frank", "ivan", "judy"]
    assert "made by uid 4243, not by heidi: a submission in another's name is refused" in out
    assert rows[f"{linked.name}/{NOTEBOOK}.ipynb"] == ["a symbolic link (not followed)"]
    assert rows[f"{zero.name}/{NOTEBOOK}.ipynb"] == ["a symbolic link (not followed)"]
    assert rows[f"{pipe.name}/{NOTEBOOK}.ipynb"] == ["a named pipe (not opened)"]
    assert rows[f"{leaky.name}/submission_secret.txt"] == ["a symbolic link (not followed)"]
    assert rows[f"{nested.name}/grace"][0].startswith("a folder the release did not ship")
    assert "not a folder (a link or a file): not followed" in out
    assert "not a student id" in out
    # what reaches the course is the students' own notebooks, never what a link pointed to
    assert not (course.submitted_dir("judy", ASSIGNMENT) / "submission_secret.txt").exists()
    assert "root's secret" not in "".join(p.read_text() for p in course.root.glob("submitted/*/*/*.txt"))
    assert (course.submitted_dir("alice", ASSIGNMENT) / "submission_secret.txt").read_text() == \
        (honest / "submission_secret.txt").read_text()
    shutil.rmtree(deep)  # descends by file descriptor: past PATH_MAX too


def test_a_submission_is_timed_by_when_its_files_changed_not_by_what_it_says(course, capsys):
    """timestamp.txt and the time in the record's name are the student's words; the change times
    of the record's files are not: a late student who rewrites both is still late."""
    before = datetime.now(timezone.utc)
    late = record(course, "olivia", stamp="2020-01-01 00:00:00.000000 UTC")
    (late / "timestamp.txt").write_text("2020-01-01 00:00:00.000000 UTC")
    os.utime(late / f"{NOTEBOOK}.ipynb", (0, 0))  # the modification time is the student's too
    assert autograder(course, "collect", ASSIGNMENT, "--exchange") == 0
    stored = (course.submitted_dir("olivia", ASSIGNMENT) / "timestamp.txt").read_text()
    when = datetime.strptime(stored, "%Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=timezone.utc)
    assert before - timedelta(seconds=1) <= when <= datetime.now(timezone.utc) + timedelta(seconds=1), stored
    # editing the notebook in place after the deadline makes the submission later, never earlier
    capsys.readouterr()
    later = datetime.now(timezone.utc)
    (late / f"{NOTEBOOK}.ipynb").write_text(json.dumps(source_notebook()) + " ")
    assert autograder(course, "collect", ASSIGNMENT, "--exchange") == 0
    stored = (course.submitted_dir("olivia", ASSIGNMENT) / "timestamp.txt").read_text()
    assert datetime.strptime(stored, "%Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=timezone.utc) >= later


def test_one_size_limit_and_the_latest_record_wins(course, capsys, monkeypatch):
    first = record(course, "peggy")
    second = record(course, "peggy")
    (second / f"{NOTEBOOK}.ipynb").write_text(json.dumps(source_notebook()) + "\n")
    assert first.name < second.name
    assert autograder(course, "collect", ASSIGNMENT, "--exchange") == 0
    assert (course.submitted_dir("peggy", ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text().endswith("\n")
    capsys.readouterr()
    monkeypatch.setattr(exchange_module, "MAX_NOTEBOOK_BYTES", 1000)
    big = record(course, "trent")
    assert autograder(course, "collect", ASSIGNMENT, "--exchange") == 0
    assert table(capsys.readouterr().out)[f"{big.name}/{NOTEBOOK}.ipynb"] == ["larger than the size limit (1000 bytes)"]
    assert not course.submitted_dir("trent", ASSIGNMENT).exists()


@pytest.mark.slow
def test_a_student_without_a_secret_stops_no_ones_feedback(course, tmp_path, capsys):
    """Feedback goes to the exchange one student at a time: one whose submission has no secret
    (collected from an LMS export, say) is reported, and everyone else's pages are released."""
    records = {student: record(course, student) for student in ("alice", "bob")}
    assert autograder(course, "collect", ASSIGNMENT, "--exchange") == 0
    export = tmp_path / "export" / "carol"
    export.mkdir(parents=True)
    (export / f"{NOTEBOOK}.ipynb").write_text(json.dumps(source_notebook()))
    assert autograder(course, "collect", ASSIGNMENT, str(export.parent)) == 0
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "2") == 0
    capsys.readouterr()
    assert autograder(course, "feedback", ASSIGNMENT, "--exchange") == 1
    out = capsys.readouterr().out
    assert "feedback released to the nbgrader exchange for 2 student(s)" in out
    assert table(out)["carol"][0].startswith("no submission secret beside the submission")
    outbound = inbound(course).parent / "feedback"
    for student, folder in records.items():
        name = exchange_module.feedback_name((folder / "submission_secret.txt").read_text(), NOTEBOOK)
        page = (outbound / name).read_text()  # where the student's Fetch Feedback looks
        assert page == course.feedback_dir(student, ASSIGNMENT).joinpath(f"{NOTEBOOK}.html").read_text()
        assert '<script id="MathJax-script">' in page  # it travels alone: MathJax inside
    assert len(list(outbound.glob("*.html"))) == 2
    assert (course.feedback_dir("carol", ASSIGNMENT) / f"{NOTEBOOK}.html").is_file()  # written, for another way


def test_a_notebook_over_the_limit_is_not_graded_on_any_path(course, capsys, monkeypatch):
    """A folder placed in submitted/ by hand is held to the limit a collect applies: the same
    submissions are graded here and on a Dask worker (whose reply carries the notebook)."""
    from autograder.grading import executors
    from autograder.grading import run as grade_module
    assert executors.MAX_GRADED_NOTEBOOK_BYTES > exchange_module.MAX_NOTEBOOK_BYTES
    monkeypatch.setattr(grade_module, "MAX_NOTEBOOK_BYTES", 1000)
    folder = course.submitted_dir("walter", ASSIGNMENT)
    folder.mkdir(parents=True)
    (folder / f"{NOTEBOOK}.ipynb").write_text(json.dumps(source_notebook()))
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "1") == 1
    row = table(capsys.readouterr().out)["walter"]
    assert row == ["failed", "a00_toy.ipynb is larger than the 1000 bytes a submitted notebook may be: not graded"], row
