"""The first hour on the class's hub, as a new instructor and a new student meet it (issue 39).

The instructor, in Chromium: every command deploy/README.md gives them (its blocks marked
`instructor`, tests/support/readme.py), typed as keystrokes into a terminal opened from the Launcher
of their own JupyterLab, as written (the README's example students are this hub's), in the README's
order, the first that needs a submission after the student's; each one's exit status read from the
terminal (`echo "done-N $?"` typed after it) and what it did checked on the hub (published,
collected, graded, feedback released, the roster imported, the report written, ...): the grader is on
their PATH and `$AUTOGRAD_EXCHANGE` is this hub's exchange. Their formgrader shows only what the
course supports. The student, in Chromium: the login page names the course and says which account
to use; JupyterLab's title names it too, no news toast, nothing asked of the network; the assignment
fetched by mouse in nbgrader's Assignments tab shows in the file browser at once (the course's lab
extension, not the file browser's 10 s poll); the notebook opens unmodified; its chapter link opens
the chapter from the hub's book; the hidden-test cell says in words what it is; the work is
submitted. Screenshots of each step and of the terminal after each command are kept in
_build/test-artefacts/first-hour/ (git-ignored).
"""
from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import time
from pathlib import Path

import pytest
import requests
import websocket

from support import ARTEFACTS, axe
from support.browser import Chromium, Tab
from support.hub import COURSE, FORMGRADER_TABLE, GRADER, REPO, Browser, dask_cluster
from support.readme import commands

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

SHOTS = ARTEFACTS / "first-hour"
TITLE = runpy.run_path(str(REPO / "deploy" / "hub.py"))["course_title"]()
ASSIGNMENT = "a01_graphs"
CHAPTER = REPO / "book" / "01_graphs.md"


# The students the README's examples name, played by the hub's first two (the README says so).
EXAMPLE_STUDENTS = ("alice", "bob")
TERMINAL_TIMEOUT = 900  # release --all builds and scans seven kits: a minute idle, several under load


class LabTerminal:
    """A terminal of the person's own JupyterLab, opened from its Launcher in Chromium and typed into
    as keystrokes (xterm.js reads them from its text area, as from a keyboard). What the terminal
    prints is read from its websocket: the server sends every byte of a named terminal to each of its
    clients, the page's xterm.js and this one alike (the page draws it on a canvas, not as text)."""

    def __init__(self, tab: Tab, person: Browser):
        self.tab, self.person, self.out = tab, person, ""
        before = {t["name"] for t in person.server("api/terminals").json()}
        tab.click(".jp-LauncherCard[title^='Start a new terminal']", "the Launcher's Terminal")
        tab.until("document.querySelector('.jp-Terminal .xterm-helper-textarea')", "the terminal", timeout=120)
        for _ in range(300):
            names = {t["name"] for t in person.server("api/terminals").json()} - before
            if names:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("no terminal was started by the Launcher")
        self.name = names.pop()
        cookies = "; ".join(f"{c.name}={c.value}" for c in person.s.cookies)
        self.ws = websocket.create_connection(
            f"ws://127.0.0.1:{person.hub.port}/user/{person.user}/terminals/websocket/{self.name}",
            cookie=cookies, timeout=TERMINAL_TIMEOUT)
        self.count = 0

    def type(self, line: str) -> None:
        """The line typed, then Enter, in the page's terminal."""
        self.tab.js("document.querySelector('.jp-Terminal .xterm-helper-textarea').focus()")
        self.tab.c._call("Input.insertText", session=self.tab.session, text=line)
        for kind in ("keyDown", "keyUp"):
            self.tab.c._call("Input.dispatchKeyEvent", session=self.tab.session, type=kind, key="Enter",
                             code="Enter", windowsVirtualKeyCode=13, nativeVirtualKeyCode=13,
                             **({"text": "\r"} if kind == "keyDown" else {}))

    def run(self, line: str) -> tuple[int, str]:
        """``line`` typed, then ``echo "done-N $?"``: its exit status and what it printed."""
        self.count += 1
        done = re.compile(rf"done-{self.count} (\d+)\r?\n")  # its echo of the typed line shows `$?`, not a number
        start = len(self.out)
        self.type(line)
        self.type(f'echo "done-{self.count} $?"')
        deadline = time.monotonic() + TERMINAL_TIMEOUT
        while not done.search(self.out, start) and time.monotonic() < deadline:
            kind, *content = json.loads(self.ws.recv())
            if kind == "stdout":
                self.out += content[0]
        found = done.search(self.out, start)
        assert found, f"the terminal did not finish `{line}`:\n{self.out[-3000:]}"
        # as a person reads it: without the terminal's colours and titles, lines ended by \n alone
        printed = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", self.out[start:found.start()])
        return int(found[1]), printed.replace("\r", "")

    def close(self) -> None:
        self.ws.close()
        self.person.server(f"api/terminals/{self.name}", "DELETE")


