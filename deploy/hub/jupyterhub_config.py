"""JupyterHub for one class on one machine: students as system users, nbgrader's exchange on disk.

Installed by `deploy/hub.py install` into the configuration folder (default /etc/autograd-course)
beside the two Jupyter configuration folders it hands out: `student/` to everyone, `instructor/`
to the members of the `instructors` group (through `Spawner.group_overrides`, JupyterHub >= 5).
The roster (`roster.csv`: username,role) says who may log in and who teaches.
"""
import csv
import json
import os
import pwd
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (injected by traitlets when the file is loaded)

HERE = Path(__file__).resolve().parent
PREFIX = Path(os.environ.get("AUTOGRAD_HUB_PREFIX", "/opt/autograd-hub"))
STATE = Path(os.environ.get("AUTOGRAD_HUB_STATE", "/var/lib/autograd-hub"))


def roster(path: Path = HERE / "roster.csv") -> dict[str, set[str]]:
    """{role: usernames} from the roster; a role other than student or instructor is refused."""
    roles: dict[str, set[str]] = {"student": set(), "instructor": set()}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            role = (row.get("role") or "").strip()
            if role not in roles:
                raise ValueError(f"{path}: user {row.get('username')!r} has role {role!r}; use student or instructor")
            roles[role].add(row["username"].strip())
    return roles


ROLES = roster()

