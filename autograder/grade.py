"""``autograder grade``: grade every submission of an assignment, in parallel and resumably.

How it works, and why:

* **The verdict is decided where no student code runs.** Each student is graded by a worker
  (:mod:`autograder.judge.worker`), a trusted process that reads the notebooks as data, restores their
  structure from the source notebook (:mod:`autograder.judge.restore`: the template wins) and judges
  each exercise (:mod:`autograder.judge`): the student's cells run in a sandbox of their own per
  exercise (bubblewrap: no network, uid 65534, nothing of the course, the gradebook, the other
  students, solutions/ or the hidden checks visible; memory, CPU, process, file and output
  limits), the hidden check runs in the worker on plain data. A crash, hang or attack in one
  exercise costs that exercise only. Where no sandbox can be made, grading refuses to run unless
  the instructor passes ``unsafe=True`` (``--unsafe``).
* **One writer.** This process is the only one that writes the real gradebook (any SQLAlchemy
  URL). It runs nbgrader's SaveAutoGrades and AssignLatePenalties preprocessors on the autograded
  notebooks the worker wrote (no execution; the student's extension and earlier manual grades are
  honoured as nbgrader would), then moves the autograded folder into place, then writes a
  "graded" marker.
* **Done** means: the marker exists and matches a fingerprint of the submitted files, the
  autograded notebooks exist, and the gradebook holds the submission with the submitted
  timestamp. The marker is written last and removed before a regrade starts, so a crash at any
  point (kill -9, power cut) leaves the student "not done" and a rerun grades them again,
  overwriting the same rows (nbgrader's update_or_create): nothing lost, nothing duplicated.
  Ctrl-C is gentler: it stops the run between two students, never inside a gradebook write.
  A re-collected (changed) submission no longer matches its marker and is graded again.
* **Limits.** Per exercise: a time budget for its sandbox (``cell_timeout``, default the
  course's ``Execute.timeout``), counted on the sandbox's own clock so that another student's
  load cannot use it up (:meth:`autograder.judge.session.Session.clock`), and the sandbox's
  memory cap (``memory_mb``). Per notebook: a wall clock here as a backstop; on expiry the
  worker and every process it started are killed.
* **Workers** are forked from a forkserver that imported the judge once, each in a session of
  its own, and die with the grader (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning
from tqdm import tqdm

from . import notebook
from .course import Course, CourseError
from .judge import worker
from .nbgrader_glue import record_grades

if TYPE_CHECKING:
    from .grade_executors import Executor

RUN_PREFIX = "autograder-grade-"


@dataclass(frozen=True)
class Limits:
    cell_timeout: int | None = None   # seconds per exercise's sandbox (its own clock); None: Execute.timeout
    notebook_timeout: float | None = None  # wall seconds per notebook (a backstop); None: every exercise's
                                           # budget in full, plus a minute
    memory_mb: int | None = 4096      # address space of each sandbox, None: the sandbox default


@dataclass
class Outcome:
    student: str
    status: str                       # "graded", "already graded" or "failed"
    detail: str = ""
    score: float | None = None
    max_score: float | None = None
    seconds: float | None = None      # wall time of this student's grading
    log: str = field(default="", repr=False)


# -- what "done" means ---------------------------------------------------------------------------

def fingerprint(folder: Path) -> str:
    """A hash of every file of a submission folder (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _naive_utc(stamp: datetime | None) -> datetime | None:
    if stamp is not None and stamp.tzinfo is not None:
        stamp = stamp.astimezone(timezone.utc).replace(tzinfo=None)
    return stamp


class Ledger:
    """The grader's own records in ``<course>/.autograder/``: graded markers and failures."""

    def __init__(self, course: Course, assignment: str):
        self.course, self.assignment = course, assignment
        self.graded_dir = course.state_dir / "graded" / assignment
        self.failed_dir = course.state_dir / "failed" / assignment

    @staticmethod
    def _write(path: Path, data: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)  # atomic: a marker is either absent or complete

    def marker(self, student: str) -> dict | None:
        path = self.graded_dir / f"{student}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def mark_graded(self, student: str, fp: str, repairs: list[str] | None = None,
                    verdicts: dict[str, dict] | None = None) -> None:
        """``repairs``: what restoring the notebook's structure changed (a deleted test cell put
        back, ...); ``verdicts``: the judge's, per exercise (passed, message, and the traceback of a
        check that crashed). Kept here for the instructor: the scratch copy that was graded is gone."""
        self._write(self.graded_dir / f"{student}.json", {"fingerprint": fp, "at": _now(), "repairs": repairs or [],
                                                           "verdicts": verdicts or {}})
        (self.failed_dir / f"{student}.json").unlink(missing_ok=True)

    def unmark(self, student: str) -> None:
        (self.graded_dir / f"{student}.json").unlink(missing_ok=True)

    def mark_failed(self, student: str, reason: str, log: str) -> None:
        self._write(self.failed_dir / f"{student}.json", {"reason": reason, "at": _now(), "log": log})

    def failures(self) -> dict[str, dict]:
        return {p.stem: json.loads(p.read_text()) for p in sorted(self.failed_dir.glob("*.json"))}

    def is_done(self, gb: Gradebook, student: str) -> bool:
        submitted = self.course.submitted_dir(student, self.assignment)
        marker = self.marker(student)
        if marker is None or marker["fingerprint"] != fingerprint(submitted):
            return False
        autograded = self.course.autograded_dir(student, self.assignment)
        for path in submitted.glob("*.ipynb"):
            if path.stem in self.course.notebooks(self.assignment) \
                    and not (autograded / path.name).exists():
                return False
        try:
            submission = gb.find_submission(self.assignment, student)
        except MissingEntry:
            return False
        stamp = self.course.coursedir().get_existing_timestamp(str(submitted))
        return stamp is None or _naive_utc(submission.timestamp) == _naive_utc(stamp)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- the scratch folders a worker writes into ---------------------------------------------------

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
        return Path(tempfile.mkdtemp(prefix=f"{student}-", dir=self.dir))

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


