"""One sandboxed process per exercise, and the channel to it.

:class:`Session` starts a sandbox (how: :mod:`autograder.judge.bubblewrap`), hands it the
student's cells, and turns the requests of a hidden check into messages (see
:mod:`autograder.sandbox.wire`); what comes back is plain data or a proxy of an object that stays
in the sandbox (:mod:`autograder.judge.proxy`). A session has one time budget, counted on the
sandbox's own clock (:meth:`Session.clock`: the time it had the CPU or chose to wait, not the time
another student's processes kept it off the CPU), with a hard wall-clock backstop of
:data:`WALL_STRETCH` budgets; past it, or if the process dies, every later request raises a
:class:`SandboxFailure`, which is a ``BaseException`` so that no check's ``except Exception`` can
mistake it for an error of the student's code.
"""
from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil

from autograder.judge.bubblewrap import Sandbox, SandboxUnavailable
from autograder.judge.proxy import send_handle, student_exception, wrap
from autograder.sandbox import wire


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


@functools.cache
def probe(unsafe: bool = False) -> str | None:
    """None if a sandbox can be started here, else the reason it cannot."""
    session = None
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
        # the sandbox's command itself may fail to be made (an interpreter this account cannot read)
        return f"the sandbox did not start: {error} {session.stderr_tail() if session else ''}".strip()
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
        :func:`autograder.kit.compiled`), then the cells, then the judged name plugged in.

        ``earlier`` (the capstone kind): [(assignment, its notebook's cells)] whose answers the kit
        loads first, as a student's kit does; the engine is then wholly the student's."""
        blobs: list[bytes] = []
        message = {"modules": modules, "exercises": exercises, "cells": [list(c) for c in cells],
                   "judged": judged, "others": list(others), "limits": dict(vars(self.sandbox.limits))}
        if earlier is not None:
            message["earlier"] = [[assignment, cells] for assignment, cells in earlier]
        setup = wire.encode(message, blobs)
        self._send({"setup": setup}, blobs)
        # What the sandbox may say it is running: a label the judge sent. Anything else is the
        # student's text, which must not reach a message (a skipped cell's note is not scrubbed).
        known = {label for label, _ in cells} | {f"{a} (the answers loaded from it)" for a, _ in earlier or []}
        while True:
            try:
                reply, blobs = self._receive()
            except (SandboxDied, SandboxTimeout) as failure:
                if self.running is not None:
                    raise self._fail(type(failure), f"{failure} while running your cell {self.running}") from None
                raise
            if "running" not in reply:
                break
            if isinstance(reply["running"], str) and reply["running"] in known:
                self.running = reply["running"]
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
        message = {"op": op, "args": wire.encode(list(args), blobs, send_handle),
                   "kwargs": wire.encode(dict(kwargs), blobs, send_handle)}
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
            return wrap(self, wire.decode(reply.get("value"), blobs))
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
