"""How a sandbox process is started: under bubblewrap, or (``unsafe=True``) as a plain subprocess.

:class:`Sandbox` builds the command: a fresh mount, PID, network, IPC and UTS namespace;
everything read-only but an empty ``/tmp``; the Python install and its site-packages, and the
runner's own folder, are the only things mounted; a uid no user has; no capabilities; an empty
environment. Of the Python install's site-packages only the libraries a student's code runs with
(:data:`SANDBOX_DISTRIBUTIONS`: NumPy) are visible: the grader's own packages (``autograder``,
``solutions``, nbgrader, ...) are hidden however they were installed, editable or not. The unsafe
variant keeps the same resource limits (:class:`SandboxLimits`). The channel to a started sandbox
is :mod:`autograder.judge.session`.
"""
from __future__ import annotations

import functools
import glob
import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

RUNNER_DIR = Path(__file__).resolve().parents[1] / "sandbox"
SANDBOX_UID = 65534
# As root, each grading process runs its sandboxes under a uid of its own, no user's: the process
# limit (RLIMIT_NPROC) counts per uid, so one student's fork bomb cannot use up another's.
UID_BASE = 2_000_000


def sandbox_uid() -> int:
    return UID_BASE + os.getpid() if os.geteuid() == 0 else SANDBOX_UID


class SandboxUnavailable(Exception):
    """No sandbox can be made on this machine (the reason says why)."""


@dataclass(frozen=True)
class SandboxLimits:
    memory_mb: int = 4096      # address space of the runner (and of anything it starts)
    cpu_s: int = 300           # CPU seconds of the runner
    nproc: int = 16            # processes and threads of the sandbox's uid (one uid per grading process)
    fsize_mb: int = 16         # largest file it may write (in its /tmp)
    tmpfs_mb: int = 256        # all of its /tmp together (memory-backed)
    nofile: int = 256          # open files
    message_mb: int = 64       # largest message the judge reads from it


def _mounts_for(path: Path) -> list[str]:
    """bwrap arguments that create the parents of ``path`` (world-readable) and bind it read-only."""
    args = []
    for parent in reversed(path.parents):
        if str(parent) != "/":
            args += ["--perms", "0755", "--dir", str(parent)]
    return args + ["--ro-bind", str(path), str(path)]


# The installed distributions a sandbox sees (with what they require); every other file of every
# site-packages folder is hidden. The kit and the students' notebooks need NumPy and the stdlib.
SANDBOX_DISTRIBUTIONS = ("numpy",)
_SITE_NAMES = ("site-packages", "dist-packages")


def _distribution_entries(names: tuple[str, ...]) -> dict[Path, set[str]]:
    """site folder -> the top-level entries (packages, modules, .libs, dist-info) of ``names`` and
    of everything they require (extras left out) that live in it."""
    found: dict[Path, set[str]] = {}
    todo, seen = list(names), set()
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        site = Path(str(dist.locate_file(""))).resolve()
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if Path(str(f)).parts}
        found.setdefault(site, set()).update(t for t in tops if t not in ("..", ".") and (site / t).exists())
        for requirement in dist.requires or []:
            if "extra ==" not in requirement.replace('"', "'").replace("extra=='", "extra == '"):
                match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
                if match:
                    todo.append(match.group(0))
    return found


