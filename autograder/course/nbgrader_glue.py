"""Every place this package departs from stock nbgrader 0.9.6, what it does instead, and why.

nbgrader remains the course's backbone: its course directory, its gradebook (any SQLAlchemy URL),
generate_assignment, the late-submission policy, manual grading, export, the exchange. What
differs:

1. **No autograde.** nbgrader's autograde runs the student's notebook in a Jupyter kernel and
   takes a test cell without an error output as passed; code in that kernel can forge it.
   Grading here runs no student code in the grader (:mod:`autograder.judge`); the judge writes
   an *autograded* notebook with its verdicts as error outputs, and :func:`record_grades` stores
   it with nbgrader's own SaveAutoGrades and AssignLatePenalties, so every later step (manual
   grading, export, feedback, late penalties) is nbgrader's.
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

import functools
import tempfile
from pathlib import Path

import nbgrader.api
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import AssignLatePenalties, ClearHiddenTests, GetGrades, SaveAutoGrades
from traitlets.config import Config

from autograder.course import notebook

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
NBGRADER_TEMPLATES = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
MAX_OUTPUT = 4000  # characters of any one output shown in feedback


# 1. -----------------------------------------------------------------------------------------------
def record_grades(path: Path, assignment: str, student: str, db_url: str, config: Config) -> None:
    """Store the grades of a judged notebook in the gradebook, as nbgrader's autograde would."""
    nb = notebook.read(path)
    resources = {"nbgrader": {"notebook": path.stem, "assignment": assignment, "student": student,
                              "db_url": db_url}}
    for preprocessor in (SaveAutoGrades(config=config), AssignLatePenalties(config=config)):
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
                output.traceback = [f"{output.ename}: {output.evalue}"[:MAX_OUTPUT]]
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

    def _get_score(self, cell: NotebookNode, resources: dict) -> None:
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(notebook.grade_id(cell), self.notebook_id,
                                          self.assignment_id, self.student_id)
        notebook.nbgrader(cell)["needs_manual_grade"] = bool(grade.needs_manual_grade)  # a grade cell: its own dict

    def preprocess(self, nb: NotebookNode, resources: dict):
        nb, resources = super().preprocess(nb, resources)
        entries: dict[str, dict] = {}
        for cell in nb.cells:
            meta = notebook.nbgrader(cell)
            if not meta.get("grade"):
                continue
            grade_id, score, points = meta["grade_id"], float(meta.get("score") or 0), float(meta.get("points") or 0)
            if meta.get("solution"):  # an answer graded by hand
                entries[grade_id] = {"id": grade_id, "title": _title(notebook.exercise_of(grade_id)) + " (written)",
                                     "anchor": grade_id, "score": score, "points": points, "written": True,
                                     "pending": bool(meta.get("needs_manual_grade")), "message": ""}
                continue
            exercise = notebook.exercise_of(grade_id)
            entry = entries.setdefault(exercise, {"id": exercise, "title": _title(exercise), "anchor": grade_id,
                                                  "score": 0.0, "points": 0.0, "written": False,
                                                  "pending": False, "message": ""})
            entry["score"] += score
            entry["points"] += points
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error" and not entry["message"]:
                    entry["message"] = notebook.failure_message(output, exercise)[:MAX_OUTPUT]
        items = list(entries.values())
        resources["nbgrader"]["exercises"] = items
        resources["nbgrader"]["auto_score"] = sum(e["score"] for e in items if not e["written"])
        resources["nbgrader"]["auto_points"] = sum(e["points"] for e in items if not e["written"])
        resources["nbgrader"]["pending"] = sum(e["points"] for e in items if e["written"] and e["pending"])
        return nb, resources


def _title(exercise: str) -> str:
    """The exercise's title as its check declares it, else its id."""
    try:
        from autograder.judge import catalogue
        return catalogue.exercise(exercise).title or exercise
    except LookupError:
        return exercise


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
