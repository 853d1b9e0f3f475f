"""ngshare, nbgrader's exchange on Kubernetes (deploy/kubernetes/README.md), as a managed service of
a real JupyterHub on this machine, for the tests: ``Ngshare(tmp_path)`` starts the hub and ngshare
from `.venv-ngshare` (`make ngshare`) and always stops them, by process id.

No Kubernetes and no spawner: the tests play the students' servers. A process run by ``run(user,
home, ...)`` has what a server on the cluster has: its user's hub token, the user's name, and
the ``nbgrader_config.py`` deploy/kubernetes/values.yaml puts in every server (ngshare_exchange,
the plugin the Assignments tab runs, pointed at ngshare). Clients talk to the hub's API and to
ngshare directly, as in the cluster (values.yaml's ngshare url is the service's own, not the
proxy's), so the hub's proxy is a dict in the hub's memory.

Who is who: ``instructor`` is the course's instructor and ngshare's admin (the ngshare chart's
``ngshare.admins``), who creates the course; ``grading-service`` is a hub service with a token and
no roles, an instructor of the course in ngshare (the grading service's identity); the harness
itself is a hub service with the admin role, which makes users and their tokens over the REST API.
"""
from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psutil
import requests
import yaml

from support import REPO
from support.hub import free_port, stop_session

VENV = REPO / ".venv-ngshare"
COURSE = "autograd-course"
GRADER = "grading-service"

# ngshare binds 0.0.0.0 in service mode ("for the proxy"); a test's ngshare answers on loopback only.
LOOPBACK_SHIM = '''\
import sys

import tornado.httpserver
from ngshare import ngshare

listen = tornado.httpserver.HTTPServer.listen


def on_loopback(self, port, address=None, **kwargs):
    return listen(self, port, "127.0.0.1", **kwargs)


tornado.httpserver.HTTPServer.listen = on_loopback
ngshare.main(sys.argv[1:])
'''

HUB_CONFIG = '''\
from jupyterhub.proxy import Proxy


class RoutesInMemory(Proxy):
    """No proxy process: nothing here goes through the proxy (clients call the hub's API and
    ngshare directly), but the hub keeps its routes somewhere."""

    should_start = False
    routes = {{}}

    async def add_route(self, routespec, target, data):
        self.routes[routespec] = {{"routespec": routespec, "target": target, "data": data}}

    async def delete_route(self, routespec):
        self.routes.pop(routespec, None)

    async def get_all_routes(self):
        return dict(self.routes)


c = get_config()  # noqa: F821
c.JupyterHub.proxy_class = RoutesInMemory
c.JupyterHub.bind_url = "http://127.0.0.1:{proxy_port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.JupyterHub.db_url = "sqlite:///{root}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{root}/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = "{root}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "null"  # nobody logs in: the tests hold tokens
c.JupyterHub.services = [
    {{"name": "ngshare", "url": "http://127.0.0.1:{ngshare_port}",
      "command": ["{python}", "{root}/ngshare_on_loopback.py", "--database", "sqlite:///{root}/ngshare.db",
                  "--storage", "{root}/ngshare-files/", "--admins", "{instructor}"]}},
    {{"name": "{grader}", "api_token": "{grader_token}"}},
    {{"name": "harness", "api_token": "{admin_token}"}},
]
c.JupyterHub.load_roles = [
    {{"name": "admin", "services": ["harness"]}},
    # as deploy/kubernetes/values.yaml's hub.loadRoles (the exchange works without it: test_ngshare_exchange)
    {{"name": "user", "scopes": ["self", "access:services!service=ngshare"]}},
]
'''


