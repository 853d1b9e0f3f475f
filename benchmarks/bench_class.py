"""A class at once on the hub of deploy/hub.py: N simulated students in three arrival shapes, measured.

    sudo .venv/bin/python benchmarks/bench_class.py -n 5 --minutes 1    # small: tests/deploy/test_class_load.py
    sudo .venv/bin/python benchmarks/bench_class.py --sweep 10,20,40     # `make bench-class`: N stepped

Each student is a real system user (``ld<tag>s<k>``, created here and removed at the end with
``userdel --remove``, even on failure) on the real hub (``deploy/hub.py install/users/start`` under a
prefix, a configuration, a state folder, an exchange and a port of this run's own; loopback only),
driven over HTTP and the kernel's websocket as a browser would: log in (PAM), start their server, fetch
a01 through the Assignments tab's API, start a kernel in ``a01_graphs/`` and run the first cells of
chapter 1 on their own engine (their answers: the kit loads them from the assignment's notebook), save,
and submit. The arrivals follow three shapes, one after the other on the same servers:

* **lecture**: every student arrives within the window (uniform at random), logs in, spawns, fetches,
  starts a kernel and runs the first cells;
* **lab**: everyone runs cells for the window (the chapter's engine cell again, a think time of 5-20 s
  between runs);
* **deadline**: every student saves and submits within the window; a third submits twice (a correction
  a minute later, or at the end of the window), so that "collected once" means the latest one. The
  instructor meanwhile collects every 20 s and grades what is collected (``grade --jobs 1``), as at a
  real deadline, then collects once more after the window.

Measured per shape: p50/p95/p99 of log-in, spawn, kernel start, cell execution, save and submit (seconds,
each from the request to the answer); errors (any non-2xx answer, any failed cell, any timeout: each is
listed); resident memory and CPU of every user's processes (their server and kernel), sampled each
second: per idle student (after the lecture) and per active student (during the lab); the hub's and the
proxy's own memory; the load average. Counted: submissions from the students' side (a 2xx reply), from
the exchange (inbound folders), and as collected (the course's ``submitted/`` holds each student's
latest, identified by a token the student wrote into the notebook); ``exactly once`` holds when every
student's latest submission is collected, none is missing, none is collected twice.

Why asyncio (aiohttp) rather than Locust: Locust's users are requests-based greenlets that repeat tasks
at a rate; it has no websocket client of its own (a Jupyter kernel needs one: plugins or a gevent-patched
``websocket-client``), and its gevent monkey-patching would reach the harness's own work as root (system
users, the hub's process, the instructor's commands, the samplers). Here each student is one scripted
coroutine (hubtraf, the JupyterHub community's load tool, is built the same way on aiohttp), arrivals are
scheduled per shape, and every request is counted exactly.

Bounded: at most ``MAX_STUDENTS`` users, every request with a timeout, every shape with a deadline of
its window plus ``GRACE``; every process stopped by its pid (the hub's process group, then each user's
processes found by uid). Needs root and the hub's environment (``deploy/hub.py install`` builds it under
``AUTOGRAD_HUB_PREFIX``, default /opt/autograd-hub as deploy/hub.py: about 5 minutes the first time).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the hub harness the tests use: tests/support is not installed
from support.hub import ASSIGNMENT, COURSE, Hub  # noqa: E402

CHAPTER = "01_graphs"
MAX_STUDENTS = 120
GRACE = 240                 # seconds a shape may run past its window (the last arrivals' spawns, a slow submit)
REQUEST_TIMEOUT = 180       # seconds for any one request (a spawn is polled, each poll bounded)
SPAWN_TIMEOUT = 300
SHAPES = ("lecture", "lab", "deadline")
STEPS = ("login", "spawn", "fetch", "kernel", "cell", "save", "submit")


# -- the site: the hub of deploy/hub.py, with users of this run's own (tests/support/hub.py's harness) --

def class_hub(root: Path, n: int, cull_timeout: int = 3600, cull_every: int = 300, activity_interval: int = 300,
              spawn_limit: int | None = None) -> Hub:
    """deploy/hub.py's hub in a folder of this run's own, n students and an instructor as system users."""
    if not 0 < n <= MAX_STUDENTS:
        raise ValueError(f"bench_class: {n} students; between 1 and {MAX_STUDENTS}")
    return Hub(root, "ld", [f"s{k}" for k in range(n)], shell_only=(), settings={
        "AUTOGRAD_CULL_TIMEOUT": str(cull_timeout), "AUTOGRAD_CULL_EVERY": str(cull_every),
        "AUTOGRAD_ACTIVITY_INTERVAL": str(activity_interval),
        **({"AUTOGRAD_SPAWN_LIMIT": str(spawn_limit)} if spawn_limit else {})})


# -- one student, as their browser does it ---------------------------------------------------------

@dataclass
class Record:
    """Every timed step and every error of a run, by shape."""
    times: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    waited: int = 0  # the hub's "too many starting at once" pages a student's browser waited out

    def add(self, shape: str, step: str, seconds: float) -> None:
        self.times.setdefault(shape, {}).setdefault(step, []).append(seconds)

    def error(self, shape: str, student: str, what: str) -> None:
        self.errors.append(f"{shape}: {student}: {what}")


class StepError(Exception):
    """A request that did not get the answer a browser needs (said with its status and text)."""


class Student:
    def __init__(self, site: Hub, user: str, record: Record):
        import aiohttp
        self.site, self.user, self.record = site, user, record
        # cookies of 127.0.0.1; the session has no overall timeout (it would close a kernel's websocket
        # REQUEST_TIMEOUT after it opened): each request has its own
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                          timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        self.timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        self.kernel_id: str | None = None
        self.ws = None
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.reader: asyncio.Future | None = None
        self.session_id = uuid.uuid4().hex
        self.submitted: list[str] = []  # the token of each submission the hub answered 2xx

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()
        await self.http.close()

    def xsrf(self, path: str) -> str:
        from yarl import URL
        cookie = self.http.cookie_jar.filter_cookies(URL(f"{self.site.base}{path}")).get("_xsrf")
        return cookie.value if cookie else ""

    async def request(self, method: str, path: str, expect: tuple[int, ...] = (200,), **kwargs):
        """One request; the answer's JSON (or text), or StepError. The _xsrf header of the page's path."""
        prefix = "/hub/" if path.startswith("/hub/") else f"/user/{self.user}/"
        headers = {"X-XSRFToken": self.xsrf(prefix), "Referer": f"{self.site.base}{prefix}",
                   **kwargs.pop("headers", {})}
        if method == "POST" and "data" not in kwargs and "json" not in kwargs:
            kwargs["json"] = {}  # as the page sends: the hub refuses a POST of application/octet-stream
        async with self.http.request(method, f"{self.site.base}{path}", headers=headers, timeout=self.timeout,
                                     **kwargs) as reply:
            text = await reply.text()
            if reply.status not in expect:
                raise StepError(f"{method} {path.split('?')[0]}: {reply.status} {text[:200]}")
            with contextlib.suppress(ValueError):
                return json.loads(text) if text else None
            return text

    async def timed(self, shape: str, step: str, action):
        began = time.monotonic()
        result = await action
        self.record.add(shape, step, time.monotonic() - began)
        return result

    async def login(self) -> None:
        await self.request("GET", "/hub/login")
        await self.request("POST", "/hub/login", expect=(302,), allow_redirects=False,
                           data={"username": self.user, "password": self.site.passwords[self.user],
                                 "_xsrf": self.xsrf("/hub/")})

    async def spawn(self) -> None:
        """Ask for the server as the browser does after logging in (GET /hub/spawn), wait until the hub
        says it is ready, then open it (the OAuth round trip that logs the browser in). When too many
        start at once the hub answers its 429 page: the student does what that page does by itself (its
        refresh), never a reload by hand, so a page that does not retry is a StepError."""
        deadline = time.monotonic() + SPAWN_TIMEOUT
        while True:
            async with self.http.get(f"{self.site.base}/hub/spawn/{self.user}", timeout=self.timeout,
                                     allow_redirects=False) as reply:
                page = await reply.text()
                if reply.status in (200, 302, 303):  # the pending page, or on to the server
                    break
                if reply.status != 429 or time.monotonic() > deadline:
                    raise StepError(f"GET spawn: {reply.status} {page[:200]}")
                self.record.waited += 1
                refresh = re.search(r'<meta http-equiv="refresh" content="(\d+)"', page)
                if refresh is None:
                    raise StepError("GET spawn: 429, and the page does not try again by itself")
                await asyncio.sleep(int(refresh.group(1)))
        while time.monotonic() < deadline:
            model = await self.request("GET", f"/hub/api/users/{self.user}")
            server = (model.get("servers") or {}).get("")
            if server is None:  # the hub gave up on it (its start timeout, or the server died starting)
                raise StepError("the hub reported the spawn failed (the server is gone; see the hub's log)")
            if server.get("ready"):
                break
            await asyncio.sleep(0.5)
        else:
            raise StepError(f"the server did not start in {SPAWN_TIMEOUT} s")
        await self.request("GET", f"/user/{self.user}/lab")

    async def fetch(self) -> None:
        reply = await self.request("POST", f"/user/{self.user}/assignments/fetch",
                                   params={"course_id": COURSE, "assignment_id": ASSIGNMENT})
        if not reply.get("success") and "already exists" not in str(reply.get("value")):
            raise StepError(f"fetch: {str(reply.get('value'))[:300]}")

    async def answer(self) -> None:
        """The student's answers typed into the fetched notebook and saved (their engine for chapter 1)."""
        path = f"/user/{self.user}/api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        fetched = (await self.request("GET", path))["content"]
        content = answered_notebook(fetched)
        await self.request("PUT", path, json={"type": "notebook", "content": content})

    async def start_kernel(self) -> None:
        """A notebook session in a01_graphs/ (the kernel's working folder, where the kit finds the answers)
        and its websocket, ready once the kernel answers a first request."""
        import aiohttp
        session = await self.request("POST", f"/user/{self.user}/api/sessions", expect=(201,),
                                     json={"path": f"{ASSIGNMENT}/{CHAPTER}.ipynb", "type": "notebook",
                                           "name": f"{CHAPTER}.ipynb", "kernel": {"name": "python3"}})
        self.kernel_id = session["kernel"]["id"]
        url = (f"{self.site.base.replace('http', 'ws')}/user/{self.user}/api/kernels/{self.kernel_id}/channels"
               f"?session_id={self.session_id}")
        self.ws = await self.http.ws_connect(url, headers={"X-XSRFToken": self.xsrf(f"/user/{self.user}/")},
                                             timeout=aiohttp.ClientWSTimeout(ws_close=10), max_msg_size=0)
        self.inbox = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())
        await self.execute("1", timeout=REQUEST_TIMEOUT)  # the kernel is up once it runs something

    async def _read(self) -> None:
        """Read the websocket all the time, as a browser does: aiohttp answers the server's pings only while
        something reads, and Jupyter's server closes a socket whose pings go unanswered (seen at N = 10)."""
        import aiohttp
        assert self.ws is not None
        while True:
            message = await self.ws.receive()
            await self.inbox.put(message)
            if message.type != aiohttp.WSMsgType.TEXT:
                return

    async def execute(self, code: str, timeout: float = REQUEST_TIMEOUT) -> None:
        """Run one cell: an execute_request on the shell channel; done at its reply and the idle status."""
        import aiohttp
        assert self.ws is not None
        msg_id = uuid.uuid4().hex
        await self.ws.send_json({
            "header": {"msg_id": msg_id, "username": self.user, "session": self.session_id, "msg_type":
                       "execute_request", "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}})
        reply, idle, error = None, False, ""
        deadline = time.monotonic() + timeout
        while reply is None or not idle:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepError(f"a cell ran over {timeout:.0f} s")
            try:
                message = await asyncio.wait_for(self.inbox.get(), timeout=left)
            except asyncio.TimeoutError:
                raise StepError(f"a cell ran over {timeout:.0f} s") from None
            if message.type != aiohttp.WSMsgType.TEXT:
                raise StepError(f"the kernel's websocket closed ({message.type.name})")
            data = json.loads(message.data)
            if data.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = data["header"]["msg_type"]
            if kind == "execute_reply":
                reply = data["content"]
            elif kind == "status" and data["content"].get("execution_state") == "idle":
                idle = True
            elif kind == "error":
                error = f"{data['content'].get('ename')}: {data['content'].get('evalue')}"[:300]
        if reply.get("status") != "ok":
            raise StepError(f"a cell failed: {error or reply.get('ename')}")

    async def save_and_submit(self, shape: str) -> None:
        """A token written into the notebook (what identifies this submission once collected), saved, submitted."""
        path = f"/user/{self.user}/api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        token = uuid.uuid4().hex
        nb = (await self.request("GET", path))["content"]
        nb["cells"] = [c for c in nb["cells"] if not str(c.get("source", "")).startswith("submission token ")]
        nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": f"submission token {token}"})
        await self.timed(shape, "save", self.request("PUT", path, json={"type": "notebook", "content": nb}))
        reply = await self.timed(shape, "submit", self.request(
            "POST", f"/user/{self.user}/assignments/submit", params={"course_id": COURSE, "assignment_id": ASSIGNMENT}))
        if not reply.get("success"):
            raise StepError(f"submit: {str(reply.get('value'))[:300]}")
        self.submitted.append(token)


def answered_notebook(fetched: dict) -> dict:
    """The fetched a01 notebook with every answer written as the source notebook has it (the model answer)."""
    from support.course import answered
    source = json.loads((REPO / "assignments" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    return answered(fetched, source)


_CHAPTER: list[str] = []


def chapter_cells() -> list[str]:
    """The first cells of chapter 1 as a student runs them: the kit, the imports, the first graph (the
    book's plumbing cells and figures left out)."""
    if not _CHAPTER:
        sys.path.insert(0, str(REPO / "book" / "_ext"))
        import coursekit_book
        nb = coursekit_book.chapter_notebook(REPO / "book" / f"{CHAPTER}.md")
        hidden = {"remove-cell", "remove-input", "raises-exception"}
        code = [c.source for c in nb.cells if c.cell_type == "code" and not hidden & set(c.metadata.get("tags", []))]
        _CHAPTER.extend(code[:3])
    return _CHAPTER


# -- the shapes --------------------------------------------------------------------------------------

async def at(offset: float, began: float) -> None:
    await asyncio.sleep(max(0.0, began + offset - time.monotonic()))


async def lecture(students: list[Student], window: float, record: Record) -> None:
    """Everyone arrives within the window: log in, spawn, fetch, answer, kernel, the first cells."""
    began = time.monotonic()

    async def arrive(s: Student, offset: float) -> None:
        await at(offset, began)
        try:
            await s.timed("lecture", "login", s.login())
            await s.timed("lecture", "spawn", s.spawn())
            await s.timed("lecture", "fetch", s.fetch())
            await s.answer()
            await s.timed("lecture", "kernel", s.start_kernel())
            for code in chapter_cells():
                await s.timed("lecture", "cell", s.execute(code))
        except (StepError, OSError, asyncio.TimeoutError) as error:
            record.error("lecture", s.user, f"{type(error).__name__}: {error}")

    await bounded(window, [arrive(s, random.uniform(0, window)) for s in students], record, "lecture")


async def lab(students: list[Student], window: float, record: Record) -> None:
    """Everyone runs the chapter's engine cell again and again for the window, thinking 5-20 s between runs."""
    began = time.monotonic()

    async def work(s: Student) -> None:
        await asyncio.sleep(random.uniform(0, 5))
        try:
            while time.monotonic() - began < window:
                await s.timed("lab", "cell", s.execute(chapter_cells()[-1]))
                await asyncio.sleep(random.uniform(5, 20))
        except (StepError, OSError, asyncio.TimeoutError) as error:
            record.error("lab", s.user, f"{type(error).__name__}: {error}")

    await bounded(window, [work(s) for s in students if s.ws is not None], record, "lab")


async def deadline(students: list[Student], window: float, record: Record, site: Hub,
                   instructor: Instructor) -> None:
    """Every student submits within the window (a third twice); the instructor collects and grades meanwhile."""
    began = time.monotonic()
    twice = set(random.sample(range(len(students)), len(students) // 3))

    async def submit(k: int, s: Student) -> None:
        first = random.uniform(0, window * (0.5 if k in twice else 1.0))
        await at(first, began)
        try:
            await s.save_and_submit("deadline")
            if k in twice:
                await at(random.uniform(first + window * 0.25, window), began)
                await s.save_and_submit("deadline")
        except (StepError, OSError, asyncio.TimeoutError) as error:
            record.error("deadline", s.user, f"{type(error).__name__}: {error}")

    instructor.start()
    try:
        await bounded(window, [submit(k, s) for k, s in enumerate(students)], record, "deadline")
    finally:
        await asyncio.to_thread(instructor.stop)


async def bounded(window: float, work: list, record: Record, shape: str) -> None:
    tasks = [asyncio.ensure_future(w) for w in work]
    if not tasks:
        record.error(shape, "?", "no student could take part (see the shapes before)")
        return
    done, pending = await asyncio.wait(tasks, timeout=window + GRACE)
    for task in pending:
        task.cancel()
        record.error(shape, "?", f"still running {window + GRACE:.0f} s after the shape began: cancelled")
    for task in done:
        if task.exception() is not None:
            record.error(shape, "?", f"{type(task.exception()).__name__}: {task.exception()}")


class Instructor:
    """Collects every ``every`` seconds and grades what was collected, in a thread, until stopped."""

    def __init__(self, site: Hub, every: float = 20):
        self.site, self.every = site, every
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.collects: list[float] = []
        self.errors: list[str] = []
        self.grade: subprocess.Popen | None = None

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            done = self.site.instructor_command("collect", ASSIGNMENT, "--exchange", str(self.site.exchange),
                                                timeout=600)
            self.collects.append(time.monotonic() - began)
            if done.returncode != 0:
                self.errors.append(f"collect: {done.stderr[-500:]}")
            if self.grade is None or self.grade.poll() is not None:
                self.grade = subprocess.Popen(  # in the background: it takes longer than a collect
                    self.site.instructor_argv("grade", ASSIGNMENT, "--jobs", "1"),
                    cwd=self.site.home(self.site.instructor),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            self.stopping.wait(max(0.0, self.every - (time.monotonic() - began)))

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        if self.grade is not None and self.grade.poll() is None:
            os.killpg(self.grade.pid, signal.SIGKILL)  # grading resumes where it stopped (the ledger)
            self.grade.wait()


# -- what the machine spends --------------------------------------------------------------------------

class Sampler:
    """Each second: every user's resident memory and CPU time, the hub's and the proxy's memory, the load."""

    def __init__(self, site: Hub):
        self.site = site
        self.samples: list[dict] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.label = ""

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()

    def _run(self) -> None:
        uids = {uid: user for user, uid in self.site.uids.items()}
        while not self.stopping.wait(1.0):
            memory: dict[str, int] = {}
            cpu: dict[str, float] = {}
            for p in psutil.process_iter(["uids", "memory_info", "cpu_times"]):
                user = uids.get(p.info["uids"].real) if p.info["uids"] else None
                if user and p.info["memory_info"] is not None and p.info["cpu_times"] is not None:
                    memory[user] = memory.get(user, 0) + p.info["memory_info"].rss
                    cpu[user] = cpu.get(user, 0.0) + p.info["cpu_times"].user + p.info["cpu_times"].system
            own = {}
            for name, p in self.site.hub_processes().items():
                with contextlib.suppress(psutil.Error):
                    own[name] = p.memory_info().rss
            self.samples.append({"t": time.monotonic(), "label": self.label, "memory": memory, "cpu": cpu,
                                 "own": own, "load": os.getloadavg()[0]})

    def during(self, label: str) -> list[dict]:
        return [s for s in self.samples if s["label"] == label]


def per_student(samples: list[dict], students: list[str]) -> dict:
    """Median resident MiB per student and CPU cores per student over the samples (CPU from the first to the last)."""
    if len(samples) < 2:
        return {}
    memory = statistics.median(sum(s["memory"].get(u, 0) for u in students) / len(students) for s in samples)
    seconds = samples[-1]["t"] - samples[0]["t"]
    cpu = sum(samples[-1]["cpu"].get(u, 0.0) - samples[0]["cpu"].get(u, 0.0) for u in students)
    return {"MiB": memory / 2**20, "cores": cpu / seconds / len(students), "CPU s": cpu / len(students),
            "hub MiB": max(s["own"].get("hub", 0) for s in samples) / 2**20,
            "proxy MiB": max(s["own"].get("proxy", 0) for s in samples) / 2**20,
            "load": max(s["load"] for s in samples)}


# -- counting the submissions --------------------------------------------------------------------------

def count_submissions(site: Hub, students: list[Student]) -> dict:
    """Submissions counted three ways: the students' 2xx replies, the exchange's inbound folders, and the
    course's collected folder (one per student, holding the token of their latest submission)."""
    inbound = site.exchange / COURSE / "inbound"
    in_exchange: dict[str, int] = {}
    for folder in inbound.iterdir() if inbound.is_dir() else []:
        user = folder.name.split("+")[0]
        if folder.name.split("+")[1:2] == [ASSIGNMENT]:
            in_exchange[user] = in_exchange.get(user, 0) + 1
    missing, duplicated, stale = [], [], []
    collected = site.course / "submitted"
    for s in students:
        if not s.submitted:
            continue
        folder = collected / s.user / ASSIGNMENT
        notebooks = list(folder.glob("*.ipynb")) if folder.is_dir() else []
        if not notebooks:
            missing.append(s.user)
            continue
        text = "".join(p.read_text() for p in notebooks)
        tokens = [t for t in s.submitted if t in text]
        if len(tokens) > 1 or len(notebooks) > 1:
            duplicated.append(s.user)
        elif tokens != [s.submitted[-1]]:
            stale.append(s.user)
    others = sorted(p.name for p in collected.iterdir() if p.name not in {s.user for s in students}) \
        if collected.is_dir() else []
    return {"made": sum(len(s.submitted) for s in students), "in exchange": sum(in_exchange.values()),
            "students who submitted": sum(1 for s in students if s.submitted),
            "collected": sum(1 for s in students if s.submitted) - len(missing),
            "exchange matches students": all(in_exchange.get(s.user, 0) == len(s.submitted) for s in students),
            "missing": missing, "duplicated": duplicated, "stale": stale, "strangers": others}


# -- a run --------------------------------------------------------------------------------------------

def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p * len(ordered) + 0.5) - 1))]  # nearest rank
    return {"n": len(ordered), "p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "max": ordered[-1]}


def run_class(n: int, minutes: dict[str, float], root: Path, cull_timeout: int = 3600, cull_every: int = 300,
              activity_interval: int = 300, spawn_limit: int | None = None, after=None,
              install: bool = True) -> dict:
    """One class of n students through the three shapes on a hub of its own; the users are removed at the end.

    ``after(site, students)``: called before the users are removed (the test checks the culler there).
    ``install=False``: the environments are installed already (by the test run): only this hub's folders are made."""
    site = class_hub(root, n, cull_timeout, cull_every, activity_interval, spawn_limit)
    record = Record()
    result: dict = {"n": n, "minutes": minutes, "load before": os.getloadavg()}
    try:
        if install:
            site.install()
        else:
            site.install_site()
        site.add_users()
        result["hub start s"] = site.start()
        course = site.course
        for other in (course / "source").iterdir():
            if other.name != ASSIGNMENT:
                shutil.rmtree(other)
        released = site.instructor_command("release", ASSIGNMENT, "--exchange", str(site.exchange), timeout=1800)
        if released.returncode != 0:
            raise RuntimeError(f"release: {released.stdout[-2000:]}{released.stderr[-2000:]}")
        result.update(asyncio.run(_shapes(site, minutes, record, after)))
    finally:
        site.stop()
        result["files removed by hand"] = site.remove_users()
        result["users"], result["uids"] = list(site.uids), list(site.uids.values())
    result["errors"] = record.errors
    result["429 pages waited out"] = record.waited
    result["steps"] = {shape: {step: percentiles(v) for step, v in steps.items()}
                       for shape, steps in record.times.items()}
    result["load after"] = os.getloadavg()
    return result


async def _shapes(site: Hub, minutes: dict[str, float], record: Record, after) -> dict:
    students = [Student(site, user, record) for user in site.students]
    out: dict = {}
    instructor = Instructor(site)
    try:
        with Sampler(site) as sampler:
            sampler.label = "lecture"
            await lecture(students, minutes["lecture"] * 60, record)
            sampler.label = "idle"
            await asyncio.sleep(15)
            sampler.label = "lab"
            await lab(students, minutes["lab"] * 60, record)
            sampler.label = "deadline"
            await deadline(students, minutes["deadline"] * 60, record, site, instructor)
            sampler.label = "after"
        users = [s.user for s in students]
        out["idle student"] = per_student(sampler.during("idle"), users)
        out["active student"] = per_student(sampler.during("lab"), users)
        out["deadline"] = per_student(sampler.during("deadline"), users)
        out["lecture"] = per_student(sampler.during("lecture"), users)
        final = await asyncio.to_thread(site.instructor_command, "collect", ASSIGNMENT, "--exchange",
                                        str(site.exchange), timeout=900)
        if final.returncode != 0:
            record.error("deadline", "instructor", f"the last collect: {final.stderr[-500:]}")
        record.errors.extend(f"deadline: instructor: {e}" for e in instructor.errors)
        out["instructor collects s"] = percentiles(instructor.collects)
        out["submissions"] = count_submissions(site, students)
        if after is not None:
            out["after"] = await after(site, students)
    finally:
        for s in students:
            await s.close()
    return out


# -- reporting ---------------------------------------------------------------------------------------

def table(results: list[dict]) -> str:
    lines = [f"{'N':>4} {'shape':<9} " + " ".join(f"{step + ' p50/p95/p99':>20}" for step in STEPS)]
    for r in results:
        for shape in SHAPES:
            steps = r["steps"].get(shape, {})
            cells = [(f"{steps[s]['p50']:.1f}/{steps[s]['p95']:.1f}/{steps[s]['p99']:.1f}" if s in steps else "-")
                     for s in STEPS]
            lines.append(f"{r['n']:>4} {shape:<9} " + " ".join(f"{c:>20}" for c in cells))
        sub = r.get("submissions", {})
        idle, active = r.get("idle student", {}), r.get("active student", {})
        lines.append(
            f"     errors {len(r['errors'])}; submissions made {sub.get('made')}, in the exchange "
            f"{sub.get('in exchange')}, collected {sub.get('collected')} of {sub.get('students who submitted')} "
            f"students (missing {len(sub.get('missing', []))}, duplicated {len(sub.get('duplicated', []))}, "
            f"stale {len(sub.get('stale', []))}); idle student {idle.get('MiB', 0):.0f} MiB "
            f"{idle.get('cores', 0):.3f} cores; active (lab) {active.get('MiB', 0):.0f} MiB "
            f"{active.get('cores', 0):.3f} cores; hub {max(active.get('hub MiB', 0), idle.get('hub MiB', 0)):.0f} "
            f"MiB, proxy {max(active.get('proxy MiB', 0), idle.get('proxy MiB', 0)):.0f} MiB; "
            f"CPU per student in the lecture {r.get('lecture', {}).get('CPU s', 0):.1f} s; load average "
            f"{r['load before'][0]:.1f} before, max "
            f"{max(x.get('load', 0) for x in (idle, active, r.get('deadline', {}))):.1f} during")
    return "\n".join(lines)


def holds(result: dict, p95_submit: float = 5.0) -> bool:
    """The issue's bar: no error, every submission collected exactly once, the deadline's p95 submit under 5 s."""
    sub = result.get("submissions", {})
    submit = result["steps"].get("deadline", {}).get("submit", {})
    return (not result["errors"] and sub.get("exchange matches students") and not sub.get("missing")
            and not sub.get("duplicated") and not sub.get("stale") and submit.get("p95", 1e9) < p95_submit)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="students (default: %(default)s)")
    parser.add_argument("--sweep", help="step N through these counts (e.g. 10,20,40), stopping at the first that "
                                        "fails the bar (an error, a submission lost or doubled, p95 submit >= 5 s)")
    parser.add_argument("--minutes", type=float, help="every shape's window, in minutes (default: 2, 10, 2)")
    parser.add_argument("--lab-minutes", type=float, help="the lab's window alone")
    parser.add_argument("--spawn-limit", type=int,
                        help="the hub's concurrent spawn limit (default: the configuration's)")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--logs", type=Path, help="keep each run's hub log in this folder")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_class: run as root (it creates system users; the hub starts each server as its user)")
    minutes = {"lecture": 2.0, "lab": 10.0, "deadline": 2.0}
    if args.minutes:
        minutes = dict.fromkeys(SHAPES, args.minutes)
    if args.lab_minutes:
        minutes["lab"] = args.lab_minutes
    counts = [int(x) for x in args.sweep.split(",")] if args.sweep else [args.n]
    print(f"method: per N a fresh hub (deploy/hub.py, loopback) and N new system users; shapes in order on the same "
          f"servers, windows {minutes} minutes; the machine's other work goes on (a shared 2-core machine): the "
          f"load average is printed beside every row. {os.cpu_count()} CPUs, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB", flush=True)
    results = []
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
            root = Path(tmp)
            root.chmod(0o755)  # every user's server reads the configuration under it
            try:
                result = run_class(n, minutes, root, spawn_limit=args.spawn_limit)
            finally:
                if args.logs and (root / "hub.log").exists():
                    args.logs.mkdir(parents=True, exist_ok=True)
                    shutil.copy(root / "hub.log", args.logs / f"hub-{n}.log")
        results.append(result)
        print(table([result]), flush=True)
        for error in result["errors"][:20]:
            print(f"     error: {error}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str))
        if args.sweep and not holds(result):
            held = counts[counts.index(n) - 1] if n != counts[0] else "none"
            print(f"N = {n} fails the bar; the largest N held: {held}")
            break
    else:
        if args.sweep:
            print(f"every N held, up to {counts[-1]}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
