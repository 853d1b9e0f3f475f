#!/usr/bin/env python3
"""A JupyterHub for one class on one machine, with nbgrader's exchange: install, add users, start.

    sudo python3 deploy/hub.py install              # the environments, the proxy, the configuration
    sudo python3 deploy/hub.py users roster.csv     # system users (homes 0700), instructors' courses
    sudo python3 deploy/hub.py start                # the hub on 127.0.0.1:8000 (foreground)
    sudo python3 deploy/hub.py site                 # another hub's folders (AUTOGRAD_HUB_ETC, ...), same install
    sudo python3 deploy/hub.py demo                 # all three for a demo class, passwords printed

Standard library only: it runs before any environment exists. Run as root (it creates system
users, and the hub must be root to start each user's server as that user). Nothing it sets up
needs root afterwards: the instructors run the grader as themselves (deploy/README.md).
"""
from __future__ import annotations

import argparse
import csv
import grp
import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PREFIX = Path(os.environ.get("AUTOGRAD_HUB_PREFIX", "/opt/autograd-hub"))
ETC = Path(os.environ.get("AUTOGRAD_HUB_ETC", "/etc/autograd-course"))
STATE = Path(os.environ.get("AUTOGRAD_HUB_STATE", "/var/lib/autograd-hub"))
EXCHANGE = Path(os.environ.get("AUTOGRAD_EXCHANGE", "/srv/nbgrader/exchange"))
PROXY = "configurable-http-proxy@5.3.0"
# A venv made from a Python under /root (mode 0700) cannot run for another user: use the system's.
SYSTEM_PYTHON = os.environ.get("AUTOGRAD_HUB_PYTHON", "/usr/bin/python3")
NAME_RULE = "lowercase letters, digits, '-' and '_', starting with a letter, at most 32 characters"
# The instructors: the only users who may read the grader (it holds the reference solutions) and
# write the course's folders of the exchange.
GROUP = os.environ.get("AUTOGRAD_HUB_GROUP", "autograd-instructors")
COURSE_ID = "autograd-course"  # as deploy/hub/{student,instructor}/nbgrader_config.py say
# The course's folders of the exchange, made by root before any student logs in (a student could
# otherwise make them first, and publish their own "assignment"): owner root, group the instructors;
# inbound takes every student's submission (write, no list; sticky: no one removes another's).
# What the grader needs that the students' environment (requirements-hub.txt) does not have: installed
# with the grader, where students cannot read it. tests/deploy/test_kubernetes.py checks that every
# dependency of the course package is in one or the other.
GRADER_ONLY = ("sphinx-mathjax-offline>=0.0.2,<1", "copydetect>=0.5,<0.6")
EXCHANGE_FOLDERS = {"": 0o2775, "outbound": 0o2775, "inbound": 0o3773, "feedback": 0o2771}
# The book as `make book` builds it: install copies it under the prefix, where the hub serves it
# (hub/book.py, at /services/book/). Its title is the course's name the hub shows.
BOOK = REPO / "_build" / "html"
BOOK_CONFIG = REPO / "_config.yml"


class HubError(Exception):
    """A step that cannot be done, said in a sentence."""


def run(*command: str | Path, **kwargs) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([str(c) for c in command], check=True, **kwargs)
    except FileNotFoundError as error:
        raise HubError(f"{command[0]} is not installed ({error.filename})") from None
    except subprocess.CalledProcessError as error:
        raise HubError(f"`{' '.join(map(str, command))}` failed with exit code {error.returncode}") from None


def readable_by_all(path: Path) -> None:
    """chmod -R a+rX: every user's server runs from here."""
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files, ""]:
            p = Path(root) / name
            if p.is_symlink():
                continue
            mode = p.stat().st_mode
            extra = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
            if p.is_dir() or mode & stat.S_IXUSR:
                extra |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
            p.chmod(mode | extra)


