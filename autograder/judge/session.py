"""One sandboxed process per exercise, and the channel to it.

:class:`Sandbox` says how a runner process is started: under bubblewrap (a fresh mount, PID,
network, IPC and UTS namespace; everything read-only but an empty ``/tmp``; the Python install
and its site-packages, and the runner's own folder, are the only things mounted; a uid no user
has; no capabilities; an empty environment) or, with ``unsafe=True``, as a plain subprocess with the
same resource limits. Of the Python install's site-packages only the libraries a student's
code runs with (:data:`SANDBOX_DISTRIBUTIONS`: NumPy) are visible: the grader's own packages
(``autograder``, ``solutions``, nbgrader, ...) are hidden however they were installed, editable
or not. :class:`Session` starts one, hands it the student's cells, and turns the
requests of a hidden check into messages (see :mod:`autograder.sandbox.wire`). A session has one
time budget, counted on the sandbox's own clock (:meth:`Session.clock`: the time it had the CPU
or chose to wait, not the time another student's processes kept it off the CPU), with a hard
wall-clock backstop of :data:`WALL_STRETCH` budgets; past it, or if the process dies, every later
request raises a :class:`SandboxFailure`, which is a ``BaseException`` so that no check's
``except Exception`` can mistake it for an error of the student's code.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import glob
import importlib.metadata
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil

from autograder.sandbox import wire

RUNNER_DIR = Path(__file__).resolve().parents[1] / "sandbox"
SANDBOX_UID = 65534
# As root, each grading process runs its sandboxes under a uid of its own, no user's: the process
# limit (RLIMIT_NPROC) counts per uid, so one student's fork bomb cannot use up another's.
UID_BASE = 2_000_000


def sandbox_uid() -> int:
    return UID_BASE + os.getpid() if os.geteuid() == 0 else SANDBOX_UID


class SandboxFailure(BaseException):
    """The sandbox stopped answering: it ran out of time, died, or broke the protocol."""


class SandboxTimeout(SandboxFailure):
    pass


class SandboxDied(SandboxFailure):
    pass


class SandboxProtocolError(SandboxFailure):
    pass


# On a busy machine a sandbox's clock runs slower than the wall clock; it may take at most this
# many budgets of wall time (a backstop: a sandbox starved that long is cut anyway).
WALL_STRETCH = 10
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_delay(pid: int) -> float:
    """Seconds the process spent runnable but waiting for a CPU (Linux schedstat); 0 if unknown."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


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


@functools.cache
def probe(unsafe: bool = False) -> str | None:
    """None if a sandbox can be started here, else the reason it cannot."""
    try:
        session = Session(Sandbox(unsafe=unsafe), budget=60)
        try:
            ready = session.setup(modules={}, exercises={}, cells=[("probe", "import numpy, os\nuid = os.getuid()")],
                                  judged="uid", others=[])
            if ready.cells[0]["error"] is not None:
                return f"the sandbox's Python cannot import numpy: {ready.cells[0]['error']['msg']}"
            if not unsafe and ready.answer == 0:
                return "the sandbox runs as root"
        finally:
            session.close()
    except SandboxUnavailable as error:
        return str(error)
    except (SandboxFailure, OSError) as error:
        return f"the sandbox did not start: {error} {session.stderr_tail()}".strip()
    return None


@dataclass
class Ready:
    cells: list[dict]        # per cell: {"label": ..., "error": None or {"type", "msg", "where"}}
    defined: bool            # whether the judged name exists after the cells ran
    answer: object           # the judged object (a proxy), or None


