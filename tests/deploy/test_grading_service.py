"""Feedback on submit on the class's hub: the grading service as deploy/ starts it (a JupyterHub
managed service of the instructor's course, as the instructor), driven by students over HTTP
through the Assignments tab's API. No instructor command after the release, but the policy's
(the course's nbgrader_config.py) and a due date's (a re-release with --due, as deploy/README.md says).

One hub for the module: a01 has the default policy (the full page on submit), a02 the score only
and at most one graded submission an hour, a03 nothing until the due date."""
from __future__ import annotations

import bisect
import html
import json
import os
import re
import signal
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pytest

from autograder.course import notebook

from support import ARTEFACTS, axe
from support.browser import LAB_MENUS, Chromium, news
from support.hub import COURSE, GRADER, PREFIX, REPO, Browser, answered, as_user
from support.words import visible

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]
HUB_ENV = {"AUTOGRAD_GRADING_SERVICE": "{instructor}", "AUTOGRAD_GRADING_JOBS": "1"}
ASSIGNMENT = "a01_graphs"
SCORE_ONLY, WITHHELD = "a02_broadcasting", "a03_im2col"
POLICY = {SCORE_ONLY: {"before_due": "score", "per_hour": 1}, WITHHELD: {"before_due": "none"}}
HIDDEN = "judged outside the notebook"  # the text of every hidden test cell (its checks run outside)
NOTEBOOK_SHOWN = 'id="notebook-container"'  # the full page shows the student's notebook (by_exercise.html.j2)


def source(assignment: str) -> dict:
    return json.loads((REPO / "assignments" / "source" / assignment / f"{assignment}.ipynb").read_text())


def home(user: str) -> Path:
    return Path(os.path.expanduser(f"~{user}"))


def the_service(course: Path) -> psutil.Process:
    found = [p for p in psutil.process_iter(["cmdline", "username"])
             if "serve" in (p.info["cmdline"] or []) and str(course) in (p.info["cmdline"] or [])
             and "-m" in (p.info["cmdline"] or [])]
    assert len(found) == 1, found
    return found[0]


def fetched_feedback(student: Browser, assignment: str = ASSIGNMENT) -> list[str]:
    """The student's Fetch Feedback: the submissions (their times) whose pages are in their folder."""
    student.assignments("fetch_feedback", assignment_id=assignment)
    listing = student.server(f"api/contents/{assignment}/feedback")
    if listing.status_code != 200:
        return []
    return sorted(item["name"] for item in listing.json()["content"] if item["type"] == "directory")


def feedback_of(student: Browser, timeout: float = 900, assignment: str = ASSIGNMENT) -> str:
    """The student's Fetch Feedback, pressed until a page comes (the service grades meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stamps = fetched_feedback(student, assignment)
        if stamps:
            page = student.server(f"api/contents/{assignment}/feedback/{stamps[-1]}/{assignment}.html",
                                  params={"content": "1", "format": "text", "type": "file"})
            assert page.status_code == 200, page.text[:300]
            return page.json()["content"]
        time.sleep(2)
    raise AssertionError(f"{student.user}: no feedback after {timeout} s")


def release(hub, assignment: str = ASSIGNMENT, due: str | None = None) -> Path:
    """The instructor's release of ``assignment`` to the hub's exchange (once per hub, or again to
    move its due date); their course folder."""
    course = home(hub.instructor) / "course"
    if due or not (hub.exchange / COURSE / "outbound" / assignment).is_dir():
        done = as_user(hub.instructor, GRADER, "--course", course, "release", assignment, "--exchange",
                       hub.exchange, *(["--due", due] if due else []), timeout=1800)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return course


def work(student: Browser, assignment: str = ASSIGNMENT, attempt: int = 0) -> None:
    """The fetched notebook, answered and saved, as the student does it in JupyterLab (``attempt``:
    a comment of that number in an answer, so each attempt is a notebook of its own)."""
    path = f"api/contents/{assignment}/{assignment}.ipynb"
    nb = answered(student.server(path).json()["content"], source(assignment))
    if attempt:
        cell = next(c for c in nb["cells"] if notebook.is_answer(c) and c["cell_type"] == "code")
        cell["source"] += f"\n# attempt {attempt}"
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
    with Chromium(timeout=660) as chromium:  # the last look waits for a grading
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
        # a student who submits again and keeps the page open: the link comes by itself, through the
        # hub (the page's own request, which the hub answers only with the page's _xsrf token)
        assert c.server("course/submit", "POST", data={"assignment": ASSIGNMENT}).status_code == 303
        waited = chromium.open(course_page, probe=news(600))
        assert waited.probe.endswith("is ready.") and "a01 · Graphs and backpropagation" in waited.probe, waited.probe




# -- the instructor's policy, and a student resubmitting in a loop ----------------------------------

def service_state(hub) -> dict:
    """The service's state as the instructor reads it (.autograder/serve/state.json): per
    ``assignment/student`` what became of them, and the gradings in order (``history``)."""
    done = as_user(hub.instructor, "cat", home(hub.instructor) / "course" / ".autograder" / "serve" / "state.json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def until(hub, what: str, test, timeout: float = 900) -> dict:
    """The service's state once ``test(state)`` holds (the service grades meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = service_state(hub)
        if test(state):
            return state
        time.sleep(1)
    raise AssertionError(f"the service's state after {timeout} s is not {what}: {json.dumps(state)[-3000:]}")


