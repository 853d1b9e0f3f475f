"""Where ``autograder grade`` runs its workers: on this machine, or on a Dask cluster.

An executor starts one worker per student and blocks until at least one has finished; the
:class:`autograder.grading.run.GradingRun` that drives it records each result, and is the only writer
of the ledger and the gradebook whichever executor it drives.

* :class:`LocalExecutor`: up to ``--jobs`` workers forked from this machine's forkserver. It
  waits on their process sentinels (and on the Ctrl-C pipe), and kills a worker that runs over
  its backstop.
* :class:`DaskExecutor` (``--scheduler tls://HOST:PORT``, :class:`ClusterAccess`): one Dask task per student. The task
  carries the student's submitted files as bytes (the assignment's source folder is scattered to
  every worker once), so no filesystem is shared; on the worker, :func:`grade_remote` grades them
  exactly as the local executor does (the worker's own warm forkserver, one bubblewrap sandbox
  per exercise, the same backstop) and replies with plain data: the autograded notebooks and
  the verdicts. The client checks the reply's shape, types and sizes (:func:`accept`) before
  writing anything. A worker killed mid-task: the scheduler runs the task again elsewhere, and a
  second reply for a student already recorded is dropped, so nothing is lost or doubled.

Scratch folders on a worker live in its temp dir under ``autograder-dask-``, owned by the worker
process: removed at task end, and those of a dead worker (kill -9 skips all cleanup) when the
client connects and at every task's start.
"""
from __future__ import annotations

import contextlib
import multiprocessing.connection
import multiprocessing.forkserver
import shutil
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from autograder.course import MAX_NOTEBOOK_BYTES, CourseError, notebook
from autograder.course.directory import Course
from autograder.grading.control import StopRequest, exercise_budget, wall_limit
from autograder.grading.workers import (
    Finished,
    Job,
    Limits,
    Run,
    _workers,
    failure_reason,
    reap,
    scratch_dir,
    start_worker,
    timed_out,
)

REMOTE_PREFIX = "autograder-dask-"
# Dask's housekeeping, tuned for grading (a few long tasks per worker, no dashboard to feed): with
# its defaults (an event-loop tick every 20 ms, a memory check every 100 ms, a system monitor every
# 500 ms, a statistical profiler every 10 ms) an idle scheduler and two workers burn 0.15 CPU-s per
# second, with these 0.02 (measured on 127.0.0.1). Set on the scheduler and every worker
# (deploy/dask.md); the first is required: the worker keeps a forkserver, which a daemon may not start.
QUIET_DASK = {
    "DASK_DISTRIBUTED__WORKER__DAEMON": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__GIL__ENABLED": "False",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
}
# One autograded notebook: a submitted one (at most MAX_NOTEBOOK_BYTES, on every path) with its
# outputs cleared but the judge's messages, each capped at MAX_TEXT_CHARS.
MAX_GRADED_NOTEBOOK_BYTES = MAX_NOTEBOOK_BYTES + 8 * 2**20
MAX_LOG_CHARS = 20_000
MAX_TEXT_CHARS = 20_000           # any other string of a reply (a verdict's message, a repair)
IN_FLIGHT_PER_THREAD = 2          # tasks queued per worker thread: the next payload is there when one ends
CHECK_STOP_EVERY = 1.0            # seconds: how soon a Dask wait notices Ctrl-C


class Executor(Protocol):
    def room(self) -> int:
        """How many more students may be submitted now."""

    def busy(self) -> bool:
        """Whether a submitted student has not been handed back yet."""

    def submit(self, student: str, fingerprint: str) -> None: ...

    def wait(self, stop: StopRequest, timeout: float | None = None) -> list[Finished]:
        """Block until at least one student is finished (or Ctrl-C, or ``timeout`` seconds);
        return those finished."""

    def close(self) -> None:
        """Stop what still runs (only left on Ctrl-C or an error)."""


# -- this machine ----------------------------------------------------------------------------------