def _site_folders(roots: list[Path]) -> list[Path]:
    """Every site-packages / dist-packages folder of the Python installs under ``roots``."""
    import site
    candidates = {Path(p) for p in [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
                  if Path(p).name in _SITE_NAMES}
    for root in roots:
        for pattern in ("lib/python3*/*-packages", "lib/python3/*-packages", "local/lib/python3*/*-packages",
                        "lib64/python3*/*-packages"):
            candidates.update(Path(p) for p in glob.glob(str(root / pattern)))
    folders = {p.resolve() for p in candidates if p.name in _SITE_NAMES and p.is_dir()}
    return sorted(p for p in folders if any(p.is_relative_to(root) for root in roots))


@functools.cache
def python_mounts(python: str, prefix: str, base_prefix: str) -> tuple[list[str], str]:
    """bwrap arguments that show the sandbox the Python install (interpreter, stdlib) and, of its
    site-packages, only :data:`SANDBOX_DISTRIBUTIONS`; and the interpreter's path in the sandbox.

    A venv is not mounted whole (its site-packages and scripts are the grader's): only its
    ``pyvenv.cfg``, its ``bin/python*`` and a site-packages folder holding the allowed libraries.
    Each site folder of the base install is covered by an empty tmpfs with those libraries bound in.
    """
    venv, base = Path(prefix), Path(base_prefix).resolve()
    roots = sorted({base, Path(os.path.realpath(python)).parent.parent})
    args: list[str] = []
    mounted = [Path("/usr")]
    for root in roots:
        if not any(root != other and root.is_relative_to(other) for other in roots) \
                and not root.is_relative_to("/usr"):
            args += _mounts_for(root)
            mounted.append(root)
    keep = _distribution_entries(SANDBOX_DISTRIBUTIONS)
    folders = _site_folders(mounted)
    interpreter = python
    if venv.resolve() != base:  # a venv: only what makes it a venv, and its allowed libraries
        venv_sites = _site_folders([venv.resolve()])
        real = venv.resolve()
        if (real / "pyvenv.cfg").is_file():
            args += _mounts_for(real / "pyvenv.cfg")
        args += [*_mounts_for(real / "bin")[:-3], "--perms", "0755", "--dir", str(real / "bin")]
        for exe in sorted((real / "bin").glob("python*")):
            # bin/python is a symlink to the base interpreter (kept a symlink, so Python finds pyvenv.cfg)
            args += ["--symlink", os.readlink(exe), str(exe)] if exe.is_symlink() else ["--ro-bind", str(exe), str(exe)]
        if real != venv:  # the venv's path is a symlink: both ends must be there
            args += [*_mounts_for(venv)[:-3], "--symlink", str(real), str(venv)]
        for folder in venv_sites:
            args += [*_mounts_for(folder)[:-3], "--perms", "0755", "--dir", str(folder)]
        folders += venv_sites
        candidate = venv / "bin" / "python"
        interpreter = str(candidate) if candidate.exists() else python
    for folder in folders:
        args += ["--perms", "0755", "--tmpfs", str(folder)]
        for entry in sorted(keep.get(folder, ())):
            args += ["--ro-bind", str(folder / entry), str(folder / entry)]
    return args, interpreter


@dataclass(frozen=True)
class Sandbox:
    unsafe: bool = False
    limits: SandboxLimits = SandboxLimits()
    python: str = sys.executable

    def command(self) -> list[str]:
        runner = ["-I", "-B", "-X", "frozen_modules=on"]
        if self.unsafe:
            return [self.python, *runner, str(RUNNER_DIR / "runner.py")]
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`")
        args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
                # /tmp first: a Python install or venv that lives under /tmp is bound on top of it
                "--perms", "1777", "--size", str(self.limits.tmpfs_mb << 20), "--tmpfs", "/tmp"]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/") / link
            if target.is_symlink():
                args += ["--symlink", os.readlink(target), str(target)]
            elif target.is_dir():
                args += ["--ro-bind", str(target), str(target)]
        mounts, python = python_mounts(self.python, sys.prefix, sys.base_prefix)
        args += [*mounts, *_mounts_for(Path("/sandbox"))[:-3], "--ro-bind", str(RUNNER_DIR), "/sandbox",
                 "--dev", "/dev", "--proc", "/proc", "--chdir", "/tmp", "--clearenv",
                 "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/bin:/bin",
                 "--setenv", "OPENBLAS_NUM_THREADS", "1", "--setenv", "OMP_NUM_THREADS", "1",
                 "--setenv", "MKL_NUM_THREADS", "1", "--setenv", "MPLBACKEND", "Agg",
                 "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib", "--setenv", "PYTHONHASHSEED", "0"]
        if os.geteuid() == 0:
            # bwrap as root mounts what root can read, then setpriv drops to an unprivileged uid
            # with no capabilities at all before Python starts.
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                raise SandboxUnavailable("setpriv (util-linux) is missing: it drops the sandbox to a non-root uid")
            uid = sandbox_uid()
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", setpriv,
                     "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                     "--inh-caps=-all", "--bounding-set=-all", "--"]
        else:
            args[1:1] = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        return args + [python, *runner, "/sandbox/runner.py"]

    def env(self) -> dict[str, str]:
        if not self.unsafe:
            return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        return {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir(), "OPENBLAS_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
