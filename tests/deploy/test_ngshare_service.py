"""The grading service on Kubernetes' exchange: ngshare 0.6.0, the managed service of a real JupyterHub
(issue 38; deploy/kubernetes/README.md, "Feedback on submit").

Everyone acts as on the cluster (support/ngshare.py): the instructor releases from their server
with `autograder release --exchange URL` and their own hub token; students fetch, submit and fetch
feedback with nbgrader's ngshare plugin (what the Assignments tab runs in their server), each with
their own token; the service runs as a command, `autograder serve --exchange URL --once`, with the
token of its hub service (`grading-service`, an instructor of the course in ngshare). No
instructor command between a submission and its page.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests

from autograder.course.ngshare import parse_stamp

from support.course import (
    ASSIGNMENT,
    NOTEBOOK,
    SOLUTIONS,
    answered,
    make_course,
    released_notebook,
    source_notebook,
    use_toy_catalogue,
)
from support.hub import PREFIX
from support.ngshare import COURSE, Ngshare

# with the hub's tests: the grader deploy/hub.py installs (hub_install) is installed by one worker only
pytestmark = [pytest.mark.xdist_group("hub"), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(hub_install):
    """The hub with ngshare, the toy course released there by the instructor, and the course then
    given to the grading VM's account (a system user of this test's own, an instructor of the
    machine: the grader deploy/hub.py installs is theirs), which the service runs as."""
    owner = f"ngs-grader-{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--groups",
                    "autograd-instructors", owner], check=True)
    root = Path(tempfile.mkdtemp(prefix="autograd-ngshare-"))
    root.chmod(0o755)  # the owner reaches the course through it
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            use_toy_catalogue(monkeypatch)  # the service's and the instructor's processes inherit it
            with Ngshare(root, students=("alice", "bob", "carol")) as ngshare:
                course = make_course(root / "course")
                released = ngshare.run(ngshare.instructor, root / "home" / "instr", "-m", "autograder", "--course",
                                       course.root, "release", ASSIGNMENT, "--solutions", SOLUTIONS,
                                       "--exchange", ngshare.url)
                assert released.returncode == 0, released.stdout + released.stderr
                assert f"published to the nbgrader exchange {ngshare.url} (ngshare)" in released.stdout
                for path in [course.root, *course.root.rglob("*")]:
                    os.lchown(path, pwd.getpwnam(owner).pw_uid, pwd.getpwnam(owner).pw_gid)
                ngshare.owner = owner
                yield ngshare, course
    finally:
        for path in [root, *root.rglob("*")]:
            with contextlib.suppress(OSError):
                os.lchown(path, 0, 0)  # nothing left to a uid the next useradd hands to a stranger
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["userdel", owner], check=False)


def as_owner(ngshare: Ngshare, *argv: str, token: bool = False) -> subprocess.CompletedProcess:
    """``python *argv`` as the grading VM's account (the course's owner), with the grader's environment
    (deploy/hub.py's: this machine's own venv is under /root) and the service's token if asked."""
    user = pwd.getpwnam(ngshare.owner)
    env = {k: v for k, v in os.environ.items() if k.startswith(("AUTOGRADER_", "LANG", "LC_", "PATH"))}
    env.update(HOME="/", USER=user.pw_name, PYTHONPATH=str(PREFIX / "grader" / "lib"),
               **({"JUPYTERHUB_API_TOKEN": ngshare.grader_token} if token else {}))
    done = subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--",
                           str(PREFIX / "venv" / "bin" / "python"), *argv], env=env, cwd="/", capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def home(ngshare: Ngshare, student: str) -> Path:
    return ngshare.root / "home" / student


def nbgrader(ngshare: Ngshare, student: str, *argv: str) -> subprocess.CompletedProcess:
    done = ngshare.run(student, home(ngshare, student), "-m", "nbgrader", *argv, "--course", COURSE)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def fetch_and_submit(ngshare: Ngshare, student: str, share: float = 1.0) -> str:
    """The student fetches (once), writes ``share`` of the answers, submits: ngshare's time of it."""
    folder = home(ngshare, student) / ASSIGNMENT
    if not folder.exists():
        nbgrader(ngshare, student, "fetch_assignment", ASSIGNMENT)
    path = folder / f"{NOTEBOOK}.ipynb"
    path.write_text(json.dumps(answered(json.loads(path.read_text()), source_notebook(), share)))
    nbgrader(ngshare, student, "submit", ASSIGNMENT)
    return stamps(ngshare, student)[-1]


def stamps(ngshare: Ngshare, student: str) -> list[str]:
    """The student's submissions as ngshare lists them to the student, oldest first."""
    answer = requests.get(f"{ngshare.url}/submissions/{COURSE}/{ASSIGNMENT}/{student}", timeout=30,
                          headers={"Authorization": f"token {ngshare.token(student)}"}).json()
    return sorted((s["timestamp"] for s in answer["submissions"]), key=parse_stamp)


def serve(ngshare: Ngshare, course, *more: str) -> subprocess.CompletedProcess:
    """`autograder serve --once` as the grading VM runs it: the course's owner, the service's own token."""
    return as_owner(ngshare, "-m", "autograder", "--course", str(course.root), "serve", "--exchange", ngshare.url,
                    "--once", "--jobs", "2", *more, token=True)


def fetched_page(ngshare: Ngshare, student: str, stamp: str) -> str:
    """Fetch Feedback, as the student: the page of the submission ``stamp``, as it lands in their folder."""
    nbgrader(ngshare, student, "fetch_feedback", ASSIGNMENT)
    page = home(ngshare, student) / ASSIGNMENT / "feedback" / stamp / f"{NOTEBOOK}.html"
    assert page.is_file(), sorted(p.name for p in page.parent.parent.glob("*"))
    return page.read_text()