class LocalExecutor:
    def __init__(self, course: Course, assignment: str, limits: Limits, unsafe: bool, run: Run, jobs: int):
        self.course, self.assignment, self.limits, self.unsafe, self.run = course, assignment, limits, unsafe, run
        self.jobs = max(1, jobs)
        self.workers = _workers()
        multiprocessing.forkserver.ensure_running()  # its imports overlap with the preparation below
        self.wall = wall_limit(course, assignment, limits)
        self.budget = exercise_budget(course, limits)
        self.running: list[Job] = []

    def room(self) -> int:
        return self.jobs - len(self.running)

    def busy(self) -> bool:
        return bool(self.running)

    def submit(self, student: str, fingerprint: str) -> None:
        job = Job(student, self.run.scratch_folder(student), fingerprint)
        start_worker(self.workers, job, source=self.course.source_dir(self.assignment),
                     submitted=self.course.submitted_dir(student, self.assignment), budget=self.budget,
                     memory_mb=self.limits.memory_mb, unsafe=self.unsafe)
        job.deadline = job.started + self.wall
        self.running.append(job)

    def wait(self, stop: StopRequest, timeout: float | None = None) -> list[Finished]:
        if not self.running:
            return []
        until_deadline = max(0.0, min(job.deadline for job in self.running) - time.monotonic())
        timeout = until_deadline if timeout is None else min(timeout, until_deadline)
        sentinels: list[Any] = [job.process.sentinel for job in self.running if job.process is not None]
        multiprocessing.connection.wait([*sentinels, stop.wakeup], timeout=timeout)
        finished = []
        for job in list(self.running):
            assert job.process is not None
            if job.process.exitcode is not None:
                finished.append(self._finished(job))
            elif time.monotonic() > job.deadline:
                reason = timed_out(job, self.wall)
                finished.append(Finished(job.student, job.fingerprint, time.monotonic() - job.started,
                                         failure=reason, log=job.log_tail(), scratch=job.scratch))
            else:
                continue
            self.running.remove(job)
        return finished

    def _finished(self, job: Job) -> Finished:
        seconds = time.monotonic() - job.started
        result = job.result()
        if result is None:
            log = job.log_tail()
            assert job.process is not None
            return Finished(job.student, job.fingerprint, seconds, failure=failure_reason(job.process.exitcode, log),
                            log=log, scratch=job.scratch)
        return Finished(job.student, job.fingerprint, seconds, result=result, autograded=job.autograded,
                        scratch=job.scratch)

    def close(self) -> None:
        from autograder.grading.workers import kill_tree
        for job in self.running:
            if job.process is not None:
                kill_tree(job.process)
        self.running.clear()


# -- a Dask cluster --------------------------------------------------------------------------------

