"""The class's hub, for the tests that use it (tests/deploy/): deploy/hub.py installs and
starts a JupyterHub; students and an instructor log in over HTTP and work through the Assignments
tab's API, as helpers below let a test do.

Runs on loopback only, as root (the hub starts each user's server as that user). The users it
creates have names of their own and are removed at the end; the hub and every server it started
are stopped by their process ids. The single-user environment (/opt/autograd-hub) is built once
per machine by `deploy/hub.py install` and reused.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import requests

from autograder.course import notebook

from support import REPO

HUB = REPO / "deploy" / "hub.py"
COURSE = "autograd-course"
ASSIGNMENT = "a01_graphs"


PREFIX = Path(os.environ.get("AUTOGRAD_HUB_PREFIX", "/opt/autograd-hub"))
GRADER = PREFIX / "grader" / "bin" / "autograder"  # the grader as deploy/hub.py installs it for the instructors


# What the instructor's formgrader table shows: the visible headers and whether "Add new assignment..."
# and the course's note are on screen.
FORMGRADER_TABLE = """(async () => {
    for (let i = 0; i < 300 && !document.querySelector('tbody tr td.name a'); i++) {
        await new Promise(r => setTimeout(r, 100));
    }
    const visible = el => !!el && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
    const headers = [...document.querySelectorAll('table.table thead th')].filter(visible);
    return {headers: headers.map(th => th.innerText.trim()),
            cells: [...document.querySelectorAll('tbody tr:first-child td')].filter(visible).length,
            add: [...document.querySelectorAll('a')].some(a => visible(a) && /Add new assignment/.test(a.innerText)),
            note: (document.querySelector('#autograd-course-note') || {}).innerText || ''};
})()"""


def as_user(user: str, *command: str | Path, **kwargs) -> subprocess.CompletedProcess:
    """A command run by ``user`` as from their terminal on the hub (their home, their groups)."""
    home = os.path.expanduser(f"~{user}")
    return subprocess.run(["runuser", "-u", user, "--", "env", f"HOME={home}", *map(str, command)],
                          capture_output=True, text=True, cwd=home, **kwargs)


def free_port() -> int:
    """A port whose neighbours (+1 the proxy's API, +81 the hub's, +82 the book's) are free too."""
    for _ in range(50):
        port = 20000 + secrets.randbelow(20000)
        taken = False
        for p in (port, port + 1, port + 81, port + 82):
            with socket.socket() as s:
                taken = taken or s.connect_ex(("127.0.0.1", p)) == 0
        if not taken:
            return port
    raise RuntimeError("no free port on 127.0.0.1")


class Hub:
    def __init__(self, root: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        tag = secrets.token_hex(2)
        self.instructor = f"hubt{tag}i"
        self.students = [f"hubt{tag}{who}" for who in ("a", "b", "c")]
        self.mallory = f"hubt{tag}m"  # a student with a shell who never opens the Assignments tab
        self.env = {**os.environ, "AUTOGRAD_HUB_ETC": str(root / "etc"), "AUTOGRAD_HUB_STATE": str(root / "state"),
                    "AUTOGRAD_EXCHANGE": str(root / "exchange"), "AUTOGRAD_HUB_PORT": str(self.port)}
        self.exchange = root / "exchange"
        self.roster = root / "roster.csv"
        self.roster.write_text("username,role\n" + f"{self.instructor},instructor\n"
                               + "".join(f"{s},student\n" for s in [*self.students, self.mallory]))
        self.passwords: dict[str, str] = {}
        self.process: subprocess.Popen | None = None
        self.log = root / "hub.log"

    def command(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(HUB), *args], env=self.env, capture_output=True, text=True,
                              **kwargs)

    def start(self) -> float:
        started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, str(HUB), "start"], env=self.env, start_new_session=True,
                                        stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                if requests.get(f"{self.base}/hub/api/", timeout=2).status_code == 200:
                    return time.monotonic() - started
            except requests.ConnectionError:
                pass
            assert self.process.poll() is None, f"the hub exited: {self.log.read_text()[-2000:]}"
            time.sleep(0.2)
        raise AssertionError(f"the hub did not answer in 120 s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is None:
            return
        hub = psutil.Process(self.process.pid)
        tree = [hub, *hub.children(recursive=True)]
        os.killpg(self.process.pid, signal.SIGTERM)  # the hub stops the servers it started
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        for p in tree:
            if p.is_running():
                p.kill()


class Browser:
    """One person's session with the hub, as their browser has it (cookies, the _xsrf token)."""

    def __init__(self, hub: Hub, user: str):
        self.hub, self.user, self.s = hub, user, requests.Session()
        self.s.get(f"{hub.base}/hub/login", timeout=30)
        r = self.s.post(f"{hub.base}/hub/login", timeout=60, allow_redirects=False,
                        data={"username": user, "password": hub.passwords[user], "_xsrf": self.xsrf})
        assert r.status_code == 302, f"{user} could not log in: {r.status_code} {r.text[:300]}"

    @property
    def xsrf(self) -> str:
        return self.cookie("/hub/")

    def cookie(self, path: str) -> str:
        """The _xsrf token the page at ``path`` holds (the hub and each server set their own)."""
        return next((c.value for c in self.s.cookies if c.name == "_xsrf" and c.path.rstrip("/") == path.rstrip("/")),
                    "")

    def headers(self, path: str = "/hub/") -> dict:
        return {"X-XSRFToken": self.cookie(path), "Referer": f"{self.hub.base}{path}"}

    def spawn(self) -> float:
        started = time.monotonic()
        r = self.s.post(f"{self.hub.base}/hub/api/users/{self.user}/server", headers=self.headers(), timeout=60)
        assert r.status_code in (201, 202), r.text
        for _ in range(1200):
            server = self.s.get(f"{self.hub.base}/hub/api/users/{self.user}", headers=self.headers(),
                                timeout=30).json()["servers"].get("", {})
            if server.get("ready"):
                # the first visit logs the browser in to its server (the hub's OAuth round trip)
                opened = self.s.get(f"{self.hub.base}/user/{self.user}/lab", timeout=120)
                assert opened.status_code == 200, opened.text[:300]
                return time.monotonic() - started
            time.sleep(0.1)
        raise AssertionError(f"{self.user}'s server did not start: {self.hub.log.read_text()[-2000:]}")

    def server(self, path: str, method: str = "GET", owner: str | None = None, **kwargs) -> requests.Response:
        prefix = f"/user/{owner or self.user}/"
        kwargs.setdefault("allow_redirects", False)
        return self.s.request(method, f"{self.hub.base}{prefix}{path}", headers=self.headers(prefix), timeout=120,
                              **kwargs)

    def assignments(self, action: str = "", **params) -> dict:
        path = f"assignments/{action}" if action else "assignments"
        r = self.server(path, "POST" if action else "GET", params={"course_id": COURSE, **params})
        assert r.status_code == 200, f"{path}: {r.status_code} {r.text[:300]}"
        reply = r.json()
        assert reply["success"], f"{self.user}: {path} failed: {reply.get('value')}"
        return reply


def answered(released: dict, source: dict) -> dict:
    """The fetched notebook with every answer cell holding the model answer, as a student types it."""
    answers = {notebook.grade_id(c): c["source"] for c in source["cells"] if notebook.is_answer(c)}
    for cell in released["cells"]:
        if notebook.grade_id(cell) in answers and cell["cell_type"] == "code":
            cell["source"] = notebook.typed_in(answers[notebook.grade_id(cell)])
    return released


def user_memory(user: str) -> int:
    """Resident memory of every process the user runs (their server, their kernels), in bytes.

    Other processes of the machine come and go meanwhile: process_iter with attributes skips
    one that ends while it is read."""
    return sum(p.info["memory_info"].rss for p in psutil.process_iter(["username", "memory_info"])
               if p.info["username"] == user and p.info["memory_info"] is not None)
