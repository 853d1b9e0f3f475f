"""The grading workers of ``autograder grade``: scratch folders, one forked process per student.

Each student is graded by a worker (:mod:`autograder.judge.worker`) forked from a forkserver that
imported the judge once, in a session of its own, dying with the grader (PR_SET_PDEATHSIG); it
writes the autograded notebooks and its result into a scratch folder of the run, which the
grader's process alone reads (:mod:`autograder.grading.record`). Limits: per exercise a time budget
and a memory cap for its sandbox; per notebook a wall clock here, on whose expiry the worker and
everything it started are killed.
"""
from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from nbgrader.api import MissingEntry

from autograder.course import CourseError
from autograder.course.directory import Course
from autograder.judge import worker

RUN_PREFIX = "autograder-grade-"


@dataclass(frozen=True)
class Limits:
    cell_timeout: int | None = None   # seconds per exercise's sandbox (its own clock); None: Execute.timeout
    notebook_timeout: float | None = None  # wall seconds per notebook (a backstop); None: every exercise's
                                           # budget in full, plus a minute
    memory_mb: int | None = 4096      # address space of each sandbox, None: the sandbox default


class Run:
    """A scratch area in the system temp dir for one grading run; removed when the run ends.

    Each student gets a folder in it for the worker's output (autograded notebooks, result, log).
    No sandbox sees it: a sandbox has a /tmp of its own.
    """

    def __init__(self, course: Course, assignment: str):
        self.course, self.assignment = course, assignment
        try:
            with course.gradebook() as gb:
                gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(f"assignment '{assignment}' is not in the gradebook {course.db_url}: "
                              f"run `autograder release {assignment}` first") from None
        self.dir = scratch_dir(RUN_PREFIX)

    def scratch_folder(self, student: str) -> Path:
        # a prefix, not the name: whatever the id's length, the folder's name stays a valid one
        return Path(tempfile.mkdtemp(prefix=f"{student[:32]}-", dir=self.dir))

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def reap(prefix: str) -> None:
    """Remove the folders of ``prefix`` in the system temp dir whose owner process is gone."""
    for old in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        with contextlib.suppress(OSError, ValueError):
            if not _alive(int((old / "owner.pid").read_text())):
                shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    # a process killed under a parent that has not waited for it yet is a zombie: it exists but
    # will never clean up after itself
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def scratch_dir(prefix: str) -> Path:
    """A new folder in the system temp dir, owned by this process.

    Folders of the same prefix whose owner is gone (killed: kill -9 skips all cleanup) are
    removed first, so interrupted runs do not pile up.
    """
    reap(prefix)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / "owner.pid").write_text(str(os.getpid()))
    return folder


@dataclass
class Job:
    """One student's grading worker: a process forked from the forkserver, writing into ``scratch``."""
    student: str
    scratch: Path
    fingerprint: str
    started: float = 0.0
    deadline: float = float("inf")
    process: multiprocessing.process.BaseProcess | None = None

    @property
    def result_path(self) -> Path:
        return self.scratch / "result.json"

    @property
    def log_path(self) -> Path:
        return self.scratch / "worker.log"

    @property
    def autograded(self) -> Path:
        return self.scratch / "autograded"

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def result(self) -> dict | None:
        """The worker's result, if it wrote one that parses."""
        with contextlib.suppress(OSError, ValueError):
            result = json.loads(self.result_path.read_text())
            return result if isinstance(result, dict) and result.get("success") else None
        return None


def _workers() -> multiprocessing.context.ForkServerContext:
    """Workers are forked from a forkserver that has imported the judge, the checks and the reference once.

    Those imports cost about a second of CPU; a fork costs milliseconds. The forkserver is a
    clean single-threaded process, so forking it is safe where forking this one (tqdm's monitor
    thread, open databases) would not be.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["autograder.judge.warm"])
    return context


def start_worker(workers: multiprocessing.context.ForkServerContext, job: Job, *, source: Path, submitted: Path,
                 budget: float, memory_mb: int | None, unsafe: bool) -> None:
    """Fork a worker that grades ``submitted`` against the assignment's ``source`` folder into ``job.scratch``."""
    spec = job.scratch / "spec.json"
    spec.write_text(json.dumps({
        "root": str(job.scratch), "source": str(source), "submitted": str(submitted), "out": str(job.autograded),
        "result": str(job.result_path), "log": str(job.log_path), "budget": budget,
        "memory_mb": memory_mb, "unsafe": unsafe, "env": dict(os.environ),
    }))
    job.process = workers.Process(target=worker.run, args=(str(spec),), daemon=True,
                                  name=f"grade {source.name}/{job.student}")
    job.process.start()
    job.started = time.monotonic()  # after start(): the forkserver's own start-up is not counted


def kill_tree(process: multiprocessing.process.BaseProcess) -> None:
    """SIGKILL a worker and everything it started, its sandboxes included.

    The judge starts each sandbox in a session of its own (and bubblewrap its child in another:
    ``--new-session``), so the worker's process group does not contain them: walk the process tree
    instead. Everything found is stopped before anything is
    killed, so that nothing can fork, or be re-parented away, between the listing and the kill.
    """
    with contextlib.suppress(psutil.NoSuchProcess):
        root = psutil.Process(process.pid)
        found: dict[int, psutil.Process] = {}
        while True:
            tree = [root, *root.children(recursive=True)]
            new = [p for p in tree if p.pid not in found]
            if not new:
                break
            for p in new:
                found[p.pid] = p
                with contextlib.suppress(psutil.Error):
                    p.suspend()
        groups = set()
        for p in found.values():
            with contextlib.suppress(OSError):
                groups.add(os.getpgid(p.pid))
        groups.discard(os.getpgrp())
        for group in groups:  # also catches a kernel's children that were already orphaned
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        for p in found.values():
            with contextlib.suppress(psutil.Error):
                p.kill()
    process.join()


def failure_reason(returncode: int | None, log: str) -> str:
    ended = f"was killed by signal {-returncode}" if returncode and returncode < 0 else f"exited with code {returncode}"
    if "MemoryError" in log:
        return "the grading worker ran out of memory"
    return f"the grading worker {ended} without a result (a bug of the grader: see the log)"


def timed_out(job: Job, wall: float) -> str:
    """Kill a worker that ran over its backstop; the reason it failed."""
    if job.process is not None:
        kill_tree(job.process)
    gone = "" if job.log_path.exists() else " (its scratch folder is gone: did the notebook delete files?)"
    return f"timeout: grading ran over {wall:.0f} s and was killed{gone}"


@dataclass
class Finished:
    """What an executor hands back for one student: the worker's result, or why there is none.

    ``autograded`` is a folder of this machine holding the autograded notebooks (for a Dask
    worker: written here from its reply, once checked); ``scratch`` is removed once recorded.
    """
    student: str
    fingerprint: str
    seconds: float
    result: dict | None = None
    autograded: Path | None = None
    failure: str = ""
    log: str = ""
    scratch: Path | None = None
