"""The trusted judge: checks run here, answers run in a sandbox, verdicts come from plain data.

These tests drive `autograder.judge.judge.judge` with a check written for it
(tests/fixtures/judge_exercises/t02_judge.py: Mul's backward) and cells a student could write.
"""
from __future__ import annotations

import inspect

import pytest

from autograder import kit
from autograder.course import catalogue
from autograder.judge.bubblewrap import Sandbox
from autograder.judge.judge import code_cells, judge, transform

from support import FIXTURES, judging

FIXTURE = FIXTURES / "judge_exercises"
IMPORTS = ("import numpy as np\nfrom coursekit.engine import Function, Tensor\n"
           "from coursekit.engine.ops.shape import unbroadcast\n")


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_EXERCISES", str(FIXTURE))


def reference_mul_source() -> str:
    import solutions.ops.elementwise as E
    return inspect.getsource(E.Mul)


def verdict(*cells: str, budget: float = 30.0):
    return judging.verdict("t02-mul", [(f"cell {i}", c) for i, c in enumerate([IMPORTS, *cells])], budget=budget)


def test_a_correct_answer_passes_and_a_wrong_one_fails_with_the_checks_message():
    right = verdict(reference_mul_source())
    assert right.passed and right.kind == "right"
    wrong = reference_mul_source().replace("unbroadcast(grad * y, x.shape)", "grad * y")
    result = verdict(wrong)
    assert not result.passed and "unbroadcast" in result.message, result
    # the engine's own shape check raised, at no line of the student's to show: the judge's kind says so
    assert result.kind == "crash", result


def test_isolation_a_buggy_unbroadcast_in_the_notebook_costs_mul_nothing():
    bad = "def unbroadcast(grad, shape):\n    return grad.sum(axis=0)\n"
    assert verdict(bad, reference_mul_source()).passed


@pytest.mark.slow
def test_the_reference_of_the_judged_exercise_is_not_in_the_sandbox():
    """Not importable, not in the kit's sources: no line of Mul.backward's body is sent."""
    for s in catalogue.in_engine():
        secret = {line for _, line in kit.body_lines([s])}
        sources = "\n".join(m[1] for m in kit.kit_modules([s]).values())
        sent = {line.strip() for line in sources.split("\n")}
        assert not (secret & sent), f"{s.id}: the sandbox's kit holds lines of the answer: {secret & sent}"
    stolen = ("import sys\nclass Mul(Function):\n    def forward(self, x, y):\n        return x * y\n"
              "    def backward(self, grad):\n        import solutions.ops.elementwise as E\n"
              "        return E.Mul.backward(self, grad)\n")
    result = verdict(stolen)
    assert not result.passed and "ModuleNotFoundError" in result.message


@pytest.mark.parametrize("attack", [
    "raise SystemExit",
    "import os\nos._exit(0)",
    "import autograder.course.catalogue\nautograder.course.catalogue.graded = lambda *a: None",
    "import builtins\nbuiltins.isinstance = lambda *a: True",
])
def test_attacks_in_a_cell_do_not_pass(attack):
    result = verdict(attack + "\n" if "exit" not in attack else f"def Mul():\n    {attack.replace(chr(10), '; ')}\n")
    assert not result.passed


def test_a_crash_while_judged_is_a_verdict_naming_it():
    crash = reference_mul_source().replace("x, y = self.inputs", "import ctypes; ctypes.string_at(0)")
    result = verdict(crash)
    assert not result.passed and "segmentation fault" in result.message and result.kind == "sandbox died"


@pytest.mark.slow
def test_an_endless_loop_is_a_verdict_naming_the_time_limit():
    hang = reference_mul_source().replace("x, y = self.inputs", "while True: pass")
    result = verdict(hang, budget=3)
    # the verdict and its message, not the seconds: on a loaded machine the sandbox's clock (what the
    # budget counts) runs behind the wall clock, up to WALL_STRETCH budgets
    assert not result.passed and "time limit" in result.message and "3 s" in result.message, result.message
    assert result.kind == "time-out"


def test_an_answer_that_is_missing_or_whose_cell_fails_says_so():
    missing = verdict("x = 1")
    assert "Mul is not defined" in missing.message and missing.kind == "not answered"
    result = judging.verdict("t02-mul", [("cell 0", IMPORTS), ("t02-mul", "class Mul(Function):\n    oops(\n")],
                             budget=30)
    assert "the cell that defines Mul raised SyntaxError" in result.message and result.kind == "crash"


def test_a_verdicts_kind_agrees_with_whether_it_passed():
    from autograder.judge.verdict import Verdict

    assert Verdict("t02-mul", True).kind == "right"
    for passed, kind in ((False, ""), (False, "right"), (True, "wrong"), (False, "bug")):
        with pytest.raises(ValueError, match="cannot be of kind"):
            Verdict("t02-mul", passed, "a message", kind=kind)


def test_cells_stop_at_the_exercises_hidden_test_and_leave_test_cells_out():
    def cell(source, **nbgrader):
        return {"cell_type": "code", "source": source, "metadata": {"nbgrader": nbgrader} if nbgrader else {}}
    cells = [cell("a = 1"), cell("%matplotlib inline"),
             cell("def f(): ...", grade_id="t02-f", solution=True, grade=False),
             cell("assert f() is None", grade_id="t02-f-visible", grade=True, solution=False),
             cell("check('t02-f', f)", grade_id="t02-f-hidden", grade=True, solution=False),
             cell("b = 2")]
    assert code_cells(cells, "t02-f") == [("cell 1", "a = 1\n"), ("cell 2", transform("%matplotlib inline")),
                                          ("t02-f", "def f(): ...\n")]


@pytest.mark.slow
def test_a_death_or_a_hang_in_a_cell_names_the_cell():
    died = verdict("import os\nos._exit(3)", reference_mul_source())
    assert not died.passed and "exited with code 3" in died.message and "while running your cell cell 1" in died.message
    hung = verdict("while True:\n    pass", reference_mul_source(), budget=3)
    assert not hung.passed and "time limit" in hung.message and "while running your cell cell 1" in hung.message


@pytest.mark.slow
def test_a_cell_that_hung_is_not_run_again_for_the_exercises_below_it():
    from autograder.judge.judge import HungCells

    hung = HungCells()
    cells = [("cell 0", IMPORTS), ("cell 1", "while True:\n    pass"), ("t02-mul", reference_mul_source())]
    first = judge("t02-mul", cells, sandbox=Sandbox(), budget=3, hung=hung)
    assert not first.passed and "while running your cell cell 1" in first.message and first.seconds >= 3

    class Counting(Sandbox):
        """A sandbox that counts the processes started in it: the hung cell must not be run again."""
        started = 0

        def command(self) -> list[str]:
            Counting.started += 1
            return super().command()

    second = judge("t02-unbroadcast", cells[:2], sandbox=Counting(), budget=3, hung=hung)
    assert second.message == first.message and Counting.started == 0
