"""Feedback on submit on the class's hub: the grading service as deploy/ starts it (a JupyterHub
managed service of the instructor's course, as the instructor), driven by students over HTTP
through the Assignments tab's API. No instructor command after the release."""
from __future__ import annotations

import html
import json
import os
import re
import signal
import time
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest

from support import ARTEFACTS, axe
from support.browser import LAB_MENUS, Chromium
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


def release(hub) -> Path:
    """The instructor's release of a01 to the hub's exchange (once per hub); their course folder."""
    course = home(hub.instructor) / "course"
    if not (hub.exchange / COURSE / "outbound" / ASSIGNMENT).is_dir():
        done = as_user(hub.instructor, GRADER, "--course", course, "release", ASSIGNMENT, "--exchange",
                       hub.exchange, timeout=1800)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return course


def work(student: Browser) -> None:
    """The fetched notebook, answered and saved, as the student does it in JupyterLab."""
    path = f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    nb = answered(student.server(path).json()["content"], SOURCE)
    assert student.server(path, "PUT", json={"type": "notebook", "content": nb}).status_code == 200


def test_a_submission_gets_its_feedback_with_no_instructor_command(hub):
    a, b = (Browser(hub, user) for user in hub.students[:2])
    for student in (a, b):
        student.spawn()
    course = release(hub)
    for student in (a, b):
        student.assignments("fetch", assignment_id=ASSIGNMENT)
        work(student)

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


def test_the_course_page_says_it_arrived_and_links_its_feedback(hub):
    """A student's landing page on the hub (deploy/hub/student/python/autograd_course_page): fetch,
    submit, "arrived", and the link to that submission's feedback once the service has graded it."""
    c = Browser(hub, hub.students[2])
    c.spawn()
    release(hub)
    landing = c.s.get(f"{hub.base}/user/{c.user}/", timeout=120)  # where the hub's "My server" leads
    assert landing.status_code == 200 and landing.url.endswith(f"/user/{c.user}/course/"), landing.url
    assert "a01 · Graphs and backpropagation" in landing.text and "No due date has been set." in landing.text, \
        landing.text[-3000:]
    fetched = c.server("course/fetch", "POST", data={"assignment": ASSIGNMENT})
    assert fetched.status_code == 303, fetched.text[-2000:]
    work(c)
    # the service publishes what a student may read at its next look at the exchange (every 2 s)
    view = hub.exchange / COURSE / "student_view.json"
    for _ in range(300):
        if view.is_file() and ASSIGNMENT in json.loads(view.read_text())["assignments"]:
            break
        time.sleep(0.2)
    submitted = c.server("course/submit", "POST", data={"assignment": ASSIGNMENT})
    assert submitted.status_code == 303, submitted.text[-2000:]
    told = c.s.get(f"{hub.base}{submitted.headers['Location']}", timeout=120).text
    assert re.search(r"Your submission of a01 · Graphs and backpropagation arrived at\s*<time datetime=", told), told
    assert "It is graded within about a minute" in told

    deadline, link = time.monotonic() + 900, None
    while link is None and time.monotonic() < deadline:
        shown = c.server("course/").text
        link = re.search(r'<a class="feedback-link" href="([^"]+)">Feedback on your submission of', shown)
        time.sleep(0 if link else 3)
    assert link, f"{c.user}: no feedback link on the course page after 900 s"
    address = f"{hub.base}{html.unescape(link.group(1))}"
    stamp = urllib.parse.unquote(address.rsplit("/", 2)[-2])
    feedback = c.s.get(address, timeout=120)
    assert feedback.status_code == 200 and feedback.headers["Content-Security-Policy"].startswith("sandbox")
    assert feedback.text.startswith("<!DOCTYPE html>"), feedback.text[:200]  # the way back is inside its body
    # that submission's time: as collected (its files' last change in the exchange), within seconds of nbgrader's
    about = re.search(r'This feedback is about your submission of <time datetime="([^"]+)"', feedback.text)
    assert about, feedback.text[-3000:]
    collected = datetime.fromisoformat(about.group(1))
    submitted = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f UTC").replace(tzinfo=timezone.utc)
    assert abs((collected - submitted).total_seconds()) < 10, (collected, submitted)

    # in the student's browser: the page readable by everyone (axe), the feedback's math typeset
    with Chromium() as chromium:
        chromium._call("Storage.setCookies", cookies=[
            {"name": k.name, "value": k.value, "domain": "127.0.0.1", "path": k.path} for k in c.s.cookies])
        course_page = f"{hub.base}/user/{c.user}/course/"
        found = chromium.open(course_page, probe=axe.probe(), screenshot=ARTEFACTS / "hub-course-page.png").probe
        assert not axe.serious(found), axe.describe("the course page on the hub", axe.serious(found))
        shown = chromium.open(address, screenshot=ARTEFACTS / "hub-feedback-page.png",
                              probe="document.querySelectorAll('mjx-container').length")
        assert shown.probe > 0, "no formula typeset in the feedback page"
        # and JupyterLab's Course menu, the way back (what the hub gives the students' servers)
        menus = chromium.open(f"{hub.base}/user/{c.user}/lab", probe=LAB_MENUS).probe
        assert menus and "Course" in menus, menus