class Ngshare:
    """A JupyterHub from `.venv-ngshare` with ngshare as its managed service, in ``root``.

    ``url`` is ngshare's API base as ngshare_exchange wants it; ``token(user)`` a hub API token of
    that user; ``env``/``run`` a process acting as that user's Jupyter server. Use it as a context
    manager: the hub, ngshare and everything they started are stopped at the end."""

    def __init__(self, root: Path, instructor: str = "instr", students: tuple[str, ...] = ("alice", "bob")):
        python = VENV / "bin" / "python"
        if not (python.exists() and (VENV / "bin" / "jupyterhub").exists()):
            raise RuntimeError(f"ngshare's environment {VENV} is missing: run `make ngshare` "
                               "(`make test` builds it)")
        self.root, self.instructor, self.students = root, instructor, students
        ports: set[int] = set()
        while len(ports) < 3:
            ports.add(free_port())
        # proxy_port: the hub's public URL, which it needs and nothing listens on (no proxy runs)
        self.hub_port, self.ngshare_port, proxy_port = sorted(ports)
        self.hub_api = f"http://127.0.0.1:{self.hub_port}/hub/api"
        # JupyterHub serves a service under /services/<name>/ and tells ngshare so
        # (JUPYTERHUB_SERVICE_PREFIX): its API is there on its own port too
        self.url = f"http://127.0.0.1:{self.ngshare_port}/services/ngshare"
        self.grader_token = secrets.token_hex(32)
        self._admin = {"Authorization": f"token {secrets.token_hex(32)}"}
        self._tokens: dict[str, str] = {}
        self.log = root / "jupyterhub.log"
        (root / "ngshare_on_loopback.py").write_text(LOOPBACK_SHIM)
        (root / "jupyterhub_config.py").write_text(HUB_CONFIG.format(
            root=root, hub_port=self.hub_port, ngshare_port=self.ngshare_port, proxy_port=proxy_port, python=python,
            instructor=instructor, grader=GRADER, grader_token=self.grader_token,
            admin_token=self._admin["Authorization"].split()[1]))
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Ngshare:
        try:
            self.start()
            self.create_course()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> float:
        """The hub and ngshare, in a session of their own; seconds until ngshare answers."""
        started = time.monotonic()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL_ENV"))}
        with self.log.open("w") as log:  # the hub's copy of the descriptor stays open
            self.process = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", "jupyterhub_config.py"],
                                            cwd=self.root, env=env, start_new_session=True, stdout=log,
                                            stderr=subprocess.STDOUT)
        while time.monotonic() - started < 120:
            try:  # ngshare's own health check, on the port the hub gave it
                if requests.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - started
            except requests.ConnectionError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"the hub exited: {self.log.read_text()[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"ngshare did not answer in 120 s: {self.log.read_text()[-3000:]}")

    def processes(self) -> list[psutil.Process]:
        """The hub and what it started (ngshare)."""
        if self.process is None:
            return []
        try:
            hub = psutil.Process(self.process.pid)
            return [hub, *hub.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        if self.process is not None:
            stop_session(self.process)
            self.process = None

    def token(self, user: str, scopes: list[str] | None = None) -> str:
        """A hub API token of ``user`` (the user made on first use), as their server holds one;
        ``grading-service``'s is the service's own. With ``scopes``, a new token of only those."""
        if user == GRADER:
            return self.grader_token
        if user not in self._tokens or scopes is not None:
            r = requests.post(f"{self.hub_api}/users/{user}", headers=self._admin, timeout=30)
            assert r.status_code in (201, 409), f"making hub user {user}: {r.status_code} {r.text[:300]}"
            r = requests.post(f"{self.hub_api}/users/{user}/tokens", headers=self._admin, timeout=30,
                              json={"note": "the tests' stand-in for the server's token",
                                    **({"scopes": scopes} if scopes is not None else {})})
            assert r.status_code == 201, f"a token for {user}: {r.status_code} {r.text[:300]}"
            if scopes is not None:
                return r.json()["token"]
            self._tokens[user] = r.json()["token"]
        return self._tokens[user]

    def nbgrader_config(self) -> str:
        """The ``nbgrader_config.py`` deploy/kubernetes/values.yaml puts in every server, pointed here."""
        values = yaml.safe_load((REPO / "deploy" / "kubernetes" / "values.yaml").read_text())
        text = values["singleuser"]["extraFiles"]["nbgrader-exchange"]["stringData"]
        cluster_url = f'{values["hub"]["services"]["ngshare"]["url"]}/services/ngshare'
        if f'"{cluster_url}"' not in text:
            raise RuntimeError(f"deploy/kubernetes/values.yaml's nbgrader_config.py does not name {cluster_url}")
        return text.replace(cluster_url, self.url)

    def env(self, user: str, home: Path) -> dict[str, str]:
        """The environment of a process acting as ``user``'s Jupyter server on the cluster; for
        ``grading-service``, of the service run with its token on the grading machine, whose Jupyter
        configuration names no exchange (the URL is the service's argument). JupyterHub names a
        service in JUPYTERHUB_SERVICE_NAME, not JUPYTERHUB_USER; USER is set for both: importing
        ngshare_exchange reads one of the two, and says KeyError when neither is there."""
        config = self.root / "jupyter-config" / user
        config.mkdir(parents=True, exist_ok=True)
        if user != GRADER:
            (config / "nbgrader_config.py").write_text(self.nbgrader_config())
        home.mkdir(parents=True, exist_ok=True)
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL_ENV"))}
        who = {"JUPYTERHUB_SERVICE_NAME": user} if user == GRADER else {"JUPYTERHUB_USER": user}
        return {**keep, "HOME": str(home), "USER": user, **who, "JUPYTERHUB_API_TOKEN": self.token(user),
                "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter")}

    def run(self, user: str, home: Path, *argv: str | Path, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """``python *argv`` (the main venv's, as a server's) as ``user`` in ``cwd`` (their home)."""
        env = self.env(user, home)
        return subprocess.run([sys.executable, *map(str, argv)], env=env, cwd=cwd or home, capture_output=True,
                              text=True, timeout=timeout)

    def course_management(self, user: str, *argv: str, said: str = "Successfully") -> subprocess.CompletedProcess:
        """ngshare_exchange's `ngshare-course-management` as ``user`` (the main venv's, as on a server);
        an error names the command. It prints its errors in red and exits -1, or exits 0 after printing
        some (a student add_students could not add): ``said`` is what it prints when it did the work."""
        command = Path(sys.executable).parent / "ngshare-course-management"
        env = self.env(user, self.root / "home" / user)
        done = subprocess.run([str(command), *argv], env=env, cwd=env["HOME"], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0 or said not in done.stdout or "\033[91m" in done.stdout:
            raise RuntimeError(f"ngshare-course-management {' '.join(argv)}: {done.stdout[-2000:]}"
                               f"{done.stderr[-2000:]}")
        return done

    def create_course(self) -> None:
        """The course as deploy/kubernetes/README.md's instructor makes it (ngshare's admin), with
        the README's own `ngshare-course-management` commands, in its order: the course, the roster,
        and the grading service as one of its instructors."""
        roster = self.root / "roster.csv"  # the columns the README says add_students requires
        roster.write_text("student_id,first_name,last_name,email\n" + "".join(f"{s},,,\n" for s in self.students))
        commands = readme_course_commands()
        assert [c[0] for c in commands] == ["create_course", "add_students", "add_instructor"], commands
        for command in commands:
            argv = [{"instructor1": self.instructor, "roster.csv": str(roster)}.get(word, word) for word in command]
            if argv[0] == "add_students":
                # --no-gb (the README's choice for not from ~/course): these tests keep no gradebook there
                self.course_management(self.instructor, *argv, "--no-gb",
                                       said=f"{self.students[-1]} was successfully added to {COURSE}")
            else:
                self.course_management(self.instructor, *argv)


def readme_course_commands() -> list[list[str]]:
    """Every `ngshare-course-management` command of deploy/kubernetes/README.md, in its order (in a
    code span, which may wrap, or on a line of a shell block), without the command's name."""
    text = (REPO / "deploy" / "kubernetes" / "README.md").read_text()
    found = [(m.start(), m[1]) for m in re.finditer(r"`ngshare-course-management\s+([^`]+)`", text)]
    found += [(m.start(), m[1]) for m in re.finditer(r"^ngshare-course-management\s+(.+)$", text, flags=re.M)]
    return [shlex.split(" ".join(words.split())) for _, words in sorted(found)]
