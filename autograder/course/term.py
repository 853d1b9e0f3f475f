"""A term's rules on time: extensions, standing accommodations, late days.

What the instructor decided lives in one file, ``<course>/.autograder/term.json`` (written only by
``autograder extend`` and ``autograder late-days``); what follows from it for each submission is
written into nbgrader's own column, ``SubmittedAssignment.extension``, so that nbgrader's
``duedate`` and ``total_seconds_late`` (and everything built on them: the late penalty, the
formgrader, the exports, the class page's late counts, the LMS files) see the student's own due
date. :func:`settle` derives the column from the file and re-applies the late penalty, without
judging anything again; ``grade`` calls it for each student it records, ``extend`` and
``late-days`` for the students they touch.

A student's extension on an assignment is the larger of

* the one given for that assignment (``--until DATE``, or ``--by 2d``), and
* their standing accommodation (``--by 3d`` on all assignments, or ``--by 50%`` of each
  assignment's time: from its release to its due date),

plus the late days spent on it. Late days are a course-wide budget per student. They are spent
in due-date order, whole days, on each submission still late after its extension, when enough
are left to cover it entirely (a submission they cannot cover keeps its penalty and spends none);
the instructor may pin the number spent on one submission instead. Spending is recomputed from
the gradebook's timestamps every time, never accumulated: a regrade spends nothing twice.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nbformat import NotebookNode
from nbgrader.api import Gradebook, SubmittedAssignment
from nbgrader.utils import parse_utc

from autograder.course import CourseError
from autograder.course.directory import Course
from autograder.course.files import write_file
from autograder.course.nbgrader_glue import AssignLatePenaltiesTo

DAY = 86400.0
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|%)")
_UNITS = {"d": DAY, "h": 3600.0, "m": 60.0}


# -- what the instructor writes -----------------------------------------------------------------

def parse_span(text: str) -> tuple[str, float]:
    """``2d``, ``36h``, ``90m``, ``1d12h`` -> ("seconds", n); ``50%`` -> ("percent", 50)."""
    parts = _SPAN.findall(text.replace(" ", ""))
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        raise CourseError(f"--by {text!r} is not a length of time: write it like 2d, 36h, 90m or 1d12h "
                          "(or 50% of each assignment's time, for a standing accommodation)")
    if any(u == "%" for _, u in parts):
        if len(parts) > 1:
            raise CourseError(f"--by {text!r}: a percentage stands alone, like 50%")
        return "percent", float(parts[0][0])
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise CourseError(f"--by {text!r}: an extension is longer than nothing")
    return "seconds", seconds


def parse_zoned(text: str) -> datetime:
    """A date with its time zone (``2026-12-03 17:00 Europe/Paris``, ``2026-12-03 17:00 UTC``,
    ``2026-12-03T17:00+01:00``) as naive UTC, nbgrader's way. Without a zone a date is refused: an
    extension to 17:00 means nothing until one says where."""
    example = "write it like '2026-12-03 17:00 Europe/Paris' or '2026-12-03 17:00 UTC'"
    parts = text.split()
    if len(parts) == 3:
        zone = parts[2]
        try:  # a name only: nbgrader reads "+0100" there as seconds
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise CourseError(f"{text!r}: {zone!r} is not a time zone ({example}, or "
                              "'2026-12-03T17:00+01:00')") from None
        try:
            return parse_utc(text)
        except (ValueError, OverflowError):
            raise CourseError(f"{text!r} is not a date: {example}") from None
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise CourseError(f"{text!r} is not a date with its time zone: {example}") from None
    if stamp.tzinfo is None:
        raise CourseError(f"{text!r} has no time zone: {example}")
    return stamp.astimezone(timezone.utc).replace(tzinfo=None)


# -- the file ----------------------------------------------------------------------------------

@dataclass
class Term:
    """The instructor's decisions (the contents of term.json)."""
    extensions: dict[str, dict[str, dict]] = field(default_factory=dict)   # student -> assignment -> rule
    standing: dict[str, dict] = field(default_factory=dict)                # student -> rule
    budget: int | None = None                                              # late days per student
    spend: dict[str, dict[str, int]] = field(default_factory=dict)         # student -> assignment -> days pinned
    opens: dict[str, str] = field(default_factory=dict)                    # assignment -> first release (UTC)

    @classmethod
    def load(cls, course: Course) -> Term:
        path = term_path(course)
        if not path.is_file():
            return cls()
        try:
            data = json.loads(path.read_text())
            return cls(data.get("extensions", {}), data.get("standing", {}), data.get("budget"),
                       data.get("spend", {}), data.get("opens", {}))
        except (ValueError, AttributeError):
            raise CourseError(f"{path} is damaged (not the JSON `autograder extend` writes): restore it "
                              "from a backup") from None

    def save(self, course: Course) -> None:
        # all or nothing (written beside, then renamed over), never through a link
        write_file(term_path(course), json.dumps({"extensions": self.extensions, "standing": self.standing,
                                                  "budget": self.budget, "spend": self.spend, "opens": self.opens},
                                                 indent=1, sort_keys=True))

    def empty(self) -> bool:
        return not (self.extensions or self.standing or self.budget is not None or self.spend)

    def base_extension(self, student: str, assignment: str, due: datetime) -> float:
        """Seconds of extension before late days: the larger of the assignment's and the standing one."""
        candidates = [0.0]
        rule = self.extensions.get(student, {}).get(assignment)
        if rule:
            candidates.append(_rule_seconds(rule, due, self.opens.get(assignment)))
        rule = self.standing.get(student)
        if rule:
            candidates.append(_rule_seconds(rule, due, self.opens.get(assignment)))
        return max(candidates)


