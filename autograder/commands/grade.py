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

Here: the command and its run loop (:class:`GradingRun`, over an executor of
:mod:`autograder.grading.executors`); the workers and their scratch folders are
:mod:`autograder.grading.workers`, the ledger and the gradebook writes :mod:`autograder.grading.record`.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tqdm import tqdm

from autograder.course import MAX_NOTEBOOK_BYTES, Course, CourseError, size_text
from autograder.grading.control import StopRequest
from autograder.grading.record import Ledger, Outcome, _graded_outcome, _record, fingerprint
from autograder.grading.workers import Finished, Limits, Run

MORE_EVERY = 1.0  # seconds: how often a run with a free worker asks the service for new work

if TYPE_CHECKING:
    from autograder.grading.executors import ClusterAccess, Executor


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
    from autograder.judge.session import probe
    reason = probe()
    if reason is not None and not unsafe:
        raise CourseError(f"cannot make a sandbox for student code here: {reason}. Install bubblewrap "
                          "(`apt-get install bubblewrap`), or pass --unsafe to grade without one "
                          "(student code then runs as you, and can read and change your files)")


def grade(course: Course, assignment: str, students: list[str] | None = None, *, jobs: int = 1,
          limits: Limits = Limits(), force: bool = False, progress: bool = True,
          unsafe: bool = False, scheduler: str | None = None, access: ClusterAccess | None = None,
          more: Callable[[], list[str]] | None = None,
          each: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Grade the submissions of ``assignment``; returns one Outcome per selected student.

    ``scheduler`` (``tls://HOST:PORT``): grade on that Dask cluster's workers instead of ``jobs``
    local ones (:mod:`autograder.grading.executors`), reached as ``access`` says; this process
    still records every grade.

    For the grading service (:mod:`autograder.commands.serve`): ``more()`` is asked for further
    students whenever a worker is free, so that a run takes each new submission as soon as there
    is room instead of waiting for its slowest student (it returns [] when none waits; the run
    ends when none waits and none is being graded); ``each(outcome)`` is called as each student's
    outcome is recorded."""
    from autograder.grading.executors import ClusterAccess, DaskExecutor, LocalExecutor

    course.require_assignment(assignment)
    if scheduler is None:
        require_sandbox(unsafe)  # a Dask cluster's workers are asked, each for itself
    students = select_students(course, assignment, students)
    ledger = Ledger(course, assignment)
    outcomes: dict[str, Outcome] = {}

    def to_grade(names: list[str]) -> list[str]:
        """Those of ``names`` to hand a worker; the others (done already, too large) get their outcome now."""
        with course.gradebook() as gb:
            done = [s for s in names if not force and ledger.is_done(gb, s)]
        settled = [_graded_outcome(course, assignment, student, "already graded") for student in done]
        for student in names:
            if student not in done and (too_large := _oversized(course, assignment, student)):
                settled.append(Outcome(student, "failed", too_large))
                ledger.mark_failed(student, too_large, "")
        for outcome in settled:
            outcomes[outcome.student] = outcome
            if each is not None:
                each(outcome)
        return [s for s in names if s not in outcomes]

    more_to_grade = None if more is None else (lambda: to_grade(select_students(course, assignment, more())))
    with _exclusive(course, assignment), StopRequest() as stop, contextlib.closing(ledger):
        todo = to_grade(students)
        if todo or more is not None:
            run = Run(course, assignment)
            executor: Executor
            try:
                if scheduler is None:
                    executor = LocalExecutor(course, assignment, limits, unsafe, run, jobs)
                else:
                    executor = DaskExecutor(scheduler, course, assignment, limits, unsafe, run,
                                            access or ClusterAccess())
                try:
                    grading = GradingRun(course, assignment, ledger, executor, stop, progress)
                    outcomes.update(grading.grade(todo, more=more_to_grade, each=each))
                finally:
                    executor.close()  # on Ctrl-C or an error: stops what is still running
            finally:
                run.close()
    return [outcomes[s] for s in dict.fromkeys(students + list(outcomes)) if s in outcomes]


def _oversized(course: Course, assignment: str, student: str) -> str:
    """Why a submission is too large to grade ("" if it is not): the limit a collect applies, for a
    folder placed in submitted/ by other means, so that every path grades the same submissions."""
    for path in sorted(course.submitted_dir(student, assignment).glob("*.ipynb")):
        if path.lstat().st_size > MAX_NOTEBOOK_BYTES:
            limit = size_text(MAX_NOTEBOOK_BYTES)
            return f"{path.name} is larger than the {limit} a submitted notebook may be: not graded"
    return ""


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

    def grade(self, students: list[str], more: Callable[[], list[str]] | None = None,
              each: Callable[[Outcome], None] | None = None) -> dict[str, Outcome]:
        """Grade ``students`` (and, with ``more``, whoever it hands over while a worker is free;
        :func:`grade` says why); ``each`` hears every outcome as it is recorded."""
        todo = deque(students)
        with tqdm(total=len(todo), desc=f"grading {self.assignment}", unit="student",
                  disable=not self.progress, file=sys.stderr) as bar:
            while True:
                self.stop.checkpoint()
                while self.executor.room() > 0:
                    if not todo and more is not None:
                        added = [s for s in more() if s not in self.outcomes and s not in todo]
                        todo.extend(added)
                        bar.total += len(added)
                    if not todo:
                        break
                    self._launch(todo.popleft())
                if not todo and not self.executor.busy():
                    return self.outcomes
                # with ``more``, a free worker looks for new work every MORE_EVERY seconds meanwhile
                timeout = MORE_EVERY if more is not None and self.executor.room() > 0 else None
                for done in self.executor.wait(self.stop, timeout):
                    outcome = self._finish(done, bar)
                    if outcome is not None and each is not None:
                        each(outcome)

    def _launch(self, student: str) -> None:
        self.ledger.unmark(student)  # from here until recorded, this student is not done
        self.executor.submit(student, fingerprint(self.course.submitted_dir(student, self.assignment)))

    def _finish(self, done: Finished, bar: tqdm) -> Outcome | None:
        if done.student in self.outcomes:  # a task Dask ran twice: the first reply counts
            return None
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
        return outcome