class Session:
    """A runner process and its channel; every request must finish before ``budget`` seconds."""

    def __init__(self, sandbox: Sandbox, budget: float):
        self.sandbox = sandbox
        self.started = time.monotonic()
        self.deadline = self.started + budget  # on the sandbox's clock (see clock())
        self.wall_deadline = self.started + WALL_STRETCH * budget
        self.budget = budget
        self.failure: SandboxFailure | None = None
        self._judge_delay = run_delay(os.getpid())
        self._measured = (self.started, self.started)  # (wall time, clock) of the last measurement
        self._errlog = tempfile.TemporaryFile()
        self.process = subprocess.Popen(sandbox.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._errlog, env=sandbox.env(), close_fds=True,
                                        start_new_session=True)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._reader = wire.Reader(self.process.stdout.fileno(), sandbox.limits.message_mb << 20)
        self._modules: dict[str, object] = {}
        self.running: str | None = None  # the cell the sandbox is running, while it runs the student's cells
        # Answers the sandbox's calls of sealed references (autograder.judge.sealed.Oracle), if any.
        self.oracle: Callable[[Any], Any] | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def setup(self, modules: dict, exercises: dict[str, str], cells: list[tuple[str, str]], judged: str,
              others: list[str], earlier: list[tuple[str, list[dict]]] | None = None) -> Ready:
        """Start the answer: ``modules`` {name: [is_package, marshalled code, filename]} (see
        :func:`autograder.judge.judge.compiled`), then the cells, then the judged name plugged in.

        ``earlier`` (the capstone kind): [(assignment, its notebook's cells)] whose answers the kit
        loads first, as a student's kit does; the engine is then wholly the student's."""
        blobs: list[bytes] = []
        message = {"modules": modules, "exercises": exercises, "cells": [list(c) for c in cells],
                   "judged": judged, "others": list(others), "limits": dict(vars(self.sandbox.limits))}
        if earlier is not None:
            message["earlier"] = [[assignment, cells] for assignment, cells in earlier]
        setup = wire.encode(message, blobs)
        self._send({"setup": setup}, blobs)
        while True:
            try:
                reply, blobs = self._receive()
            except (SandboxDied, SandboxTimeout) as failure:
                if self.running is not None:
                    raise self._fail(type(failure), f"{failure} while running your cell {self.running}") from None
                raise
            if "running" not in reply:
                break
            self.running = str(reply["running"])[:200]
        self.running = None
        if not reply.get("ready"):
            raise self._fail(SandboxProtocolError, "the sandbox did not get ready")
        cells_info = reply.get("cells")
        if not isinstance(cells_info, list):
            raise self._fail(SandboxProtocolError, "malformed cell report")
        answer = self._value(reply, blobs) if reply.get("defined") else None
        return Ready([_cell_report(c) for c in cells_info], bool(reply.get("defined")), answer)

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(Exception):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.process.kill()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(Exception):
                stream.close()  # type: ignore[union-attr]  # None only if Popen failed
        self._errlog.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    def request(self, op: str, *args, name: str | None = None, **kwargs):
        blobs: list[bytes] = []
        message = {"op": op, "args": wire.encode(list(args), blobs, _send_handle),
                   "kwargs": wire.encode(dict(kwargs), blobs, _send_handle)}
        if name is not None:
            message["name"] = name
        self._send(message, blobs)
        reply, blobs = self._receive()
        if "err" in reply:
            raise student_exception(reply["err"])
        return self._value(reply, blobs)

    def module(self, name: str):
        if name not in self._modules:
            self._modules[name] = self.request("import", name)
        return self._modules[name]

    # -- channel ---------------------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self.failure is not None:
            raise self.failure

    def _send(self, message: dict, blobs: list[bytes]) -> None:
        self._check_alive()
        try:
            wire.write(self.process.stdin.fileno(), wire.pack(message, blobs))  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def clock(self) -> float:
        """The sandbox's own clock, on the scale of ``time.monotonic()``: it starts with the session
        and advances by the CPU time of the sandbox's whole process tree, or by the wall time less
        the time the sandbox and this judge spent waiting for a CPU, whichever is more.

        So one student's processes, however many, cannot make another's exercise time out: time
        a sandbox spends kept off the CPU by load is not counted, while its own CPU use (all of
        its processes together) and its own waiting (a sleep, a blocked read) are."""
        now = time.monotonic()
        cpu = starved = 0.0
        try:
            root = psutil.Process(self.process.pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = proc.cpu_times()
                    cpu += times.user + times.system + times.children_user + times.children_system
                    starved += run_delay(proc.pid)
        except psutil.Error:  # the sandbox is gone: nothing more will be read from it
            return now
        starved += run_delay(os.getpid()) - self._judge_delay
        return self.started + max(cpu, now - self.started - starved)

    def _time_left(self) -> float:
        """Wall seconds to wait before looking again, or 0 when the time is up."""
        now = time.monotonic()
        if now >= self.wall_deadline:
            return 0.0
        measured_at, clock = self._measured
        bound = clock + (now - measured_at) * CPUS  # the clock cannot run faster than every CPU at once
        if bound >= self.deadline:
            clock = self.clock()
            self._measured = (now, clock)
            bound = clock
        if bound >= self.deadline:
            return 0.0
        return min(self.wall_deadline - now, max(0.05, (self.deadline - bound) / CPUS))

    def _wait(self) -> None:
        while True:
            left = self._time_left()
            if left <= 0:
                raise self._fail(SandboxTimeout, f"ran over the time limit of {self.budget:g} s")
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                return

    def _receive(self) -> tuple[dict, list[bytes]]:
        """The sandbox's next message; its calls of sealed references are answered on the way."""
        while True:
            self._check_alive()
            try:
                message, blobs = self._reader.read(self._wait)
            except EOFError:
                raise self._died() from None
            except wire.WireError as error:
                raise self._fail(SandboxProtocolError, f"sent a message the judge cannot read ({error})") from None
            if "oracle" not in message:
                return message, blobs
            self._answer(message["oracle"], blobs)

    def _answer(self, request, blobs: list[bytes]) -> None:
        from autograder.judge.sealed import OracleError
        reply: dict
        out: list[bytes] = []
        try:
            if self.oracle is None:
                raise OracleError("NotImplementedError", "no sealed reference in this sandbox")
            reply = {"value": wire.encode(self.oracle(wire.decode(request, blobs)), out)}
        except OracleError as error:
            reply, out = {"err": {"type": error.kind, "msg": str(error)}}, []
        except wire.WireError as error:
            reply, out = {"err": {"type": "TypeError", "msg": f"a value the judge cannot read or send ({error})"}}, []
        self._send(reply, out)

    def _value(self, reply: dict, blobs: list[bytes]):
        try:
            return _wrap(self, wire.decode(reply.get("value"), blobs))
        except wire.WireError as error:
            raise self._fail(SandboxProtocolError, f"sent a value the judge cannot read ({error})") from None

    def _fail(self, kind: type[SandboxFailure], text: str) -> SandboxFailure:
        self.failure = kind(text)
        self.close()
        return self.failure

    def _died(self) -> SandboxFailure:
        code = None
        with contextlib.suppress(Exception):
            code = self.process.wait(timeout=5)
        return self._fail(SandboxDied, death_reason(code))

    def stderr_tail(self, limit: int = 2000) -> str:
        """What the sandbox wrote before the runner took over fd 2 (bwrap's or Python's own errors)."""
        with contextlib.suppress(Exception):
            self._errlog.seek(0)
            return self._errlog.read(limit).decode(errors="replace")
        return ""


def death_reason(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code > 128 and code - 128 in signal.valid_signals():  # bwrap passes a child's signal on as 128 + n
        code = 128 - code
    if code < 0:
        sig = -code
        names: dict[int, str] = {
            signal.SIGSEGV: "crashed with a segmentation fault", signal.SIGKILL: "was killed (out of memory?)",
            signal.SIGXCPU: "ran out of CPU time", signal.SIGABRT: "aborted",
            signal.SIGXFSZ: "wrote a file over the size limit", signal.SIGBUS: "crashed (bus error)"}
        return names.get(sig, f"was killed by signal {sig}")
    return f"exited with code {code} (os._exit, sys.exit or a crash)"


def _cell_report(cell) -> dict:
    if not isinstance(cell, dict):
        return {"label": "?", "error": None}
    error = cell.get("error")
    if error is not None:
        error = {"type": str(error.get("type", "Exception"))[:200], "msg": str(error.get("msg", ""))[:2000],
                 "where": str(error.get("where", ""))[:300]}
    return {"label": str(cell.get("label", "?"))[:200], "error": error}


# -- values and proxies --------------------------------------------------------------------------

def _send_handle(value):
    if isinstance(value, Proxy):
        return {"$r": object.__getattribute__(value, "_id")}
    raise wire.WireError(f"cannot send a {type(value).__module__}.{type(value).__name__} to the sandbox: "
                         "pass arrays, numbers, tuples or proxies of sandbox objects")


def _wrap(session: Session, value):
    if isinstance(value, wire.Handle):
        return Proxy(session, value)
    if isinstance(value, tuple):
        return tuple(_wrap(session, v) for v in value)
    if isinstance(value, list):
        return [_wrap(session, v) for v in value]
    if isinstance(value, dict):
        return {k: _wrap(session, v) for k, v in value.items()}
    return value


class StudentError(Exception):
    """An exception raised by student code in the sandbox, rebuilt here as data.

    Its class also derives from the builtin exception of the same name (or the nearest builtin
    base), so a check's ``except ValueError`` or ``except NotImplementedError`` works as if the
    code had run here. ``where`` is " (in backward, line 7)" for the student's innermost frame.
    """

    remote_type: str = "Exception"
    where: str = ""


_BUILTIN_ERRORS = {name: obj for name, obj in vars(builtins).items()
                   if isinstance(obj, type) and issubclass(obj, Exception)}
_ERROR_CLASSES: dict[tuple[str, type], type] = {}


def student_exception(err) -> StudentError:
    if not isinstance(err, dict):
        err = {}
    type_name = str(err.get("type", "Exception"))[:200]
    mro = [str(n) for n in err.get("mro", [])][:64] if isinstance(err.get("mro"), list) else []
    base = next((_BUILTIN_ERRORS[n] for n in mro if n in _BUILTIN_ERRORS), Exception)
    key = (type_name, base)
    if key not in _ERROR_CLASSES:
        try:
            cls = type(type_name if type_name.isidentifier() else "StudentException",
                       (StudentError,) if base is Exception else (StudentError, base), {})
        except TypeError:  # an exception type whose layout cannot be combined
            cls = type("StudentException", (StudentError,), {})
        _ERROR_CLASSES[key] = cls
    cls = _ERROR_CLASSES[key]
    message = str(err.get("msg", ""))[:2000]
    try:
        error = cls(message)
    except Exception:  # noqa: BLE001 (a builtin whose constructor wants more arguments)
        error = StudentError(message)
    error.remote_type = type_name
    error.where = str(err.get("where", ""))[:300]
    return error


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor")


class Proxy:
    """A stand-in for an object that lives in the sandbox.

    Attribute access, calls, operators, indexing, ``len``, iteration, ``with`` and
    ``isinstance(x, proxy_of_a_class)`` are requests to the sandbox; plain results come back as
    values, anything else as another proxy. ``repr`` is local (it never shows student text).
    """

    __slots__ = ("_session", "_id", "_type", "_mro", "_kind")
    __array_ufunc__ = None  # `array * proxy` goes to the proxy's __rmul__, not through NumPy

    def __init__(self, session: Session, handle: wire.Handle):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_id", handle.id)
        object.__setattr__(self, "_type", handle.type)
        object.__setattr__(self, "_mro", tuple(handle.mro))
        object.__setattr__(self, "_kind", handle.kind)

    def _request(self, op: str, *args, **kwargs):
        return object.__getattribute__(self, "_session").request(op, *args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__") and name not in ("__name__", "__qualname__",
                                                                           "__module__", "__doc__"):
            raise AttributeError(name)
        return self._request("getattr", self, name)

    def __setattr__(self, name: str, value) -> None:
        self._request("setattr", self, name, value)

    def __call__(self, *args, **kwargs):
        return self._request("call", self, *args, **kwargs)

    def __repr__(self) -> str:
        kind, kind_type = object.__getattribute__(self, "_kind"), object.__getattribute__(self, "_type")
        return f"<sandbox {kind} {kind_type}>"

    def __instancecheck__(self, obj) -> bool:
        return isinstance(obj, Proxy) and bool(self._request("operator", obj, self, name="isinstance"))

    def __subclasscheck__(self, cls) -> bool:
        return isinstance(cls, Proxy) and bool(self._request("operator", cls, self, name="issubclass"))

    def __len__(self) -> int:
        return self._request("operator", self, name="len")

    def __iter__(self):
        return iter(self._request("operator", self, name="list"))

    def __bool__(self) -> bool:
        return bool(self._request("operator", self, name="bool"))

    def __float__(self) -> float:
        return float(self._request("operator", self, name="float"))

    def __int__(self) -> int:
        return int(self._request("operator", self, name="int"))

    def __index__(self) -> int:
        return int(self._request("operator", self, name="index"))

    def __array__(self, dtype=None, copy=None):
        import numpy as np
        return np.asarray(self._request("operator", self, name="asarray"), dtype=dtype)

    def __getitem__(self, key):
        return self._request("operator", self, key, name="getitem")

    def __setitem__(self, key, value) -> None:
        self._request("operator", self, key, value, name="setitem")

    def __contains__(self, item) -> bool:
        return bool(self._request("operator", self, item, name="contains"))

    def __enter__(self):
        return self._request("method", self, "__enter__")

    def __exit__(self, kind, value, tb):
        self._request("method", self, "__exit__", None, None, None)
        return False

    def __neg__(self):
        return self._request("operator", self, name="neg")

    def __pos__(self):
        return self._request("operator", self, name="pos")

    def __abs__(self):
        return self._request("operator", self, name="abs")

    def __lt__(self, other):
        return self._request("operator", self, other, name="lt")

    def __le__(self, other):
        return self._request("operator", self, other, name="le")

    def __gt__(self, other):
        return self._request("operator", self, other, name="gt")

    def __ge__(self, other):
        return self._request("operator", self, other, name="ge")

    __hash__ = object.__hash__


def _binary(name: str):
    def forward(self, other):
        return self._request("operator", self, other, name=name)

    def reflected(self, other):
        return self._request("operator", other, self, name=name)
    return forward, reflected


for _name in _BINARY:
    _dunder = _name.rstrip("_")
    _fwd, _ref = _binary(_name)
    setattr(Proxy, f"__{_dunder}__", _fwd)
    setattr(Proxy, f"__r{_dunder}__", _ref)
