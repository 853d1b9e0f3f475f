"""How a grading run is bounded and stopped: each exercise's budget, each student's wall-clock
backstop, and Ctrl-C as a request to stop between two students.

Beneath ``autograder grade`` (:mod:`autograder.commands.grade`) and the executors that run its
workers (:mod:`autograder.grading.executors`), which both read them here.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

from autograder.course import notebook
from autograder.course.directory import Course
from autograder.grading.workers import Limits


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


def wall_limit(course: Course, assignment: str, limits: Limits) -> float:
    """The backstop for one student: by default long enough for every exercise to use its whole
    budget (a student whose every answer hangs still gets each exercise judged, and 0 for those),
    twice (an exercise that finds a hung cell is judged again without it), each stretched as far
    as a sandbox's clock may lag the wall clock on a busy machine (``WALL_STRETCH``)."""
    from autograder.judge.session import WALL_STRETCH
    notebooks = course.notebooks(assignment)
    if limits.notebook_timeout is not None:
        return limits.notebook_timeout * max(1, len(notebooks))
    from autograder.course import catalogue
    from autograder.judge.submission import judged_exercises
    total = 0.0
    for name in notebooks:
        for exercise in judged_exercises(notebook.read(course.source_dir(assignment) / f"{name}.ipynb").cells):
            budget = getattr(catalogue.declared(exercise), "budget", None) or exercise_budget(course, limits)
            total += 2 * (WALL_STRETCH * budget + 5)
    return total + 60


def exercise_budget(course: Course, limits: Limits) -> float:
    """Seconds of sandbox clock per exercise, unless its spec says otherwise."""
    return limits.cell_timeout or course.config().Execute.get("timeout") or 60