# -- workers -------------------------------------------------------------------------------------

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
    context.set_forkserver_preload(["autograder.judge.worker"])
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
    """SIGKILL a worker and everything it started, its Jupyter kernel included.

    Jupyter starts the kernel in a session of its own, so the worker's process group does not
    contain it: walk the process tree instead. Everything found is stopped before anything is
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


# -- recording a result in the real gradebook (this process only) --------------------------------

def _install(src: Path, dest: Path, keep: set[Path]) -> None:
    """Replace ``dest`` by the files ``keep`` (relative paths) of ``src``, all or nothing.

    Only the notebooks and the files nbgrader put there are kept: anything else the student's
    code wrote into its working folder (a huge file, a symlink to a secret) stays behind.
    """
    staging = dest.with_name(f".{dest.name}.incoming")
    old = dest.with_name(f".{dest.name}.old")
    for leftover in (staging, old):
        shutil.rmtree(leftover, ignore_errors=True)
    staging.mkdir(parents=True)
    for rel in sorted(keep):
        if (src / rel).is_file() and not (src / rel).is_symlink():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, staging / rel, follow_symlinks=False)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def _files(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


class StopRequest:
    """Ctrl-C while grading is a request to stop at the next safe point.

    A KeyboardInterrupt raised anywhere could land inside a gradebook session and leave a SQLite
    connection holding its lock (seen in testing: the next run then fails with "database is
    locked"). Instead, SIGINT only sets a flag and writes a byte to :attr:`wakeup` (a pipe an
    executor waits on beside its workers, so the request is seen at once), and
    :meth:`checkpoint` raises between students, where no database session is open.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self.wakeup, self._wakeup_w = os.pipe()

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # signals are main-thread only
            self._previous = signal.signal(signal.SIGINT, self._request)
        return self

    def _request(self, signum: int, frame: object) -> None:
        self.requested = True
        with contextlib.suppress(OSError):
            os.write(self._wakeup_w, b"!")

    def checkpoint(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        os.close(self.wakeup)
        os.close(self._wakeup_w)


def _record(course: Course, assignment: str, done: Finished, ledger: Ledger, result: dict) -> Outcome:
    student = done.student
    submitted = course.submitted_dir(student, assignment)
    assert done.autograded is not None
    autograded = done.autograded
    stamp = course.coursedir().get_existing_timestamp(str(submitted))
    config = course.config()
    with warnings.catch_warnings():
        # nbgrader 0.9.6 on SQLAlchemy 2 warns "Object ... not in session" on every new
        # submission; the rows are written correctly (checked by the tests).
        warnings.simplefilter("ignore", SAWarning)
        with course.gradebook() as gb:
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment, student, **({"timestamp": stamp} if stamp else {}))
            # A notebook the student did not hand in scores 0, as nbgrader's autograde does.
            handed_in = {p.stem for p in autograded.glob("*.ipynb")}
            for entry in gb.find_assignment(assignment).notebooks:
                if entry.name not in handed_in:
                    for grade in gb.find_submission_notebook(entry.name, assignment, student).grades:
                        grade.auto_score, grade.needs_manual_grade = 0, False
            gb.db.commit()
        for path in sorted(autograded.glob("*.ipynb")):
            record_grades(path, assignment, student, course.db_url, config)
        keep = _files(course.source_dir(assignment)) | _files(submitted) | {Path("timestamp.txt")}
        _install(autograded, course.autograded_dir(student, assignment), keep)
        repairs = [str(r) for r in result.get("repairs") or []]
        verdicts = _verdicts(result)
        ledger.mark_graded(student, done.fingerprint, repairs, verdicts)
    outcome = _graded_outcome(course, assignment, student, "graded")
    unreadable = list((result.get("unreadable") or {}).values())
    record = ledger.graded_dir / f"{student}.json"
    crashed = sorted(e for e, v in verdicts.items() if v["detail"])
    outcome.detail = "; ".join([*unreadable, *_repaired(repairs, record),
                                *([f"a check crashed on {', '.join(crashed)} (a bug of the grader: the traceback is in "
                                   f"{record})"] if crashed else []),
                                *([outcome.detail] if outcome.detail else [])])
    return outcome


