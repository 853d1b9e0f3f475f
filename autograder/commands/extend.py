"""``autograder extend`` and ``autograder late-days``: the instructor's decisions on time, applied at once.

Each command checks everything first (the student, the assignment, the date and its zone, the
budget), then writes the decision into ``term.json`` and the consequences into the gradebook in one
transaction (:func:`autograder.course.term.settle`): a student already graded gets their late
penalty re-applied on the stored scores, nobody is judged again. The rules themselves are
:mod:`autograder.course.term`'s.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from nbgrader.api import Gradebook, MissingEntry

from autograder.course import CourseError
from autograder.course.directory import Course
from autograder.course.nbgrader_glue import one_transaction
from autograder.course.term import Standing, Term, known_students, parse_span, parse_zoned, settle, standings


def _require_student(course: Course, gb: Gradebook, student: str) -> None:
    if student not in known_students(course, gb):
        raise CourseError(f"no student '{student}' in the gradebook or among the submissions: import the roster "
                          "(autograder students import roster.csv) or check the spelling")


def _due(gb: Gradebook, assignment: str) -> datetime:
    try:
        due = gb.find_assignment(assignment).duedate
    except MissingEntry:
        due = None
    if due is None:
        raise CourseError(f"{assignment} has no due date to extend: release it with --due first")
    return due


def extend(course: Course, student: str, assignment: str | None, until: str | None, by: str | None,
           remove: bool) -> list[Standing]:
    """Give ``student`` an extension on ``assignment`` (or, without one, a standing accommodation on
    every assignment); ``remove`` takes it back. Returns the student's submissions as now settled."""
    if sum(x is not None and x is not False for x in (until, by, remove)) != 1:
        raise CourseError("say one of --until DATE, --by LENGTH or --remove")
    if assignment is not None:
        course.require_assignment(assignment)
    term = Term.load(course)
    with course.gradebook() as gb:
        _require_student(course, gb, student)
        if remove:
            if assignment is None:
                term.standing.pop(student, None)
            else:
                term.extensions.get(student, {}).pop(assignment, None)
        elif assignment is None:
            if until is not None:
                raise CourseError("--until is a date of one assignment: name the ASSIGNMENT, or give a standing "
                                  "accommodation with --by (3d, or 50% of each assignment's time)")
            kind, value = parse_span(by or "")
            term.standing[student] = {kind: value}
        else:
            due = _due(gb, assignment)
            if until is not None:
                stamp = parse_zoned(until)
                if stamp <= due:
                    raise CourseError(f"--until {until}: not after the due date of {assignment} "
                                      f"({due:%Y-%m-%d %H:%M} UTC); an extension ends later than that")
                rule: dict = {"until": stamp.isoformat()}
            else:
                kind, value = parse_span(by or "")
                if kind == "percent" and assignment not in term.opens:
                    raise CourseError(f"--by {by}: the time {assignment} was given is not known (released before "
                                      "the release time was kept): give the extension as a length, like 2d")
                rule = {kind: value}
            term.extensions.setdefault(student, {})[assignment] = rule
        _apply(course, gb, term, [student])
        return standings(gb, term, [student])[student]


def late_days(course: Course, budget: str | None, student: str | None, assignment: str | None,
              spend: str | None) -> dict[str, list[Standing]]:
    """Set the course's late-day budget, or pin the days ``student`` spends on ``assignment``
    (``spend`` a number, or "auto" to let the rule decide again). Returns every student's standing."""
    term = Term.load(course)
    with course.gradebook() as gb:
        if budget is not None:
            if budget == "none":
                term.budget = None
            elif not budget.isdigit():
                raise CourseError(f"--budget {budget!r}: a whole number of days (or 'none' for no late days)")
            else:
                term.budget = int(budget)
        if student is not None or assignment is not None or spend is not None:
            if student is None or assignment is None or spend is None:
                raise CourseError("to say what a student spends: autograder late-days STUDENT ASSIGNMENT --spend N "
                                  "(or --spend auto)")
            course.require_assignment(assignment)
            _require_student(course, gb, student)
            if term.budget is None:
                raise CourseError("the course has no late days: set a budget first (autograder late-days --budget 5)")
            pinned = term.spend.setdefault(student, {})
            if spend == "auto":
                pinned.pop(assignment, None)
            elif not spend.isdigit():
                raise CourseError(f"--spend {spend!r}: a whole number of days, or 'auto'")
            else:
                _due(gb, assignment)
                others = sum(s.late_days for s in standings(gb, term, [student])[student] if s.assignment != assignment)
                if others + int(spend) > term.budget:
                    raise CourseError(f"{student} has {term.budget - others} late day(s) left of {term.budget} "
                                      f"(spent elsewhere: {others}): cannot spend {spend} on {assignment}")
                pinned[assignment] = int(spend)
        everyone = sorted({s.id for s in gb.students})
        _apply(course, gb, term, everyone)
        return standings(gb, term, everyone)


def _apply(course: Course, gb: Gradebook, term: Term, students: list[str]) -> None:
    """The decision into term.json and its consequences into the gradebook, together: the file is
    replaced inside the transaction, just before it commits (a failed write leaves both as they were;
    a crash between the two leaves the file ahead, and the next command or grade settles it)."""
    with one_transaction(gb):
        settle(gb, course, students, term)
        term.save(course)


def rows(course: Course, settled: list[Standing], budget: int | None) -> list[list[str]]:
    """A table of one student's submissions: their due date, extension, late days."""
    out = []
    with course.gradebook() as gb:
        for s in settled:
            sub = gb.find_submission(s.assignment, s.student)
            due = sub.assignment.duedate
            own = due + timedelta(seconds=round(s.extension))
            late = sub.total_seconds_late
            out.append([s.assignment, f"{due:%Y-%m-%d %H:%M}", f"{own:%Y-%m-%d %H:%M}",
                        str(s.late_days) if budget is not None else "",
                        f"{late / 3600:.1f} h" if late else "on time",
                        f"{sub.late_submission_penalty or 0:g}", s.short])
    return out
