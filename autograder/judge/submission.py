"""Grade one submission: restore each notebook's structure, judge every exercise, write the result.

Runs in a grading worker (:mod:`autograder.judge.worker`), a trusted process: it reads the student's
notebooks as data and never executes them; each exercise is judged in a sandbox of its own
(:mod:`autograder.judge.judge`), so a crash, a hang or an attack in one exercise costs that
exercise only, and the exercises judged before it keep their scores.

What it writes is the *autograded* notebook nbgrader's gradebook tools read: the restored
notebook (:mod:`autograder.judge.restore`: the release template's test cells, the student's answers)
with every output cleared, and on each test cell of a failed exercise one error output
holding the judge's message. nbgrader's SaveAutoGrades then scores it as stock nbgrader scores
any notebook (an error output is 0 points, none is full points), so the gradebook, late
penalties, manual grading and feedback work as they always did, while the verdict itself was
decided here, from plain data.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import nbformat

from autograder.course import catalogue, notebook
from autograder.course.files import write_file
from autograder.judge.bubblewrap import Sandbox
from autograder.judge.judge import HungCells, code_cells, judge
from autograder.judge.restore import restore
from autograder.judge.verdict import UNREADABLE, Verdict


def judged_exercises(cells) -> list[str]:
    """The exercises judged in a notebook, in order: every exercise with a test cell.

    A verdict is per exercise: it decides every test cell of the exercise, visible or hidden
    (a visible test is a part of what the hidden check checks, and runs nowhere)."""
    out: list[str] = []
    for cell in cells:
        grade_id = notebook.grade_id(cell)
        if notebook.is_test(cell) and grade_id:
            exercise = notebook.exercise_of(grade_id)
            if exercise not in out:
                out.append(exercise)
    return out


class SkippedCells(HungCells):
    """The cells that ran over their exercise's budget: the exercises below them run without them.

    This is what nbgrader does with a cell that runs over ``Execute.timeout``: it interrupts it,
    the cell's effects are lost, the notebook goes on. Every exercise re-runs the cells above it
    in a fresh sandbox, so a cell that hung once is skipped from then on rather than waited on
    again; an exercise that finds a new one is judged again without it (once: a second new hang
    in that run fails the exercise, which bounds the time a notebook takes to two budgets per
    exercise). The exercise whose own answer cell hangs fails with the time-limit message.
    """

    def known(self, cells: list[tuple[str, str]]) -> str | None:
        return None  # a known hung cell is never handed to the judge: nothing fails for it

    def without(self, cells: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [cell for cell in cells if cell not in self.hung]

    def messages(self) -> dict[str, str]:
        """Label of every skipped cell -> why it was skipped."""
        return {label: message for (label, _), message in self.hung.items()}


def judge_with_skips(exercise: str, cells: list[tuple[str, str]], skipped: SkippedCells, **kwargs) -> Verdict:
    """Judge ``exercise`` on ``cells`` minus the known hung cells; again without a newly hung one."""
    for attempt in range(2):
        before = set(skipped.hung)
        verdict = judge(exercise, skipped.without(cells), hung=skipped, **kwargs)
        new = set(skipped.hung) - before
        if attempt or not new or any(notebook.exercise_of(label) == exercise for label, _ in new):
            return verdict
    return verdict


def _skip_output(message: str):
    text = f"this cell was interrupted and skipped: {message}; the exercises below were judged without it"
    return nbformat.v4.new_output("error", ename="TimeoutError", evalue=text, traceback=[f"TimeoutError: {text}"])


def autograded(restored, verdicts: dict[str, Verdict], skipped: dict[str, str] | None = None):
    """The restored notebook with no outputs but the judge's messages on the test cells of failed
    exercises, and on each ungraded cell that was skipped (``skipped``: its label -> the message)."""
    skipped = skipped or {}
    for index, cell in enumerate(restored.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        grade_id = notebook.grade_id(cell)
        label = grade_id or f"cell {index + 1}"  # as judge.code_cells labels it
        if label in skipped and not notebook.nbgrader(cell).get("grade") and \
                notebook.exercise_of(label) not in verdicts:
            cell.outputs = [_skip_output(skipped[label])]
        if notebook.is_test(cell) and grade_id:
            exercise = notebook.exercise_of(grade_id)
            verdict = verdicts.get(exercise)
            if verdict is None or not verdict.passed:
                message = verdict.message if verdict else "this exercise was not judged"
                cell.outputs = [notebook.failure_output(exercise, message)]
    return restored


def earlier_notebooks(source: Path, submitted: Path) -> list[tuple[str, list[dict]]]:
    """The student's notebooks of the assignments before ``source``'s, each restored against its
    own source notebook, as [(assignment, cells)]: what the capstone's whole engine is made of.

    Layout (nbgrader's): ``source`` is ``<course>/source/<assignment>`` and ``submitted`` is
    ``<course>/submitted/<student>/<assignment>``. An assignment the student never handed in is
    left out: its exercises stay stubs, and the check's message names them."""
    prefix = source.name.split("_", 1)[0]
    out = []
    for folder in sorted(source.parent.glob("a[0-9][0-9]_*")):
        if not folder.is_dir() or folder.name.split("_", 1)[0] >= prefix:
            continue
        template_path = folder / f"{folder.name}.ipynb"
        path = submitted.parent / folder.name / template_path.name
        if not (template_path.is_file() and path.is_file()):
            continue
        try:
            student = notebook.read(path)
        except Exception:  # noqa: BLE001 (unreadable: as if not handed in)
            continue
        restored, _ = restore(notebook.read(template_path), student)
        cells = [{"cell_type": c.cell_type, "id": str(c.get("id", "")), "source": c.source,
                  "metadata": {"nbgrader": dict(notebook.nbgrader(c))}}
                 for c in restored.cells if c.cell_type == "code"]
        out.append((folder.name, cells))
    return out


def grade_submission(source: Path, submitted: Path, out: Path, *, sandbox: Sandbox, budget: float,
                     on_exercise=lambda verdict: None) -> dict:
    """Judge every notebook of ``source`` (the assignment's source folder) found in ``submitted``;
    write the autograded notebooks into ``out``; return {"notebooks": {name: {exercise: verdict}},
    "repairs": [...], "unreadable": {name: reason}}."""
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"notebooks": {}, "repairs": [], "unreadable": {}, "seconds": 0.0}
    started = time.monotonic()
    for template_path in sorted(source.glob("*.ipynb")):
        path = submitted / template_path.name
        if not path.is_file():
            continue  # not handed in: the parent scores it 0, as nbgrader does
        template = notebook.read(template_path)
        try:
            student = notebook.read(path)
        except Exception as error:  # noqa: BLE001 (anything that is not a notebook)
            reason = f"{path.name} could not be read as a notebook ({type(error).__name__})"
            result["unreadable"][template_path.stem] = reason
            student = nbformat.v4.new_notebook()
        restored, repairs = restore(template, student)
        result["repairs"] += [f"{template_path.name}: {r}" for r in repairs]
        verdicts: dict[str, Verdict] = {}
        skipped = SkippedCells()
        for exercise in judged_exercises(restored.cells):
            if template_path.stem in result["unreadable"]:
                verdicts[exercise] = Verdict(exercise, False, result["unreadable"][template_path.stem],
                                             kind=UNREADABLE)
            else:
                # an exercise no catalogue module declares: judge() says so in the verdict
                the_spec = catalogue.declared(exercise)
                whole = the_spec is not None and the_spec.whole_engine
                earlier = earlier_notebooks(source, submitted) if whole else None
                verdicts[exercise] = judge_with_skips(exercise, code_cells(restored.cells, exercise), skipped,
                                                      sandbox=sandbox, budget=(the_spec and the_spec.budget) or budget,
                                                      earlier=earlier)
            on_exercise(verdicts[exercise])
        result["notebooks"][template_path.stem] = {e: asdict(v) for e, v in verdicts.items()}
        notebook.write(autograded(restored, verdicts, skipped.messages()), out / template_path.name)
    result["seconds"] = time.monotonic() - started
    return result


def write_result(path: Path, result: dict) -> None:
    write_file(path, json.dumps(result, indent=1))
