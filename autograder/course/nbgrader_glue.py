"""Every place this package departs from stock nbgrader 0.9.6, what it does instead, and why.

nbgrader remains the course's backbone: its course directory, its gradebook (any SQLAlchemy URL),
generate_assignment, the late-submission policy, manual grading, export, the exchange. What
differs:

1. **No autograde.** nbgrader's autograde runs the student's notebook in a Jupyter kernel and
   takes a test cell without an error output as passed; code in that kernel can forge it.
   Grading here runs no student code in the grader (:mod:`autograder.judge`); the judge writes
   an *autograded* notebook with its verdicts as error outputs, and :func:`record_grades` stores
   it with nbgrader's own SaveAutoGrades and AssignLatePenalties, so every later step (manual
   grading, export, feedback, late penalties) is nbgrader's. **One transaction a student**:
   nbgrader commits after every cell (1-2 s a student, the serial part of a whole class's
   grading); here its writes go into the caller's one transaction (:func:`one_transaction`) and
   the cells' rows are read in one query (:class:`NotebookRows`), the rules nbgrader's own.
2. **Structure from the source, not OverwriteCells.** nbgrader's OverwriteCells crashes on a
   duplicated test cell and misplaces a deleted one; :mod:`autograder.judge.restore` rebuilds the
   submitted notebook on the source notebook before anything is judged.
3. **Feedback without hidden tests, math offline, one line per exercise.** nbgrader's feedback
   keeps hidden tests, loads MathJax from a CDN and lists every test cell by number;
   :func:`configure_feedback` swaps in :class:`RedactHiddenTests`, :class:`GetGradesByExercise`
   and the ``autograder_feedback`` template (a summary per exercise first, written answers "to
   be graded by hand" until they are, MathJax 3 from a folder next to each page).
4. **Gradebook creation without a subprocess.** nbgrader stamps a new gradebook by running
   ``alembic heads`` in a subprocess (2-10 s, and it fails unless the venv's bin is on PATH);
   :func:`fast_gradebook_creation` computes the same head in-process (a test checks they agree).
5. **A quiet API without an exchange.** NbGraderAPI probes the exchange at start-up and logs
   CRITICAL when the default one is missing; :func:`api_defaults` points it at an existing
   folder when the course configures none, and logs at WARN.
6. **collect** imports an LMS export itself (:mod:`autograder.commands.collect`): nbgrader's collect only
   reads its exchange, which ``collect --exchange`` still uses.
"""
from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nbgrader.api
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Comment, Grade, Gradebook, GradeCell, MissingEntry, SolutionCell
from nbgrader.preprocessors import AssignLatePenalties, ClearHiddenTests, GetGrades, SaveAutoGrades
from sqlalchemy.orm import joinedload, scoped_session, sessionmaker, undefer
from traitlets.config import Config

from autograder.course import notebook
from autograder.course.catalogue import title
from autograder.course.spans import span_text

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
NBGRADER_TEMPLATES = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
MAX_OUTPUT = 4000  # characters of any one output shown in feedback


# 1. -----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def one_transaction(gb: Gradebook) -> Iterator[Gradebook]:
    """Every write made through ``gb`` inside the block, in one database transaction.

    nbgrader's Gradebook commits after each write. Its session is swapped for one joined to a
    transaction of our own (SQLAlchemy's "join a session into an external transaction",
    ``join_transaction_mode="rollback_only"``): nbgrader's commits then only flush, its rollbacks
    still undo everything, and the block's end commits once. A crash inside (kill -9 included)
    leaves the gradebook as it was before the block. Objects stay loaded across nbgrader's
    commits (``expire_on_commit=False``): what it reads back it wrote itself in this transaction.
    """
    outer = gb.db
    with gb.engine.connect() as connection:
        transaction = connection.begin()
        gb.db = scoped_session(sessionmaker(bind=connection, autoflush=True, expire_on_commit=False,
                                            join_transaction_mode="rollback_only"))
        try:
            yield gb
            gb.db.flush()
            transaction.commit()
        except BaseException:
            if transaction.is_active:
                transaction.rollback()
            raise
        finally:
            gb.db.remove()
            gb.db = outer