def install() -> None:
    """The single-user environment, the proxy, the grader, the configuration and the exchange."""
    PREFIX.mkdir(parents=True, exist_ok=True)
    PREFIX.chmod(0o755)
    ensure_group()
    venv = PREFIX / "venv"
    if not (venv / "bin" / "jupyterhub").exists():
        run(SYSTEM_PYTHON, "-m", "venv", venv)
    # every time: a requirement added since the environment was made is installed (pip skips the rest;
    # a venv damaged by hand is repaired). The deployment's tests install once per run.
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
        "-r", HERE / "requirements-hub.txt")
    readable_by_all(venv)
    proxy = PREFIX / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
    if not proxy.exists():
        (PREFIX / "node").mkdir(exist_ok=True)
        run("npm", "install", "--silent", "--no-fund", "--no-audit", "--prefix", PREFIX / "node", PROXY)
    readable_by_all(PREFIX / "node")
    install_grader(venv)
    install_book()
    install_site()
    print(f"installed: {venv}, {proxy.name}, the grader {PREFIX / 'grader'} (group {GROUP}), configuration in "
          f"{ETC}, exchange {EXCHANGE}")


def install_site() -> None:
    """One hub's own folders on top of the environments ``install`` built: its configuration (ETC),
    its state (STATE) and its exchange. ``deploy/hub.py site`` alone makes a second hub on the same
    machine (its own AUTOGRAD_HUB_ETC, AUTOGRAD_HUB_STATE, AUTOGRAD_EXCHANGE and port) without
    rebuilding the environments: the deployment's tests run one hub per test on one install."""
    if not (PREFIX / "venv" / "bin" / "jupyterhub-singleuser").exists():
        raise HubError(f"no environment in {PREFIX}: run `deploy/hub.py install` first")
    ensure_group()
    if ETC.exists():
        roster = (ETC / "roster.csv").read_bytes() if (ETC / "roster.csv").exists() else None
        shutil.rmtree(ETC)
    else:
        roster = None
    shutil.copytree(HERE / "hub", ETC)
    instructor_python(ETC / "instructor" / "python")
    if roster is not None:
        (ETC / "roster.csv").write_bytes(roster)
    elif not (ETC / "roster.csv").exists():
        (ETC / "roster.csv").write_text("username,role\n", encoding="utf-8")
    course_name(ETC)
    readable_by_all(ETC)
    STATE.mkdir(parents=True, exist_ok=True)
    STATE.chmod(0o700)
    make_exchange()


def course_title() -> str:
    """The course's name: the book's title in _config.yml (read without a YAML parser: this script
    runs before any environment exists)."""
    for line in BOOK_CONFIG.read_text(encoding="utf-8").splitlines():
        if line.startswith("title:"):
            return line.removeprefix("title:").strip().strip("\"'")
    raise HubError(f"{BOOK_CONFIG} has no title: line (the course's name the hub shows)")


def course_name(etc: Path) -> None:
    """The course's name where the hub and JupyterLab read it: course.json (jupyterhub_config.py,
    for the login page) and JupyterLab's page configuration (its window title, for everyone)."""
    title = course_title()
    (etc / "course.json").write_text(json.dumps({"title": title}) + "\n", encoding="utf-8")
    page_config = etc / "everyone" / "labconfig" / "page_config.d"
    page_config.mkdir(parents=True, exist_ok=True)
    (page_config / "course.json").write_text(json.dumps({"appName": title}) + "\n", encoding="utf-8")


def install_book() -> None:
    """The built book, copied (root's, readable by all) to PREFIX/book, where the hub serves it.
    Not built: said, and the hub runs without it (the notebooks' chapter links then find nothing)."""
    if not (BOOK / "index.html").is_file():
        print(f"deploy/hub.py: no book in {BOOK}: the hub will serve none. Build it with `make book`, "
              "then install again.", file=sys.stderr)
        return
    staging, target, old = PREFIX / ".book.incoming", PREFIX / "book", PREFIX / ".book.old"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(BOOK, staging, ignore=shutil.ignore_patterns(".*"))  # links copied as files: nothing points out
    for root, dirs, files in os.walk(staging):
        for name in [*dirs, *files]:
            os.chown(Path(root) / name, 0, 0)
    readable_by_all(staging)
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def ensure_group() -> None:
    if subprocess.run(["getent", "group", GROUP], capture_output=True).returncode != 0:
        run("groupadd", "--system", GROUP)


