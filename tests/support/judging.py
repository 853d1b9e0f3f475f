"""The one harness that judges an exercise in a test: a notebook's cells (nbformat dicts, the course's
source notebooks with some answers replaced) or code cells given as (label, source), through the real
judge and a real sandbox, as grade judges them."""
from __future__ import annotations

import copy
import functools
import json

from autograder.course import notebook
from autograder.judge import catalogue
from autograder.judge.bubblewrap import Sandbox
from autograder.judge.judge import Verdict, code_cells, judge

from support import REPO

SOURCE = REPO / "assignments" / "source"
SANDBOX = Sandbox()


@functools.cache
def _source_cells(assignment: str) -> tuple[dict, ...]:
    return tuple(c for p in sorted((SOURCE / assignment).glob("*.ipynb")) for c in json.loads(p.read_text())["cells"])


def assignment_of(exercise_id: str) -> str:
    """The folder of the assignment an exercise id belongs to (``a02-mul`` -> ``a02_broadcasting``)."""
    prefix = exercise_id.split("-", 1)[0] + "_"
    return next(p.name for p in sorted(SOURCE.iterdir()) if p.name.startswith(prefix))


def source_cells(assignment: str, answers: dict[str, str | None] | None = None) -> list[dict]:
    """The cells of the assignment's source notebooks (the model answers), each cell whose grade id is a
    key of ``answers`` given that source instead."""
    cells = copy.deepcopy(list(_source_cells(assignment)))
    for cell in cells:
        if notebook.grade_id(cell) in (answers or {}) and answers[notebook.grade_id(cell)] is not None:
            cell["source"] = answers[notebook.grade_id(cell)]
    return cells


def verdict(exercise_id: str, cells: list[dict] | list[tuple[str, str]] | None = None, *,
            answers: dict[str, str | None] | None = None, budget: float | None = None,
            earlier: list[tuple[str, list[dict]]] | None = None, whole_notebook: bool = True) -> Verdict:
    """The judge's verdict on ``exercise_id``.

    ``cells``: a notebook's cells (dicts), or code cells as (label, source) pairs; default the source
    notebooks of the exercise's assignment with ``answers`` ({grade id: source}) in place of theirs.
    ``whole_notebook``: the judge reads the notebook's other answers (what grade passes); off, it sees
    only the cells above the exercise. ``budget``: default the exercise's own, else 60 s."""
    if cells is None:
        cells = source_cells(assignment_of(exercise_id), answers)
    if cells and isinstance(cells[0], dict):
        above, every = code_cells(cells, exercise_id), code_cells(cells)
    else:
        above, every = list(cells), None
    if budget is None:
        budget = getattr(catalogue.exercise(exercise_id), "budget", None) or 60.0
    return judge(exercise_id, above, sandbox=SANDBOX, budget=budget, earlier=earlier,
                 answers=every if whole_notebook else None)
