"""The class's hub, for the tests that use it (tests/deploy/): deploy/hub.py installs and
starts a JupyterHub; students and an instructor log in over HTTP and work through the Assignments
tab's API, as helpers below let a test do.

Runs on loopback only, as root (the hub starts each user's server as that user). The users it
creates have names of their own and are removed at the end; the hub and every server it started
are stopped by their process ids. The single-user environment (/opt/autograd-hub) is built once
per machine by `deploy/hub.py install` and reused.
"""
from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import psutil
import requests

from autograder.course import notebook
from autograder.grading.executors import QUIET_DASK

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


@contextlib.contextmanager
def dask_cluster(site: Hub, root: Path):
    """A scheduler and a worker on loopback, run by the instructor (not root) from the hub's
    environment and the grader, with TLS: the certificates in the instructor's home (mode 0700),
    made by deploy/dask_certs.py as deploy/dask.md says. Yields the address and grade's TLS flags."""
    instructor_home = site.home(site.instructor)
    certs = instructor_home / ".dask-certs"
    done = as_user(site.instructor, "python3", GRADER.parent / "dask_certs.py", certs)  # as deploy/dask.md says
    assert done.returncode == 0, done.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tls://127.0.0.1:{port}"
    tls = ["--tls-ca-file", certs / "ca.pem", "--tls-cert", certs / "cluster.pem", "--tls-key", certs / "cluster.key"]
    python = [str(PREFIX / "venv" / "bin" / "python"), "-m"]
    env = [f"PYTHONPATH={PREFIX / 'grader' / 'lib'}", *(f"{k}={v}" for k, v in QUIET_DASK.items())]
    started = []
    for command in ([*python, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                     "--protocol", "tls", *tls, "--no-dashboard"],
                    # its scratch in the instructor's home, which goes with the user: killed at the end, the
                    # worker cleans nothing, and /tmp/dask-scratch-space would outlive the user's uid
                    [*python, "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard",
                     "--host", "127.0.0.1", "--no-nanny", "--local-directory", str(instructor_home / ".dask"),
                     *tls]):
        log = (root / f"dask-{len(started)}.log").open("w")
        started.append(subprocess.Popen(["runuser", "-u", site.instructor, "--", "env",
                                         f"HOME={instructor_home}", *env, *map(str, command)],
                                        stdout=log, stderr=subprocess.STDOUT, cwd=instructor_home))
    try:
        from distributed import Client
        from distributed.security import Security
        root_view = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "client.pem"),
                             tls_client_key=str(certs / "client.key"), require_encryption=True)
        with Client(address, security=root_view, timeout=120) as client:
            client.wait_for_workers(1, timeout=180)
        for process in started:  # runuser stays root for the PAM session; what it starts is the instructor's
            assert {p.username() for p in psutil.Process(process.pid).children(recursive=True)} == {site.instructor}
        yield address, ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / "client.pem"),
                        "--tls-key", str(certs / "client.key")]
    finally:
        for process in started:
            with contextlib.suppress(psutil.Error):
                for p in [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]:
                    p.kill()
            process.wait(timeout=30)


def free_port() -> int:
    """A port the kernel hands out as free, whose neighbours (+1 the proxy's API, +81 the hub's, +82
    the book's) are free too."""
    def free(port: int) -> bool:
        with socket.socket() as s:
            return port < 65536 and s.connect_ex(("127.0.0.1", port)) != 0

    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if all(free(port + k) for k in (1, 81, 82)):
            return port
    raise RuntimeError("no free port on 127.0.0.1")


