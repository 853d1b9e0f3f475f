"""What went wrong, per exercise: the failing students grouped by the bug the judge's message names.

The judge's message for a failed exercise is ``<the case>: <what is wrong>`` (``summing back over a
stretched size-1 last axis, float64: you summed only axis 0 ...``), or one of the judge's own
outcomes (:mod:`autograder.judge.judge`'s table: not implemented, an exception, a time-out, a
dead process). :func:`classify` turns a message into a group key that two students with the same
bug share even when the case that failed first, or the values, shapes, line numbers and names
it quotes, differ: the case is dropped, numbers, tuples of numbers and quoted text are masked.
An exception the student's code raised at a line of theirs is a bug of that code, grouped by what
was raised; not answered, time-outs, crashes (the process running the code died, or it raised
without a line of the student's to show), a notebook that could not be read and the grader's own
failures are groups of their own kind.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

BUG, NOT_ANSWERED, CRASH, TIMEOUT, UNREADABLE, GRADER, NOT_HANDED_IN = (
    "bug", "not answered", "crash", "time-out", "unreadable notebook", "grader error", "not handed in")

# The judge's own outcomes (autograder/judge/judge.py and submission.py), by a phrase of each message.
_KINDS = [
    # (the judge's words before and after issue 39: a gradebook keeps the messages it was given)
    (NOT_ANSWERED, ("not done yet: its cell still raises", "is not defined: write it in its exercise cell",
                    "not implemented yet", "is not defined: write it in the exercise cell",
                    "your engine is missing a piece")),
    (TIMEOUT, ("ran over the time limit", "(an endless loop, or far too slow?)")),
    (UNREADABLE, ("could not be read as a notebook",)),
    (GRADER, ("the grader could not check this exercise", "this exercise was not judged")),
    (CRASH, ("your code raised ", "the Python process running your code", "your code's message is not shown",
             "the cell that defines ")),
]

WHERE = re.compile(r" \(in [^,()]*, line \d+\)")                      # (in backward, line 7)
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?(?![\w])")
_TUPLE = re.compile(r"\((?:\s*N\s*,)*\s*N?\s*,?\s*\)|\[(?:\s*N\s*,)*\s*N?\s*\]")  # (N, N) (N,) () [N, N]
_DTYPE = re.compile(r"\b(float|int|uint|complex)(8|16|32|64|128)\b")


def _mask(text: str, quoted: bool) -> str:
    text = WHERE.sub("", text)
    if quoted:
        text = _QUOTED.sub("'…'", text)
    text = _DTYPE.sub(r"\1…", _NUMBER.sub("N", text))
    return " ".join(_TUPLE.sub("(…)", text).split())


def kind_of(message: str) -> str:
    for kind, phrases in _KINDS:
        if any(phrase in message for phrase in phrases):
            return kind
    return BUG


def classify(message: str) -> tuple[str, str]:
    """(kind, group key) of a judge's message for a failed exercise."""
    kind = kind_of(message)
    if kind in (NOT_ANSWERED, TIMEOUT, UNREADABLE, GRADER):
        return kind, kind
    if kind == CRASH:
        # "<case>: <Op.backward>: your code raised E: ... (in backward, line 7)" -> from what the
        # student's code did on; with a line of theirs quoted it is a wrong answer, a bug like another
        raised = message.find("your code raised ")
        if raised >= 0 and WHERE.search(message):
            kind = BUG
        return kind, _mask(message[raised:] if raised >= 0 else message, quoted=True)
    _, colon, diagnosis = message.partition(": ")
    return kind, _mask(diagnosis if colon else message, quoted=False)


@dataclass
class Group:
    exercise: str
    kind: str
    key: str                       # what the students of the group share (masked)
    example: str                   # one student's whole message
    students: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        """What went wrong, as the first student's message says it (its case left out)."""
        raised = self.example.find("your code raised ")
        if raised >= 0 and self.kind in (BUG, CRASH):
            return self.example[raised:]
        if self.kind != BUG:
            return self.kind
        _, colon, diagnosis = self.example.partition(": ")
        return diagnosis if colon else self.example


def group(exercise: str, failures: dict[str, str]) -> list[Group]:
    """``failures``: student -> the judge's message (or a kind, for those the judge never saw);
    the groups, largest first (then bugs before the other kinds, then by key)."""
    groups: dict[tuple[str, str], Group] = {}
    for student, message in sorted(failures.items()):
        kind, key = (NOT_HANDED_IN, NOT_HANDED_IN) if message == NOT_HANDED_IN else classify(message)
        entry = groups.setdefault((kind, key), Group(exercise, kind, key, message))
        entry.students.append(student)
    order = [BUG, CRASH, TIMEOUT, NOT_ANSWERED, UNREADABLE, NOT_HANDED_IN, GRADER]
    return sorted(groups.values(), key=lambda g: (-len(g.students), order.index(g.kind), g.key))
