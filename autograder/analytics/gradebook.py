"""What the class handed in and earned, read once for the grades CSV and the instructor's page.

From nbgrader's gradebook (SQLite or PostgreSQL, through its API): each student's scores per grade
cell and notebook, the late penalty, how late; from the grader's ledger
(:class:`autograder.grading.record.Ledger`): the students whose grading failed and the judge's
verdict on each exercise (its message), or, for a student graded before the ledger kept verdicts,
the message on the exercise's test cells of the autograded notebook.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nbgrader.api import MissingEntry

from autograder.course import CourseError
from autograder.course import notebook as nbfile
from autograder.course.directory import Course
from autograder.grading.record import Ledger


@dataclass
class Row:
    student: str
    status: str
    score: float | None = None        # raw score minus the late penalty, never below 0
    max_score: float | None = None
    raw_score: float | None = None
    late_penalty: float = 0.0
    seconds_late: float = 0.0
    notebooks: dict[str, float] = field(default_factory=dict)
    cells: dict[str, float | None] = field(default_factory=dict)   # grade_id -> score (None: ungraded)
    verdicts: dict[str, dict] = field(default_factory=dict)        # exercise -> {"passed", "message", "kind"}


def grade_cells(course: Course, assignment: str) -> list[tuple[str, str, float]]:
    """(notebook, grade_id, points) of every grade cell, in the order of the source notebooks."""
    cells = []
    for notebook in course.notebooks(assignment):
        for cell in nbfile.read(course.source_dir(assignment) / f"{notebook}.ipynb").cells:
            meta = nbfile.nbgrader(cell)
            if meta.get("grade"):
                cells.append((notebook, nbfile.grade_id(cell), float(meta.get("points", 0))))
    return cells


def written(grade_id: str) -> bool:
    return grade_id.endswith("-written")


def gather(course: Course, assignment: str) -> list[Row]:
    ledger = Ledger(course, assignment)
    failures = ledger.failures()
    rows = []
    with course.gradebook() as gb:
        try:
            graded = {s.student.id: s for s in gb.find_assignment(assignment).submissions}
        except MissingEntry:
            raise CourseError(f"assignment '{assignment}' is not in the gradebook {course.db_url}") from None
        for student in sorted(set(course.submitted_students(assignment)) | set(graded) | set(failures)):
            submission = graded.get(student)
            if student in failures:
                status = f"failed: {failures[student]['reason']}"
            elif submission is None:
                status = "not graded yet"
            elif submission.needs_manual_grade:
                status = "graded; written answers to grade by hand"
            else:
                status = "graded"
            row = Row(student, status)
            if submission is not None and student not in failures:
                row.raw_score, row.max_score = submission.score, submission.max_score
                row.late_penalty = submission.late_submission_penalty or 0.0
                row.seconds_late = float(submission.total_seconds_late or 0.0)
                row.score = max(0.0, row.raw_score - row.late_penalty)
                for nb in submission.notebooks:
                    row.notebooks[nb.name] = nb.score
                    for grade in nb.grades:  # a cell still waiting for a human has no score yet
                        waiting = grade.needs_manual_grade and grade.manual_score is None
                        row.cells[grade.name] = None if waiting else grade.score
                row.verdicts = _verdicts(course, assignment, ledger, student)
            rows.append(row)
    return rows


def _verdicts(course: Course, assignment: str, ledger: Ledger, student: str) -> dict[str, dict]:
    marker = ledger.marker(student) or {}
    verdicts = marker.get("verdicts") or {}
    if verdicts:
        return {e: {"passed": bool(v.get("passed")), "message": str(v.get("message") or ""),
                    "kind": str(v.get("kind") or "")}  # none in a record from before kinds were
                for e, v in verdicts.items() if isinstance(v, dict)}
    out: dict[str, dict] = {}   # graded before the ledger kept verdicts (nor kinds): the autograded notebooks say
    for path in sorted(course.autograded_dir(student, assignment).glob("*.ipynb")):
        for cell in nbfile.read(path).cells:
            if nbfile.is_test(cell):
                exercise = nbfile.exercise_of(nbfile.grade_id(cell))
                errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
                if exercise not in out or errors:
                    out[exercise] = {"passed": not errors,
                                     "message": nbfile.failure_message(errors[0], exercise) if errors else ""}
    return out


def course_scores(course: Course) -> tuple[list[str], dict[str, dict[str, tuple[float, float]]]]:
    """Every assignment of the gradebook, and student -> assignment -> (score after the late
    penalty, max score) of each graded submission: the course so far."""
    scores: dict[str, dict[str, tuple[float, float]]] = {}
    with course.gradebook() as gb:
        assignments = sorted(a.name for a in gb.assignments)
        for name in assignments:
            for sub in gb.find_assignment(name).submissions:
                penalty = sub.late_submission_penalty or 0.0
                scores.setdefault(sub.student.id, {})[name] = (max(0.0, sub.score - penalty), sub.max_score)
    return assignments, scores
