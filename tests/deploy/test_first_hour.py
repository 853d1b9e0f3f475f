"""The first hour on the class's hub, as a new instructor and a new student meet it (issue 39).

The instructor types deploy/README.md's release command, as the README writes it, into a terminal of
their own JupyterLab (the terminals API and its websocket, as JupyterLab's terminal uses them): the
grader is on their PATH and `$AUTOGRAD_EXCHANGE` is this hub's exchange. Their formgrader, in
Chromium, shows only what the course supports. The student, in Chromium: the login page names the
course and says which account to use; JupyterLab's title names it too, no news toast, nothing asked
of the network; the assignment fetched shows in the file browser by itself; the notebook opens
unmodified; its chapter link opens the chapter from the hub's book; the hidden-test cell says in
words what it is; the work is submitted. Screenshots of each step are kept in _build/test-artefacts/first-hour/
(git-ignored).
"""
from __future__ import annotations

import json
import os
import re
import runpy
import time
from pathlib import Path

import pytest
import requests
import websocket

from support import ARTEFACTS, axe
from support.browser import Chromium, Tab
from support.hub import COURSE, FORMGRADER_TABLE, GRADER, REPO, Browser

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

SHOTS = ARTEFACTS / "first-hour"
TITLE = runpy.run_path(str(REPO / "deploy" / "hub.py"))["course_title"]()
ASSIGNMENT = "a01_graphs"
CHAPTER = REPO / "book" / "01_graphs.md"


def readme_release() -> str:
    """deploy/README.md's release command, as an instructor copies it (its comment left out)."""
    text = (REPO / "deploy" / "README.md").read_text()
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for line in block.splitlines()]
    command = next(line for line in lines if line.startswith("autograder ") and " release " in line)
    return command.split("  #")[0].strip()


def type_in_terminal(person: Browser, lines: list[str], done: str, timeout: float = 900) -> str:
    """The lines typed into a new terminal of the person's JupyterLab; what it printed until the
    ``done`` pattern (one the typed lines, echoed back, do not match)."""
    created = person.server("api/terminals", "POST")
    assert created.status_code == 200, created.text[:300]
    name = created.json()["name"]
    cookies = "; ".join(f"{c.name}={c.value}" for c in person.s.cookies)
    ws = websocket.create_connection(
        f"ws://127.0.0.1:{person.hub.port}/user/{person.user}/terminals/websocket/{name}",
        cookie=cookies, timeout=timeout)
    out = ""
    try:
        for line in lines:
            ws.send(json.dumps(["stdin", line + "\r"]))
        deadline = time.monotonic() + timeout
        while not re.search(done, out) and time.monotonic() < deadline:
            kind, *content = json.loads(ws.recv())
            if kind == "stdout":
                out += content[0]
    finally:
        ws.close()
        person.server(f"api/terminals/{name}", "DELETE")
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", out).replace("\r", "")
    assert re.search(done, out), f"the terminal did not finish:\n{out[-3000:]}"
    return out


# The header every request of the page's own carries (JupyterHub's servers ask it of every API request
# a cookie authenticates, a GET too).
XSRF = "{'X-XSRFToken': document.cookie.match(/_xsrf=([^;]+)/)[1]}"


def open_in_file_browser(tab: Tab, name: str) -> None:
    """A double click on ``name`` in the file browser's listing."""
    item = (f"[...document.querySelectorAll('.jp-DirListing-item')].find(e => "
            f"(e.querySelector('.jp-DirListing-itemText') || {{}}).textContent.trim() === {json.dumps(name)})")
    tab.until(item, f"{name} in the file browser", timeout=60)
    tab.js(f"{item}.dispatchEvent(new MouseEvent('dblclick', {{bubbles: true}}))")


def in_page(tab: Tab, user: str, action: str) -> dict:
    """The Assignments tab's request, sent by the student's own page (their cookies, their _xsrf)."""
    return tab.js(f"""fetch('/user/{user}/assignments/{action}?course_id={COURSE}&assignment_id={ASSIGNMENT}',
        {{method: 'POST', headers: {XSRF}}})
        .then(r => r.json())""")


def test_the_first_hour_of_an_instructor_and_a_student(hub):
    instructor, student = hub.instructor, hub.students[0]
    SHOTS.mkdir(parents=True, exist_ok=True)

    # The instructor: the README's command, typed in their own terminal, as written.
    teacher = Browser(hub, instructor)
    teacher.spawn()
    command = readme_release()
    assert '--exchange "$AUTOGRAD_EXCHANGE"' in command, command
    out = type_in_terminal(teacher, ['echo "exchange=$AUTOGRAD_EXCHANGE grader=$(command -v autograder)"', command,
                                     'echo "released=$?"'], done=r"released=\d+")
    assert f"exchange={hub.exchange} grader={GRADER}\n" in out, out
    assert "command not found" not in out, out[-3000:]
    assert f"{ASSIGNMENT}: published to the nbgrader exchange {hub.exchange}/{COURSE}/outbound/{ASSIGNMENT}" in out, \
        out[-3000:]
    assert "released=0" in out, out[-3000:]

    with Chromium() as chromium:
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

        # Fetch (the Assignments tab's request, from the page); the folder shows in the file browser by itself.
        fetched = in_page(tab, student, "fetch")
        assert fetched["success"], fetched
        started = time.monotonic()
        tab.until(f"[...document.querySelectorAll('.jp-DirListing-itemText')].some(e => e.textContent.trim() === "
                  f"{json.dumps(ASSIGNMENT)})", "the fetched folder in the file browser", timeout=30)
        shown_after = time.monotonic() - started
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
        requested = [u for u in tab.requests() if not u.startswith((f"{hub.base}/", "data:", "blob:", "about:"))]
        assert not requested, requested[:5]
        assert not [u for u in tab.requests() if "/lab/api/news" in u or "/lab/api/update" in u]

        # The instructor's formgrader: only what the course supports.
        desk = Tab(chromium, hub.base)
        desk.log_in(instructor, hub.passwords[instructor])
        desk.go(f"/user/{instructor}/formgrader/manage_assignments")
        desk.until("document.querySelector('tbody tr td.name a')", "the formgrader's assignments", timeout=120)
        shown = desk.js(FORMGRADER_TABLE)
        desk.screenshot(SHOTS / "6-formgrader.png")
        assert shown["headers"] == ["Name", "Due Date", "Status", "Preview", "# Submissions", "Release Feedback"], shown
        assert not shown["add"] and "typed in your JupyterLab terminal" in shown["note"], shown

    print(f"\nfirst hour: the fetched folder showed in the file browser after {shown_after:.1f} s")