def install_grader(venv: Path) -> None:
    """The course package (the grader and the reference it judges with) in a folder only the
    instructors' group can read, run with the students' environment (which has all it needs
    besides): ``grader/bin/autograder`` puts ``grader/lib`` on the path. Students cannot read it;
    nothing of it is in their environment."""
    grader = PREFIX / "grader"
    staging = PREFIX / ".grader.incoming"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
        "--target", staging / "lib", REPO, *GRADER_ONLY)
    wrapper = staging / "bin" / "autograder"
    wrapper.write_text(f"#!/bin/sh\n# The course's grader, for the instructors of this hub (deploy/hub.py install).\n"
                       f'PYTHONPATH={grader / "lib"}${{PYTHONPATH:+:$PYTHONPATH}} '
                       f'exec {venv / "bin" / "python"} -m autograder "$@"\n')
    wrapper.chmod(0o750)
    shutil.copyfile(HERE / "dask_certs.py", staging / "bin" / "dask_certs.py")  # deploy/dask.md
    # The source notebooks beside the package, as in a checkout: what the grader calls an assignment
    # in what students read (a kit's stub, a feedback message) is its notebook's heading
    # (autograder.kit.assignment_title), "a01 · Graphs and backpropagation", not "a01".
    shutil.copytree(REPO / "assignments" / "source", staging / "lib" / "assignments" / "source",
                    ignore=shutil.ignore_patterns(".*", "__pycache__"))
    gid = grp.getgrnam(GROUP).gr_gid
    for root, _dirs, files in os.walk(staging):
        os.chown(root, 0, gid)
        os.chmod(root, 0o750)
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                os.chown(path, 0, gid)
                path.chmod(0o750 if path.stat().st_mode & stat.S_IXUSR else 0o640)
    old = PREFIX / ".grader.old"
    shutil.rmtree(old, ignore_errors=True)
    if grader.exists():
        grader.rename(old)
    staging.rename(grader)
    shutil.rmtree(old, ignore_errors=True)