def pack(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder``, by its relative path (symlinks are not followed)."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def unpack(files: dict[str, bytes], folder: Path) -> None:
    for rel, data in files.items():
        target = (folder / rel).resolve()
        if Path(rel).is_absolute() or ".." in Path(rel).parts or not target.is_relative_to(folder.resolve()):
            raise ValueError(f"a file path outside the course: {rel!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _files(files: dict[str, bytes]) -> dict[str, bytes]:
    return files


def worker_ready(unsafe: bool) -> str | None:
    """Run on every worker when a client connects: reap dead workers' scratch folders, start the
    forkserver (its imports cost seconds: the first task need not wait for them), and say why no
    sandbox can be made here, if so."""
    from autograder.judge.session import probe
    reap(REMOTE_PREFIX)
    reason = probe()
    if reason is None or unsafe:
        _workers()
        multiprocessing.forkserver.ensure_running()
    return reason


def grade_remote(task: dict[str, Any], source: dict[str, bytes]) -> dict[str, Any]:
    """A Dask task: grade one student's submission on this worker and reply with plain data.

    ``task``: assignment, student, fingerprint, submitted ({path: bytes} under
    ``submitted/<student>/``), budget, wall, memory_mb, unsafe. ``source``: the course's
    ``source/`` files the grading needs, scattered once.
    Reply: {"result": the worker's result or None, "notebooks": {name: bytes}, "failure": str,
    "log": str, "seconds": float, "host": str}.
    """
    from autograder.judge.session import probe
    host = socket.gethostname()
    reason = probe()
    if reason is not None and not task["unsafe"]:
        raise CourseError(f"cannot make a sandbox for student code on worker {host}: {reason}. Install bubblewrap "
                          "there, or pass --unsafe to grade without one")
    workers = _workers()
    area = scratch_dir(REMOTE_PREFIX)  # also reaps the folders of workers that died mid-task
    try:
        course = area / "course"
        unpack(source, course / "source")
        unpack(task["submitted"], course / "submitted" / task["student"])
        job = Job(task["student"], area / "job", task["fingerprint"])
        job.scratch.mkdir()
        start_worker(workers, job, source=course / "source" / task["assignment"],
                     submitted=course / "submitted" / task["student"] / task["assignment"],
                     budget=task["budget"], memory_mb=task["memory_mb"], unsafe=task["unsafe"])
        assert job.process is not None
        job.process.join(timeout=task["wall"])
        seconds = time.monotonic() - job.started
        reply: dict[str, Any] = {"result": None, "notebooks": {}, "failure": "", "log": "",
                                 "seconds": seconds, "host": host}
        if job.process.exitcode is None:
            reply["failure"] = timed_out(job, task["wall"])
        elif (result := job.result()) is not None:
            reply["result"] = result
            reply["notebooks"] = {p.name: p.read_bytes() for p in sorted(job.autograded.glob("*.ipynb"))}
        else:
            reply["failure"] = failure_reason(job.process.exitcode, job.log_tail())
        if reply["result"] is None:
            reply["log"] = job.log_tail()
        return reply
    finally:
        shutil.rmtree(area, ignore_errors=True)


class MalformedReply(ValueError):
    pass


def accept(reply: object, notebooks: set[str]) -> tuple[dict[str, Any] | None, dict[str, bytes], str, str, float]:
    """Check a worker's reply is the plain data :func:`grade_remote` returns, within its sizes:
    (result, notebooks, failure, log, seconds). Raises MalformedReply naming what is wrong."""
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise MalformedReply(what)

    def text(value: object, limit: int = MAX_TEXT_CHARS) -> bool:
        return isinstance(value, str) and len(value) <= limit

    need(isinstance(reply, dict), f"the reply is a {type(reply).__name__}, not a dict")
    assert isinstance(reply, dict)
    failure, log, seconds = reply.get("failure"), reply.get("log"), reply.get("seconds")
    need(text(failure), "its failure is not a short string")
    need(isinstance(log, str), "its log is not a string")
    need(isinstance(seconds, float | int) and not isinstance(seconds, bool) and 0 <= seconds < 10**6,
         "its seconds are not a number of seconds")
    files = reply.get("notebooks")
    need(isinstance(files, dict), "its notebooks are not a dict")
    assert isinstance(files, dict)
    for name, data in files.items():
        need(name in notebooks, f"a notebook the assignment does not have: {str(name)[:80]!r}")
        need(isinstance(data, bytes) and len(data) <= MAX_GRADED_NOTEBOOK_BYTES,
             f"{name} is not bytes of at most {MAX_GRADED_NOTEBOOK_BYTES // 2**20} MB")
        try:
            notebook.validated(data.decode())
        except Exception as error:  # noqa: BLE001 (whatever nbformat finds wrong with it)
            raise MalformedReply(f"{name} is not a valid notebook ({type(error).__name__})") from None
    result = reply.get("result")
    if result is not None:
        need(isinstance(result, dict) and result.get("success") is True, "its result does not say success")
        assert isinstance(result, dict)
        unreadable = result.get("unreadable") or {}
        need(isinstance(unreadable, dict) and all(isinstance(k, str) and text(v) for k, v in unreadable.items()),
             "its unreadable notebooks are not names and reasons")
        repairs = result.get("repairs") or []
        need(isinstance(repairs, list) and all(text(r) for r in repairs), "its repairs are not short strings")
        need(isinstance(result.get("notebooks"), dict), "its verdicts are not a dict")
        result = {"success": True, "unreadable": dict(unreadable), "repairs": list(repairs),
                  "notebooks": result["notebooks"]}
    return result, files, str(failure), str(log)[-MAX_LOG_CHARS:], float(seconds)  # type: ignore[arg-type]


def refuse_without_sandbox(address: str, reasons: dict[str, str | None], unsafe: bool) -> None:
    """Stop, naming a worker, if any worker of the cluster cannot make a sandbox (unless ``unsafe``)."""
    if not reasons:
        raise CourseError(f"the Dask scheduler {address} has no workers")
    refusing = {worker: reason for worker, reason in reasons.items() if reason is not None}
    if refusing and not unsafe:
        worker, reason = next(iter(sorted(refusing.items())))
        raise CourseError(f"cannot make a sandbox for student code on {len(refusing)} of {len(reasons)} Dask "
                          f"workers ({worker}: {reason}). Install bubblewrap on every worker, or pass --unsafe "
                          "to grade without one (student code then runs as the worker's user)")


@dataclass(frozen=True)
class ClusterAccess:
    """How the grader proves itself to a Dask cluster: TLS with a client certificate of the
    cluster's CA (``deploy/dask_certs.py``), or nothing, on a machine no one else can reach."""
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    single_user_machine: bool = False

    def security(self, address: str):
        """The ``distributed.Security`` to connect to ``address`` with (None: a plain connection),
        or CourseError when the connection would let others in or the certificates are missing."""
        from distributed.security import Security
        scheme = address.split("://", 1)[0] if "://" in address else "tcp"
        files = {"--tls-ca-file": self.tls_ca_file, "--tls-cert": self.tls_cert, "--tls-key": self.tls_key}
        if scheme == "tls":
            missing = [flag for flag, path in files.items() if not path]
            if missing:
                raise CourseError(f"a tls:// scheduler needs the cluster's CA and a client certificate: pass "
                                  f"{', '.join(missing)} (deploy/dask_certs.py makes them)")
            for flag, path in files.items():
                try:
                    Path(str(path)).read_bytes()
                except OSError as error:
                    raise CourseError(f"{flag} {path}: cannot be read ({error.strerror})") from None
            return Security(tls_ca_file=self.tls_ca_file, tls_client_cert=self.tls_cert,
                            tls_client_key=self.tls_key, require_encryption=True)
        if not self.single_user_machine:
            raise CourseError(
                f"refusing the unauthenticated Dask scheduler {address}: anyone who can reach its port runs code on "
                "its workers, which hold the source notebooks (the solutions) and every submission. Run the cluster "
                "with TLS and client certificates (tls://, --tls-ca-file/--tls-cert/--tls-key; deploy/dask.md), or "
                "pass --single-user-machine if no one else can reach it")
        return None


class DaskExecutor:
    def __init__(self, address: str, course: Course, assignment: str, limits: Limits, unsafe: bool, run: Run,
                 access: ClusterAccess = ClusterAccess()):
        try:
            from distributed import Client
        except ImportError:
            raise CourseError("grading on a Dask cluster needs the `distributed` package: "
                              "pip install 'autograd-course[dask]'") from None
        self.course, self.assignment, self.unsafe, self.run = course, assignment, unsafe, run
        security = access.security(address)
        try:
            # the default client of this process: distributed.wait finds it so
            self.client = Client(address, timeout=10, security=security)
        except OSError as error:
            raise CourseError(f"cannot reach the Dask scheduler {address}: {error}") from None
        try:
            self._check_workers(address)
            self.task: dict[str, Any] = {"assignment": assignment, "budget": exercise_budget(course, limits),
                                         "wall": wall_limit(course, assignment, limits),
                                         "memory_mb": limits.memory_mb, "unsafe": unsafe}
            self.notebooks = {f"{name}.ipynb" for name in course.notebooks(assignment)}
            self.earlier = self._earlier_assignments()
            # The source folder is sent once, as a task's result that the workers fetch from one
            # another: a scattered copy would be lost with its worker, a task's result is recomputed.
            self.source = self.client.submit(_files, self._source_files(), key=f"source-{uuid.uuid4().hex[:8]}",
                                             pure=False)
        except BaseException:
            self.client.close()
            raise
        self.futures: dict[Any, str] = {}   # future -> student
        self.fingerprints: dict[str, str] = {}
        self.started: dict[str, float] = {}

    def _check_workers(self, address: str) -> None:
        # one task per worker, on its task thread: client.run would block the worker's event loop for
        # the sandbox probe and the forkserver's imports (seconds), long enough to lose heartbeats
        workers = list(self.client.scheduler_info(n_workers=-1)["workers"])
        futures = [self.client.submit(worker_ready, self.unsafe, workers=[w], allow_other_workers=False, pure=False,
                                      key=f"worker-ready-{uuid.uuid4().hex[:8]}") for w in workers]
        refuse_without_sandbox(address, dict(zip(workers, self.client.gather(futures), strict=True)), self.unsafe)

    def _earlier_assignments(self) -> list[str]:
        """The assignments whose notebooks a whole-engine exercise reads (the capstone's engine)."""
        from autograder.course import catalogue
        from autograder.judge.submission import judged_exercises
        whole = any(getattr(catalogue.declared(e), "whole_engine", False)
                    for name in self.notebooks
                    for e in judged_exercises(notebook.read(self.course.source_dir(self.assignment) / name).cells))
        prefix = self.assignment.split("_", 1)[0]
        return [a for a in self.course.assignments() if whole and a.split("_", 1)[0] < prefix]

    def _source_files(self) -> dict[str, bytes]:
        source = self.course.source_dir(self.assignment).parent
        files = {f"{self.assignment}/{rel}": data for rel, data in pack(source / self.assignment).items()}
        for earlier in self.earlier:
            path = source / earlier / f"{earlier}.ipynb"
            if path.is_file():
                files[f"{earlier}/{earlier}.ipynb"] = path.read_bytes()
        return files

    def _submitted_files(self, student: str) -> dict[str, bytes]:
        files = {f"{self.assignment}/{rel}": data
                 for rel, data in pack(self.course.submitted_dir(student, self.assignment)).items()}
        for earlier in self.earlier:
            path = self.course.submitted_dir(student, earlier) / f"{earlier}.ipynb"
            if path.is_file():
                files[f"{earlier}/{earlier}.ipynb"] = path.read_bytes()
        return files

    def room(self) -> int:
        threads = sum(self.client.nthreads().values())
        return IN_FLIGHT_PER_THREAD * max(1, threads) - len(self.futures)

    def busy(self) -> bool:
        return bool(self.futures)

    def submit(self, student: str, fingerprint: str) -> None:
        task = {**self.task, "student": student, "fingerprint": fingerprint,
                "submitted": self._submitted_files(student)}
        # a key of its own per run: a later run never picks up an old result of the same student
        key = f"grade-{self.assignment}-{student}-{uuid.uuid4().hex[:8]}"
        future = self.client.submit(grade_remote, task, self.source, key=key, pure=False)
        self.futures[future] = student
        self.fingerprints[student] = fingerprint
        self.started[student] = time.monotonic()

    def wait(self, stop: StopRequest, timeout: float | None = None) -> list[Finished]:
        from concurrent.futures import CancelledError

        from distributed import wait
        until = None if timeout is None else time.monotonic() + timeout
        ready = [future for future in self.futures if future.done()]
        while not ready and not stop.requested and (until is None or time.monotonic() < until):
            # a cancelled task (its input lost) ends the wait too: it is handed back as failed below
            with contextlib.suppress(TimeoutError, CancelledError):
                wait(list(self.futures), timeout=CHECK_STOP_EVERY, return_when="FIRST_COMPLETED")
            ready = [future for future in self.futures if future.done()]
        return [self._finished(future) for future in ready]

    def _finished(self, future: Any) -> Finished:
        student = self.futures.pop(future)
        fingerprint, seconds = self.fingerprints.pop(student), time.monotonic() - self.started.pop(student)
        try:
            reply = future.result()
        except BaseException as error:  # noqa: BLE001 (the task failed: KilledWorker, a refusal, cancelled)
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
            return Finished(student, fingerprint, seconds, failure=f"the Dask task failed: {type(error).__name__}: "
                            f"{str(error)[:MAX_TEXT_CHARS]}")
        try:
            result, notebooks, failure, log, seconds = accept(reply, self.notebooks)
        except MalformedReply as error:
            return Finished(student, fingerprint, seconds, failure=f"the Dask worker's reply was malformed: {error}")
        if result is None:
            return Finished(student, fingerprint, seconds, failure=failure, log=log)
        scratch = self.run.scratch_folder(student)
        autograded = scratch / "autograded"
        autograded.mkdir()
        for name, data in notebooks.items():
            (autograded / name).write_bytes(data)
        return Finished(student, fingerprint, seconds, result=result, autograded=autograded, scratch=scratch)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.futures:
                self.client.cancel(list(self.futures))
            self.futures.clear()
            self.client.close()

