"""Feedback on submit on the class's hub: the grading service as deploy/ starts it (a JupyterHub
managed service of the instructor's course, as the instructor), driven by students over HTTP
through the Assignments tab's API. No instructor command after the release."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from support.hub import COURSE, GRADER, REPO, Browser, answered, as_user

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]
HUB_ENV = {"AUTOGRAD_GRADING_SERVICE": "{instructor}", "AUTOGRAD_GRADING_JOBS": "1"}
ASSIGNMENT = "a01_graphs"
SOURCE = json.loads((REPO / "assignments" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())


def home(user: str) -> Path:
    return Path(os.path.expanduser(f"~{user}"))


def the_service(course: Path) -> psutil.Process:
    found = [p for p in psutil.process_iter(["cmdline", "username"])
             if "serve" in (p.info["cmdline"] or []) and str(course) in (p.info["cmdline"] or [])
             and "-m" in (p.info["cmdline"] or [])]
    assert len(found) == 1, found
    return found[0]


def feedback_of(student: Browser, timeout: float = 900) -> str:
    """The student's Fetch Feedback, pressed until a page comes (the service grades meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        student.assignments("fetch_feedback", assignment_id=ASSIGNMENT)
        listing = student.server(f"api/contents/{ASSIGNMENT}/feedback")
        if listing.status_code == 200:
            stamps = [item["name"] for item in listing.json()["content"] if item["type"] == "directory"]
            if stamps:
                page = student.server(f"api/contents/{ASSIGNMENT}/feedback/{max(stamps)}/{ASSIGNMENT}.html",
                                      params={"content": "1", "format": "text", "type": "file"})
                assert page.status_code == 200, page.text[:300]
                return page.json()["content"]
        time.sleep(2)
    raise AssertionError(f"{student.user}: no feedback after {timeout} s")


def test_a_submission_gets_its_feedback_with_no_instructor_command(hub):
    a, b = (Browser(hub, user) for user in hub.students[:2])
    for student in (a, b):
        student.spawn()
    course = home(hub.instructor) / "course"
    done = as_user(hub.instructor, GRADER, "--course", course, "release", ASSIGNMENT, "--exchange", hub.exchange,
                   timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for student in (a, b):
        student.assignments("fetch", assignment_id=ASSIGNMENT)
        path = f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        nb = answered(student.server(path).json()["content"], SOURCE)
        assert student.server(path, "PUT", json={"type": "notebook", "content": nb}).status_code == 200

    service = the_service(course)
    assert service.username() == hub.instructor  # neither root nor a student
    a.assignments("submit", assignment_id=ASSIGNMENT)
    page = feedback_of(a)
    assert "This feedback is about your submission of" in page and "BEGIN HIDDEN TESTS" not in page

    # kill -9: the hub starts the service again, and what came meanwhile is graded
    service.send_signal(signal.SIGKILL)
    b.assignments("submit", assignment_id=ASSIGNMENT)
    page = feedback_of(b)
    assert "This feedback is about your submission of" in page
    again = the_service(course)
    assert again.pid != service.pid and again.username() == hub.instructor
    status = as_user(hub.instructor, GRADER, "--course", course, "serve", "--status")
    assert status.returncode == 0, status.stderr
    rows = [line.split() for line in status.stdout.splitlines() if line.startswith(ASSIGNMENT)]
    assert sorted((row[1], row[2]) for row in rows) == sorted((s, "done") for s in (a.user, b.user)), status.stdout
    assert (hub.exchange / COURSE / "inbound").is_dir()
