"""Skipping one exercise costs exactly that exercise (issue 37), over the whole catalogue.

Each exercise E of an assignment is judged with the assignment's other exercises sealed, answered
or not (``autograder/judge/judge.py``, ``_engine``): so the model answers with E alone left as
released lose E's points and nothing else, and a sibling left blank, returning None or raising is
the same to every other exercise. The capstone (a06), judged on the student's own a01-a05, has its
own rule: it needs every earlier exercise its training runs, and its feedback names the one missing
(``assignments/README.md``).

Cost, bounded: one verdict per (E, exercise of E's assignment) for the released case, the exact
property (about 800 verdicts); the two wrong answers are judged all at once, every other exercise
of the assignment wrong around each model answer (one verdict per exercise and kind). Measured on
the 2-core machine: see the README's test table.
"""
from __future__ import annotations

import pytest

from autograder.judge import catalogue

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


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_skipping_one_exercise_costs_exactly_that_exercise(spec):
    """The model answers with ``spec`` alone as released: ``spec`` fails, every other auto-graded
    exercise of its assignment passes (full marks minus its points; the written answers aside)."""
    siblings = [s.id for s in catalogue.assignment(spec.id) if not s.whole_engine]
    failed = _failures(siblings, {spec.id: judging.left_as(spec.id)})
    assert spec.id in failed, f"{spec.id} passed as released"
    assert set(failed) == {spec.id}, f"leaving {spec.id} as released costs other exercises too: {failed}"


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
    assert f"exercise {needed.id}" in result.message and "missing" in result.message, result.message