def _rule_seconds(rule: dict, due: datetime, opens: str | None) -> float:
    if "until" in rule:
        return (datetime.fromisoformat(rule["until"]) - due).total_seconds()
    if "seconds" in rule:
        return float(rule["seconds"])
    if opens is None:  # a percentage of an assignment released before its opening was kept
        return 0.0
    return max(0.0, (due - datetime.fromisoformat(opens)).total_seconds()) * float(rule["percent"]) / 100


def term_path(course: Course):
    return course.state_dir / "term.json"


def note_release(course: Course, assignment: str) -> None:
    """Keep the first release's time: "+50 % of the assignment's time" counts from there."""
    term = Term.load(course)
    if assignment not in term.opens:
        term.opens[assignment] = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0).isoformat()
        term.save(course)


# -- what follows for the gradebook ------------------------------------------------------------

@dataclass
class Standing:
    """One student's submission after the rules: its extension and late days spent (and why not)."""
    student: str
    assignment: str
    extension: float          # seconds, late days included
    late_days: int = 0
    short: str = ""           # why late days could not cover it ("" when they did, or were not needed)


def _outcome(term: Term, student: str, submissions: list[SubmittedAssignment]) -> list[Standing]:
    """The student's submissions in due-date order, each with its extension and the late days it spends."""
    left = term.budget
    out = []
    dated = sorted((s for s in submissions if s.assignment.duedate is not None),
                   key=lambda s: (s.assignment.duedate, s.assignment.name))
    for sub in dated:
        name, due = sub.assignment.name, sub.assignment.duedate
        base = term.base_extension(student, name, due)
        standing = Standing(student, name, base)
        late = 0.0 if sub.timestamp is None else (sub.timestamp - (due + timedelta(seconds=base))).total_seconds()
        pinned = term.spend.get(student, {}).get(name) if left is not None else None  # no budget: no late days
        if pinned is not None:
            standing.late_days = pinned
        elif late > 0 and left is not None:
            needed = math.ceil(late / DAY)
            if needed <= left:
                standing.late_days = needed
            else:
                standing.short = f"{needed} late day(s) needed, {left} left: the late penalty applies"
        if left is not None:
            left -= standing.late_days
        standing.extension = base + standing.late_days * DAY
        out.append(standing)
    return out


def standings(gb: Gradebook, term: Term, students: list[str] | None = None) -> dict[str, list[Standing]]:
    """student -> their submissions after the rules, for every student of the gradebook (or those named)."""
    names = students if students is not None else [s.id for s in gb.students]
    out = {}
    for student in names:
        subs = gb.db.query(SubmittedAssignment).filter(SubmittedAssignment.student_id == student).all()
        out[student] = _outcome(term, student, subs)
    return out


def settle(gb: Gradebook, course: Course, students: list[str], term: Term | None = None) -> list[Standing]:
    """Write each named student's extensions into the gradebook and re-apply the late penalty where
    an extension changed (nbgrader's plugin and bounds, on the stored scores: nothing is judged
    again). Nothing is committed here: call it inside :func:`one_transaction`."""
    term = term if term is not None else Term.load(course)
    if term.empty() and not _any_extension(gb, students):
        return []  # a course that never used these rules pays nothing for them
    config = course.config()
    settled = []
    for student in students:
        for standing in standings(gb, term, [student])[student]:
            sub = gb.find_submission(standing.assignment, student)
            wanted = timedelta(seconds=round(standing.extension)) if standing.extension > 0 else None
            if sub.extension != wanted:
                sub.extension = wanted
                reapply_penalty(gb, sub, config)
            settled.append(standing)
    return settled


def _any_extension(gb: Gradebook, students: list[str]) -> bool:
    return gb.db.query(SubmittedAssignment).filter(SubmittedAssignment.student_id.in_(students),
                                                   SubmittedAssignment.extension.isnot(None)).count() > 0


def reapply_penalty(gb: Gradebook, sub: SubmittedAssignment, config) -> None:
    """nbgrader's AssignLatePenalties on each stored notebook (it reads the scores, not the notebook)."""
    for nb in sub.notebooks:
        resources = {"nbgrader": {"notebook": nb.name, "assignment": sub.assignment.name, "student": sub.student.id}}
        AssignLatePenaltiesTo(gb, config=config).preprocess(NotebookNode(cells=[]), resources)


def known_students(course: Course, gb: Gradebook) -> set[str]:
    """The gradebook's students (the roster's, and everyone graded) and whoever handed something in."""
    known = {s.id for s in gb.students}
    for assignment in course.assignments():
        known.update(course.submitted_students(assignment))
    return known