class NotebookRows:
    """One submitted notebook's grade and comment rows, read in one query each, standing in for the
    Gradebook that nbgrader's SaveAutoGrades asks cell by cell (``find_grade``, ``find_comment``:
    a six-table join each). Where a grade cell and a task cell share a name, the grade cell wins,
    as in nbgrader's lookups; a missing row raises nbgrader's MissingEntry, as its lookups do."""

    class _Flush:
        """SaveAutoGrades commits after each cell; here its writes wait for the caller's commit."""

        @staticmethod
        def commit() -> None:
            pass

    db = _Flush()

    def __init__(self, gb: Gradebook, notebook: str, assignment: str, student: str, with_points: bool = False):
        submitted = gb.find_submission_notebook(notebook, assignment, student)
        self.where = f"{assignment}/{notebook} for {student}"
        grades = gb.db.query(Grade).options(joinedload(Grade.cell))
        if with_points:  # each grade's max_score in the same query (it is deferred: one query a grade)
            grades = grades.options(undefer(Grade.max_score))
        self.grades = self._by_name(grades.filter(Grade.notebook_id == submitted.id), GradeCell)
        self.comments = self._by_name(gb.db.query(Comment).options(joinedload(Comment.cell))
                                      .filter(Comment.notebook_id == submitted.id), SolutionCell)

    @staticmethod
    def _by_name(rows, preferred: type) -> dict:
        ordered = sorted(rows, key=lambda row: isinstance(row.cell, preferred))  # the preferred kind last: it wins
        return {row.cell.name: row for row in ordered}

    def find_grade(self, grade_cell: str, notebook: str, assignment: str, student: str) -> Grade:
        if grade_cell not in self.grades:
            raise MissingEntry(f"No such grade: {self.where}/{grade_cell}")
        return self.grades[grade_cell]

    def find_comment(self, solution_cell: str, notebook: str, assignment: str, student: str) -> Comment:
        if solution_cell not in self.comments:
            raise MissingEntry(f"No such comment: {self.where}/{solution_cell}")
        return self.comments[solution_cell]


def _ids(preprocessor, resources: dict) -> None:
    """The notebook, assignment and student ids that nbgrader's preprocessors read from resources."""
    ids = resources["nbgrader"]
    preprocessor.notebook_id, preprocessor.assignment_id = ids["notebook"], ids["assignment"]
    preprocessor.student_id, preprocessor.db_url = ids["student"], ids.get("db_url")


class SaveAutoGradesTo(SaveAutoGrades):
    """nbgrader's SaveAutoGrades (its scoring and "No response." rules, its manual-grade flag),
    writing to the rows given instead of a Gradebook of its own that commits every cell."""

    def __init__(self, rows: NotebookRows, **kwargs):
        super().__init__(**kwargs)
        self.rows = rows

    def preprocess(self, nb: NotebookNode, resources: dict):
        _ids(self, resources)
        self.gradebook = self.rows
        return super(SaveAutoGrades, self).preprocess(nb, resources)  # the cells, without opening a Gradebook


class AssignLatePenaltiesTo(AssignLatePenalties):
    """nbgrader's AssignLatePenalties (its plugin, its bounds on the penalty) on the gradebook given,
    without a commit: the same steps as its ``preprocess``, which opens a Gradebook of its own."""

    def __init__(self, gb: Gradebook, **kwargs):
        super().__init__(**kwargs)
        self.gradebook = gb

    def preprocess(self, nb: NotebookNode, resources: dict):
        _ids(self, resources)
        self.init_plugin()
        submission = self.gradebook.find_submission(self.assignment_id, self.student_id)
        notebook = self.gradebook.find_submission_notebook(self.notebook_id, self.assignment_id, self.student_id)
        # the scores and the lateness are SQL expressions over rows written in this transaction
        self.gradebook.db.flush()
        self.gradebook.db.expire(submission)
        self.gradebook.db.expire(notebook)
        notebook.late_submission_penalty = None
        if submission.total_seconds_late > 0:
            penalty = self.plugin_inst.late_submission_penalty(self.student_id, notebook.score,
                                                               submission.total_seconds_late)
            if penalty is not None:
                notebook.late_submission_penalty = self._check_late_penalty(notebook, penalty)
        return nb, resources


