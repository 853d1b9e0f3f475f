"""One sandboxed process per exercise, and the channel to it.

:class:`Sandbox` says how a runner process is started: under bubblewrap (a fresh mount, PID,
network, IPC and UTS namespace; everything read-only but an empty ``/tmp``; the Python install
and its site-packages, and the runner's own folder, are the only things mounted; a uid no user
has; no capabilities; an empty environment) or, with ``unsafe=True``, as a plain subprocess with the
same resource limits. :class:`Session` starts one, hands it the student's cells, and turns the
requests of a hidden check into messages (see :mod:`autograder.sandbox.wire`). A session has one
wall-clock budget; past it, or if the process dies, every later request raises a
:class:`SandboxFailure`, which is a ``BaseException`` so that no check's ``except Exception``
can mistake it for an error of the student's code.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

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


class SandboxUnavailable(Exception):
    """No sandbox can be made on this machine (the reason says why)."""


@dataclass(frozen=True)
class SandboxLimits:
    memory_mb: int = 4096      # address space of the runner (and of anything it starts)
    cpu_s: int = 300           # CPU seconds of the runner
    nproc: int = 64            # processes and threads of the sandbox's uid (one uid per grading process)
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
        roots = sorted({Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                        Path(os.path.realpath(self.python)).parent.parent})
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
        for root in roots:
            if not any(root != other and root.is_relative_to(other) for other in roots) \
                    and not root.is_relative_to("/usr"):
                args += _mounts_for(root)
        # A venv's bin/python is a symlink to the base interpreter: both ends must be visible.
        venv = Path(sys.prefix)
        if venv != venv.resolve() and not venv.is_relative_to("/usr"):
            args += _mounts_for(venv)
        args += [*_mounts_for(Path("/sandbox"))[:-3], "--ro-bind", str(RUNNER_DIR), "/sandbox",
                 "--dev", "/dev", "--proc", "/proc", "--chdir", "/tmp", "--clearenv",
                 "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/bin:/bin",
                 "--setenv", "OPENBLAS_NUM_THREADS", "1", "--setenv", "OMP_NUM_THREADS", "1",
                 "--setenv", "MKL_NUM_THREADS", "1", "--setenv", "MPLBACKEND", "Agg",
                 "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib", "--setenv", "PYTHONHASHSEED", "0"]
        python = str(Path(sys.prefix) / "bin" / "python") if (Path(sys.prefix) / "bin" / "python").exists() \
            else self.python
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
        self.deadline = time.monotonic() + budget
        self.budget = budget
        self.failure: SandboxFailure | None = None
        self._errlog = tempfile.TemporaryFile()
        self.process = subprocess.Popen(sandbox.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._errlog, env=sandbox.env(), close_fds=True,
                                        start_new_session=True)
        self._reader = wire.Reader(self.process.stdout.fileno(), sandbox.limits.message_mb << 20)
        self._modules: dict[str, object] = {}
        self.running: str | None = None  # the cell the sandbox is running, while it runs the student's cells

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
                stream.close()
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
            wire.write(self.process.stdin.fileno(), wire.pack(message, blobs))
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def _wait(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._fail(SandboxTimeout, f"ran over the time limit of {self.budget:g} s")
        ready, _, _ = select.select([self.process.stdout], [], [], left)
        if not ready:
            raise self._fail(SandboxTimeout, f"ran over the time limit of {self.budget:g} s")

    def _receive(self) -> tuple[dict, list[bytes]]:
        self._check_alive()
        try:
            return self._reader.read(self._wait)
        except EOFError:
            raise self._died() from None
        except wire.WireError as error:
            raise self._fail(SandboxProtocolError, f"sent a message the judge cannot read ({error})") from None

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
        names = {signal.SIGSEGV: "crashed with a segmentation fault", signal.SIGKILL: "was killed (out of memory?)",
                 signal.SIGXCPU: "ran out of CPU time", signal.SIGABRT: "aborted", signal.SIGXFSZ:
                 "wrote a file over the size limit", signal.SIGBUS: "crashed (bus error)"}
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
