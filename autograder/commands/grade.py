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

Here: the command. Its run (the lock, the students it selects, those it sets aside, and the loop
over an executor of :mod:`autograder.grading.executors`) is :mod:`autograder.grading.run`; the
workers and their scratch folders are :mod:`autograder.grading.workers`, the ledger and the
gradebook writes :mod:`autograder.grading.record`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from autograder.course import CourseError
from autograder.course.directory import Course
from autograder.grading.control import StopRequest
from autograder.grading.record import Ledger, Outcome
from autograder.grading.run import GradingRun, exclusive, select_students, settle
from autograder.grading.workers import Limits, Run

if TYPE_CHECKING:
    from autograder.grading.executors import ClusterAccess, Executor


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
        for outcome in settle(course, assignment, names, ledger, force):
            outcomes[outcome.student] = outcome
            if each is not None:
                each(outcome)
        return [s for s in names if s not in outcomes]

    more_to_grade = None if more is None else (lambda: to_grade(select_students(course, assignment, more())))
    with exclusive(course, assignment), StopRequest() as stop, contextlib.closing(ledger):
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
