"""A semester on the class's hub, as its people live it: the instructor releases a01 to a06 with a
due date, three students fetch them into their homes through the Assignments tab's API, answer
(A everything, B part of it, C everything but after the due date), run a chapter in their own
assignment folder, submit; the instructor collects, grades, grades a written answer by hand in
the formgrader in a real browser, returns feedback through the exchange; each student fetches
it and the page, opened in Chromium, shows its math typeset with nothing loaded from outside
the machine; the grades leave as grades.csv and the Canvas and Moodle import files.

The hub is tests/test_hub.py's (its fixture: system users of its own, removed at the end, every
process stopped by its id). Grading is kept to what the semester needs to show (every student
fetches all six): a01 for all three, the capstone a06 for A. The due date is set at release a few
minutes ahead; the grading of A and B fills the wait before C submits.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pytest
import requests
from test_chapters import coursekit_book, textwrap_indent
from test_hub import (
    COURSE,
    REPO,
    Browser,
    Hub,
    autograder,
    hub,  # noqa: F401 (the fixture: this module gets a hub of its own)
    user_memory,
)

from autograder.course import Course

from autograder_support import answered
from browser import Chromium

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

SOURCE = REPO / "assignments" / "source"
# The semester of the issue: a01 to a06 (an assignment still being written in the working tree,
# copied into the instructor's course by `deploy/hub.py users`, is taken out of this course).
ASSIGNMENTS = sorted(p.name for p in SOURCE.iterdir() if re.match(r"a0[1-6]_", p.name))
GRADED = ["a01_graphs"]  # for all three; the capstone for A alone
CAPSTONE = ASSIGNMENTS[-1]
CHAPTER = "01_graphs"  # run by each student in a01_graphs/, the folder the book pairs it with
WRITTEN = {"a01-diamond-written": 2, "a01-accumulate-written": 1}  # what the instructor gives A by hand
# Long enough for the release of six assignments and A's and B's fetch and submit on a busy
# 2-core machine; what is left of it goes to grading A and B.
DUE_IN = timedelta(minutes=7)
VENV = Path(os.environ.get("AUTOGRAD_HUB_PREFIX", "/opt/autograd-hub")) / "venv"


def home(user: str) -> Path:
    return Path(os.path.expanduser(f"~{user}"))


def cli(course: Path, *args: str) -> str:
    done = autograder("--course", str(course), *args)
    assert done.returncode == 0, f"autograder {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def run_chapter(student: Browser) -> tuple[int, str, dict | None]:
    """The chapter's notebook downloaded into the student's a01_graphs/ (through their server)
    and run there as the student, with the hub's environment, as their own kernel would; the
    cells that show an error on purpose print it. Returns the exit code, the run's log and the
    executed notebook (None if a cell failed)."""
    notebook = f"a01_graphs/{CHAPTER}.ipynb"
    chapter = coursekit_book.chapter_notebook(REPO / "book" / f"{CHAPTER}.md")
    for cell in chapter.cells:
        if "raises-exception" in cell.get("metadata", {}).get("tags", []):
            cell.source = f"try:\n{textwrap_indent(cell.source)}\nexcept Exception as error:\n    print(error)"
    put = student.server(f"api/contents/{notebook}", "PUT", json={"type": "notebook", "content": chapter})
    assert put.status_code in (200, 201), put.text[:300]
    folder = home(student.user) / "a01_graphs"
    log = folder.parent / f".{CHAPTER}-run.log"
    with log.open("w") as stderr:
        run = subprocess.Popen(
            ["runuser", "-u", student.user, "--", "env", f"HOME={home(student.user)}", str(VENV / "bin" / "jupyter"),
             "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=600",
             "--output", f"{CHAPTER}-run.ipynb", f"{CHAPTER}.ipynb"],
            cwd=folder, stdout=subprocess.DEVNULL, stderr=stderr)
        peak = 0
        while run.poll() is None:  # the kernel's resident memory, sampled while the chapter runs
            peak = max(peak, kernel_memory(student.user))
            time.sleep(0.5)
    KERNEL_PEAK[student.user] = peak
    executed = folder / f"{CHAPTER}-run.ipynb"
    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())  # the traceback's terminal colours
    return run.returncode, text, json.loads(executed.read_text()) if run.returncode == 0 else None


KERNEL_PEAK: dict[str, int] = {}


def kernel_memory(user: str) -> int:
    total = 0
    for p in psutil.process_iter(["username", "cmdline", "memory_info"]):
        if p.info["username"] == user and p.info["memory_info"] is not None \
                and "ipykernel_launcher" in " ".join(p.info["cmdline"] or []):
            total += p.info["memory_info"].rss
    return total


class Tab:
    """One page in a browser context of its own (its own cookies): a person at their browser."""

    def __init__(self, chromium: Chromium, base: str):
        self.c, self.base = chromium, base
        context = chromium._call("Target.createBrowserContext")["browserContextId"]
        target = chromium._call("Target.createTarget", url="about:blank", browserContextId=context)["targetId"]
        self.session = chromium._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            chromium._call(f"{domain}.enable", session=self.session)

    def go(self, path: str) -> None:
        navigation = self.c._call("Page.navigate", session=self.session, url=self.base + path)
        assert "errorText" not in navigation, f"{path}: {navigation['errorText']}"

    def js(self, expression: str):
        reply = self.c._call("Runtime.evaluate", session=self.session, expression=expression, awaitPromise=True,
                             returnByValue=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:80]}: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def until(self, expression: str, what: str, timeout: float = 120):
        """The expression's value once it is truthy in the page (which may still be loading)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.js(f"document.readyState === 'complete' && !!({expression})")
            except RuntimeError:  # the page changed under the evaluation (a redirect, a click)
                value = None
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"{what}: not there after {timeout:.0f} s (at {self.js('location.href')})")

    def click(self, selector: str, what: str) -> None:
        self.until(f"document.querySelector({json.dumps(selector)})", what)
        self.js(f"document.querySelector({json.dumps(selector)}).click()")

    def log_in(self, user: str, password: str) -> None:
        """The hub's login form, filled in and sent."""
        self.go("/hub/login?next=%2Fhub%2Fhome")
        self.until("document.querySelector('#username_input')", "the login form")
        self.js(f"document.querySelector('#username_input').value = {json.dumps(user)};"
                f"document.querySelector('#password_input').value = {json.dumps(password)};"
                "document.querySelector('#login_submit').click()")
        self.until("!location.pathname.startsWith('/hub/login')", f"{user} logged in")

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.c._events
                if e.get("sessionId") == self.session and e["method"] == "Network.requestWillBeSent"]