def instructor_python(folder: Path) -> None:
    """What the instructors' servers import besides the hub's environment: the formgrader guard
    (in deploy/hub/instructor/python/), and copies of what it shares with the grader: the one
    sanitizer, the count of answers still to grade by hand, the feedback pages' MathJax configuration
    and their readable colours (one source, in autograder/)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO / "autograder" / "course" / "safe_html.py", folder / "autograd_safe_html.py")
    shutil.copyfile(REPO / "autograder" / "course" / "written.py", folder / "autograd_written.py")
    (folder / "autograd_formgrade").mkdir(exist_ok=True)
    for name in ("mathjax.html.j2", "readable.css"):
        shutil.copyfile(REPO / "autograder" / "templates" / "autograder_feedback" / name,
                        folder / "autograd_formgrade" / name)


def make_exchange() -> None:
    """nbgrader's exchange on disk: everyone may make their own folders at its root (nbgrader's
    submit checks that it can; sticky: no one removes another's), and the course's folders are
    root's and the instructors', made now (:data:`EXCHANGE_FOLDERS`)."""
    EXCHANGE.mkdir(parents=True, exist_ok=True)
    EXCHANGE.chmod(0o1777)
    group = grp.getgrnam(GROUP)
    gid = group.gr_gid
    instructors = {0} | {_uid(name) for name in group.gr_mem} - {None}
    for name, mode in EXCHANGE_FOLDERS.items():
        folder = EXCHANGE / COURSE_ID / name
        info = os.lstat(folder) if os.path.lexists(folder) else None
        if info is not None and (not stat.S_ISDIR(info.st_mode) or info.st_uid not in instructors):
            # made by a student (or anyone but root and the instructors) before this install:
            # theirs, not the course's; an instructor's (nbgrader's first release made it) is kept
            aside = folder.with_name(f"{folder.name}.not-the-course.{secrets.token_hex(4)}")
            folder.rename(aside)
            print(f"moved aside {folder} (made by uid {info.st_uid}) to {aside}", file=sys.stderr)
        folder.mkdir(exist_ok=True)
        os.chown(folder, 0, gid)
        folder.chmod(mode)


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def read_roster(path: Path) -> list[tuple[str, str]]:
    import re
    rows = []
    with path.open(newline="", encoding="utf-8") as f:
        for number, row in enumerate(csv.DictReader(f), start=2):
            name, role = (row.get("username") or "").strip(), (row.get("role") or "").strip()
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name):
                raise HubError(f"{path}, line {number}: {name!r} is not a username ({NAME_RULE})")
            if role not in ("student", "instructor"):
                raise HubError(f"{path}, line {number}: {name} has role {role!r}; use student or instructor")
            rows.append((name, role))
    if not rows:
        raise HubError(f"{path}: no users (columns: username,role)")
    return rows


def add_users(path: Path, passwords: bool = False) -> dict[str, str]:
    """System users for the roster's people, homes 0700; each instructor gets ~/course.

    Returns {username: password} for the users given a fresh password (``passwords``)."""
    rows = read_roster(path)
    given = {}
    ensure_group()
    for name, role in rows:
        if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
            run("useradd", "--create-home", "--shell", "/bin/bash", name)
        home = Path(os.path.expanduser(f"~{name}"))
        home.chmod(0o700)  # Debian's useradd makes 0755: students could read each other's work
        if passwords:
            given[name] = secrets.token_urlsafe(12)
            run("chpasswd", input=f"{name}:{given[name]}\n".encode())
        if role == "instructor":
            run("usermod", "--append", "--groups", GROUP, name)
        elif name in grp.getgrnam(GROUP).gr_mem:  # a student never reads the grader
            run("gpasswd", "--delete", name, GROUP, stdout=subprocess.DEVNULL)
        if role == "instructor" and not (home / "course").exists():
            course = home / "course"
            course.mkdir()
            shutil.copy2(REPO / "assignments" / "nbgrader_config.py", course / "nbgrader_config.py")
            shutil.copytree(REPO / "assignments" / "source", course / "source")
            run("chown", "-R", f"{name}:{name}", course)
    ETC.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, ETC / "roster.csv")
    (ETC / "roster.csv").chmod(0o644)
    print(f"users: {', '.join(f'{n} ({r})' for n, r in rows)}")
    return given


def start() -> int:
    """The hub in the foreground (Ctrl-C stops it and every server it started)."""
    if not (ETC / "jupyterhub_config.py").exists():
        raise HubError(f"no configuration in {ETC}: run `deploy/hub.py install` first")
    env = {**os.environ, "AUTOGRAD_HUB_PREFIX": str(PREFIX), "AUTOGRAD_HUB_STATE": str(STATE),
           "AUTOGRAD_EXCHANGE": str(EXCHANGE)}
    return subprocess.call([str(PREFIX / "venv" / "bin" / "jupyterhub"), "-f", str(ETC / "jupyterhub_config.py")],
                           cwd=STATE, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/hub.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="the single-user environment, the proxy, the configuration, the exchange")
    sub.add_parser("site", help="another hub's configuration, state and exchange on the environments install built")
    users = sub.add_parser("users", help="system users from a roster (username,role), homes 0700")
    users.add_argument("roster", type=Path)
    users.add_argument("--passwords", action="store_true", help="give each a fresh password and print it")
    sub.add_parser("start", help="run the hub in the foreground")
    demo = sub.add_parser("demo", help="install, the demo roster's users with passwords, start")
    demo.add_argument("--roster", type=Path, default=HERE / "demo-roster.csv")
    args = parser.parse_args(argv)
    try:
        if os.geteuid() != 0:
            raise HubError("run as root: it creates system users and starts each user's server as that user")
        if args.command == "install":
            install()
        elif args.command == "site":
            install_site()
            print(f"site: configuration in {ETC}, state {STATE}, exchange {EXCHANGE}")
        elif args.command == "users":
            for name, password in add_users(args.roster, args.passwords).items():
                print(f"  {name}: {password}")
        elif args.command == "start":
            return start()
        else:
            install()
            for name, password in add_users(args.roster, passwords=True).items():
                print(f"  {name}: {password}")
            print(f"open http://127.0.0.1:{os.environ.get('AUTOGRAD_HUB_PORT', '8000')}/ and log in")
            return start()
    except HubError as error:
        print(f"deploy/hub.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