def gradings(state: dict, assignment: str, student: str) -> list[str]:
    """The submissions (their times) the service graded for the student, in order."""
    return [stamp for a, s, stamp, _ in state["history"] if (a, s) == (assignment, student)]


def submissions(student: Browser, assignment: str) -> list[str]:
    """The times of the student's submissions, as their Assignments tab lists them, oldest first."""
    listing = student.assignments()["value"]
    return sorted(s["timestamp"] for entry in listing if entry["assignment_id"] == assignment
                  and entry["status"] == "submitted" for s in entry["submissions"])


def ready(hub, user: str, assignment: str, attempt: int = 0) -> Browser:
    """The student on their server, ``assignment`` fetched and answered (``work``'s ``attempt``), as an
    earlier test may have left them."""
    student = Browser(hub, user)
    student.spawn()
    if student.server(f"api/contents/{assignment}").status_code == 404:
        student.assignments("fetch", assignment_id=assignment)
    work(student, assignment, attempt)
    return student


def said_of(student: Browser, assignment: str) -> str:
    """What the student's course page says of their submissions of ``assignment`` (the latest first), in words."""
    shown = student.server("course/")
    assert shown.status_code == 200, shown.text[-2000:]
    section = shown.text.split(f'id="submissions-{assignment}"', 1)[1].split(">", 1)[1]
    return visible(section.split("</div>", 1)[0])


@pytest.fixture(scope="module")
def policies(hub):
    """The instructor's policy in their course's nbgrader_config.py, as deploy/README.md shows it,
    and a02 and a03 released with a due date tomorrow."""
    course = home(hub.instructor) / "course"
    text = f"\nc.FeedbackService.policy = {POLICY!r}\n"
    done = as_user(hub.instructor, "tee", "-a", course / "nbgrader_config.py", input=text)
    assert done.returncode == 0, done.stderr
    tomorrow = f"{datetime.now(timezone.utc) + timedelta(days=1):%Y-%m-%d %H:%M:%S}"
    for assignment in POLICY:
        release(hub, assignment, due=tomorrow)
    return course


def test_the_score_only_before_the_due_date_and_at_most_one_graded_submission_an_hour(hub, policies):
    a = ready(hub, hub.students[0], SCORE_ONLY)
    a.assignments("submit", assignment_id=SCORE_ONLY)
    page = feedback_of(a, assignment=SCORE_ONLY)
    assert re.search(r"Score: [\d.]+ out of [\d.]+ \(the hidden tests are counted, not shown", page), page[-3000:]
    assert "<td>passed</td>" in page and "This feedback is about your submission of" in page
    assert HIDDEN not in page and NOTEBOOK_SHOWN not in page  # nor the notebook, nor the judge's messages
    assert "Until the due date this feedback shows your score" in said_of(a, SCORE_ONLY)
    first = until(hub, "a02 graded once", lambda s: len(gradings(s, SCORE_ONLY, a.user)) == 1)

    # a second submission within the hour: not graded now; the instructor's status says when it is
    a.assignments("submit", assignment_id=SCORE_ONLY)
    latest = submissions(a, SCORE_ONLY)[-1]
    graded_at = datetime.fromisoformat(first["students"][f"{SCORE_ONLY}/{a.user}"]["graded_at"][0])
    when = f"next at {graded_at + timedelta(hours=1):%H:%M} UTC"
    held = until(hub, "a02's second submission held", lambda s: when in s["students"][f"{SCORE_ONLY}/{a.user}"]
                 .get("detail", ""), timeout=300)
    assert held["students"][f"{SCORE_ONLY}/{a.user}"]["status"] == "waiting"
    status = as_user(hub.instructor, GRADER, "--course", policies, "serve", "--status")
    row = next(line for line in status.stdout.splitlines() if line.startswith(SCORE_ONLY) and a.user in line)
    assert "waiting" in row and f"at most 1 graded submissions an hour: {when}" in row, status.stdout
    assert len(gradings(service_state(hub), SCORE_ONLY, a.user)) == 1
    assert latest not in fetched_feedback(a, SCORE_ONLY) and len(fetched_feedback(a, SCORE_ONLY)) == 1
    # and the student's course page says when, not "within about a minute"
    said = said_of(a, SCORE_ONLY)
    assert (f"Your instructor grades at most 1 of your submissions an hour: this one is graded at "
            f"{graded_at + timedelta(hours=1):%Y-%m-%d %H:%M} UTC.") in said and "about a minute" not in said, said


