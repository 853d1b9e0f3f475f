"""What went wrong, per exercise: the failing students grouped by the bug the judge's message names.

Each failed verdict carries its kind, decided by the judge (:mod:`autograder.judge.verdict`): a
wrong answer with a diagnosis, not answered, a crash, a time-out, a dead sandbox, an unreadable
notebook, the grader's own error. Wrong answers are grouped by bug: the judge's message for one
is ``<the case>: <what is wrong>`` (``summing back over a stretched size-1 last axis, float64: you
summed only axis 0 ...``), and :func:`classify` turns it into a group key that two students with
the same bug share even when the case that failed first, or the values, shapes, line numbers and
names it quotes, differ: the case is dropped, numbers, tuples of numbers and quoted text are
masked. An exception the student's code raised is grouped by what was raised (a wrong answer
when the judge could quote the line of theirs that raised it, a crash when not); not answered,
time-outs, a notebook that could not be read and the grader's own failures are groups of their
own kind. A verdict recorded before verdicts carried a kind is read from its message
(:func:`kind_from_message`, the one fallback).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from autograder.judge import verdict as judged

BUG, NOT_ANSWERED, CRASH, TIMEOUT, UNREADABLE, GRADER, NOT_HANDED_IN = (
    "bug", "not answered", "crash", "time-out", "unreadable notebook", "grader error", "not handed in")

# The judge's kinds as the page groups them (a dead sandbox is a crash like another); not handed
# in is the page's own, for a student the judge never saw.
_GROUP_OF = {judged.WRONG: BUG, judged.NOT_ANSWERED: NOT_ANSWERED, judged.CRASH: CRASH, judged.TIMEOUT: TIMEOUT,
             judged.SANDBOX_DIED: CRASH, judged.GRADER_ERROR: GRADER, judged.UNREADABLE: UNREADABLE,
             NOT_HANDED_IN: NOT_HANDED_IN}

# Only for a verdict recorded before verdicts carried their kind (a ledger written by an older
# grader, or none: the autograded notebook's message): the kind, by a phrase of each message
# the judge (judge/judge.py, judge/submission.py, judge/scrub.py) wrote then. Never reworded.
_PHRASES_OF_THEN = [
    (NOT_ANSWERED, ("not implemented yet", "is not defined: write it in the exercise cell",
                    "your engine is missing a piece")),
    (TIMEOUT, ("ran over the time limit", "(an endless loop, or far too slow?)")),
    (UNREADABLE, ("could not be read as a notebook",)),
    (GRADER, ("the grader could not check this exercise", "this exercise was not judged")),
    (CRASH, ("your code raised ", "the Python process running your code", "your code's message is not shown",
             "the cell that defines ")),
]
RAISED = "your code raised "  # where a message names what the student's code raised (the group's key)
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


def kind_from_message(message: str) -> str:
    """The kind of a failed verdict recorded without one, read from its message (see _PHRASES_OF_THEN)."""
    kind = next((kind for kind, phrases in _PHRASES_OF_THEN if any(p in message for p in phrases)), BUG)
    if kind == CRASH and RAISED in message and WHERE.search(message):
        return BUG  # it raised at a line of the student's, which the message quotes: a bug of that code
    return kind


def kind_of(verdict: dict) -> str:
    """The group kind of a failed verdict ({"message", "kind"}, as the ledger records it)."""
    return _GROUP_OF.get(str(verdict.get("kind") or "")) or kind_from_message(str(verdict.get("message") or ""))


def classify(message: str, kind: str = "") -> tuple[str, str]:
    """(group kind, group key) of a failed verdict: its ``message``, and the ``kind`` the judge
    recorded with it ("" for a verdict recorded before kinds were: read from the message)."""
    kind = kind_of({"message": message, "kind": kind})
    if kind not in (BUG, CRASH):
        return kind, kind
    raised = message.find(RAISED)
    if raised >= 0 or kind == CRASH:
        # "<case>: <Op.backward>: your code raised E: ... (in backward, line 7)" -> from what the
        # student's code raised on, whatever the case
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
        raised = self.example.find(RAISED)
        if raised >= 0 and self.kind in (BUG, CRASH):
            return self.example[raised:]
        if self.kind != BUG:
            return self.kind
        _, colon, diagnosis = self.example.partition(": ")
        return diagnosis if colon else self.example


def group(exercise: str, failures: dict[str, dict]) -> list[Group]:
    """``failures``: student -> the judge's failed verdict ({"message", "kind"}, as the ledger
    records it; {"kind": NOT_HANDED_IN} for those the judge never saw); the groups, largest first
    (then bugs before the other kinds, then by key)."""
    groups: dict[tuple[str, str], Group] = {}
    for student, verdict in sorted(failures.items()):
        message = str(verdict.get("message") or "")
        kind, key = classify(message, str(verdict.get("kind") or ""))
        entry = groups.setdefault((kind, key), Group(exercise, kind, key, message or kind))
        entry.students.append(student)
    order = [BUG, CRASH, TIMEOUT, NOT_ANSWERED, UNREADABLE, NOT_HANDED_IN, GRADER]
    return sorted(groups.values(), key=lambda g: (-len(g.students), order.index(g.kind), g.key))