def grade_by_hand(chromium: Chromium, site: Hub, student: str, scores: dict[str, int]) -> None:
    """The instructor, in the formgrader: Manage Students, the student, a01, the notebook; a score
    typed into each written answer's box and saved (the box saves itself when it loses focus)."""
    tab = Tab(chromium, site.base)
    tab.log_in(site.instructor, site.passwords[site.instructor])
    prefix = f"/user/{site.instructor}/formgrader"
    tab.go(prefix)
    tab.click(f'a[href$="{prefix}/manage_students"]', "the formgrader's Manage Students link")
    tab.click(f'a[href$="{prefix}/manage_students/{student}"]', f"{student} in the students' list")
    tab.click(f'a[href$="{prefix}/manage_students/{student}/a01_graphs"]', f"a01 among {student}'s assignments")
    tab.click(f'a[href*="{prefix}/submissions/"]', f"{student}'s a01 notebook")
    for grade_id, score in scores.items():
        box = f"document.getElementById({json.dumps(grade_id)}).closest('.nbgrader_cell').querySelector('.score')"
        tab.until(f"document.getElementById({json.dumps(grade_id)}) && {box}", f"the score box of {grade_id}")
        tab.until(f"{box}.classList.contains('needs_manual_grade')", f"{grade_id} waiting for a grade")
        tab.js(f"{box}.focus()")
        chromium._call("Input.insertText", session=tab.session, text=str(score))
        tab.js(f"{box}.blur()")
        tab.until(f"!{box}.classList.contains('needs_manual_grade') && {box}.value === '{score}'",
                  f"{grade_id} saved with {score}")


def feedback_page(chromium: Chromium, site: Hub, student: Browser) -> dict:
    """The student's fetched feedback page, opened from their server in their browser, once
    MathJax has typeset it: what it shows and what it asked the network for."""
    listing = student.server("api/contents/a01_graphs/feedback").json()
    [stamp] = [item["name"] for item in listing["content"] if item["type"] == "directory"]
    tab = Tab(chromium, site.base)
    tab.log_in(student.user, site.passwords[student.user])
    tab.go(f"/user/{student.user}/files/a01_graphs/feedback/{stamp}/a01_graphs.html")
    tab.until("window.MathJax && MathJax.startup && MathJax.startup.promise", "MathJax in the page")
    tab.js("MathJax.startup.promise")
    shown = tab.js("""({
        typeset: document.querySelectorAll('mjx-container').length,
        prose: [...document.querySelectorAll('.text_cell_render, .jp-RenderedMarkdown')]
            .map(e => e.innerText).join('\\n'),
        title: document.title,
    })""")
    shown["requests"] = tab.requests()
    return shown


