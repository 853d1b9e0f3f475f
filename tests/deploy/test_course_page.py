"""The students' course page (deploy/hub/student/python/autograd_course_page), no hub.

A real Jupyter server configured with the students' own configuration folder of the hub
(deploy/hub/student: the extension enabled, nbgrader's exchange from $AUTOGRAD_EXCHANGE) serves the
page for the toy course released to a scratch exchange; the grading service (driven one pass at a
time, as in tests/grader/test_serve.py) publishes the due date and the policy and grades. Root
stands for the student, as in test_serve.py. The page is driven as a student's browser drives it
(forms posted, links followed), then opened in headless Chromium: axe-core, the keyboard, the
local time, and the feedback page's sandbox.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests

from autograder.commands.serve import STUDENT_VIEW, Service, own_due_name

from support import ARTEFACTS, REPO, axe
from support.browser import LAB_MENUS, SPEECH_FROM_MENU, Chromium, news
from support.course import ASSIGNMENT, NOTEBOOK, autograder, released_to_exchange
from support.jupyter import jupyter_server
from support.words import visible

pytestmark = [pytest.mark.xdist_group("autograder")]  # the tests of a course and a server are marked slow
STUDENT = REPO / "deploy" / "hub" / "student"
sys.path.insert(0, str(STUDENT / "python"))
import autograd_course_page as page_module  # noqa: E402  (the extension, as the students' PYTHONPATH has it)

TITLE = "a00 · Toy assignment"  # the released notebook's first heading


@pytest.fixture
def course(tmp_path, monkeypatch):
    course = released_to_exchange(tmp_path, monkeypatch)
    assert autograder(course, "release", ASSIGNMENT, "--due", "2030-01-01 12:00 UTC") == 0
    return course


@pytest.fixture
def student(tmp_path, course):
    """(a requests session, the course page's address, the token) of the student's server."""
    home = tmp_path / "home"
    home.mkdir()
    exchange = str(course.exchange_config().Exchange.root)
    with jupyter_server(tmp_path, STUDENT, STUDENT / "python", env={"AUTOGRAD_EXCHANGE": exchange},
                        home=home) as (base, token):
        session = requests.Session()
        session.headers["Authorization"] = f"token {token}"  # a token needs no _xsrf field
        yield session, f"{base}/course/", token


def post(session: requests.Session, url: str, action: str, assignment: str = ASSIGNMENT) -> requests.Response:
    return session.post(f"{url}{action}", data={"assignment": assignment}, allow_redirects=False, timeout=120)


@pytest.mark.slow
def test_a_student_fetches_submits_and_reads_their_feedback_from_the_page(course, student, tmp_path):
    session, url, token = student
    service = Service(course)
    service.poll()  # the service publishes what a student may read
    exchange = Path(service.root)
    assert '"before_due": "full"' in (exchange / STUDENT_VIEW).read_text()

    first = session.get(url, timeout=60)
    assert first.status_code == 200, first.text[-2000:]
    words = visible(first.text)
    assert TITLE in words and ASSIGNMENT not in words  # the assignment's title, never its folder's name
    assert '<time datetime="2030-01-01T12:00:00+00:00">2030-01-01 12:00 UTC</time>' in first.text
    assert "Fetch" in words and "None yet." in words
    # what JupyterLab's Assignments tab names assignments and the course by (labextensions/autograd-titles)
    names = session.get(url + "titles.json", timeout=60).json()
    assert names["titles"] == {ASSIGNMENT: TITLE} and names["course"] and names["course_id"], names
    policy = first.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy

    # nothing to submit before fetching: one sentence, the page still there
    refused = post(session, url, "submit")
    assert refused.status_code == 400 and f"Fetch {TITLE} first" in visible(refused.text)
    fetched = post(session, url, "fetch")
    assert fetched.status_code == 303, fetched.text[-2000:]
    shown = session.get(url + fetched.headers["Location"].split("/course/", 1)[1], timeout=60).text
    assert f"{TITLE} is in your files" in visible(shown)
    assert f'href="/lab/tree/{ASSIGNMENT}/{NOTEBOOK}.ipynb"' in shown and f"Open {TITLE} in JupyterLab" in shown
    assert (tmp_path / "home" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").is_file()

    submitted = post(session, url, "submit")
    assert submitted.status_code == 303
    shown = session.get(url + submitted.headers["Location"].split("/course/", 1)[1], timeout=60).text
    said = visible(shown)
    assert re.search(rf"Your submission of {TITLE} arrived at \d{{4}}-\d\d-\d\d \d\d:\d\d UTC\.", said), said
    assert "It is graded within about a minute, and a link to its feedback will appear here." in said
    assert 'data-waiting="true"' in shown

    assert service.step()  # graded; its page released by the submission's secret
    shown = session.get(url, timeout=60).text
    link = re.search(r'<a class="feedback-link" href="([^"]+)">Feedback on your submission of <time', shown)
    assert link, shown
    assert 'data-waiting' not in shown
    feedback = session.get(requests.compat.urljoin(url, html.unescape(link.group(1))), timeout=60)
    assert feedback.status_code == 200
    assert "This feedback is about your submission of" in feedback.text
    assert "BEGIN HIDDEN TESTS" not in feedback.text
    assert re.search(r'<body[^>]*><nav aria-label="Course"[^>]*><a href="/course/#a00_toy">Back to your course page',
                     feedback.text) and feedback.text.startswith("<!DOCTYPE html>"), feedback.text[:300]
    sandbox = feedback.headers["Content-Security-Policy"]
    assert sandbox.startswith("sandbox allow-scripts") and "default-src 'none'" in sandbox
    stamp = html.unescape(link.group(1)).split("/")[-2]

    # the student's own due date, beside their feedback, named by their submission's secret
    assert autograder(course, "extend", "root", ASSIGNMENT, "--by", "2d") == 0
    service.poll()
    secret = (course.submitted_dir("root", ASSIGNMENT) / "submission_secret.txt").read_text().strip()
    assert (exchange / "feedback" / own_due_name(secret)).is_file()
    shown = session.get(url, timeout=60).text
    assert ('Your due date, with your extension: <time datetime="2030-01-03T12:00:00+00:00">' in shown), shown

    # a name with a way out, an assignment not released, a submission never made: refused, in a sentence
    for bad in ("../../etc", "a00_toy/../x", "nope"):
        answer = post(session, url, "fetch", bad)
        assert answer.status_code == 400 and "There is no assignment of that name" in answer.text
    assert session.get(f"{url}feedback/..%2F..%2Fetc/{stamp}/x", timeout=60).status_code == 404
    missing = session.get(f"{url}feedback/{ASSIGNMENT}/2020-01-01 00:00:00.000000 UTC/{NOTEBOOK}", timeout=60)
    assert missing.status_code == 404 and "There is no feedback on your submission of" in visible(missing.text)
    # a link planted at the page's name in the exchange is not followed
    released = next(p for p in (exchange / "feedback").glob("*.html"))
    shutil.move(released, tmp_path / "page.html")
    released.symlink_to(tmp_path / "page.html")
    assert session.get(requests.compat.urljoin(url, html.unescape(link.group(1))), timeout=60).status_code == 404
    released.unlink()
    shutil.move(tmp_path / "page.html", released)

    # in a browser: readable by everyone (axe, light and dark), by keyboard, in the reader's time
    # zone; the feedback page's scripts run (its local time) in a sandbox that cannot reach the server
    with Chromium(timeout=120) as chromium:
        for scheme in ("light", "dark"):
            found = chromium.open(f"{url}?token={token}", color_scheme=scheme, probe=axe.probe()).probe
            assert not axe.serious(found), axe.describe(f"the course page ({scheme})", axe.serious(found))
        # 640 px wide: a 1280 px window at 200 % zoom; nothing to scroll sideways
        opened = chromium.open(f"{url}?token={token}", tabs=8, width=640,
                               screenshot=ARTEFACTS / "course-page-640px.png",
                               probe="({times: [...document.querySelectorAll('time')].map(t => t.textContent),"
                                     " wide: document.documentElement.scrollWidth - window.innerWidth})")
        times = opened.probe["times"]
        assert times and not re.match(r"\d{4}-", times[0]), times  # the script ran
        assert opened.probe["wide"] <= 0, opened.probe
        assert all(f["visible"] for f in opened.focus if f), opened.focus
        reached = {f["text"] for f in opened.focus if f}
        assert {"Skip to the content", "Submit " + TITLE} & reached, reached
        sandboxed = chromium.open(
            requests.compat.urljoin(url, html.unescape(link.group(1))) + f"?token={token}",
            probe="(async () => ({origin: window.origin, note: document.querySelector('.submission-note time')"
                  ".textContent, api: await fetch('/api/contents').then(r => r.status, () => 'blocked')}))()")
        assert sandboxed.probe["origin"] == "null" and sandboxed.probe["api"] == "blocked", sandboxed.probe
        assert not re.match(r"\d{4}-", sandboxed.probe["note"]), sandboxed.probe  # its script ran
        # speech, turned on from MathJax's menu, where the sandbox keeps no setting: every formula spoken
        spoken = chromium.open(requests.compat.urljoin(url, html.unescape(link.group(1))) + f"?token={token}",
                               probe=SPEECH_FROM_MENU)
        assert spoken.probe["formulas"] and spoken.probe["spoken"] == spoken.probe["formulas"], spoken.probe

        # and from JupyterLab, a "Course" menu leads back to the page (and to the book)
        menus = chromium.open(f"{url.removesuffix('course/')}lab?token={token}", probe=LAB_MENUS).probe
        assert menus and "Course" in menus, menus
        settings = session.get(f"{url.removesuffix('course/')}lab/api/settings/@jupyterlab/mainmenu-extension:plugin",
                               timeout=60).json()
        [course_menu] = [m for m in settings["schema"]["properties"]["menus"]["default"] if m["label"] == "Course"]
        assert [(i["args"]["text"], i["args"]["url"]) for i in course_menu["items"]] == [
            ("Your assignments (the course page)", "/hub/user-redirect/course/"),
            ("The course book", "/services/book/")]

        # a student who submits again and keeps the page open: the link comes, and is said, by itself
        assert post(session, url, "submit").status_code == 303
        seen: dict = {}
        watching = threading.Thread(target=lambda: seen.update(page=chromium.open(f"{url}?token={token}",
                                                                                  probe=news(90))))
        watching.start()
        time.sleep(2)  # the page open (a warm browser takes well under a second) before the grading
        assert service.step()
        watching.join()
    assert seen["page"].probe and seen["page"].probe.endswith("is ready."), seen["page"].probe
    assert TITLE in seen["page"].probe and "Feedback on your submission of" in seen["page"].probe


def test_what_happens_next_follows_the_policy():
    due = datetime(2030, 1, 1, 12, tzinfo=timezone.utc)
    before, after = due - timedelta(days=1), due + timedelta(hours=2, minutes=5)
    a = page_module.Assignment("a02", "a02 · Broadcasting", "fetched", due=due)
    latest = page_module.Submission("2030-01-01 14:05:00.000000 UTC", after, True, [("a02", False)])
    older = page_module.Submission("2029-12-31 10:00:00.000000 UTC", before, False, [("a02", False)])
    step = page_module.next_step
    assert "your instructor releases the feedback" in step(a, latest, False, before).lower()  # no service
    a.rules = {"before_due": "full", "on_submit": True}
    assert "graded within about a minute, and a link to its feedback" in step(a, latest, False, before)
    assert step(a, latest, True, before).startswith("Grading is paused by your instructor")
    a.rules = {"before_due": "score", "on_submit": True}
    assert "shows your score" in step(a, latest, False, before)
    assert "a link to its feedback will appear" in step(a, latest, False, after)  # the due date has passed
    a.rules = {"before_due": "none", "on_submit": True}
    assert "its feedback will appear here at the due date" in step(a, latest, False, before)
    assert "A newer submission replaced this one" in step(a, older, False, before)
    a.rules = {"before_due": "full", "on_submit": False}
    assert "your instructor releases the feedback" in step(a, latest, False, before).lower()
    a.rules, latest.held = {"before_due": "score", "per_hour": 2, "on_submit": True}, before + timedelta(minutes=40)
    assert step(a, latest, False, before) == ("Your instructor grades at most 2 of your submissions an hour: this "
                                              "one is graded at")  # the page follows with the time
    assert page_module.duration(after - due) == "2 hours 5 minutes"
    assert page_module.duration(timedelta(days=1, seconds=7)) == "1 day 7 seconds"
    assert page_module.duration(timedelta(seconds=40)) == "40 seconds"


def test_what_is_read_from_the_exchange_is_bounded_and_never_through_a_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text('{"due": "2030-01-01T12:00:00+00:00"}')
    (tmp_path / "link.json").symlink_to(real)
    assert page_module.read_json(real) == {"due": "2030-01-01T12:00:00+00:00"}
    assert page_module.read_json(tmp_path / "link.json") == {}
    (tmp_path / "big.json").write_bytes(b" " * (page_module.MAX_JSON + 1))
    assert page_module.read_json(tmp_path / "big.json") == {}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert page_module.read_json(tmp_path / "list.json") == {}
    os.mkfifo(tmp_path / "fifo.json")
    assert page_module.read_json(tmp_path / "fifo.json") == {}  # not opened for long: no writer, no wait
    assert page_module.parse_time("2026-11-29 05:15:37.285410 UTC") == datetime(2026, 11, 29, 5, 15, 37, 285410,
                                                                                tzinfo=timezone.utc)
    assert page_module.parse_time("yesterday") is None


def test_the_page_imports_nothing_the_students_environment_lacks():
    """The students' servers have the hub's environment only (deploy/requirements-hub.txt): nothing
    of the grader or the reference engine, which they cannot read."""
    import ast

    found = set()
    for path in (STUDENT / "python" / "autograd_course_page").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found.add((node.module or "").split(".")[0])
    assert found and not found & {"autograder", "solutions", "coursekit"}, found
    assert {"jinja2", "jupyter_server", "nbgrader", "tornado"} <= found  # what the hub's environment brings


def rendered(a, s) -> str:
    """The course page with assignment ``a`` and its one submission ``s``, just submitted."""
    s.step = page_module.next_step(a, s, False, s.when)
    a.submissions = [s]
    return page_module._env.get_template("course.html").render(
        course_name="Autograd from Scratch", link=lambda *parts: "/" + "/".join(parts), static="/static/",
        book_url="/services/book/", hub_url=None, logout_url=None, xsrf="", assignments=[a], paused=False,
        message=("submit", a, s), error="")


def test_a_student_over_the_hourly_limit_is_told_when_it_is_graded():
    a = page_module.Assignment("a02_broadcasting", "a02 · Broadcasting", "fetched",
                               rules={"before_due": "full", "per_hour": 1, "on_submit": True})
    s = page_module.Submission("2026-11-02 19:30:00.000000 UTC", datetime(2026, 11, 2, 19, 30, tzinfo=timezone.utc),
                               True, [("a02_broadcasting", False)],
                               held=datetime(2026, 11, 2, 20, 12, tzinfo=timezone.utc))
    shown = rendered(a, s)
    said = "Your instructor grades at most 1 of your submissions an hour: this one is graded at 2026-11-02 20:12 UTC."
    assert visible(shown).count(said) == 2, visible(shown)  # in the news of the submit, and under the submission
    assert '<time datetime="2026-11-02T20:12:00+00:00">' in shown  # in the reader's time zone, by the page's script
    assert "within about a minute" not in visible(shown)


def test_a_late_submission_is_told_by_how_much_when_it_arrives():
    due = datetime(2026, 11, 1, 17, tzinfo=timezone.utc)
    a = page_module.Assignment("a02_broadcasting", "a02 · Broadcasting", "fetched", due=due,
                               rules={"before_due": "full", "on_submit": True})
    s = page_module.Submission("2026-11-02 19:30:00.000000 UTC", due + timedelta(days=1, hours=2, minutes=30), True,
                               [("a02_broadcasting", False)], late_by=timedelta(days=1, hours=2, minutes=30))
    shown = visible(rendered(a, s))
    assert "Your submission of a02 · Broadcasting arrived at 2026-11-02 19:30 UTC. It is 1 day 2 hours after your " \
           "due date." in shown, shown
    assert "It was 1 day 2 hours after your due date." in shown
    assert "a02_broadcasting" not in shown


@pytest.mark.slow
def test_what_the_service_publishes_never_stops_its_grading(course, capsys):
    with open(course.root / "nbgrader_config.py", "a") as config:
        config.write('\nc.FeedbackService.policy = {"a00_toy": {"before_due": "all of it"}}\n')
    service = Service(course)
    service.poll()
    assert '"assignments": {}' in (Path(service.root) / STUDENT_VIEW).read_text()  # nothing wrong said
    (Path(service.root) / STUDENT_VIEW).unlink()
    (Path(service.root) / STUDENT_VIEW).mkdir()  # cannot be written
    service.poll()
    service.poll()
    err = capsys.readouterr().err
    assert err.count("the students' course page is not up to date") == 1, err


def test_an_assignment_is_named_by_its_notebooks_first_heading_after_the_due_date_cell(tmp_path):
    """`release --due` puts a cell stating the due date first: the title is still the heading."""
    nb = {"cells": [{"cell_type": "markdown", "source": "**Due Tuesday 2026-12-01 16:00 UTC.** Hand in before then."},
                    {"cell_type": "code", "source": "# not a heading"},
                    {"cell_type": "markdown", "source": ["Intro\n", "# a01 · Graphs and backpropagation\n"]}]}
    path = tmp_path / "a01_graphs.ipynb"
    path.write_text(json.dumps(nb))
    assert page_module.notebook_title(path) == "a01 · Graphs and backpropagation"
    path.write_text(json.dumps({"cells": [nb["cells"][0]]}))
    assert page_module.notebook_title(path) is None  # and the page shows the folder's name then