def _verdicts(result: dict) -> dict[str, dict]:
    """The judge's verdict on each exercise, from the worker's result: {exercise: {"passed",
    "message", "detail"}} (what nbgrader scores is the same verdict, as the test cells' outputs)."""
    out: dict[str, dict] = {}
    for verdicts in (result.get("notebooks") or {}).values():
        for exercise, verdict in (verdicts if isinstance(verdicts, dict) else {}).items():
            if isinstance(verdict, dict):
                out[str(exercise)] = {"passed": verdict.get("passed") is True,
                                      "message": str(verdict.get("message") or ""),
                                      "detail": str(verdict.get("detail") or "")}
    return out


def _repaired(repairs: list[str], record: Path) -> list[str]:
    """A line for grade's table when the notebook's structure had to be repaired before grading."""
    if not repairs:
        return []
    shown = "; ".join(repairs[:2]) + ("; ..." if len(repairs) > 2 else "")
    return [f"notebook repaired before grading ({len(repairs)}: {shown}; all in {record})"]


def _graded_outcome(course: Course, assignment: str, student: str, status: str) -> Outcome:
    with course.gradebook() as gb:
        submission = gb.find_submission(assignment, student)
        details = ["written answers to grade by hand"] if submission.needs_manual_grade else []
        penalty = submission.late_submission_penalty or 0.0
        if submission.total_seconds_late > 0:
            details.append(f"{_duration(submission.total_seconds_late)} late"
                           + (f", penalty {penalty:g}" if penalty else ""))
        # the score after the late penalty, as nbgrader's export computes it
        return Outcome(student, status, "; ".join(details), max(0.0, submission.score - penalty),
                       submission.max_score)


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours < 48 else f"{hours // 24} days {hours % 24} h"


# -- the command ---------------------------------------------------------------------------------

