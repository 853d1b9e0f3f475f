"""The one harness that judges an exercise in a test: a notebook's cells (nbformat dicts, the course's
source notebooks with some answers replaced) or code cells given as (label, source), through the real
judge and a real sandbox, as grade judges them."""
from __future__ import annotations

import copy
import functools
import json

import nbformat

from autograder.course import catalogue, notebook
from autograder.judge.bubblewrap import Sandbox
from autograder.judge.judge import code_cells, judge
from autograder.judge.verdict import Verdict

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


# An answer cell as released, and two wrong answers a student could leave there instead: the stub's
# raise line replaced (every solution region of the cell), so the answer is no longer the kit's stub.
LEFT_AS = {
    "released": None,
    "returns None": "return None",
    "raises": "raise ValueError('wrong')",
}


def left_as(exercise_id: str, how: str = "released") -> str:
    """The answer cell of ``exercise_id`` as released (the stub), or with every stub's
    ``raise NotImplementedError()`` replaced by the wrong body ``LEFT_AS[how]``."""
    cell = next(c for c in _source_cells(assignment_of(exercise_id)) if notebook.grade_id(c) == exercise_id)
    released = notebook.released(nbformat.from_dict({**cell, "source": notebook.text(cell["source"])}))
    body = LEFT_AS[how]
    return released if body is None else released.replace("raise NotImplementedError()", body)


def verdict(exercise_id: str, cells: list[dict] | list[tuple[str, str]] | None = None, *,
            answers: dict[str, str | None] | None = None, budget: float | None = None,
            earlier: list[tuple[str, list[dict]]] | None = None) -> Verdict:
    """The judge's verdict on ``exercise_id``.

    ``cells``: a notebook's cells (dicts), or code cells as (label, source) pairs; default the source
    notebooks of the exercise's assignment with ``answers`` ({grade id: source}) in place of theirs.
    ``budget``: default the exercise's own, else 60 s."""
    if cells is None:
        cells = source_cells(assignment_of(exercise_id), answers)
    above = code_cells(cells, exercise_id) if cells and isinstance(cells[0], dict) else list(cells)
    if budget is None:
        budget = getattr(catalogue.exercise(exercise_id), "budget", None) or 60.0
    return judge(exercise_id, above, sandbox=SANDBOX, budget=budget, earlier=earlier)
