"""Code similarity (issue 32, item 3): planted copies are flagged, independently written answers are not.

Every exercise of every assignment: a **planted copy** of the model answer (every argument and local
renamed, a pair of independent statements swapped, other comments, other spacing: support.classes'
``disguise``) against the answer it copies, and every **alternative** of the mutant catalogue
(a correct answer in another style) against the model answer. An alternative that rewrites at least
half of the solution is written independently; one that changes a line of it (a print added, ``0``
for ``0.0``) is the model answer with an edit, a copy by construction, and is reported apart.
Each pair alone (a class of two): every passage weighs the same, so the score is copydetect's
share of both answers covered. Answers under :data:`SHORT` Python tokens (the course's code removed)
are set aside. How a class's convergent answers are weighed: tests/grader/test_similarity_class.py.
Measured with the default threshold (85 %), 2026-11-29: planted copies 67 of 67 at the
threshold, independent alternatives 0 of 25, one-edit alternatives 22 of 71.
"""
from __future__ import annotations

import pytest

from autograder.analytics import THRESHOLD
from autograder.analytics import similarity as sim
from autograder.course import catalogue, notebook
from autograder.mutants import load_alternatives

from support.classes import (
    alternatives_by_exercise,
    answer_cells,
    disguise,
    released_code,
    source_notebooks,
    variant_answer,
    with_variant,
)

ASSIGNMENTS = catalogue.assignment_names()
SHORT = 12   # Python tokens: a shorter answer (``return grad * self.output``) is no evidence either way
pytestmark = pytest.mark.slow   # every catalogue's answers fingerprinted: about 30 s


def _body_size(assignment: str, exercise: str) -> int:
    for nb in source_notebooks(assignment).values():
        for cell in nb["cells"]:
            if notebook.grade_id(cell) == exercise and notebook.is_answer(cell):
                return sum(len(line) for _, line in notebook.solution_lines(notebook.text(cell["source"])))
    raise LookupError(exercise)


def _score(assignment: str, exercise: str, left: str, right: str, given) -> sim.Comparison:
    return sim.Exercise(exercise, {"a": left, "b": right}, given).pair("a", "b")


@pytest.fixture(scope="module")
def measured():
    copies, independent, one_edit, short = [], [], [], 0
    for assignment in ASSIGNMENTS:
        given = sim.boilerplate(released_code(assignment))
        model = answer_cells(assignment)
        for exercise, code in model.items():
            c = _score(assignment, exercise, code, disguise(code), given)
            copies.append(c) if min(c.tokens) >= SHORT else None
            short += min(c.tokens) < SHORT
        for alt in load_alternatives(assignment):
            c = _score(assignment, alt.exercise, model[alt.exercise], variant_answer(assignment, alt), given)
            if min(c.tokens) < SHORT:
                short += 1
                continue
            rewritten = len(alt.find) >= 0.5 * _body_size(assignment, alt.exercise)
            (independent if rewritten else one_edit).append((alt.id, c))
    return copies, independent, one_edit, short


def test_planted_copies_are_flagged_and_independent_answers_are_not(measured):
    copies, independent, one_edit, short = measured
    flagged_copies = [c for c in copies if c.similarity >= THRESHOLD]
    flagged_independent = [(i, c) for i, c in independent if c.similarity >= THRESHOLD]
    flagged_edits = [(i, c) for i, c in one_edit if c.similarity >= THRESHOLD]
    print(f"\nplanted copies flagged: {len(flagged_copies)}/{len(copies)}; independent alternatives flagged: "
          f"{len(flagged_independent)}/{len(independent)}; one-edit alternatives: {len(flagged_edits)}/"
          f"{len(one_edit)}; too short: {short}")
    assert len(copies) >= 50 and len(independent) >= 15
    assert len(flagged_copies) >= 0.9 * len(copies), [(c.exercise, round(c.similarity, 2)) for c in copies
                                                     if c not in flagged_copies]
    assert len(flagged_independent) <= 0.1 * len(independent), flagged_independent


def test_the_matrix_scores_are_copydetects_own():
    """Every pair's score, computed for the whole class at once, is what copydetect's compare_files gives."""
    assignment = "a02_broadcasting"
    given = sim.boilerplate(released_code(assignment))
    for exercise, code in answer_cells(assignment).items():
        answers = {"model": code, "copy": disguise(code)}
        for alt in alternatives_by_exercise(assignment).get(exercise, []):
            answers[alt.id] = variant_answer(assignment, alt)
        ex = sim.Exercise(exercise, answers, given)
        for left in answers:
            for right in answers:
                if left != right:
                    assert ex.pair(left, right).matched == ex.compare(left, right).matched, (exercise, left, right)


def test_short_answers_and_the_given_code_flag_no_one():
    given = sim.boilerplate(["def mul(a, b):\n    \"\"\"The product.\"\"\"\n    # YOUR CODE HERE\n"
                             "    raise NotImplementedError()\n"])
    same = "def mul(a, b):\n    \"\"\"The product.\"\"\"\n    return a * b\n"
    c = sim.Exercise("x-mul", {"a": same, "b": same}, given).pair("a", "b")
    assert c.tokens[0] < SHORT
    result = sim.compare_class({"x-mul": {"a": same, "b": same}}, [], {"x-mul": same})
    assert result.pairs == [] and result.model == []


def test_in_a_class_the_copying_pair_alone_is_flagged_and_the_natural_answer_is_no_evidence():
    """11 students type the model answer (most of the class: the natural way to write it), a twelfth
    answers in the catalogue's other styles and a thirteenth copies the twelfth in disguise."""
    assignment = "a02_broadcasting"
    model = answer_cells(assignment)
    styled = source_notebooks(assignment)
    for alternatives in alternatives_by_exercise(assignment).values():
        styled = with_variant(assignment, alternatives[0], styled)
    victim = answer_cells(assignment, styled)
    answers = {e: {**{f"typist{i:02d}": code for i in range(11)}, "victim": victim[e], "copier": disguise(victim[e])}
               for e, code in model.items()}
    result = sim.compare_class(answers, released_code(assignment), model)
    assert [(p.left, p.right) for p in result.pairs] == [("copier", "victim")]
    assert result.pairs[0].similarity >= THRESHOLD
    assert result.model == []   # the model answer, typed in by most of the class: no one's evidence
    assert result.compared == 13 * 12 // 2
