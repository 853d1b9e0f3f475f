"""``autograder report``: the instructor's page, a grades CSV, the data and figures in ``reports/<assignment>/``.

* ``class_report.html``: the instructor's page (:mod:`autograder.analytics.page`): each exercise's
  statistics, what the class got wrong (the judge's messages grouped by bug), code similarity,
  the course so far; self-contained, it opens from disk. Beside it the data it shows, as CSV and
  JSON, its figures, and ``similarity/``, a page per listed pair.

* ``grades.csv``: one row per student who handed something in: status, score (after the late
  penalty, as nbgrader's own export computes it), max score, raw score, late penalty, the student's
  own due date (their extension and late days included, :mod:`autograder.course.term`), the late
  days spent on this assignment, used on the course and left, one column per notebook
  (``notebook:<name>``), per exercise (``exercise:<id>``, the sum of
  the exercise's auto-graded test cells, see :func:`autograder.course.notebook.exercise_of`) and
  per written answer (``written:<id>``, empty until graded by hand): an exercise's code and
  written points are never added into one column.
* ``score_histogram.png``: the distribution of total scores; ``exercises.png``: per exercise, the
  share of full, partial and zero marks (and of those who did not answer); ``mistakes.png``: the
  largest groups of students who got an exercise wrong the same way; ``course.png``: every
  assignment's scores so far.
* ``canvas_grades.csv`` and ``moodle_grades.csv``, once a roster is imported (``--lms`` picks): each
  system's grade-import file, every student of the roster, the score after the late penalty
  (:mod:`autograder.course.lms` says what each importer reads).

Everything is read from the gradebook through nbgrader's API, plus the grader's own records: the
submissions that could not be graded and the judge's verdict on each exercise. Every CSV goes through
:mod:`autograder.course.safe_csv`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autograder.analytics import page, plots, similarity
from autograder.analytics.gradebook import Row, gather, grade_cells, written
from autograder.course import CourseError, safe_csv
from autograder.course import notebook as nbfile
from autograder.course.directory import Course
from autograder.course.lms import LMS_NAMES, Grade, load_roster, write_canvas, write_moodle
from autograder.course.term import Term, standings


@dataclass(frozen=True)
class Time:
    """A student's time on the assignment: their own due date, and the course's late days."""
    due: str = ""            # their due date (UTC), extension and late days included
    late_days: str = ""      # spent on this assignment
    used: str = ""           # spent on the whole course so far
    left: str = ""
    extended: bool = False   # an extension moved their due date

    def columns(self) -> list[str]:
        return [self.due, self.late_days, self.used, self.left]

    def note(self) -> str:
        """For the LMS's feedback line."""
        return (f"; due date {self.due} UTC (extended)" if self.due and self.extended else "") \
            + (f"; {self.late_days} late day(s) spent" if self.late_days not in ("", "0") else "")


def times(course: Course, assignment: str) -> dict[str, Time]:
    """Every graded student's Time on ``assignment``, from the gradebook and the term's rules."""
    term = Term.load(course)
    out = {}
    with course.gradebook() as gb:
        everyone = standings(gb, term)
        for sub in gb.find_assignment(assignment).submissions:
            mine = everyone.get(sub.student.id, [])
            here = next((s for s in mine if s.assignment == assignment), None)
            used = sum(s.late_days for s in mine)
            out[sub.student.id] = Time(
                f"{sub.duedate:%Y-%m-%d %H:%M}" if sub.duedate else "",
                "" if term.budget is None or here is None else str(here.late_days),
                "" if term.budget is None else str(used),
                "" if term.budget is None else str(term.budget - used),
                bool(sub.extension))
    return out


def write_csv(path: Path, rows: list[Row], cells: list[tuple[str, str, float]], time: dict[str, Time]) -> None:
    notebooks = list(dict.fromkeys(nb for nb, _, _ in cells))
    exercises = list(dict.fromkeys(nbfile.exercise_of(gid) for _, gid, _ in cells if not written(gid)))
    by_hand = [gid for _, gid, _ in cells if written(gid)]
    table = [["student", "status", "score", "max_score", "raw_score", "late_penalty", "due_date",
              "late_days", "late_days_used", "late_days_left"]
             + [f"notebook:{nb}" for nb in notebooks] + [f"exercise:{ex}" for ex in exercises]
             + [f"written:{nbfile.exercise_of(gid)}" for gid in by_hand]]
    for row in rows:
        graded = row.score is not None
        per_exercise = {ex: sum(s or 0.0 for gid, s in row.cells.items()
                                if nbfile.exercise_of(gid) == ex and not written(gid))
                        for ex in exercises}
        table.append([row.student, row.status,
                      _num(row.score), _num(row.max_score), _num(row.raw_score),
                      _num(row.late_penalty) if graded else ""]
                     + time.get(row.student, Time()).columns()
                     + [_num(row.notebooks.get(nb)) for nb in notebooks]
                     + [_num(per_exercise[ex]) if graded else "" for ex in exercises]
                     + [_num(row.cells.get(gid)) if graded else "" for gid in by_hand])
    safe_csv.write(path, table)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def lms_grades(rows: list[Row], time: dict[str, Time] | None = None) -> dict[str, Grade]:
    """The students whose grade is complete, with a line of feedback; nobody else gets a number
    (a partial score would reach the LMS as if it were final)."""
    grades = {}
    for row in rows:
        if row.status == "graded" and row.score is not None and row.max_score is not None:
            late = f"; late penalty {row.late_penalty:g} (raw score {row.raw_score:g})" if row.late_penalty else ""
            note = (time or {}).get(row.student, Time()).note()
            grades[row.student] = Grade(row.score, f"autograder: {row.score:g}/{row.max_score:g}{late}{note}")
    return grades


def write_lms(course: Course, assignment: str, rows: list[Row], max_score: float, systems: list[str] | None,
              canvas_assignment_id: str | None, notes: list[str], time: dict[str, Time] | None = None) -> list[Path]:
    """Each system's grade-import CSV beside grades.csv: ``systems`` None means every system once a
    roster is imported, none before."""
    roster = load_roster(course)
    if roster is None:
        if systems:
            raise CourseError("LMS grade files need a roster: autograder students import roster.csv")
        return []
    folder = course.reports_dir(assignment)
    grades = lms_grades(rows, time)
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
           canvas_assignment_id: str | None = None, notes: list[str] | None = None,
           threshold: float = similarity.THRESHOLD) -> list[Path]:
    """Write everything; the instructor's page first in the list returned."""
    rows = gather(course, assignment)
    cells = grade_cells(course, assignment)
    folder = course.reports_dir(assignment)
    folder.mkdir(parents=True, exist_ok=True)
    max_score = sum(points for _, _, points in cells)
    time = times(course, assignment)
    write_csv(folder / "grades.csv", rows, cells, time)
    plots.scores(folder / "score_histogram.png", assignment, rows, max_score, {g: p for _, g, p in cells})
    made = page.write(course, assignment, rows, cells, {"scores": folder / "score_histogram.png"}, threshold)
    return [made.page, folder / "grades.csv", folder / "score_histogram.png", *made.files] \
        + write_lms(course, assignment, rows, max_score, lms, canvas_assignment_id, notes if notes is not None else [],
                    time)