@contextlib.contextmanager
def _exclusive(course: Course, assignment: str):
    course.state_dir.mkdir(exist_ok=True)
    with open(course.state_dir / f"grade-{assignment}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CourseError(f"another `autograder grade {assignment}` is running on {course.root}") from None
        yield  # the kernel drops the lock when this process ends, however it ends


def select_students(course: Course, assignment: str, students: list[str] | None) -> list[str]:
    submitted = course.submitted_students(assignment)
    if students is None:
        return submitted
    unknown = sorted(set(students) - set(submitted))
    if unknown:
        raise CourseError(f"no submission of {assignment} from: {', '.join(unknown)} "
                          f"(in {course.submitted_dir('*', assignment).parent.parent})")
    return [s for s in submitted if s in students]


def require_sandbox(unsafe: bool) -> None:
    """Refuse to run student code without a sandbox, unless the instructor said so."""
    from .judge.session import probe
    reason = probe()
    if reason is not None and not unsafe:
        raise CourseError(f"cannot make a sandbox for student code here: {reason}. Install bubblewrap "
                          "(`apt-get install bubblewrap`), or pass --unsafe to grade without one "
                          "(student code then runs as you, and can read and change your files)")


def grade(course: Course, assignment: str, students: list[str] | None = None, *, jobs: int = 1,
          limits: Limits = Limits(), force: bool = False, progress: bool = True,
          unsafe: bool = False, scheduler: str | None = None) -> list[Outcome]:
    """Grade the submissions of ``assignment``; returns one Outcome per selected student.

    ``scheduler`` (``tcp://HOST:PORT``): grade on that Dask cluster's workers instead of ``jobs``
    local ones (:mod:`autograder.grade_executors`); this process still records every grade."""
    from .grade_executors import DaskExecutor, LocalExecutor

    course.require_assignment(assignment)
    if scheduler is None:
        require_sandbox(unsafe)  # a Dask cluster's workers are asked, each for itself
    students = select_students(course, assignment, students)
    ledger = Ledger(course, assignment)
    outcomes: dict[str, Outcome] = {}
    with _exclusive(course, assignment), StopRequest() as stop:
        with course.gradebook() as gb:
            done = [s for s in students if not force and ledger.is_done(gb, s)]
        for student in done:
            outcomes[student] = _graded_outcome(course, assignment, student, "already graded")
        todo = [s for s in students if s not in outcomes]
        if todo:
            run = Run(course, assignment)
            executor: Executor
            try:
                if scheduler is None:
                    executor = LocalExecutor(course, assignment, limits, unsafe, run, jobs)
                else:
                    executor = DaskExecutor(scheduler, course, assignment, limits, unsafe, run)
                try:
                    outcomes.update(GradingRun(course, assignment, ledger, executor, stop, progress).grade(todo))
                finally:
                    executor.close()  # on Ctrl-C or an error: stops what is still running
            finally:
                run.close()
    return [outcomes[s] for s in students if s in outcomes]


@dataclass
class GradingRun:
    """Grading a list of students through one executor, recording each as its worker finishes.

    The executor starts workers (local processes or Dask tasks) and blocks until at least one
    has finished; this object is the only writer of the ledger and the gradebook, so whatever
    runs the workers, "done" keeps one meaning.
    """
    course: Course
    assignment: str
    ledger: Ledger
    executor: Executor
    stop: StopRequest
    progress: bool = True
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def grade(self, students: list[str]) -> dict[str, Outcome]:
        todo = deque(students)
        with tqdm(total=len(todo), desc=f"grading {self.assignment}", unit="student",
                  disable=not self.progress, file=sys.stderr) as bar:
            while todo or self.executor.busy():
                self.stop.checkpoint()
                while todo and self.executor.room() > 0:
                    self._launch(todo.popleft())
                for done in self.executor.wait(self.stop):
                    self._finish(done, bar)
        return self.outcomes

    def _launch(self, student: str) -> None:
        self.ledger.unmark(student)  # from here until recorded, this student is not done
        self.executor.submit(student, fingerprint(self.course.submitted_dir(student, self.assignment)))

    def _finish(self, done: Finished, bar: tqdm) -> None:
        if done.student in self.outcomes:  # a task Dask ran twice: the first reply counts
            return
        try:
            if done.result is None:
                outcome = Outcome(done.student, "failed", done.failure, log=done.log)
            else:
                outcome = _record(self.course, self.assignment, done, self.ledger, done.result)
        finally:
            if done.scratch is not None:
                shutil.rmtree(done.scratch, ignore_errors=True)
        outcome.seconds = done.seconds
        if outcome.status == "failed":
            self.ledger.mark_failed(done.student, outcome.detail, outcome.log)
        self.outcomes[done.student] = outcome
        bar.set_postfix_str(f"{done.student}: {outcome.status}")
        bar.update(1)


def wall_limit(course: Course, assignment: str, limits: Limits) -> float:
    """The backstop for one student: by default long enough for every exercise to use its whole
    budget (a student whose every answer hangs still gets each exercise judged, and 0 for those),
    twice (an exercise that finds a hung cell is judged again without it), each stretched as far
    as a sandbox's clock may lag the wall clock on a busy machine (``WALL_STRETCH``)."""
    from .judge.session import WALL_STRETCH
    notebooks = course.notebooks(assignment)
    if limits.notebook_timeout is not None:
        return limits.notebook_timeout * max(1, len(notebooks))
    from .judge import catalogue
    from .judge.grading import judged_exercises
    total = 0.0
    for name in notebooks:
        for exercise in judged_exercises(notebook.read(course.source_dir(assignment) / f"{name}.ipynb").cells):
            budget = getattr(catalogue.declared(exercise), "budget", None) or exercise_budget(course, limits)
            total += 2 * (WALL_STRETCH * budget + 5)
    return total + 60


def exercise_budget(course: Course, limits: Limits) -> float:
    """Seconds of sandbox clock per exercise, unless its spec says otherwise."""
    return limits.cell_timeout or course.config().Execute.get("timeout") or 60