def test_nothing_before_the_due_date_then_the_full_page_graded_once(hub, policies):
    b = ready(hub, hub.students[1], WITHHELD)
    b.assignments("submit", assignment_id=WITHHELD)
    key = f"{WITHHELD}/{b.user}"
    until(hub, "a03 graded and withheld", lambda s: s["students"].get(key, {}).get("withheld"))
    assert fetched_feedback(b, WITHHELD) == []
    assert "It is graded, and its feedback will appear here at the due date." in said_of(b, WITHHELD)

    # the due date moved to now (a re-release with --due): the full page, graded nothing again
    release(hub, WITHHELD, due=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S}")
    page = feedback_of(b, assignment=WITHHELD)
    assert "This feedback is about your submission of" in page and HIDDEN not in page
    assert NOTEBOOK_SHOWN in page and 'class="feedback-title"' in page, page[-3000:]
    [made], [graded] = submissions(b, WITHHELD), gradings(service_state(hub), WITHHELD, b.user)
    assert graded >= made  # once, that one (its time as collected: its files' last change, after nbgrader's)
    assert "Feedback on your submission of" in said_of(b, WITHHELD)


def test_a_student_resubmitting_in_a_loop_delays_no_one(hub):
    """The looper edits and submits a01 12 times as fast as the hub takes them; the other submits once, just
    after the looper's first is taken for grading (one worker). The other is graded before any of
    the looper's later submissions, the looper's queued older ones are replaced, not graded, and
    each one's final submission is graded exactly once into the gradebook."""
    release(hub)
    # a notebook of their own each (an earlier test's may be theirs already)
    looper, other = ready(hub, hub.students[0], ASSIGNMENT, 100), ready(hub, hub.students[2], ASSIGNMENT, 100)
    before = len(service_state(hub)["history"])
    looper.assignments("submit", assignment_id=ASSIGNMENT)
    first = submissions(looper, ASSIGNMENT)[-1]
    collected = home(hub.instructor) / "course" / "submitted" / looper.user / ASSIGNMENT / "timestamp.txt"
    deadline = time.monotonic() + 900
    while as_user(hub.instructor, "cat", collected).stdout.strip() < first:  # the first taken for grading
        assert time.monotonic() < deadline, "the looper's first submission not collected after 900 s"
        time.sleep(0.5)
    other.assignments("submit", assignment_id=ASSIGNMENT)
    for attempt in range(1, 12):  # each a notebook of its own: the same one again is not graded again
        work(looper, ASSIGNMENT, attempt)
        looper.assignments("submit", assignment_id=ASSIGNMENT)
    mine, theirs = submissions(looper, ASSIGNMENT)[-12:], submissions(other, ASSIGNMENT)[-1]
    state = until(hub, "both final submissions graded", lambda s: all(
        s["students"][f"{ASSIGNMENT}/{who.user}"]["status"] == "done"
        and s["students"][f"{ASSIGNMENT}/{who.user}"].get("submission", "") >= last
        for who, last in ((looper, mine[-1]), (other, theirs))))

    # a graded submission's time is when its files last changed in the exchange (collect's, which no
    # student can set): after nbgrader's time of that submission, before the next one's
    order = [(student, stamp) for a, student, stamp, _ in state["history"][before:] if a == ASSIGNMENT]
    graded = [(student, bisect.bisect_right(mine if student == looper.user else [theirs], stamp) - 1)
              for student, stamp in order]
    assert graded.count((other.user, 0)) == 1 and len(graded) == len(set(graded)), order  # each once
    assert graded.index((other.user, 0)) < min(graded.index(g) for g in graded if g[0] == looper.user and g[1] > 0)
    looped = [k for who, k in graded if who == looper.user]
    assert looped[-1] == len(mine) - 1 and len(looped) <= len(mine) // 2, order  # latest-wins: most never graded
    recorded = as_user(hub.instructor, PREFIX / "venv" / "bin" / "python", "-c", GRADEBOOK_TIMES,
                       home(hub.instructor) / "course" / "gradebook.db", ASSIGNMENT)
    assert recorded.returncode == 0, recorded.stderr
    times = json.loads(recorded.stdout)
    finals = {who: stamp for who, stamp in order}  # each one's last grading
    assert {who: times[who] for who in finals} == {who: stamp[:26] for who, stamp in finals.items()}, (times, order)


# The gradebook's submission times of an assignment, read by the instructor with nbgrader's own API
GRADEBOOK_TIMES = """import json, sys
from nbgrader.api import Gradebook
with Gradebook(f"sqlite:///{sys.argv[1]}") as gb:
    print(json.dumps({s.student.id: f"{s.timestamp:%Y-%m-%d %H:%M:%S.%f}" for s in
                      gb.find_assignment(sys.argv[2]).submissions}))
"""
