"""The grading run: which students a run grades, and the one loop that grades them.

``autograder grade`` (:mod:`autograder.commands.grade`) and the class's service (``serve``) both
start a run here: it takes the assignment's lock (one run at a time per assignment and course),
selects the students, sets aside those already graded and those whose notebook is over the size a
collect allows, and drives an executor (:mod:`autograder.grading.executors`) over the rest,
recording each student as their worker finishes (:mod:`autograder.grading.record`): this process
is the only writer of the ledger and the gradebook.
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

from autograder.course import MAX_NOTEBOOK_BYTES, CourseError, size_text
from autograder.course.directory import Course
from autograder.grading.control import StopRequest
from autograder.grading.record import Ledger, Outcome, _graded_outcome, _record, fingerprint
from autograder.grading.workers import Finished

MORE_EVERY = 1.0  # seconds: how often a run with a free worker asks the service for new work

if TYPE_CHECKING:
    from autograder.grading.executors import Executor


@contextlib.contextmanager
def exclusive(course: Course, assignment: str):
    """One run at a time per assignment of a course: a second one stops at once, naming the first."""
    course.state_dir.mkdir(exist_ok=True)
    with open(course.state_dir / f"grade-{assignment}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CourseError(f"another `autograder grade {assignment}` is running on {course.root}") from None
        yield  # the kernel drops the lock when this process ends, however it ends


def select_students(course: Course, assignment: str, students: list[str] | None) -> list[str]:
    """The students a run grades: every one who submitted, or those named (each must have submitted)."""
    submitted = course.submitted_students(assignment)
    if students is None:
        return submitted
    unknown = sorted(set(students) - set(submitted))
    if unknown:
        raise CourseError(f"no submission of {assignment} from: {', '.join(unknown)} "
                          f"(in {course.submitted_dir('*', assignment).parent.parent})")
    return [s for s in submitted if s in students]


def settle(course: Course, assignment: str, students: list[str], ledger: Ledger, force: bool) -> list[Outcome]:
    """The outcome of each of ``students`` a run does not hand a worker: already graded (unless
    ``force``), or whose submission is too large to grade (recorded as failed)."""
    with course.gradebook() as gb:
        done = [s for s in students if not force and ledger.is_done(gb, s)]
    settled = [_graded_outcome(course, assignment, student, "already graded") for student in done]
    for student in students:
        if student not in done and (too_large := oversized(course, assignment, student)):
            settled.append(Outcome(student, "failed", too_large))
            ledger.mark_failed(student, too_large, "")
    return settled


def oversized(course: Course, assignment: str, student: str) -> str:
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
        :func:`autograder.commands.grade.grade` says why); ``each`` hears every outcome as it is recorded."""
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
