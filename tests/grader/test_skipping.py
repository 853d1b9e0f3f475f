"""Skipping one exercise costs exactly that exercise (issue 37), over the whole catalogue.

Each exercise E of an assignment is judged with the assignment's other exercises sealed, answered
or not (``autograder/judge/judge.py``, ``_engine``): so the model answers with E alone left as
released lose E's points and nothing else, and a sibling left blank, returning None or raising is
the same to every other exercise. The capstone (a06), judged on the student's own a01-a05, has its
own rule: it needs every earlier exercise its training runs, and its feedback names the one missing
(``assignments/README.md``).

Cost, bounded: for the exact property, E and each exercise whose judging runs E's cell (those
below it: about 430 verdicts); then every model answer with all the other exercises of its
assignment left as released, returning None or raising at once (one verdict per exercise and
kind, about 200). Measured 2026-11-29 on the 2-core machine, shared (load average 6): 86 tests in
3 min 17 s with 2 workers (`-n 2`), 347 s of test time.
"""
from __future__ import annotations

import pytest

from autograder.course import catalogue, notebook

from support import judging

ASSIGNMENTS = catalogue.assignment_names()
# The capstone's exercises are judged on the student's whole engine: tested below on their own rule.
SPECS = [s for a in ASSIGNMENTS for s in catalogue.assignment(a) if not s.whole_engine]


def _failures(exercise_ids, answers: dict[str, str]) -> dict[str, str]:
    out = {}
    for exercise_id in exercise_ids:
        result = judging.verdict(exercise_id, answers=answers)
        assert not result.detail, f"the check of {exercise_id} itself failed:\n{result.detail}"
        if not result.passed:
            out[exercise_id] = result.message
    return out


def _seeing(exercise_id: str) -> list[str]:
    """The exercises of its assignment whose judging runs the answer cell of ``exercise_id``: those
    whose first test cell is below it (the judge runs the cells above the judged exercise's tests,
    and reads nothing else of the notebook)."""
    cells = judging.source_cells(judging.assignment_of(exercise_id))
    answer = next(i for i, c in enumerate(cells) if notebook.grade_id(c) == exercise_id and notebook.is_answer(c))
    first_test: dict[str, int] = {}
    for i, cell in enumerate(cells):
        if notebook.is_test(cell):
            first_test.setdefault(notebook.exercise_of(notebook.grade_id(cell)), i)
    return [s.id for s in catalogue.assignment(exercise_id)
            if not s.whole_engine and s.id != exercise_id and first_test[s.id] > answer]


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_skipping_one_exercise_costs_exactly_that_exercise(spec):
    """The model answers with ``spec`` alone as released: ``spec`` fails, every other auto-graded
    exercise of its assignment passes (full marks minus its points; the written answers aside).

    Judged: ``spec`` and every exercise whose judging runs its cell. The others get the very input
    of the model notebook (the cells above them, the catalogue), judged by test_exercises."""
    seeing = _seeing(spec.id)
    failed = _failures([spec.id, *seeing], {spec.id: judging.left_as(spec.id)})
    assert spec.id in failed, f"{spec.id} passed as released"
    assert set(failed) == {spec.id}, f"leaving {spec.id} as released costs other exercises too: {failed}"


def test_an_exercise_below_another_runs_its_cell():
    """What the exact test above leans on: the exercises it leaves out are those above."""
    assert "a02-mul" in _seeing("a02-unbroadcast") and "a02-unbroadcast" not in _seeing("a02-mul")


@pytest.mark.slow
@pytest.mark.parametrize("how", list(judging.LEFT_AS))
@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if any(s in SPECS for s in catalogue.assignment(a))])
def test_a_model_answer_keeps_its_points_whatever_the_other_exercises_hold(assignment, how):
    """Each model answer, every other exercise of its assignment left as released, or answered
    wrongly (returning None, raising): full marks for it each time, so a blank answer and a wrong
    one cost the student the same, their own exercise's points."""
    ids = [s.id for s in catalogue.assignment(assignment) if not s.whole_engine]
    failed = {}
    for exercise_id in ids:
        others = {other: judging.left_as(other, how) for other in ids if other != exercise_id}
        failed.update(_failures([exercise_id], others))
    assert not failed, f"model answers failing when the other exercises are {how}: {failed}"


@pytest.mark.slow
@pytest.mark.parametrize("capstone", [s for a in ASSIGNMENTS for s in catalogue.assignment(a) if s.whole_engine],
                         ids=lambda s: s.id)
def test_the_capstone_names_the_earlier_exercise_it_needs(capstone):
    """The capstone's rule: it runs on the student's own engine, so an earlier exercise left as
    released costs it, and its feedback names that exercise (``assignments/README.md``)."""
    earlier = [s for s in catalogue.in_engine() if s.prefix < capstone.prefix]
    needed = next(s for s in earlier if s.id == "a02-mul") if any(s.id == "a02-mul" for s in earlier) else earlier[0]
    notebooks = []
    for prefix in sorted({s.prefix for s in earlier}):
        name = catalogue.assignment_name(prefix)
        answers = {needed.id: judging.left_as(needed.id)} if prefix == needed.prefix else None
        notebooks.append((name, judging.source_cells(name, answers)))
    result = judging.verdict(capstone.id, earlier=notebooks)
    assert not result.passed and not result.detail, result
    assert f"{needed.title} is an exercise you have not done yet" in result.message and "missing" in result.message, \
        result.message
