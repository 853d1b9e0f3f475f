"""The hidden checks, through the trusted judge: they pass the reference answers, catch every
mutant with the right kind of message, isolate one exercise from the others, and survive garbage.

Each case is a notebook (the source notebook of an assignment: its solution regions are the
reference answers), optionally with one cell changed, judged exercise by exercise exactly as
`autograder grade` judges a student: the answer in a sandbox, the check here.
"""
from __future__ import annotations

import copy
import functools
import json
import re

import nbformat
import pytest

from autograder.course import catalogue, notebook
from autograder.mutants import Mutant, apply_mutant, load_alternatives, load_mutants

from support import REPO
from support.judging import verdict

SOURCE = REPO / "assignments" / "source"
ASSIGNMENTS = catalogue.assignment_names()
SPECS = [s for a in ASSIGNMENTS for s in catalogue.assignment(a)]
MUTANTS = [(a, m) for a in ASSIGNMENTS for m in load_mutants(a)]
ALTERNATIVES = [(a, m) for a in ASSIGNMENTS for m in load_alternatives(a)]


def each_exercise(specs: list) -> list:
    """``specs`` as parameters: the first exercise of each assignment in `make check`, the others in
    `make test` only (marked slow): every exercise is judged, the contributor's loop judges seven."""
    firsts = {a: next((s for s in specs if s.id.startswith(a.split("_", 1)[0] + "-")), None) for a in ASSIGNMENTS}
    return [pytest.param(s, id=s.id, marks=() if s in firsts.values() else pytest.mark.slow) for s in specs]


@functools.cache
def source_notebooks(assignment: str) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((SOURCE / assignment).glob("*.ipynb"))}


def assignment_of(exercise_id: str) -> str:
    prefix = exercise_id.split("-", 1)[0]
    return next(a for a in ASSIGNMENTS if a.startswith(prefix + "_"))


def notebook_with(exercise_id: str, notebooks: dict[str, dict] | None = None) -> dict:
    """The notebook (of `notebooks`, default the source) that holds the exercise's answer cell."""
    notebooks = notebooks or source_notebooks(assignment_of(exercise_id))
    for nb in notebooks.values():
        if any(notebook.grade_id(c) == exercise_id for c in nb["cells"]):
            return nb
    raise LookupError(exercise_id)


def earlier(exercise_id: str) -> list[tuple[str, list[dict]]]:
    """The source notebooks of the assignments before the exercise's: a student who finished them
    with the reference answers (what a whole-engine exercise is judged on)."""
    prefix = exercise_id.split("-", 1)[0]
    return [(a, [c for nb in source_notebooks(a).values() for c in nb["cells"]])
            for a in ASSIGNMENTS if a.split("_", 1)[0] < prefix]


def failure(exercise_id: str, notebook: dict | None = None, budget: float = 60) -> str:
    """The student-facing message for the exercise in `notebook` ('' if it passes)."""
    notebook = notebook or notebook_with(exercise_id)
    the_spec = catalogue.exercise(exercise_id)
    result = verdict(exercise_id, notebook["cells"], budget=the_spec.budget or budget,
                     earlier=earlier(exercise_id) if the_spec.whole_engine else None)
    assert not result.detail, f"the check of {exercise_id} itself failed:\n{result.detail}"
    return "" if result.passed else f"{exercise_id}: {result.message}"


def with_answer(exercise_id: str, source: str) -> dict:
    """The source notebook with the exercise's answer cell replaced by `source`."""
    nb = copy.deepcopy(notebook_with(exercise_id))
    for cell in nb["cells"]:
        if notebook.grade_id(cell) == exercise_id:
            cell["source"] = source
    return nb


def mutated(assignment: str, mutant: Mutant) -> dict:
    _, nb = apply_mutant(source_notebooks(assignment), mutant, assignment)
    return nb