def record_grades(path: Path, assignment: str, student: str, gb: Gradebook, config: Config) -> None:
    """Store the grades of a judged notebook through ``gb``, as nbgrader's autograde would (its
    SaveAutoGrades, then its AssignLatePenalties). Nothing is committed here: call it inside
    :func:`one_transaction`, one for the whole student."""
    nb = notebook.read(path)
    resources = {"nbgrader": {"notebook": path.stem, "assignment": assignment, "student": student}}
    rows = NotebookRows(gb, path.stem, assignment, student)
    for preprocessor in (SaveAutoGradesTo(rows, config=config), AssignLatePenaltiesTo(gb, config=config)):
        nb, resources = preprocessor.preprocess(nb, resources)


# 3. -----------------------------------------------------------------------------------------------
class RedactHiddenTests(ClearHiddenTests):
    """Remove hidden tests from feedback: the code, and the traceback lines that quote it.

    Test cells (nbgrader ``grade`` and not ``solution``) hold hidden tests: the grader restored
    them from the source notebook. In a student's own cell only whole BEGIN ... END regions are
    cut (a copy of a hidden test); a lone quoted marker is the student's text and stays (nbgrader
    would raise on a BEGIN without an END). Outputs are the judge's messages only (the grader
    clears everything else), each kept short.
    """

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if notebook.is_test(cell):
            self._remove_hidden_test_region(cell)
        else:
            cell.source = notebook.cut_hidden_regions(cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                # the judge's message as the student reads it: without the exercise's id
                evalue = notebook.failure_message(output, notebook.exercise_of(notebook.grade_id(cell))) \
                    if output.ename == notebook.FAILED else output.evalue
                output.traceback = [f"{output.ename}: {evalue}"[:MAX_OUTPUT]]
            elif output.get("output_type") == "stream":
                output.text = output.text[:MAX_OUTPUT]
        return cell, resources


class GetGradesByExercise(GetGrades):
    """nbgrader's GetGrades, plus what the page's summary shows: one entry per exercise.

    ``resources["nbgrader"]["exercises"]``: in notebook order, {"id", "title", "anchor", "score",
    "points", "message"} for each exercise with test cells (its cells' points added up; the
    judge's message when it failed), and {"written": True, "pending": bool, ...} for each answer
    graded by hand. ``auto_score`` / ``auto_points`` total the auto-graded part only; ``pending``
    is the points still to be graded by hand (not counted in either total).
    """

    rows: NotebookRows | None = None
    late = ""

    def _rows(self) -> NotebookRows:
        """The notebook's grade and comment rows, read once: nbgrader's GetGrades asks the gradebook
        for each cell's (a six-table join each, and one more query for each grade's points), which
        was a third of a feedback page's time."""
        if self.rows is None:
            self.rows = NotebookRows(self.gradebook, self.notebook_id, self.assignment_id, self.student_id,
                                     with_points=True)
            self.late = _late_text(self.gradebook.find_submission(self.assignment_id, self.student_id))
        return self.rows

    def _get_comment(self, cell: NotebookNode, resources: dict) -> None:
        comment = self._rows().find_comment(notebook.grade_id(cell), self.notebook_id, self.assignment_id,
                                            self.student_id)
        notebook.nbgrader(cell)["comment"] = comment.comment

    def _get_score(self, cell: NotebookNode, resources: dict) -> None:
        grade = self._rows().find_grade(notebook.grade_id(cell), self.notebook_id, self.assignment_id,
                                        self.student_id)
        meta = notebook.nbgrader(cell)  # a grade cell: its own dict
        meta["score"], meta["points"] = grade.score, grade.max_score
        meta["needs_manual_grade"] = bool(grade.needs_manual_grade)

    def preprocess(self, nb: NotebookNode, resources: dict):
        self.rows, self.late = None, ""  # this notebook's, read from the Gradebook nbgrader's preprocess opens
        try:
            nb, resources = super().preprocess(nb, resources)
        finally:
            self.rows = None
        entries: dict[str, dict] = {}
        heading = ""  # the last heading above a cell: what the student read as a written question's title
        for cell in nb.cells:
            meta = notebook.nbgrader(cell)
            if cell.cell_type == "markdown" and not meta.get("solution"):
                heading = _heading(cell.source) or heading
                if heading and not resources["nbgrader"].get("heading"):  # the notebook's title, for the page's
                    resources["nbgrader"]["heading"] = heading
            if not meta.get("grade"):
                continue
            grade_id, score, points = meta["grade_id"], float(meta.get("score") or 0), float(meta.get("points") or 0)
            if meta.get("solution"):  # an answer graded by hand
                entries[grade_id] = {"id": grade_id, "title": heading or title(notebook.exercise_of(grade_id)),
                                     "anchor": grade_id, "score": score, "points": points, "written": True,
                                     "pending": bool(meta.get("needs_manual_grade")), "message": ""}
                continue
            exercise = notebook.exercise_of(grade_id)
            # what the page's heading of a test cell says instead of nbgrader's "Grade cell: <its id>"
            kind = "Hidden test" if grade_id.endswith("-hidden") else "Test"
            resources["nbgrader"].setdefault("labels", {})[grade_id] = f"{kind} of {title(exercise)}"
            entry = entries.setdefault(exercise, {"id": exercise, "title": title(exercise), "anchor": grade_id,
                                                  "score": 0.0, "points": 0.0, "written": False,
                                                  "pending": False, "message": ""})
            entry["score"] += score
            entry["points"] += points
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error" and not entry["message"]:
                    entry["message"] = notebook.failure_message(output, exercise)[:MAX_OUTPUT]
        items = list(entries.values())
        resources["nbgrader"]["exercises"] = items
        resources["nbgrader"]["late"] = self.late
        resources["nbgrader"]["auto_score"] = sum(e["score"] for e in items if not e["written"])
        resources["nbgrader"]["auto_points"] = sum(e["points"] for e in items if not e["written"])
        resources["nbgrader"]["pending"] = sum(e["points"] for e in items if e["written"] and e["pending"])
        return nb, resources


def _late_text(submission) -> str:
    """How late the student handed in, measured from their own due date ("" when on time)."""
    if not submission.total_seconds_late:
        return ""
    own = " (yours, with your extension)" if submission.extension else ""
    return (f"Handed in {span_text(submission.total_seconds_late)} after the due date{own}, "
            f"{submission.duedate:%Y-%m-%d %H:%M} UTC.")


def _heading(markdown: str) -> str:
    """A markdown cell's first heading as plain words ("Written question · matmul with a batch")."""
    line = next((line for line in markdown.split("\n") if line.startswith("#")), "")
    return line.lstrip("#").replace("`", "").strip()


def configure_feedback(config: Config) -> Config:
    config.GenerateFeedback.preprocessors = [GetGradesByExercise, CSSHTMLHeaderPreprocessor, RedactHiddenTests]
    config.HTMLExporter.template_name = "autograder_feedback"
    config.HTMLExporter.extra_template_basedirs = [str(TEMPLATES), str(NBGRADER_TEMPLATES)]
    config.HTMLExporter.template_file = "by_exercise.html.j2"  # extends nbgrader's index.html.j2
    return config


# 4. -----------------------------------------------------------------------------------------------
@functools.cache
def alembic_head() -> str:
    """The gradebook schema revision of the installed nbgrader (what ``alembic heads`` prints)."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(Path(nbgrader.__file__).resolve().parent / "alembic"))
    return str(ScriptDirectory.from_config(config).get_current_head())


def fast_gradebook_creation() -> None:
    nbgrader.api.get_alembic_version = alembic_head


# 5. -----------------------------------------------------------------------------------------------
def api_defaults(config: Config) -> Config:
    config.NbGraderAPI.log_level = "WARN"  # nbgrader's INFO log is returned in the result anyway
    if "root" not in config.Exchange:
        config.Exchange.root = tempfile.gettempdir()
    return config