# Loopback by default: put a TLS-terminating reverse proxy in front for a real class
# (AUTOGRAD_HUB_IP=0.0.0.0 only behind one).
c.JupyterHub.ip = os.environ.get("AUTOGRAD_HUB_IP", "127.0.0.1")
c.JupyterHub.port = PORT = int(os.environ.get("AUTOGRAD_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = PORT + 81  # 8081 beside 8000, as JupyterHub's defaults: two hubs on one machine
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 1}"
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.ConfigurableHTTPProxy.command = [str(PREFIX / "node" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")

# Students and instructors are system users of this machine (PAM checks their passwords; a
# university would put its single sign-on here instead: an OAuthenticator or LTI authenticator).
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = ROLES["student"] | ROLES["instructor"]
c.Authenticator.admin_users = set()  # nobody needs the hub's admin page to teach
c.JupyterHub.load_groups = {"instructors": {"users": sorted(ROLES["instructor"])}}

# Every server runs as its own user (LocalProcessSpawner: setuid to the system user), in their
# home (mode 0700: `deploy/hub.py users` makes it so), from one environment every user can read.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(PREFIX / "venv" / "bin" / "jupyterhub-singleuser")]
# Students land on their course page (student/python/autograd_course_page: the assignments, due
# dates, submissions and feedback); instructors on JupyterLab (below).
c.Spawner.default_url = "/course/"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
# The students' Jupyter configuration: the exchange, no formgrader, no create-assignment toolbar.
EXCHANGE = os.environ.get("AUTOGRAD_EXCHANGE", "/srv/nbgrader/exchange")
# Everyone's too (everyone/): the terminal a non-login shell, so that it keeps the PATH the hub gives
# (Debian's /etc/profile resets it: the instructors' `autograder` was "command not found", the
# students' `python` not their kernel's); no news or update check from the network, no news toast;
# the course's name in JupyterLab's title (everyone/labconfig/page_config.d/, written by deploy/hub.py).
# The students' own server extensions (student/python/): the course page (autograd_course_page) and
# Validate in the course's words (autograd_validate).
CONFIG_PATH = {role: os.pathsep.join([str(HERE / role), str(HERE / "everyone")]) for role in ("student", "instructor")}
c.Spawner.environment = {"JUPYTER_CONFIG_PATH": CONFIG_PATH["student"], "AUTOGRAD_EXCHANGE": EXCHANGE,
                         "PYTHONPATH": str(HERE / "student" / "python"),
                         "PATH": f"{PREFIX / 'venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin"}
# Instructors get the formgrader (manual grading of the written answers) guarded against their
# students' scripts (instructor/python/autograd_formgrader_guard.py), their course folder, and the
# grader on their PATH (readable by the instructors' system group only: deploy/hub.py install_grader).
GRADER = PREFIX / "grader"
c.Spawner.group_overrides = {
    "01-instructors": {
        "groups": ["instructors"],
        "spawner_override": {"default_url": "/lab", "environment": {  # merged into the above
            "JUPYTER_CONFIG_PATH": CONFIG_PATH["instructor"],
            "PYTHONPATH": str(HERE / "instructor" / "python"),
            "AUTOGRAD_MATHJAX": str(GRADER / "lib" / "sphinx-mathjax-offline" / "static" / "mathjax"),
            "PATH": f"{GRADER / 'bin'}:{PREFIX / 'venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        }},
    },
}

# -- A class at once (issue 33; the numbers: deploy/README.md, "How many students one machine holds") --
# Idle servers are stopped by jupyterhub-idle-culler, a hub service with only the scopes it needs; the
# student's files stay in their home and their next visit starts a server on them again.
CULL_TIMEOUT = int(os.environ.get("AUTOGRAD_CULL_TIMEOUT", "3600"))  # seconds without activity
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_TIMEOUT}",
                f"--cull-every={int(os.environ.get('AUTOGRAD_CULL_EVERY', '300'))}"],
}]
c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"],
                            "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
# The servers report activity every this many seconds (and the hub reads the proxy's as often): the
# culler can only be as precise as this.
ACTIVITY_INTERVAL = int(os.environ.get("AUTOGRAD_ACTIVITY_INTERVAL", "300"))
c.JupyterHub.last_activity_interval = ACTIVITY_INTERVAL
c.Spawner.environment["JUPYTERHUB_ACTIVITY_INTERVAL"] = str(ACTIVITY_INTERVAL)
# At most this many servers start at once; a student past it is answered 429. Measured (deploy/README.md):
# an arrival costs about 6 CPU-seconds here, and ten at once took 36 s at p95 on 2 cores: well inside
# Spawner.start_timeout (120 s), with the students already working left their share of the machine.
# Raise it in proportion to the cores.
c.JupyterHub.concurrent_spawn_limit = int(os.environ.get("AUTOGRAD_SPAWN_LIMIT", "10"))
# The 429 page (templates/error.html) tries again by itself after the hub's Retry-After, drawn from this
# range. JupyterHub's default, 30-60 s, is several spawns long: with ten spawns of 8-16 s in flight a slot
# frees every second or two, so students waited a minute beside free slots (69 of 90 arriving over 20 s,
# spawn p95 114 s). A few seconds, spread at random so the waiting class does not retry in step.
c.JupyterHub.spawn_throttle_retry_range = (3, 8)
c.JupyterHub.template_paths = [str(HERE / "templates")]
# The course's name (the book's title in _config.yml, written here by deploy/hub.py install) on the
# login page (templates/login.html), with a word about the account.
if not (HERE / "course.json").is_file():
    raise SystemExit(f"{HERE / 'course.json'} is missing: run `deploy/hub.py install` (or `site`) again: it writes it")
COURSE_TITLE = json.loads((HERE / "course.json").read_text(encoding="utf-8"))["title"]
c.JupyterHub.template_vars = {"course_title": COURSE_TITLE}

# -- The book (issue 39): the pages `make book` built, copied under the prefix by deploy/hub.py install,
# served read-only at /services/book/ to anyone (the book is public) by book.py, as `nobody`: the
# notebooks' chapter links lead there. Absent when the book was not built before the install.
BOOK = PREFIX / "book"
if (BOOK / "index.html").is_file():
    c.JupyterHub.services.append({
        "name": "book", "display": True, "url": f"http://127.0.0.1:{PORT + 82}", "user": "nobody", "cwd": str(BOOK),
        "command": [sys.executable, str(HERE / "book.py"), str(BOOK)],
        "environment": {"PATH": "/usr/bin:/bin"},
    })

# -- Feedback on submit (issue 38; deploy/README.md, "The grading service") --
# `autograder serve` on one instructor's ~/course, as that instructor (the account whose commands read
# and write the course: never root, never a student), a managed service the hub starts with itself and
# starts again if it dies (a kill -9 loses nothing: the service picks up where it was). Opt-in:
# AUTOGRAD_GRADING_SERVICE=<instructor> when the hub starts, so an instructor grading by hand is
# never surprised by a second grader.
GRADING_FOR = os.environ.get("AUTOGRAD_GRADING_SERVICE", "")
if GRADING_FOR:
    if GRADING_FOR not in ROLES["instructor"]:
        raise ValueError(f"AUTOGRAD_GRADING_SERVICE={GRADING_FOR!r} is not an instructor of the roster")
    GRADING_HOME = pwd.getpwnam(GRADING_FOR).pw_dir
    c.JupyterHub.services.append({
        "name": "grading",
        "user": GRADING_FOR,
        "cwd": GRADING_HOME,  # not the hub's own folder (root's, 0700), which the grading workers could not enter
        "command": [str(GRADER / "bin" / "autograder"), "--course", f"{GRADING_HOME}/course",
                    "serve", "--exchange", EXCHANGE,
                    "--jobs", os.environ.get("AUTOGRAD_GRADING_JOBS", str(max(1, (os.cpu_count() or 2) // 2)))],
        "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
    })