def unanswered(assignment: str) -> dict[str, dict]:
    """The notebooks as released: every cell as nbgrader's release makes it (solution regions
    stubbed, hidden tests removed)."""
    out = {}
    for name, nb in source_notebooks(assignment).items():
        nb = copy.deepcopy(nb)
        for cell in nb["cells"]:
            cell["source"] = notebook.released(nbformat.from_dict({**cell, "source": notebook.text(cell["source"])}))
        out[name] = nb
    return out


# --------------------------------------------------------------------------------------------
# The reference passes, the unanswered notebook does not, every mutant is caught by its own check
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", each_exercise(SPECS))
def test_reference_answer_passes_and_the_unanswered_stub_does_not(spec):
    assert failure(spec.id) == ""
    stub = notebook_with(spec.id, unanswered(assignment_of(spec.id)))
    assert failure(spec.id, stub) != ""


def test_enough_auto_graded_exercises_and_mutants():
    counts = {a: len(catalogue.assignment(a)) for a in ASSIGNMENTS}
    assert counts["a01_graphs"] >= 6 and counts["a02_broadcasting"] >= 10, counts
    assert sum(counts.values()) >= 39, counts
    per_assignment = {a: len(load_mutants(a)) for a in ASSIGNMENTS}
    assert all(per_assignment.values()), f"an assignment without mutants: {per_assignment}"
    assert len(MUTANTS) >= 50, per_assignment


@pytest.mark.slow
@pytest.mark.parametrize("assignment,mutant", MUTANTS, ids=[f"{a}:{m.id}" for a, m in MUTANTS])
def test_mutant_is_caught_with_the_kind_of_mistake_and_costs_no_other_exercise(assignment, mutant):
    expected = mutant.expect
    assert expected, f"mutant {mutant.id} has no expect phrase"
    nb = mutated(assignment, mutant)
    message = failure(mutant.exercise, nb)
    assert message, f"mutant {mutant.id} ({mutant.why}) passes the hidden check of {mutant.exercise}"
    assert message.startswith(f"{mutant.exercise}: ")
    assert expected in message, f"mutant {mutant.id}: the message should name the mistake ({expected!r}): {message}"
    # Student-facing: no hidden values (floats with several digits), no checker internals.
    assert not re.search(r"\d\.\d{3,}", message), message
    assert "autograder/" not in message and "Traceback" not in message
    # Isolation: the exercises below the mutated cell see it, and still pass.
    ids = [notebook.grade_id(c) for c in nb["cells"]]
    below = [s for s in catalogue.assignment(assignment)
             if s.id in ids and ids.index(s.id) > ids.index(mutant.exercise)]
    for other in below:
        assert failure(other.id, nb) == "", f"mutant {mutant.id} also breaks {other.id}"


def test_every_exercise_has_a_correct_answer_in_another_style():
    covered = {m.exercise for _, m in ALTERNATIVES}
    assert not [s.id for s in SPECS if s.id not in covered], "exercises without an alternative correct answer"


@pytest.mark.slow
@pytest.mark.parametrize("assignment,alternative", ALTERNATIVES, ids=[f"{a}:{m.id}" for a, m in ALTERNATIVES])
def test_a_correct_answer_in_another_style_keeps_full_marks(assignment, alternative):
    """Fairness, the mutants' mirror: the reference answer rewritten in another legitimate style."""
    nb = mutated(assignment, alternative)
    assert failure(alternative.exercise, nb) == "", f"{alternative.id} ({alternative.why}) loses points"


# --------------------------------------------------------------------------------------------
# Isolation across exercises, and garbage: clear failures, never a crash of the judge
# --------------------------------------------------------------------------------------------
def test_mul_is_graded_with_the_reference_unbroadcast():
    bad = "def unbroadcast(grad, shape):\n    return grad.sum(axis=0)\n"
    nb = with_answer("a02-unbroadcast", bad)
    assert "only axis 0" in failure("a02-unbroadcast", nb)
    assert failure("a02-mul", nb) == ""


def test_backward_is_graded_with_the_reference_topological_order():
    nb = with_answer("a01-topological-order", "def topological_order(root):\n    return [root]\n")
    assert failure("a01-topological-order", nb) != ""
    assert failure("a01-backward", nb) == ""


