"""``autograder grade ASSIGNMENT --regrade [--exercise ID]``: judge the graded students again after a
fix to a check or to points, and say who gained and who lost.

Before anything is judged, each graded student's result per exercise (the score the gradebook
counts, the judge's message, whether a person set the score in the formgrader) is kept in
``.autograder/regrades/<assignment>-<time>.json``; after, the same is read again and every
difference is a row of ``reports/<assignment>/regrade.csv`` (student, exercise, old and new
score, old and new message), printed as a table. A score set by hand is never overwritten
(nbgrader's own rule: its manual score wins over the automatic one) and each is listed, so the
instructor sees where the fix would have changed a mark they set.

Every graded student is judged again whole (a check may read other exercises' answers; the
judge decides per notebook). ``--exercise`` names the exercise the fix was meant for: the table
is restricted to it, and a change anywhere else is counted in one line, as it is a surprise.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.api import MissingEntry

from autograder.course import CourseError, safe_csv
from autograder.course import notebook as nbfile
from autograder.course.directory import Course
from autograder.grading.record import Ledger

# student -> exercise -> {"score", "manual", "message"}
Snapshot = dict[str, dict[str, dict]]


def snapshot(course: Course, assignment: str) -> Snapshot:
    """Each graded student's result per exercise (its cells' scores added up, written answers apart)."""
    ledger = Ledger(course, assignment)
    out: Snapshot = {}
    with course.gradebook() as gb:
        try:
            submissions = gb.find_assignment(assignment).submissions
        except MissingEntry:
            return out
        for sub in submissions:
            student = sub.student.id
            verdicts = (ledger.marker(student) or {}).get("verdicts") or {}
            results: dict[str, dict] = {}
            for nb in sub.notebooks:
                for grade in nb.grades:
                    name = grade.name if grade.name.endswith("-written") else nbfile.exercise_of(grade.name)
                    entry = results.setdefault(name, {"score": 0.0, "manual": False, "message": ""})
                    entry["score"] += grade.score or 0.0
                    entry["manual"] = entry["manual"] or (grade.manual_score is not None
                                                          and not grade.name.endswith("-written"))
                    entry["message"] = str((verdicts.get(name) or {}).get("message") or "")
            out[student] = results
    return out


def exercises(course: Course, assignment: str) -> set[str]:
    found = set()
    for name in course.notebooks(assignment):
        for cell in nbfile.read(course.source_dir(assignment) / f"{name}.ipynb").cells:
            if nbfile.is_test(cell):
                found.add(nbfile.exercise_of(nbfile.grade_id(cell)))
    return found


def require_exercise(course: Course, assignment: str, exercise: str | None) -> None:
    if exercise is not None and exercise not in exercises(course, assignment):
        raise CourseError(f"no exercise '{exercise}' in {assignment} (exercises: "
                          f"{', '.join(sorted(exercises(course, assignment)))})")


def keep(course: Course, assignment: str, before: Snapshot) -> Path:
    folder = course.state_dir / "regrades"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{assignment}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps(before, indent=1, sort_keys=True))
    return path


@dataclass
class Changes:
    rows: list[list[str]]          # student, exercise, old, new, old message, new message
    manual: list[list[str]]        # student, exercise, the score kept, what the judge now says
    elsewhere: int                 # changes outside --exercise
    changed: list[str]             # students whose result changed

    @property
    def path_rows(self) -> list[list[str]]:
        return [["student", "exercise", "old", "new", "old message", "new message"], *self.rows]


def compare(before: Snapshot, after: Snapshot, exercise: str | None) -> Changes:
    changes = Changes([], [], 0, [])
    for student in sorted(set(before) & set(after)):
        for name, new in sorted(after[student].items()):
            old = before[student].get(name)
            if old is None:
                continue
            if new["manual"]:  # every score set by hand, whatever the judge now says
                changes.manual.append([student, name, f"{new['score']:g}", new["message"] or "passed"])
                continue
            if (new["score"], new["message"]) == (old["score"], old["message"]):
                continue
            if exercise is not None and name != exercise:
                changes.elsewhere += 1
                continue
            changes.rows.append([student, name, f"{old['score']:g}", f"{new['score']:g}", old["message"],
                                 new["message"]])
            if student not in changes.changed:
                changes.changed.append(student)
    return changes


def write(course: Course, assignment: str, changes: Changes) -> Path:
    path = course.reports_dir(assignment) / "regrade.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    safe_csv.write(path, changes.path_rows)
    return path