def status(ngshare: Ngshare, course) -> dict[str, str]:
    """``serve --status`` as the owner types it: each student's status."""
    said = as_owner(ngshare, "-m", "autograder", "--course", str(course.root), "serve", "--status").stdout
    rows = [re.split(r"\s{2,}", line.strip()) for line in said.splitlines()]
    return {cells[1]: cells[2] for cells in rows if cells[0] == ASSIGNMENT and len(cells) > 2}


def gradebook(ngshare: Ngshare, course, student: str) -> tuple[datetime, float, float]:
    """The student's submission in the gradebook, read as its owner: (time, score, max score)."""
    code = ("import sys, json; from autograder.course.directory import Course\n"
            "with Course.open(sys.argv[1]).gradebook() as gb:\n"
            "    s = gb.find_submission(sys.argv[2], sys.argv[3])\n"
            "    print(json.dumps([s.timestamp.isoformat(), s.score, s.max_score]))")
    when, score, most = json.loads(as_owner(ngshare, "-c", code, str(course.root), ASSIGNMENT, student).stdout)
    return datetime.fromisoformat(when).replace(tzinfo=timezone.utc), score, most


def test_a_submission_comes_back_as_its_feedback_with_no_instructor_command(cluster):
    ngshare, course = cluster
    stamp = fetch_and_submit(ngshare, "alice")
    said = serve(ngshare, course)
    assert f"watching ngshare at {ngshare.url}" in said.stdout, said.stdout + said.stderr
    page = fetched_page(ngshare, "alice", stamp)
    when = parse_stamp(stamp)
    assert f"This feedback is about your submission of <time datetime=\"{when.isoformat()}\">" in page
    assert "BEGIN HIDDEN TESTS" not in page and "mathjax" in page.lower()
    assert status(ngshare, course)["alice"] == "done"
    recorded, score, most = gradebook(ngshare, course, "alice")
    assert recorded == when  # the time ngshare gave the submission, not one of the student's files
    assert score == most - 1  # all but the written answer, graded by hand


def test_no_other_student_reaches_a_page_and_the_same_notebook_again_gets_its_own(cluster):
    ngshare, course = cluster
    first = stamps(ngshare, "alice")[-1]
    bob = requests.get(f"{ngshare.url}/feedback/{COURSE}/{ASSIGNMENT}/alice", params={"timestamp": first},
                       headers={"Authorization": f"token {ngshare.token('bob')}"}, timeout=30)
    assert bob.status_code == 403
    nbgrader(ngshare, "alice", "submit", ASSIGNMENT)  # unchanged: not graded again, but answered
    again = stamps(ngshare, "alice")[-1]
    assert again != first
    serve(ngshare, course)
    assert "This feedback is about your submission of" in fetched_page(ngshare, "alice", again)


def test_what_a_student_posts_by_hand_is_read_by_the_exchange_s_rules(cluster):
    """carol skips the plugin: her own token, ngshare's API, a timestamp.txt of long ago, a notebook
    in a folder and a file of another name beside the real one."""
    ngshare, course = cluster
    notebook = json.dumps(answered(released_notebook(course), source_notebook())).encode()
    files = [("a00_toy.ipynb", notebook), ("timestamp.txt", b"2020-01-01 00:00:00.000000 UTC"),
             ("deep/a00_toy.ipynb", b"{}"), ("a00_toy_copy.ipynb", notebook)]
    posted = requests.post(f"{ngshare.url}/submission/{COURSE}/{ASSIGNMENT}", timeout=30,
                           headers={"Authorization": f"token {ngshare.token('carol')}"},
                           data={"files": json.dumps([{"path": p, "content": base64.encodebytes(d).decode()}
                                                      for p, d in files])})
    assert posted.status_code == 200, posted.text
    serve(ngshare, course)
    assert status(ngshare, course)["carol"] == "done"
    when, _, _ = gradebook(ngshare, course, "carol")
    assert datetime.now(timezone.utc) - when < timedelta(minutes=10)  # ngshare's time, not 2020
    collected = sorted(p.name for p in course.submitted_dir("carol", ASSIGNMENT).iterdir())
    assert collected == ["a00_toy.ipynb", "ngshare_submission.txt", "timestamp.txt"]


def test_the_score_policy_sends_the_score_page_before_the_due_date(cluster):
    ngshare, course = cluster
    due = datetime.now(timezone.utc) + timedelta(days=2)
    with open(course.root / "nbgrader_config.py", "a") as config:  # appended: still the owner's file
        config.write(f'\nc.FeedbackService.policy = {{"{ASSIGNMENT}": {{"before_due": "score"}}}}\n')
    code = ("import sys; from datetime import datetime; from autograder.course.directory import Course\n"
            "with Course.open(sys.argv[1]).gradebook() as gb:\n"
            "    gb.update_or_create_assignment(sys.argv[2], duedate=datetime.fromisoformat(sys.argv[3]))")
    as_owner(ngshare, "-c", code, str(course.root), ASSIGNMENT, due.replace(tzinfo=None).isoformat())
    stamp = fetch_and_submit(ngshare, "bob", share=0.5)
    serve(ngshare, course)
    page = fetched_page(ngshare, "bob", stamp)
    assert "Score: " in page and "the hidden tests are counted, not shown, until the due date" in page
    assert "judged outside the notebook" not in page  # nothing of a hidden test