MUL = """class Mul(Function):
    def forward(self, x, y):
        return x * y

    def backward(self, grad):
        {body}
"""


@pytest.mark.parametrize("body,expected", [
    ("return None", "returned None"),
    ("return grad.data, grad.data", "NumPy array"),
    ("return grad, grad, grad", "3 gradient(s) for 2 input(s)"),
    ("return 'x', 'y'", "returned str"),
    ("return grad * np.nan, grad", "nan or inf"),
    ("return grad.sum(), grad.sum()", "shape"),
    ("return 1 / 0", "ZeroDivisionError"),
])
def test_garbage_from_an_op_backward(body, expected):
    message = failure("a02-mul", with_answer("a02-mul", MUL.format(body=body)))
    assert message and expected in message, message


FUNCTIONS = [s for s in SPECS if not s.regions]


@pytest.mark.parametrize("spec", each_exercise(FUNCTIONS))
def test_garbage_from_any_exercise_function(spec):
    """None, or an exception, from any function exercise: a failure that says so, never a crash of
    the judge reported as the student's (an AttributeError on the None it returned)."""
    message = failure(spec.id, with_answer(spec.id, f"def {spec.name}(*args, **kwargs):\n    return None\n"))
    assert message.startswith(f"{spec.id}: ") and "your code raised" not in message, message
    message = failure(spec.id, with_answer(spec.id, f"def {spec.name}(*args, **kwargs):\n"
                                                    "    raise ValueError('boom')\n"))
    assert "your code raised ValueError: boom" in message and "autograder/" not in message, message


def test_not_implemented_and_wrong_kind():
    stub = "def unbroadcast(grad, shape):\n    raise NotImplementedError()\n"
    assert "not done yet" in failure("a02-unbroadcast", with_answer("a02-unbroadcast", stub))
    assert "expected the class Mul" in failure("a02-mul", with_answer("a02-mul", "def Mul(x, y):\n    return x\n"))


@pytest.mark.slow
def test_an_endless_loop_in_an_op_is_stopped_with_a_message():
    endless = MUL.format(body="while True:\n            pass")
    message = failure("a02-mul", with_answer("a02-mul", endless), budget=5)
    assert "time limit" in message, message


def test_the_checks_are_deterministic():
    assignment, mutant = next((a, m) for a, m in MUTANTS if m.id == "div-wrong-power")
    nb = mutated(assignment, mutant)
    assert failure(mutant.exercise, nb) == failure(mutant.exercise, nb)


# --------------------------------------------------------------------------------------------
# The capstone: judged on the student's whole engine, made of their earlier notebooks
# --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_capstone_names_a_broken_earlier_op():
    """A student whose a02 Mul gradient is wrong (and everything else right) trains a CNN that
    falls short, or a step that is wrong; either way the message names a02-mul."""
    if "a06_training" not in ASSIGNMENTS:
        pytest.skip("no capstone")
    mutant = next(m for m in load_mutants("a02_broadcasting") if m.id == "mul-swapped")
    broken = mutated("a02_broadcasting", mutant)
    notebook = notebook_with("a06-train-step")
    the_earlier = [(a, broken["cells"] if a == "a02_broadcasting" else cells) for a, cells in earlier("a06-train-step")]
    result = verdict("a06-train-step", notebook["cells"], budget=catalogue.exercise("a06-train-step").budget,
                     earlier=the_earlier)
    assert not result.passed and not result.detail, result
    # the pieces that fail name their exercises by title (Mul), as the notebooks do
    assert re.search(r"\bMul\b", result.message) and "gradient check" in result.message, result.message
    assert "a02-" not in result.message, result.message


def test_the_capstone_without_earlier_notebooks_says_what_is_missing():
    notebook = notebook_with("a06-train-step")
    result = verdict("a06-train-step", notebook["cells"], budget=60, earlier=[])
    assert not result.passed and not result.detail, result
    assert "missing a piece: " in result.message and " is an exercise you have not done yet: " in result.message, \
        result.message
