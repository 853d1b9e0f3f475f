"""``autograder report``: a grades CSV and two plots in ``reports/<assignment>/``.

* ``grades.csv``: one row per student who handed something in: status, score (after the late
  penalty, as nbgrader's own export computes it), max score, raw score, late penalty, one column per notebook
  (``notebook:<name>``), per exercise (``exercise:<id>``, the sum of
  the exercise's auto-graded test cells, see :func:`autograder.course.notebook.exercise_of`) and
  per written answer (``written:<id>``, empty until graded by hand): an exercise's code and
  written points are never added into one column.
* ``score_histogram.png``: the distribution of total scores.
* ``failed_tests.png``: for each grade cell, the share of graded students who lost points on it,
  most-failed first: where the class struggled.
* ``canvas_grades.csv`` and ``moodle_grades.csv``, once a roster is imported (``--lms`` picks): each
  system's grade-import file, every student of the roster, the score after the late penalty
  (:mod:`autograder.course.lms` says what each importer reads).

Everything is read from the gradebook through nbgrader's API, plus the grader's own record of
submissions that could not be graded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display; before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402
from nbgrader.api import MissingEntry  # noqa: E402

from autograder.course import Course, CourseError, safe_csv  # noqa: E402
from autograder.course import notebook as nbfile  # noqa: E402
from autograder.course.lms import LMS_NAMES, Grade, load_roster, write_canvas, write_moodle  # noqa: E402
from autograder.grading.record import Ledger  # noqa: E402


@dataclass
class Row:
    student: str
    status: str
    score: float | None = None        # raw score minus the late penalty, never below 0
    max_score: float | None = None
    raw_score: float | None = None
    late_penalty: float = 0.0
    notebooks: dict[str, float] = field(default_factory=dict)
    cells: dict[str, float | None] = field(default_factory=dict)   # grade_id -> score (None: ungraded)


def grade_cells(course: Course, assignment: str) -> list[tuple[str, str, float]]:
    """(notebook, grade_id, points) of every grade cell, in the order of the source notebooks."""
    cells = []
    for notebook in course.notebooks(assignment):
        for cell in nbfile.read(course.source_dir(assignment) / f"{notebook}.ipynb").cells:
            meta = nbfile.nbgrader(cell)
            if meta.get("grade"):
                cells.append((notebook, nbfile.grade_id(cell), float(meta.get("points", 0))))
    return cells


def gather(course: Course, assignment: str) -> list[Row]:
    failures = Ledger(course, assignment).failures()
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
                row.score = max(0.0, row.raw_score - row.late_penalty)
                for nb in submission.notebooks:
                    row.notebooks[nb.name] = nb.score
                    for grade in nb.grades:  # a cell still waiting for a human has no score yet
                        waiting = grade.needs_manual_grade and grade.manual_score is None
                        row.cells[grade.name] = None if waiting else grade.score
            rows.append(row)
    return rows


def _written(grade_id: str) -> bool:
    return grade_id.endswith("-written")


def write_csv(path: Path, rows: list[Row], cells: list[tuple[str, str, float]]) -> None:
    notebooks = list(dict.fromkeys(nb for nb, _, _ in cells))
    exercises = list(dict.fromkeys(nbfile.exercise_of(gid) for _, gid, _ in cells if not _written(gid)))
    written = [gid for _, gid, _ in cells if _written(gid)]
    table = [["student", "status", "score", "max_score", "raw_score", "late_penalty"]
             + [f"notebook:{nb}" for nb in notebooks] + [f"exercise:{ex}" for ex in exercises]
             + [f"written:{nbfile.exercise_of(gid)}" for gid in written]]
    for row in rows:
        graded = row.score is not None
        per_exercise = {ex: sum(s or 0.0 for gid, s in row.cells.items()
                                if nbfile.exercise_of(gid) == ex and not _written(gid))
                        for ex in exercises}
        table.append([row.student, row.status,
                      _num(row.score), _num(row.max_score), _num(row.raw_score),
                      _num(row.late_penalty) if graded else ""]
                     + [_num(row.notebooks.get(nb)) for nb in notebooks]
                     + [_num(per_exercise[ex]) if graded else "" for ex in exercises]
                     + [_num(row.cells.get(gid)) if graded else "" for gid in written])
    safe_csv.write(path, table)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def plot_scores(path: Path, assignment: str, rows: list[Row], max_score: float) -> None:
    scores = [r.score for r in rows if r.score is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    # One bar per point when points are few, so that a bar is a score; else 20 equal bins.
    bins = [b - 0.5 for b in range(int(max_score) + 2)] if max_score <= 30 else 20
    ax.hist(scores, bins=bins, range=(0, max_score), color="#4C72B0", edgecolor="white")
    ax.set(title=f"{assignment}: total scores ({len(scores)} graded)",
           xlabel=f"score (out of {max_score:g})", ylabel="students")
    ax.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]  # MaxNLocator's
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_failures(path: Path, assignment: str, rows: list[Row], cells: list[tuple[str, str, float]]) -> None:
    graded = [r for r in rows if r.score is not None]
    rates = []
    for _, grade_id, points in cells:
        scores = [r.cells.get(grade_id) for r in graded]
        scored = [s for s in scores if s is not None]
        if scored:
            rates.append((sum(s < points for s in scored) / len(scored), grade_id))
    rates.sort(key=lambda item: (-item[0], item[1]))
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.35 * max(1, len(rates))))
    ax.barh([gid for _, gid in rates][::-1], [100 * r for r, _ in rates][::-1], color="#C44E52")
    ax.set(title=f"{assignment}: share of graded students who lost points, per grade cell",
           xlabel="% of students", xlim=(0, 100))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def lms_grades(rows: list[Row]) -> dict[str, Grade]:
    """The students whose grade is complete, with a line of feedback; nobody else gets a number
    (a partial score would reach the LMS as if it were final)."""
    grades = {}
    for row in rows:
        if row.status == "graded" and row.score is not None and row.max_score is not None:
            late = f"; late penalty {row.late_penalty:g} (raw score {row.raw_score:g})" if row.late_penalty else ""
            grades[row.student] = Grade(row.score, f"autograder: {row.score:g}/{row.max_score:g}{late}")
    return grades


def write_lms(course: Course, assignment: str, rows: list[Row], max_score: float, systems: list[str] | None,
              canvas_assignment_id: str | None, notes: list[str]) -> list[Path]:
    """Each system's grade-import CSV beside grades.csv: ``systems`` None means every system once a
    roster is imported, none before."""
    roster = load_roster(course)
    if roster is None:
        if systems:
            raise CourseError("LMS grade files need a roster: autograder students import roster.csv")
        return []
    folder = course.reports_dir(assignment)
    grades = lms_grades(rows)
    paths = []
    for system in LMS_NAMES if systems is None else systems:
        if system == "canvas":
            column = f"{assignment} ({canvas_assignment_id})" if canvas_assignment_id else assignment
            left_out = write_canvas(folder / "canvas_grades.csv", roster, column, max_score, grades)
            paths.append(folder / "canvas_grades.csv")
            missing = "no canvas_id"
        else:
            left_out = write_moodle(folder / "moodle_grades.csv", roster, assignment, grades)
            paths.append(folder / "moodle_grades.csv")
            missing = "neither email nor sis_id"
        if left_out:
            notes.append(f"{system}: {len(left_out)} student(s) of the roster left out ({missing}): "
                         + ", ".join(left_out))
    ungraded = sorted(row.student for row in rows if row.student not in grades)
    if ungraded:
        notes.append(f"no grade sent for {len(ungraded)} student(s) not completely graded: " + ", ".join(ungraded))
    return paths


def report(course: Course, assignment: str, lms: list[str] | None = None,
           canvas_assignment_id: str | None = None, notes: list[str] | None = None) -> list[Path]:
    rows = gather(course, assignment)
    cells = grade_cells(course, assignment)
    folder = course.reports_dir(assignment)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "grades.csv", folder / "score_histogram.png", folder / "failed_tests.png"]
    max_score = sum(points for _, _, points in cells)
    write_csv(paths[0], rows, cells)
    plot_scores(paths[1], assignment, rows, max_score)
    plot_failures(paths[2], assignment, rows, cells)
    return paths + write_lms(course, assignment, rows, max_score, lms, canvas_assignment_id,
                             notes if notes is not None else [])