class Hub:
    """deploy/hub.py's hub in a folder of a run's own (its configuration, state, exchange and port),
    an instructor and students as system users of the run's own: the one harness of the tests and
    of benchmarks/bench_class.py.

    ``students``: the students' names after the run's tag; ``shell_only``: students with a shell who
    never open the Assignments tab (the tests' mallory); ``settings``: the hub's environment variables
    (AUTOGRAD_SPAWN_LIMIT, AUTOGRAD_CULL_TIMEOUT, ...)."""

    def __init__(self, root: Path, prefix: str = "hubt", students: Sequence[str] = ("a", "b", "c"),
                 shell_only: Sequence[str] = ("m",), settings: dict[str, str] | None = None):
        self.root = root
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        tag = secrets.token_hex(2)
        self.instructor = f"{prefix}{tag}i"
        self.students = [f"{prefix}{tag}{who}" for who in students]
        self.shell_only = [f"{prefix}{tag}{who}" for who in shell_only]
        self.exchange = root / "exchange"
        self.env = {**os.environ, "AUTOGRAD_HUB_PREFIX": str(PREFIX), "AUTOGRAD_HUB_ETC": str(root / "etc"),
                    "AUTOGRAD_HUB_STATE": str(root / "state"), "AUTOGRAD_EXCHANGE": str(self.exchange),
                    "AUTOGRAD_HUB_PORT": str(self.port), **(settings or {})}
        self.roster = root / "roster.csv"
        self.passwords: dict[str, str] = {}
        self.uids: dict[str, int] = {}
        self.process: subprocess.Popen | None = None
        self.log = root / "hub.log"

    @property
    def mallory(self) -> str:
        return self.shell_only[0]

    @property
    def users(self) -> list[str]:
        return [self.instructor, *self.students, *self.shell_only]

    def command(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(HUB), *args], env=self.env, capture_output=True, text=True,
                              **kwargs)

    def hub_py(self, *args: str, timeout: float) -> str:
        """deploy/hub.py's ``args``; its output, or an error with the end of what it said."""
        done = self.command(*args, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"deploy/hub.py {args[0]}: {done.stderr[-3000:]}")
        return done.stdout

    def install(self) -> None:
        """The environments under the prefix, installed or brought up to date."""
        self.hub_py("install", timeout=1800)

    def install_site(self) -> None:
        """This hub's configuration, state and exchange, on environments already installed."""
        self.hub_py("site", timeout=300)

    def add_users(self) -> None:
        self.roster.write_text("username,role\n" + f"{self.instructor},instructor\n"
                               + "".join(f"{s},student\n" for s in [*self.students, *self.shell_only]))
        try:
            out = self.hub_py("users", str(self.roster), "--passwords", timeout=120 + 5 * len(self.users))
        finally:  # a failure half-way still removes who was made
            for user in self.users:
                with contextlib.suppress(KeyError):
                    self.uids[user] = pwd.getpwnam(user).pw_uid
        self.passwords = dict(line.strip().split(": ") for line in out.splitlines() if line.startswith("  "))

    def start(self) -> float:
        """The hub, in a session of its own; seconds until it answers."""
        started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, str(HUB), "start"], env=self.env, start_new_session=True,
                                        stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        while time.monotonic() - started < 180:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.base}/hub/api/", timeout=2) as reply:
                    if reply.status == 200:
                        return time.monotonic() - started
            if self.process.poll() is not None:
                raise RuntimeError(f"the hub exited: {self.log.read_text()[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"the hub did not answer in 180 s: {self.log.read_text()[-3000:]}")

    def hub_processes(self) -> dict[str, psutil.Process]:
        """The hub's own processes: the jupyterhub process and the proxy (its child)."""
        found: dict[str, psutil.Process] = {}
        if self.process is None:
            return found
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(self.process.pid).children(recursive=True):
                line = " ".join(p.cmdline())
                if "configurable-http-proxy" in line:
                    found["proxy"] = p
                elif "bin/jupyterhub " in line or line.endswith("bin/jupyterhub"):
                    found["hub"] = p
        return found

    def stop(self) -> None:
        """The hub's process group (it stops the servers it started), then anything left, by pid."""
        if self.process is None:
            return
        stop_session(self.process)
        self.process = None

    def user_processes(self) -> list[psutil.Process]:
        uids = set(self.uids.values())
        return [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]

    def remove_users(self) -> list[str]:
        """Every process of the run's users killed by pid, the users removed with their homes, then any
        file they still own where a run leaves files (this folder, the repository, the temporary folders)
        removed: a deleted uid is handed to the next user made. Returns what had to be removed by hand."""
        for _ in range(20):
            left = self.user_processes()
            if not left:
                break
            for p in left:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            psutil.wait_procs(left, timeout=5)
        for user in self.uids:
            for _ in range(50):
                code = subprocess.run(["userdel", "--remove", user], capture_output=True).returncode
                if code in (0, 6):  # removed, or no such user
                    break
                time.sleep(0.2)  # 8: a process of the user still ending
        return remove_owned_by(set(self.uids.values()), [self.root, REPO, Path("/tmp"), Path("/var/tmp"),
                                                           Path("/dev/shm")])

    def instructor_argv(self, *args: str) -> list[str]:
        """The instructor's command on their course, as `deploy/README.md` says to type it: as themselves,
        the grader `deploy/hub.py install` made for the instructors' group (run it with
        ``cwd=self.home(self.instructor)``)."""
        return ["runuser", "-u", self.instructor, "--", "env", f"HOME={self.home(self.instructor)}",
                str(GRADER), "--course", str(self.course), *args]

    def instructor_command(self, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
        return subprocess.run(self.instructor_argv(*args), capture_output=True, text=True,
                              cwd=self.home(self.instructor), timeout=timeout)

    @property
    def course(self) -> Path:
        return self.home(self.instructor) / "course"

    def home(self, user: str) -> Path:
        return Path(os.path.expanduser(f"~{user}"))


def stop_session(process: subprocess.Popen) -> None:
    """A process started in a session of its own: its group asked to stop (a hub stops what it
    started), killed if it does not within a minute, then every process of its tree seen before, by pid
    (a child that left the group too), waited for until it is gone."""
    tree: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    for p in tree:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(tree, timeout=30)  # gone, not only signalled, when this returns


def remove_owned_by(uids: set[int], roots: list[Path]) -> list[str]:
    """Remove every file or folder under ``roots`` owned by one of ``uids`` (deepest first); their paths.

    Only uids that no user holds any more: another user made meanwhile (by another test) may have been
    given one of them, and their files are theirs."""
    def unassigned(uid: int) -> bool:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return True
        return False
    uids = {uid for uid in uids if unassigned(uid)}
    if not uids:
        return []
    # find(1): it walks by file descriptor, so a hostile test's 40 nested 120-character folders elsewhere
    # in /tmp (longer than PATH_MAX) are walked too; -delete goes deepest first
    owned = [arg for uid in sorted(uids) for arg in ("-o", "-uid", str(uid))][1:]
    done = subprocess.run(["find", *map(str, roots), "-xdev", "(", *owned, ")", "-print0", "-delete"],
                          capture_output=True)
    return [p.decode(errors="replace") for p in done.stdout.split(b"\0") if p]


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
        """Their server started, or already running (an earlier test of the hub's started it), and
        this browser logged in to it; seconds until then."""
        started = time.monotonic()
        r = self.s.post(f"{self.hub.base}/hub/api/users/{self.user}/server", headers=self.headers(), timeout=60)
        assert r.status_code in (201, 202) or r.status_code == 400 and "is already running" in r.text, r.text
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
