"""Mutant catalogues: classic student bugs that ``autograder check`` plants to test the tests.

One module per assignment, named after the assignment's folder, ``autograder/mutants/<assignment>.py``
(e.g. ``a02_broadcasting.py``), holding a list ``MUTANTS``::

    from autograder.mutants import Mutant

    MUTANTS = [
        Mutant(
            id="forgot-unbroadcast",                 # unique in the file; letters, digits, . _ -
            expect="unbroadcast",                    # a phrase the student's message must contain
            exercise="a02-mul",                      # grade_id of the exercise's solution cell
            find="unbroadcast(grad * y, x.shape)",   # text inside that cell's solution region ...
            replace="grad * y",                      # ... and what the buggy student wrote instead
            why="the gradient keeps the broadcast shape instead of the input's shape",
        ),
    ]

Rules, checked by ``autograder check`` (which stops with an error naming the mutant otherwise):

* ``exercise`` is the exercise id: the grade_id of its solution cell; its test cells are
  ``<exercise>-visible`` and ``<exercise>-hidden`` (``-hidden-2``, ...), see
  :mod:`autograder`.
* ``find`` occurs exactly once inside the ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region(s)
  of that cell (it may span several lines; indentation counts). ``replace`` must differ from it.
* A good mutant is caught: it loses points on at least one test cell of its own exercise and on
  no other grade cell. A mutant that also costs points elsewhere means the tests of two
  exercises are coupled (shared state between cells, a later exercise calling an earlier one):
  ``check`` reports it as a failure.

The same module may hold ``ALTERNATIVES``, a list of the same records: **correct answers written
in another legitimate style** (a loop instead of a vectorized expression, ``np.add.at`` instead of
slices, an int where a float works, a view instead of a copy...). They are to fairness what the
mutants are to strength: ``check`` fails an alternative that loses any point.

A mutant's ``expect`` is a phrase the message the student gets for it must contain (it names the
kind of mistake); ``check`` fails a mutant whose message does not. A catalogue gives every mutant
one, or none of them (then only that each is caught is checked).

:func:`apply_mutant` plants a mutant (or an alternative) in a copy of the notebooks, for ``autograder
check`` and ``autograder demo``.

Where catalogues are found: ``$AUTOGRADER_MUTANTS`` (``os.pathsep``-separated folders, first
match wins; the autograder's own tests use it for the toy course), then this package.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from autograder.course import CourseError, notebook
from autograder.course.students import SAFE_ID

PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Mutant:
    id: str
    exercise: str
    find: str
    replace: str
    why: str = ""
    expect: str = ""   # a mutant's: a phrase its message must contain (empty for an alternative)


def catalogue_path(assignment: str) -> Path | None:
    folders = [Path(p) for p in os.environ.get("AUTOGRADER_MUTANTS", "").split(os.pathsep) if p]
    for folder in [*folders, PACKAGE_DIR]:
        if (folder / f"{assignment}.py").is_file():
            return folder / f"{assignment}.py"
    return None


def load_mutants(assignment: str) -> list[Mutant]:
    """The assignment's catalogue, validated; an empty list if it has none yet."""
    return _load(assignment, "MUTANTS")


def load_alternatives(assignment: str) -> list[Mutant]:
    """The catalogue's ``ALTERNATIVES``: correct answers in other styles, which must keep full marks."""
    return _load(assignment, "ALTERNATIVES")


def _load(assignment: str, name: str) -> list[Mutant]:
    path = catalogue_path(assignment)
    if path is None:
        return []
    spec = importlib.util.spec_from_file_location(f"autograder_mutants_{assignment}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mutants = getattr(module, name, None if name == "MUTANTS" else [])
    if not isinstance(mutants, list) or not all(isinstance(m, Mutant) for m in mutants):
        raise CourseError(f"{path}: {name} must be a list of autograder.mutants.Mutant")
    seen = set()
    for m in mutants:
        if not SAFE_ID.fullmatch(m.id) or m.id in seen:
            raise CourseError(f"{path}: mutant id {m.id!r} is repeated or not of the form [A-Za-z0-9._-]")
        if not m.find or m.find == m.replace:
            raise CourseError(f"{path}: mutant '{m.id}': find must be non-empty and differ from replace")
        seen.add(m.id)
    if name == "MUTANTS" and any(m.expect for m in mutants):
        unnamed = [m.id for m in mutants if not m.expect]
        if unnamed:
            raise CourseError(f"{path}: mutant '{unnamed[0]}' has no expect phrase (every mutant of the file needs "
                              "one: the kind of mistake its message must name)")
    return mutants


def apply_mutant(notebooks: dict[str, dict], mutant: Mutant, assignment: str) -> tuple[str, dict]:
    """(notebook name, mutated copy of that notebook); CourseError if the mutant does not apply."""
    for name, nb in notebooks.items():
        for index, cell in enumerate(nb["cells"]):
            if notebook.grade_id(cell) != mutant.exercise or not notebook.is_answer(cell):
                continue
            source = notebook.text(cell["source"])
            hits = []
            for start, end in notebook.solution_spans(source):
                at = source.find(mutant.find, start, end)
                while at != -1 and at + len(mutant.find) <= end:
                    hits.append(at)
                    at = source.find(mutant.find, at + 1, end)
            if len(hits) != 1:
                raise CourseError(
                    f"mutant '{mutant.id}' of {assignment}: `find` occurs {len(hits)} times in the solution "
                    f"region of cell '{mutant.exercise}' ({name}.ipynb); it must occur exactly once")
            mutated = copy.deepcopy(nb)
            at = hits[0]
            mutated["cells"][index]["source"] = source[:at] + mutant.replace + source[at + len(mutant.find):]
            return name, mutated
    raise CourseError(f"mutant '{mutant.id}' of {assignment}: no solution cell with grade_id "
                      f"'{mutant.exercise}' in {', '.join(f'{n}.ipynb' for n in notebooks)}")
