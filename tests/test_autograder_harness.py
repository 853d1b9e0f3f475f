"""autograder.harness: check() looks exercises up, seeds them, and turns failures into feedback."""

from pathlib import Path

import numpy as np
import pytest

from autograder import harness
from autograder.harness import GradingFailure, check, exercise

pytestmark = pytest.mark.xdist_group("autograder")

FIXTURE = Path(__file__).parent / "fixtures" / "toy_course"  # not autograder_support: no nbgrader import


@pytest.fixture(autouse=True)
def toy_registry(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_EXERCISES", str(FIXTURE / "exercises"))


def test_correct_code_passes_and_wrong_code_gets_a_message_without_expected_values():
    check("a00-add", lambda x, y: np.asarray(x, dtype=float) + np.asarray(y, dtype=float))
    with pytest.raises(AssertionError) as failure:
        check("a00-square-backward", lambda x, grad: x * grad)
    message = str(failure.value)
    assert message == "a00-square-backward: off by a factor of 2: d(x^2)/dx is 2x"
    assert failure.value.__cause__ is None and failure.value.__suppress_context__


def test_student_exceptions_are_named_with_the_students_line():
    def add(x, y):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="a00-add: not implemented yet"):
        check("a00-add", add)

    def add(x, y):
        return x + y + undefined_name  # noqa: F821

    with pytest.raises(AssertionError) as failure:
        check("a00-add", add)
    assert "your code raised NameError: name 'undefined_name' is not defined (in add, line" in str(failure.value)
    assert "exercises" not in str(failure.value)  # nothing about the checker's own code


def test_unknown_exercise_is_a_course_error_not_a_student_error():
    with pytest.raises(LookupError, match="no exercise 'a00-nope' is registered"):
        check("a00-nope", None)


def test_inputs_are_seeded_by_the_exercise_id():
    seen = []

    @exercise("t99-seeded")
    def run(obj, rng):
        seen.append(rng.normal(size=3))

    check("t99-seeded", None)
    check("t99-seeded", None)
    assert np.array_equal(seen[0], seen[1])
    assert harness.seed("t99-seeded") != harness.seed("t99-other")


def test_an_id_registered_twice_is_refused():
    @exercise("t99-twice")
    def first(obj, rng):
        pass

    with pytest.raises(ValueError, match="registered twice"):
        @exercise("t99-twice")
        def second(obj, rng):
            raise GradingFailure("never")
