"""Who acts on a course: never root on a folder that a user controls.

A course folder runs code and is followed: every command executes its ``nbgrader_config.py``, and
nbgrader and the grader open the paths beneath it. Whoever owns the folder, or any folder above it,
decides what those are (they can edit the file, or swap a subfolder for a link to a root-only
file). Run by root there, the command would run their code and follow their links with root's
power. So a command started as root on such a course does not run as root: it starts again as the
course's owner (:func:`act_as_owner`), who can do nothing through it they could not do already.
Grading needs no root either: bubblewrap makes sandboxes without privilege (user namespaces), and
each sandbox has a user namespace, and so a process count, of its own.

Root acts only on a course that root alone controls (every folder from ``/`` down to the course
owned by root, none writable by others without the sticky bit).
"""
from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# What the command keeps of the environment when it starts again as the owner: the locale, the
# terminal, the settings of the grader itself and where its code is (PYTHONPATH: the hub's grader
# runs the students' environment with its own folder on the path); nothing that names root's
# files (TMPDIR, HOME, XDG_*) or root's configuration (JUPYTER_*).
KEPT_ENVIRONMENT = ("LANG", "LANGUAGE", "TERM", "TZ", "COLUMNS", "NO_COLOR", "PYTHONPATH")
KEPT_PREFIXES = ("LC_", "AUTOGRADER_", "DASK_", "OPENBLAS_", "OMP_", "MKL_")


class OwnerError(Exception):
    """The course cannot be acted on safely by this user; the message says what to do instead."""


def controllers(path: str | Path) -> set[int]:
    """The uids other than root that control ``path``: they own it or a folder above it, the path
    being read both as given and with its links resolved. A folder that anyone may write to,
    without the sticky bit, lets anyone control what is beneath it: ``-1`` stands for "anyone"."""
    given = Path(os.path.abspath(path))
    found: set[int] = set()
    for chain in (given, Path(os.path.realpath(given))):
        for part in [chain, *chain.parents]:
            try:
                info = os.lstat(part)
            except FileNotFoundError:
                continue
            if info.st_uid != 0:
                found.add(info.st_uid)
            if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
                found.add(-1)
    return found


def _environment(user: pwd.struct_passwd) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in KEPT_ENVIRONMENT or k.startswith(KEPT_PREFIXES)}
    env.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name, SHELL=user.pw_shell or "/bin/sh",
               PATH="/usr/local/bin:/usr/bin:/bin")
    return env


def act_as_owner(course: str | Path, argv: Sequence[str]) -> None:
    """As root on a course a user controls: start this command again as that user, with the
    course given as an absolute path (the caller's ``argv`` without its ``--course``). Returns
    only when there is nothing to do (not root, or root alone controls the course); raises
    :class:`OwnerError` when the command cannot run as the owner (no single owner, no account,
    an interpreter the owner cannot run)."""
    if os.geteuid() != 0:
        return
    folder = Path(os.path.abspath(course))
    owners = controllers(folder)
    if not owners:
        return
    if -1 in owners:
        raise OwnerError(f"{folder} lies in a folder anyone can write to (no sticky bit): move the course "
                         "somewhere only its owner controls")
    if len(owners) > 1:
        names = ", ".join(sorted(_name(uid) for uid in owners))
        raise OwnerError(f"{folder} is controlled by several users ({names}): give the course and the folders "
                         "above it to one owner")
    [uid] = owners
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        raise OwnerError(f"{folder} belongs to uid {uid}, which has no account: autograder will not run as root "
                         "on a folder root does not control; give it to a user (chown) and run as them") from None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise OwnerError("setpriv (util-linux) is missing: it starts the command as the course's owner")
    drop = [setpriv, f"--reuid={uid}", f"--regid={user.pw_gid}", "--init-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--"]
    env = _environment(user)
    probe = subprocess.run([*drop, sys.executable, "-c", "import autograder.cli"], env=env, cwd=user.pw_dir
                           if os.path.isdir(user.pw_dir) else "/", capture_output=True, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        raise OwnerError(
            f"{folder} belongs to {user.pw_name}: autograder never runs as root on a course a user controls (it "
            f"would run their nbgrader_config.py and follow their links as root), and {user.pw_name} cannot run "
            f"this interpreter ({sys.executable}: {reason}). Run the command as {user.pw_name}, from a grader "
            "environment they can read (on the class's hub: /opt/autograd-hub/grader/bin/autograder, "
            "deploy/README.md)")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(setpriv, [*drop, sys.executable, "-m", "autograder", "--course", str(folder), *argv], env)


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def without_course(argv: Sequence[str]) -> list[str]:
    """``argv`` without its global ``--course X`` / ``--course=X`` (the owner's run is given the
    absolute path instead)."""
    out: list[str] = []
    skip = False
    for k, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--course" and k + 1 < len(argv):
            skip = True
            continue
        if arg.startswith("--course="):
            continue
        out.append(arg)
    return out
