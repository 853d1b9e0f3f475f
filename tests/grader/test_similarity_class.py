"""A listed pair is evidence a person should read (issue 37, part 2), in classes that converge.

Classes of a02 answers made by ``support.convergent``: honest students write each exercise in one
of several natural styles, most of them the idiomatic one, with small choices of their own; planted
copiers hand in another student's answers renamed, reordered, recommented, reformatted through
``ast.unparse``, or all of these at once. In such a class, every planted copy is listed with a
margin above the threshold, at most one honest pair per 100 students is listed, the model answer
typed in by the many who write it that way names no one, and the matching passages start and end
on the student's own tokens. Measured 2026-11-29 (2 shared cores, load 8-10), threshold 85 %:
60 students, 10 copies: every copy at 100 %, no honest pair listed, the closest 66 %, about 6 s;
300 students, 30 copies: every copy at 100 %, no honest pair listed, the closest 79 %, about 22 s.
"""
from __future__ import annotations

import io
import tokenize

import pytest

from autograder.analytics import MIN_TOKENS, THRESHOLD
from autograder.analytics import similarity as sim

from support.classes import released_code
from support.convergent import ASSIGNMENT, make_class

MARGIN = 0.1   # a planted copy scores at least this far above the threshold


def _run(size: int, pairs: int, leak: bool = False):
    made = make_class(size, pairs, seed=size)
    answers = made.answers
    if leak:   # one more student hands in the model answer, names, comments and all
        answers = {e: {**by, "leaker": made.model[e]} for e, by in answers.items()}
    return made, sim.compare_class(answers, released_code(ASSIGNMENT), made.model)


def _check(made, result, size: int) -> None:
    listed = {(p.left, p.right): p for p in result.pairs}
    honest = [key for key in listed if not made.planted(*key)]
    scores = {(a, b): score for a, b, score, _, _ in result.scores}
    closest = max((score for key, score in scores.items() if not made.planted(*key)), default=0.0)
    print(f"\n{size} students: copies {min(scores.get(k, 0.0) for k in made.copies):.3f} at least, "
          f"{len(listed)} listed, the closest honest pair {closest:.3f}")
    missed = {key: (how, round(scores.get(key, 0), 3)) for key, how in made.copies.items() if key not in listed}
    assert missed == {}, missed
    assert all(listed[key].similarity >= THRESHOLD + MARGIN for key in made.copies), \
        [(made.copies[k], listed[k].similarity) for k in made.copies]
    assert len(honest) <= size // 100, [(k, listed[k].similarity) for k in honest]
    assert result.compared == size * (size - 1) // 2
    assert result.model == []   # the idiomatic line, which the model answer also is, is no one's evidence
    # the listed ones come first and are set apart from the most similar of the rest
    assert [p.similarity for p in result.pairs] == sorted((p.similarity for p in result.pairs), reverse=True)


def test_a_class_of_60_lists_every_copy_and_no_honest_pair():
    made, result = _run(60, 10)
    _check(made, result, 60)
    assert {len({c.exercise for c in p.comparisons}) for p in result.pairs} != {1}   # never one exercise alone


@pytest.mark.slow   # 300 students, 45,000 pairs: about 30 s on a loaded 2-core machine
def test_a_class_of_300_lists_every_copy_and_at_most_three_honest_pairs():
    made, result = _run(300, 30)
    _check(made, result, 300)


def test_a_leaked_model_answer_is_reported_and_the_natural_one_is_not():
    made, result = _run(60, 0, leak=True)
    assert {c.left for c in result.model} == {"leaker"}
    assert sum(c.matched[0] for c in result.model) >= MIN_TOKENS


def test_one_natural_line_in_common_lists_no_one_even_at_100():
    """Two students who wrote only the idiomatic one-liners of a class: identical, and no evidence."""
    made = make_class(60, 0, seed=1)
    natural = {"s000", "s001"}
    answers = {e: {s: code for s, code in by.items() if s not in natural} for e, by in made.answers.items()}
    for exercise in ("a02-exp", "a02-log", "a02-broadcast-to"):
        answers[exercise].update({s: made.model[exercise] for s in natural})
    result = sim.compare_class(answers, released_code(ASSIGNMENT), made.model, threshold=1.0)
    assert all(set(natural) != {p.left, p.right} for p in result.pairs)


def _boundaries(code: str) -> tuple[set[int], set[int]]:
    starts, ends, lines = set(), set(), [0]
    for line in code.splitlines(keepends=True):
        lines.append(lines[-1] + len(line))
    for t in tokenize.generate_tokens(io.StringIO(code).readline):
        if t.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING):
            starts.add(lines[t.start[0] - 1] + t.start[1])
            ends.add(lines[t.end[0] - 1] + t.end[1])
    return starts, ends


def test_highlights_start_and_end_on_the_students_own_tokens():
    made, result = _run(60, 10)
    seen = 0
    for pair in result.pairs:
        for c in pair.comparisons:
            ex = result.exercises[c.exercise]
            for student, spans in zip((pair.left, pair.right), ex.passages(pair.left, pair.right), strict=True):
                starts, ends = _boundaries(ex.code[student])
                assert all(s in starts and e in ends for s, e in spans), (student, c.exercise, spans)
                seen += len(spans)
    assert seen > 50
    code = "class Exp(Function):\n    def backward(self, grad):\n        return grad * self.output\n"
    tokens = sim.Tokens(code)
    assert tokens.passages(sim.np.array([[0], [len(tokens.text)]])) == [(0, len(code) - 1)]


def test_a_huge_answer_is_fingerprinted_in_bounded_time():
    """A student's cell of thousands of independent lines (hostile or not) is neither sorted nor
    aligned token by token: fingerprinting it stays a matter of a second, and it still compares."""
    code = "def f(x):\n" + "".join(f"    y{i} = (x + {i})\n" for i in range(600))
    result = sim.compare_class({"x-f": {"a": code, "b": code}}, [], {})
    assert result.pairs and result.pairs[0].similarity == 1.0