def test_a_semester_on_the_hub(hub, tmp_path, capsys):  # noqa: F811 (hub: the fixture imported above)
    started = time.monotonic()
    people = {user: Browser(hub, user) for user in [hub.instructor, *hub.students]}
    spawn = {user: b.spawn() for user, b in people.items()}
    a, b, c = (people[s] for s in hub.students)
    idle = {s: user_memory(s) for s in hub.students}
    course = home(hub.instructor) / "course"
    exchange = str(hub.exchange)
    for other in (course / "source").iterdir():
        if other.name not in ASSIGNMENTS:
            shutil.rmtree(other)

    # The instructor releases the six assignments, due a few minutes from now.
    due = datetime.now(timezone.utc).replace(microsecond=0) + DUE_IN
    release = time.monotonic()
    out = cli(course, "release", "--all", "--exchange", exchange, "--due", f"{due:%Y-%m-%d %H:%M:%S}")
    release = time.monotonic() - release
    assert out.count("published to the nbgrader exchange") == len(ASSIGNMENTS), out

    # Each student sees the six and fetches them into their home.
    for student in (a, b, c):
        listed = student.assignments()["value"]
        assert sorted(x["assignment_id"] for x in listed if x["status"] == "released") == ASSIGNMENTS
        for assignment in ASSIGNMENTS:
            student.assignments("fetch", assignment_id=assignment)
        assert sorted(p.name for p in home(student.user).iterdir() if p.name in ASSIGNMENTS) == ASSIGNMENTS

    def write(student: Browser, assignment: str, share: float) -> None:
        path = f"api/contents/{assignment}/{assignment}.ipynb"
        fetched = student.server(path).json()["content"]
        source = json.loads((SOURCE / assignment / f"{assignment}.ipynb").read_text())
        put = student.server(path, "PUT", json={"type": "notebook", "content": answered(fetched, source, share)})
        assert put.status_code == 200, put.text[:300]

    # A and C answer everything (a chapter runs on the whole engine: chapter 1 already multiplies,
    # which a02 builds), B half of a01.
    for assignment in ASSIGNMENTS:
        write(a, assignment, 1.0)
        write(c, assignment, 1.0)
    for assignment in GRADED:
        write(b, assignment, 0.5)
    for assignment in GRADED:
        a.assignments("submit", assignment_id=assignment)
        b.assignments("submit", assignment_id=assignment)
    a.assignments("submit", assignment_id=CAPSTONE)
    assert datetime.now(timezone.utc) < due, "A and B submitted after the due date: the release took too long"

    # Each runs the chapter in their own a01_graphs/, as themselves: A's and C's answers are in the
    # engine; B's run stops at the first exercise B has not done, and names it.
    for student in (a, c):
        code, log, run = run_chapter(student)
        assert code == 0 and run is not None, log[-3000:]
        loaded = "".join("".join(o.get("text", "")) for o in run["cells"][1]["outputs"]
                         if o["output_type"] == "stream")  # a stream's text is a list of lines in the file
        assert re.match(r"coursekit: \d+ of your answers from your notebooks are in the engine$", loaded.strip()), \
            loaded
    code, log, _ = run_chapter(b)
    assert code != 0 and re.search(r"NotImplementedError: exercise a0\d-[\w-]+: implement ", log), log[-3000:]

    # A's session and A's own API token open nothing of B's: not the server, not the files.
    token = a.s.post(f"{hub.base}/hub/api/users/{a.user}/tokens", headers=a.headers(), timeout=30,
                     json={"note": "semester test"}).json()["token"]
    for path in ("api/contents/a01_graphs/a01_graphs.ipynb", "files/a01_graphs/a01_graphs.ipynb", "lab"):
        assert a.server(path, owner=b.user, allow_redirects=True).status_code in (403, 404), path
        answer = requests.get(f"{hub.base}/user/{b.user}/{path}", headers={"Authorization": f"token {token}"},
                              timeout=60, allow_redirects=False)
        assert answer.status_code in (403, 404), (path, answer.status_code)
    assert requests.get(f"{hub.base}/user/{a.user}/api/contents", headers={"Authorization": f"token {token}"},
                        timeout=60).status_code == 200  # the token itself works, on A's own server
    peek = subprocess.run(["runuser", "-u", a.user, "--", "cat", str(home(b.user) / "a01_graphs" / "a01_graphs.ipynb")],
                          capture_output=True, text=True)
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    # ... and no student lists another's submission: not in the exchange, not through the tab.
    inbound = hub.exchange / COURSE / "inbound"
    peek = subprocess.run(["runuser", "-u", a.user, "--", "ls", str(inbound)], capture_output=True, text=True)
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    for student in (a, b):
        listed = student.assignments()["value"]
        owners = {s["student_id"] for x in listed if x["status"] == "submitted" for s in x.get("submissions", [x])}
        assert owners == {student.user}, listed
    # The formgrader is the instructor's alone; homes are private.
    assert a.server("formgrader").status_code == 404
    assert people[hub.instructor].server("formgrader", allow_redirects=True).status_code == 200
    assert all(home(s).stat().st_mode & 0o077 == 0 for s in hub.students)

    # While C is still working: collect, grade A's capstone and A's and B's a01.
    for assignment in [*GRADED, CAPSTONE]:
        cli(course, "collect", assignment, "--exchange", exchange)
    graded = time.monotonic()
    cli(course, "grade", CAPSTONE, "--jobs", "1")
    for assignment in GRADED:
        cli(course, "grade", assignment, "--jobs", "1")
    grading = time.monotonic() - graded

    # C submits after the due date.
    time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds() + 1))
    for assignment in GRADED:
        c.assignments("submit", assignment_id=assignment)
        cli(course, "collect", assignment, "--exchange", exchange)
        cli(course, "grade", assignment, "--jobs", "1", "--students", c.user)

    # The written answers, graded by hand in the formgrader (as the instructor, who owns the course:
    # the commands run as root gave back every file they made in it, the gradebook included).
    owner = course.stat().st_uid
    assert owner != 0
    left = [str(p) for p in [course, *course.rglob("*")] if p.lstat().st_uid != owner]
    assert not left, f"files of the instructor's course left to another owner: {left[:5]}"
    with Chromium() as chromium:
        grade_by_hand(chromium, hub, a.user, WRITTEN)

        # Feedback back through the exchange; each student's Fetch Feedback, and the page in their browser.
        out = cli(course, "feedback", "a01_graphs", "--exchange", exchange)
        assert "feedback released to the nbgrader exchange" in out
        for student in (a, b, c):
            student.assignments("fetch_feedback", assignment_id="a01_graphs")
            page = feedback_page(chromium, hub, student)
            assert page["typeset"] > 10 and len(page["prose"]) > 1000, (page["typeset"], page["prose"][:300])
            assert not re.search(r"\$[^$\n]+\$|\\\(|\\\[|\\begin\{", page["prose"]), page["prose"][:2000]
            outside = [u for u in page["requests"] if not u.startswith((f"{hub.base}/", "data:", "blob:", "about:"))]
            assert not outside, outside

    # Grades leave: grades.csv with the written scores and C's lateness, and the LMS files.
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email,canvas_id\n" + "".join(
        f"{s},{s.upper()},Student,{s}@example.edu,{1000 + k}\n" for k, s in enumerate(hub.students)))
    cli(course, "students", "import", str(roster))
    cli(course, "report", "a01_graphs")
    reports = course / "reports" / "a01_graphs"
    with (reports / "grades.csv").open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(hub.students)
    for grade_id, score in WRITTEN.items():
        assert float(rows[a.user][f"written:{grade_id.removesuffix('-written')}"]) == score, rows[a.user]
    assert rows[a.user]["status"] == "graded", rows[a.user]
    assert float(rows[b.user]["raw_score"]) < float(rows[a.user]["raw_score"]) - sum(WRITTEN.values())
    with Course.open(course).gradebook() as gb:
        late = {s: gb.find_submission("a01_graphs", s).total_seconds_late for s in hub.students}
    assert late[a.user] == late[b.user] == 0 and late[c.user] > 0, late
    with (reports / "canvas_grades.csv").open() as f:
        canvas = {row["ID"]: row for row in csv.DictReader(f)}
    assert float(canvas["1000"]["a01_graphs"]) == float(rows[a.user]["score"]), canvas
    with (reports / "moodle_grades.csv").open() as f:
        moodle = {row["Email address"]: row for row in csv.DictReader(f)}
    assert float(moodle[f"{a.user}@example.edu"]["a01_graphs"]) == float(rows[a.user]["score"]), moodle
    # B and C wait for their written answers: no number reaches the LMS before they are graded
    assert canvas["1001"]["a01_graphs"] == canvas["1002"]["a01_graphs"] == "", canvas

    whole = time.monotonic() - started
    with capsys.disabled():
        print(f"\nsemester: hub started in {hub.start_time:.1f} s; spawns "
              f"{', '.join(f'{s:.1f}' for s in spawn.values())} s; idle student server "
              f"{min(idle.values()) / 2**20:.0f}-{max(idle.values()) / 2**20:.0f} MiB; a kernel running chapter 1 "
              f"peaks at {max(KERNEL_PEAK.values()) / 2**20:.0f} MiB; release --all {release:.0f} s; "
              f"grading A's a06 and A's and B's a01 {grading:.0f} s; whole test {whole:.0f} s")
