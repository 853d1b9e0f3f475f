"""A verdict on one exercise, and its kind: what happened, decided once, where the judge knows it.

The kind is stored with the verdict (the worker's result, the ledger's record of the student,
:mod:`autograder.grading.record`), so whatever reads verdicts later (the class page's groups,
:mod:`autograder.analytics.misconceptions`) reads the kind, never phrases of the message: a
message can be reworded without moving a student to another group.
"""
from __future__ import annotations

from dataclasses import dataclass

RIGHT = "right"                # answered, and the check passed
WRONG = "wrong"                # answered, and the check says what is wrong (a diagnosis), or the
#                                student's code raised at a line of theirs that the message quotes
NOT_ANSWERED = "not answered"  # not defined, still the stub, or a piece of an earlier assignment missing
CRASH = "crash"                # the student's code raised, with no line of theirs to show
TIMEOUT = "time-out"           # the exercise ran over its time budget (or below a cell that did)
SANDBOX_DIED = "sandbox died"  # the process running the code died, or broke the sandbox's protocol
GRADER_ERROR = "grader error"  # a bug of the check's own: the instructor has the traceback
UNREADABLE = "unreadable"      # the notebook holding the exercise could not be read
KINDS = (RIGHT, WRONG, NOT_ANSWERED, CRASH, TIMEOUT, SANDBOX_DIED, GRADER_ERROR, UNREADABLE)


@dataclass(frozen=True)
class Verdict:
    exercise: str
    passed: bool
    message: str = ""           # for the student: what is wrong (empty when passed)
    seconds: float = 0.0
    detail: str = ""            # for the instructor's log only (a grader bug's traceback)
    kind: str = ""              # one of KINDS, RIGHT exactly when passed (the default when it passed)

    def __post_init__(self) -> None:
        if not self.kind and self.passed:
            object.__setattr__(self, "kind", RIGHT)
        if self.kind not in KINDS or (self.kind == RIGHT) != self.passed:
            raise ValueError(f"a verdict on {self.exercise} that {'passed' if self.passed else 'failed'} "
                             f"cannot be of kind {self.kind!r} (one of {', '.join(KINDS)}, right exactly when passed)")
