"""The catalogue of exercises and the judge's verdicts on the toy course's checks."""

import pytest

from autograder.course import catalogue
from autograder.judge.checks import GradingFailure, graded

from support import FIXTURES, judging

FIXTURE = FIXTURES / "toy_course"


@pytest.fixture(autouse=True)
def toy_catalogue(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_EXERCISES", str(FIXTURE / "exercises"))


def verdict(exercise_id: str, source: str):
    return judging.verdict(exercise_id, [("cell 1", "import numpy as np"), (exercise_id, source)], budget=30)


def test_correct_code_passes_and_wrong_code_gets_a_message_without_expected_values():
    assert verdict("a00-add", "def add(x, y):\n    return np.asarray(x, float) + np.asarray(y, float)\n").passed
    result = verdict("a00-square-backward", "def square_backward(x, grad):\n    return x * grad\n")
    assert not result.passed and result.message == "off by a factor of 2: d(x^2)/dx is 2x"


def test_an_in_place_change_made_in_the_sandbox_is_seen():
    result = verdict("a00-add", "def add(x, y):\n    x += y\n    return x\n")
    assert not result.passed and "in place" in result.message


def test_student_exceptions_are_named_with_the_students_line():
    result = verdict("a00-add", "def add(x, y):\n    raise NotImplementedError\n")
    assert result.message.startswith("not done yet: its cell still raises NotImplementedError()")
    result = verdict("a00-add", "def add(x, y):\n    return x + y + undefined_name\n")
    assert result.message == "your code raised NameError: name 'undefined_name' is not defined (in add, line 2)"


def test_unknown_exercise_is_a_course_error_not_a_student_error():
    with pytest.raises(LookupError, match="no exercise 'a00-nope' is registered"):
        verdict("a00-nope", "")


def test_inputs_are_seeded_by_the_exercise_id():
    def seed(exercise_id):
        return catalogue.Spec(exercise_id, None, given_name="f").seed

    assert seed("t99-seeded") == seed("t99-seeded") and seed("t99-seeded") != seed("t99-other")
    wrong = "def square_backward(x, grad):\n    return 3 * x * grad\n"
    messages = {verdict("a00-square-backward", wrong).message for _ in range(2)}
    assert len(messages) == 1


def test_an_id_registered_twice_is_refused():
    @graded("t99-twice", name="f")
    def first(obj, rng):
        pass

    with pytest.raises(ValueError, match="declared twice"):
        @graded("t99-twice", name="g")
        def second(obj, rng):
            raise GradingFailure("never")