def subcommand(line: str) -> str:
    """`autograder --course ~/course grade a01 ...` -> "grade"."""
    words = shlex.split(line)
    return words[words.index("--course") + 2] if "--course" in words else words[1]


def as_typed(line: str, hub) -> str:
    """The README's line with its example students replaced by the hub's."""
    for example, student in zip(EXAMPLE_STUDENTS, hub.students[:len(EXAMPLE_STUDENTS)], strict=True):
        line = re.sub(rf"\b{example}\b", student, line)
    return line


def check_effect(line: str, out: str, hub) -> None:
    """What the command did, on the hub (the README's promise for it), beyond its exit status."""
    course, student, submitters = hub.course, hub.students[0], hub.students[:len(EXAMPLE_STUDENTS)]
    action = subcommand(line)
    if action == "release":
        for name in sorted(p.name for p in (course / "source").iterdir() if p.name[:1] == "a"):
            assert f"{name}: published to the nbgrader exchange {hub.exchange}/{COURSE}/outbound/{name}" in out, out
            assert (hub.exchange / COURSE / "outbound" / name / f"{name}.ipynb").is_file(), name
    elif action == "collect":
        for who in submitters:
            assert (course / "submitted" / who / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file(), out
    elif action == "grade" and "--regrade" in line:
        assert re.search(r"regrade on \S+: \d+ result\(s\) changed", out), out
    elif action == "grade":  # everyone's latest recorded, at least one graded by this command
        assert all(re.search(rf"^{who} .* graded ", out, flags=re.M) for who in submitters), out
        assert re.search(r"^[1-9]\d* graded, \d+ already graded, 0 failed$", out, flags=re.M), out
    elif action == "feedback":
        assert (f"{ASSIGNMENT}: feedback released to the nbgrader exchange for {len(submitters)} student(s)"
                in out), out
        assert len(list((hub.exchange / COURSE / "feedback").glob("*.html"))) >= len(submitters), out
    elif action == "students":
        assert f"{len(submitters)} student(s) imported from lms-roster.csv" in out, out
    elif action == "report":
        written = [Path(p) for p in re.findall(r"^(/\S+\.csv)$", out, flags=re.M)]
        assert {"grades.csv", "canvas_grades.csv", "moodle_grades.csv"} <= {p.name for p in written}, out
        assert all(p.is_file() and student in p.read_text() for p in written if p.name == "grades.csv"), out
    elif action == "extend":
        words = shlex.split(line)
        who, what = words[words.index("extend") + 1], words[words.index("extend") + 2]
        on = f"on {what}" if not what.startswith("-") else "on every assignment (standing)"
        assert f"{who}: extension {on} recorded" in out, out
    elif action == "late-days":
        assert "late days (5 per student, whole course):" in out, out
    elif action == "serve" and "--status" in line:
        assert "grading service: not running" in out, out
    elif action == "serve" and "--pause" in line:
        assert "grading service: paused" in out, out
    elif action == "serve" and "--off" in line:
        assert f"assignments off: {line.split('--off')[1].split()[0]}" in out, out
    else:
        raise AssertionError(f"`{line}`: the test does not know what it should do; add it to check_effect")


# The header every request of the page's own carries (JupyterHub's servers ask it of every API request
# a cookie authenticates, a GET too).
XSRF = "{'X-XSRFToken': document.cookie.match(/_xsrf=([^;]+)/)[1]}"


def open_in_file_browser(tab: Tab, name: str) -> None:
    """A double click on ``name`` in the file browser's listing."""
    item = (f"[...document.querySelectorAll('.jp-DirListing-item')].find(e => "
            f"(e.querySelector('.jp-DirListing-itemText') || {{}}).textContent.trim() === {json.dumps(name)})")
    tab.until(item, f"{name} in the file browser", timeout=60)
    tab.js(f"{item}.dispatchEvent(new MouseEvent('dblclick', {{bubbles: true}}))")


def menu_item(selector: str, label: str) -> str:
    """The element of ``selector`` whose text is ``label`` (a menu of JupyterLab's menu bar, one of its entries)."""
    return (f"[...document.querySelectorAll({json.dumps(selector)})]"
            f".find(e => e.innerText.trim() === {json.dumps(label)})")


def click(tab: Tab, element: str, what: str) -> None:
    """A click of the mouse at the middle of ``element`` (an expression), as a person clicks: JupyterLab's
    menus open on the button's press and act on its release."""
    tab.until(element, what, timeout=60)
    x, y = tab.js(f"(() => {{ const e = {element}; e.scrollIntoView({{block: 'nearest'}});"
                  " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        tab.c._call("Input.dispatchMouseEvent", session=tab.session, type=kind, x=x, y=y, button="left",
                    clickCount=0 if kind == "mouseMoved" else 1)


def in_page(tab: Tab, user: str, action: str) -> dict:
    """The Assignments tab's request, sent by the student's own page (their cookies, their _xsrf)."""
    return tab.js(f"""fetch('/user/{user}/assignments/{action}?course_id={COURSE}&assignment_id={ASSIGNMENT}',
        {{method: 'POST', headers: {XSRF}}})
        .then(r => r.json())""")


def test_the_first_hour_of_an_instructor_and_a_student(hub):
    instructor, student = hub.instructor, hub.students[0]
    SHOTS.mkdir(parents=True, exist_ok=True)

    # The instructor: every command deploy/README.md gives them, typed in a terminal of their own
    # JupyterLab, in Chromium, in the README's order; the first that needs a submission (collect)
    # waits for the student's, below.
    typed = [as_typed(c.line, hub) for c in commands() if c.role == "instructor"]
    first_collect = [subcommand(line) for line in typed].index("collect")
    assert first_collect > 0 and subcommand(typed[0]) == "release", typed
    teacher = Browser(hub, instructor)
    teacher.spawn()
    # the LMS's roster, uploaded to their home (JupyterLab's upload is this request)
    roster = "id,first_name,email,canvas_id\n" + "".join(f"{s},{s.title()},{s}@example.org,{100 + n}\n"
                                                          for n, s in enumerate(hub.students[:len(EXAMPLE_STUDENTS)]))
    uploaded = teacher.server("api/contents/lms-roster.csv", "PUT",
                              json={"type": "file", "format": "text", "content": roster})
    assert uploaded.status_code in (200, 201), uploaded.text[:300]
    statuses: dict[str, int] = {}

    def type_readme(lines: list[str]) -> None:
        for line in lines:
            status, out = terminal.run(line)
            terminal.tab.screenshot(SHOTS / f"terminal-{terminal.count:02d}-{subcommand(line)}.png")
            statuses[line] = status
            assert "command not found" not in out and status == 0, f"`{line}` exited {status}:\n{out[-3000:]}"
            check_effect(line, out, hub)

    with Chromium() as chromium:
        desk = Tab(chromium, hub.base)
        desk.log_in(instructor, hub.passwords[instructor])
        desk.go(f"/user/{instructor}/lab")
        desk.until("document.querySelector('.jp-LauncherCard')", "the instructor's JupyterLab", timeout=300)
        terminal = LabTerminal(desk, teacher)
        status, out = terminal.run('echo "exchange=$AUTOGRAD_EXCHANGE grader=$(command -v autograder)"')
        assert f"exchange={hub.exchange} grader={GRADER}\n" in out, out
        type_readme(typed[:first_collect])

        # The student's first page: the course's name and a word about the account.
        tab = Tab(chromium, hub.base)
        tab.go("/hub/login")
        tab.until("document.querySelector('#username_input')", "the login form")
        login = tab.js("({title: document.title, course: document.querySelector('#course-title').innerText,"
                       " hint: document.querySelector('#account-hint').innerText})")
        tab.screenshot(SHOTS / "1-login.png")
        assert login["course"] == TITLE and TITLE in login["title"], login
        assert "username and password" in login["hint"], login
        found = chromium.open(f"{hub.base}/hub/login", probe=axe.probe()).probe
        assert not axe.serious(found), axe.describe("the hub's login page", axe.serious(found))
        tab.log_in(student, hub.passwords[student])

        # The student lands on their course page (its own tests: test_course_page.py), which names the
        # assignment by its title and leads to JupyterLab.
        tab.go("/hub/spawn")
        tab.until(f"location.pathname === '/user/{student}/course/' && document.querySelector('main h2')",
                  "the student's course page", timeout=300)
        landing = tab.js("({h1: document.querySelector('main h1').innerText,"
                         " assignments: [...document.querySelectorAll('main h2')].map(h => h.innerText),"
                         " lab: [...document.querySelectorAll('a')].some(a => a.innerText.trim() === 'JupyterLab')})")
        tab.screenshot(SHOTS / "2-course-page.png")
        assert landing["h1"] == "Your assignments" and landing["lab"], landing
        assert any(h.startswith("a01 · ") for h in landing["assignments"]), landing  # its title, not its folder
        a01 = next(h for h in landing["assignments"] if h.startswith("a01 · "))

        # JupyterLab, with the course's name in its title; no news toast, nothing asked of the network.
        tab.js("[...document.querySelectorAll('a')].find(a => a.innerText.trim() === 'JupyterLab').click()")
        lab_ready = "document.querySelector('#jp-main-dock-panel') && document.querySelector('.jp-DirListing-content')"
        tab.until(f"location.pathname.startsWith('/user/{student}/lab') && {lab_ready}", "the student's JupyterLab",
                  timeout=300)
        tab.until(f"document.title.includes({json.dumps(TITLE)})", "the course's name in the window's title")
        time.sleep(3)  # the time a toast takes to show itself
        toasts = tab.js("[...document.querySelectorAll('.Toastify__toast')].map(t => t.innerText)")
        assert not toasts, toasts
        tab.screenshot(SHOTS / "2-jupyterlab.png")

        # Fetch, in nbgrader's Assignments tab (Nbgrader, Assignment List), by mouse: the folder shows in
        # the file browser at once. The file browser has just looked at its folder (its own Refresh
        # button), so its next poll is 10 s away or more: only the course's hook shows it sooner
        # (deploy/hub/student/labextensions/autograd-fetched/).
        click(tab, menu_item(".lm-MenuBar-item", "Nbgrader"), "the Nbgrader menu")
        click(tab, menu_item(".lm-Menu-item", "Assignment List"), "Nbgrader, Assignment List")
        # The tab names the assignment and the course as the course page does (labextensions/autograd-titles)
        fetch = (f"[...document.querySelectorAll('#released_assignments_list > div')].filter(row => "
                 f"row.innerText.includes({json.dumps(a01)}) && row.querySelector('button'))"
                 ".map(row => row.querySelector('button')).find(b => b.innerText.trim() === 'Fetch')")
        tab.until(fetch, f"{a01}'s Fetch button in the Assignments tab", timeout=60)
        tab.until(f"document.querySelector('#assignments_list_info').innerText.includes({json.dumps(TITLE)})",
                  "the course's name in the Assignments tab", timeout=30)
        words = tab.js("document.querySelector('#assignments').innerText")
        assert ASSIGNMENT not in words and "autograd-course" not in words, words
        click(tab, "document.querySelector('.jp-FileBrowser-toolbar [data-command=\"filebrowser:refresh\"]')",
              "the file browser's Refresh button")
        time.sleep(0.5)
        click(tab, fetch, f"{ASSIGNMENT}'s Fetch button")
        started = time.monotonic()
        tab.until(f"[...document.querySelectorAll('.jp-DirListing-itemText')].some(e => e.textContent.trim() === "
                  f"{json.dumps(ASSIGNMENT)})", "the fetched folder in the file browser", timeout=30)
        shown_after = time.monotonic() - started
        assert shown_after < 5, f"the fetched folder showed after {shown_after:.1f} s: at the file browser's poll"
        tab.screenshot(SHOTS / "3-fetched.png")

        # The notebook, opened as a student opens it (a double click on the folder, then on the
        # notebook): its kernel starts, and it is not marked modified.
        open_in_file_browser(tab, ASSIGNMENT)
        open_in_file_browser(tab, f"{ASSIGNMENT}.ipynb")
        for _ in range(900):  # (a fetch in the page: Tab.until does not wait for a promise)
            sessions = tab.js(f"fetch('/user/{student}/api/sessions', {{headers: {XSRF}}})"
                              ".then(r => r.ok ? r.json() : [r.status]).catch(e => [String(e)])") or []
            if [s for s in sessions if isinstance(s, dict) and s["kernel"]["execution_state"] == "idle"]:
                break
            time.sleep(0.2)
        else:
            tab.screenshot(SHOTS / "4-notebook-failed.png")
            raise AssertionError(f"the notebook's kernel did not start: {sessions} (at {tab.js('location.href')})")
        tab.until("document.querySelector('.jp-Notebook .jp-MarkdownCell a')", "the notebook's first cells")
        time.sleep(3)  # what JupyterLab writes into a notebook once its kernel is there
        dirty = tab.js("!!document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.jp-mod-current.jp-mod-dirty')")
        title = tab.js("document.title")
        chapter_title = next(line[2:] for line in CHAPTER.read_text().splitlines() if line.startswith("# "))
        link = tab.js(f"""(() => {{ const a = [...document.querySelectorAll('.jp-MarkdownCell a')]
            .find(a => a.getAttribute('href') === '/services/book/book/{CHAPTER.stem}.html');
            return a ? {{text: a.innerText, target: a.target}} : null; }})()""")
        tab.screenshot(SHOTS / "4-notebook.png")
        assert not dirty, "the fetched notebook opened marked modified"
        assert title.startswith(ASSIGNMENT[:12]) and title.endswith(f" - {TITLE}"), title  # (a long name is cut)
        assert link is not None and chapter_title in link["text"] and "Chapter 1" in link["text"], link

        # The chapter, from the hub's book, offline.
        page = chromium.open(f"{hub.base}/services/book/book/{CHAPTER.stem}.html",
                             screenshot=SHOTS / "5-chapter.png")
        assert chapter_title in page.dom, page.dom[:500]
        outside = [u for u in page.requests if not u.startswith((f"{hub.base}/", "data:", "blob:", "about:"))]
        assert not outside and not page.errors, (outside, page.errors[:3])
        listing = requests.get(f"{hub.base}/services/book/_static/", timeout=30)
        assert listing.status_code == 404, listing.status_code

        # The hidden-test cells say what they are.
        fetched_nb = json.loads((Path(os.path.expanduser(f"~{student}")) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
                                .read_text())
        hidden = [c for c in fetched_nb["cells"]
                  if c["metadata"].get("nbgrader", {}).get("grade_id", "").endswith("-hidden")]
        assert hidden and all("".join(c["source"]).startswith("# More checks of ") for c in hidden), hidden[:1]

        # Submit.
        submitted = in_page(tab, student, "submit")
        assert submitted["success"], submitted
        assert any(p.name.startswith(f"{student}+{ASSIGNMENT}+") for p in (hub.exchange / COURSE / "inbound").iterdir())
        # The README's other example student hands in the released notebook untouched (the Assignments tab's API).
        other = Browser(hub, hub.students[1])
        other.spawn()
        other.assignments("fetch", assignment_id=ASSIGNMENT)
        other.assignments("submit", assignment_id=ASSIGNMENT)
        requested = [u for u in tab.requests() if not u.startswith((f"{hub.base}/", "data:", "blob:", "about:"))]
        assert not requested, requested[:5]
        assert not [u for u in tab.requests() if "/lab/api/news" in u or "/lab/api/update" in u]

        # The rest of the instructor's commands, on the student's submission.
        type_readme(typed[first_collect:])

        # Grading on a Dask cluster (the README's block marked `cluster`): the instructor's cluster runs
        # (as deploy/dask.md says: their certificates, their scheduler and worker), the second student
        # writes a written answer and submits again, the instructor collects again (the README's
        # collect: only what changed) and types the cluster's grade, the README's address replaced by
        # this cluster's.
        path = f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        work = other.server(path).json()["content"]
        written = next(c for c in work["cells"] if c["cell_type"] == "markdown"
                       and c["metadata"].get("nbgrader", {}).get("solution"))
        written["source"] = "Both paths into the shared node add their gradients."
        saved = other.server(path, "PUT", json={"type": "notebook", "format": "json", "content": work})
        assert saved.status_code == 200, saved.text[:300]
        other.assignments("submit", assignment_id=ASSIGNMENT)
        with dask_cluster(hub, hub.root) as (address, _):
            type_readme([typed[first_collect], *(re.sub(r"tls://\S+", address, c.line)
                                                 for c in commands() if c.role == "cluster")])
        resubmitted = hub.course / "submitted" / hub.students[1] / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        assert "Both paths into the shared node" in resubmitted.read_text()
        terminal.close()
        assert len(statuses) >= len(typed) and set(statuses.values()) == {0}, statuses

        # The instructor's formgrader: only what the course supports.
        desk.go(f"/user/{instructor}/formgrader/manage_assignments")
        desk.until("document.querySelector('tbody tr td.name a')", "the formgrader's assignments", timeout=120)
        shown = desk.js(FORMGRADER_TABLE)
        desk.screenshot(SHOTS / "6-formgrader.png")
        assert shown["headers"] == ["Name", "Due Date", "Status", "Preview", "# Submissions", "Release Feedback"], shown
        assert not shown["add"] and "typed in your JupyterLab terminal" in shown["note"], shown

    print(f"\nfirst hour: the fetched folder showed in the file browser after {shown_after:.1f} s")
