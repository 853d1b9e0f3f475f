"""Other exercises' references in the sandbox (issue 19, item 2): sealed, stubbed or scrubbed.

When an exercise of assignment A is judged, the sandbox holds the reference code of the earlier
assignments only: the other exercises of A are sealed (the judge runs them, see
autograder/judge/sealed.py), those of later assignments are stubs. Each case is the source
notebook of an assignment (its solution regions are the reference answers) with one answer cell
replaced by what a hostile or careless student could write, judged as `autograder grade` does.
"""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import numpy as np
import pytest

from autograder import kit
from autograder.commands.release import signature
from autograder.judge import catalogue
from autograder.judge.bubblewrap import Sandbox
from autograder.judge.judge import code_cells, judge
from autograder.judge.sealed import Oracle, OracleError

SOURCE = Path(__file__).resolve().parents[1] / "assignments" / "source"
SANDBOX = Sandbox()


@functools.cache
def notebook(assignment: str) -> dict:
    (path,) = sorted((SOURCE / assignment).glob("*.ipynb"))
    return json.loads(path.read_text())


def verdict(exercise_id: str, answers: dict[str, str] | None = None):
    """The verdict on ``exercise_id`` for the source notebook with the cells of ``answers``
    ({grade_id: new source}) replaced."""
    assignment = next(p.name for p in SOURCE.iterdir() if p.name.startswith(exercise_id.split("-", 1)[0] + "_"))
    nb = copy.deepcopy(notebook(assignment))
    for cell in nb["cells"]:
        grade_id = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
        if grade_id in (answers or {}):
            cell["source"] = answers[grade_id]
    result = judge(exercise_id, code_cells(nb["cells"], exercise_id), sandbox=SANDBOX, budget=120)
    assert not result.detail, result.detail
    return result


# An answer that looks for the course's code everywhere a student can reach in the sandbox: every
# live function (gc), and the marshalled modules the kit is imported from (sys.meta_path). Each
# code object of a kit file whose name is an exercise body counts, unless it is a stub (a raise of
# NotImplementedError) or sealed (a call to the judge).
SEARCH = '''
import gc, marshal, sys, types
_STUB_NAMES = {{"NotImplementedError", "__import__", "call", "locals"}}
def _codes():
    for obj in gc.get_objects():
        code = getattr(obj, "__code__", None)
        if isinstance(code, types.CodeType):
            yield code
    for finder in sys.meta_path:
        for entry in list(getattr(finder, "modules", {{}}).values()):
            todo = [marshal.loads(entry[1])]
            while todo:
                code = todo.pop()
                yield code
                todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
_found = {{"earlier": set(), "later": set()}}
for _code in _codes():
    if not _code.co_filename.startswith("coursekit/") or set(_code.co_names) <= _STUB_NAMES:
        continue
    for _where, _names in (("earlier", {earlier!r}), ("later", {later!r})):
        if _code.co_qualname in _names:
            _found[_where].add(_code.co_qualname)
def {name}(*args, **kwargs):
    raise RuntimeError(f"EARLIER {{len(_found['earlier'])}} LATER {{sorted(_found['later'])}}")
'''


def _qualnames(specs) -> set[str]:
    return {body.qualname for items in kit.exercise_bodies(specs).values() for _, body in items}


@pytest.mark.parametrize("exercise_id", ["a03-im2col", "a02-mul"])
def test_no_code_of_the_same_or_a_later_assignment_is_reachable_in_the_sandbox(exercise_id):
    judged = catalogue.exercise(exercise_id)
    specs = catalogue.in_engine()
    earlier = _qualnames([s for s in specs if s.prefix < judged.prefix])
    later = _qualnames([s for s in specs if s.prefix >= judged.prefix]) - earlier
    answer = SEARCH.format(earlier=sorted(earlier), later=sorted(later), name=judged.name)
    if judged.regions:  # a class: the search runs in the cell; the answer raises when called
        answer = answer.replace(f"def {judged.name}(", "def _raise(") + (
            f"from coursekit.engine import Function\nclass {judged.name}(Function):\n"
            "    def forward(self, x, y):\n        return x * y\n"
            "    def backward(self, grad):\n        _raise()\n")
    result = verdict(exercise_id, {exercise_id: answer})
    assert not result.passed
    assert "EARLIER " in result.message, result.message
    found_earlier = int(result.message.split("EARLIER ")[1].split()[0])
    assert found_earlier > 0, "the search found nothing at all: it does not look where the code is"
    assert "LATER []" in result.message, result.message


CONV_BY_A04 = '''
import numpy as np
from coursekit.engine.ops.conv_backward import conv2d_backward_derived

def conv2d_input_grad_array(grad, w, x_shape, stride, padding, dilation, groups):
    return conv2d_backward_derived(np.zeros(x_shape, grad.dtype), w, grad, stride, padding, dilation, groups)[0]

def conv2d_weight_grad_array(x, grad, w_shape, stride, padding, dilation, groups, cols=None):
    return conv2d_backward_derived(x, np.zeros(w_shape, x.dtype), grad, stride, padding, dilation, groups)[1]
'''


@pytest.mark.parametrize("exercise_id", ["a03-conv2d-input-grad", "a03-conv2d-weight-grad"])
def test_a_later_assignments_reference_does_not_answer_an_exercise(exercise_id):
    result = verdict(exercise_id, {exercise_id: CONV_BY_A04})
    assert not result.passed and "NotImplementedError" in result.message + "not implemented", result


def test_a_line_of_an_earlier_assignments_reference_is_scrubbed_from_the_message():
    (unbroadcast,) = [s for s in catalogue.assignment("a02") if s.id == "a02-unbroadcast"]
    line = next(line for _, line in kit.body_lines([unbroadcast]) if signature(line) and '"' not in line)
    answer = f"def im2col(*args, **kwargs):\n    raise ValueError({('look: ' + line)!r})\n"
    result = verdict("a03-im2col", {"a03-im2col": answer})
    assert not result.passed
    assert line not in result.message and "is not shown" in result.message, result.message


def test_isolation_a_wrong_unbroadcast_costs_mul_and_div_nothing():
    wrong = "def unbroadcast(grad, shape):\n    return grad.sum(axis=0)\n"
    assert not verdict("a02-unbroadcast", {"a02-unbroadcast": wrong}).passed
    for exercise_id in ("a02-mul", "a02-div", "a02-log-softmax"):  # second-order cases run on sealed nodes
        result = verdict(exercise_id, {"a02-unbroadcast": wrong})
        assert result.passed, result


def test_isolation_a_wrong_im2col_costs_conv2d_nothing():
    wrong = ("import numpy as np\ndef im2col(x, kernel_size, stride=1, padding=0, dilation=1):\n"
             "    return np.zeros((1, 1))\n")
    assert not verdict("a03-im2col", {"a03-im2col": wrong}).passed
    assert verdict("a03-conv2d", {"a03-im2col": wrong}).passed


def test_the_oracle_answers_for_its_sealed_exercises_only():
    specs = {s.id: s for s in catalogue.assignment("a03")}
    oracle = Oracle([specs["a03-windows"]])
    xp = np.arange(16.0).reshape(1, 1, 4, 4)
    args = {"xp": xp, "kernel": (3, 3), "stride": (1, 1), "dilation": (1, 1)}
    got = oracle({"op": "call", "exercise": "a03-windows", "member": "windows", "state": None, "args": args})
    # a function, not a member: no state comes back, and the grad mode is the sandbox's default
    assert got["state"] is None and got["grad_mode"] is True
    assert isinstance(got["value"], np.ndarray) and got["value"].shape[-2:] == (3, 3)
    with pytest.raises(OracleError, match="no such sealed exercise"):
        oracle({"op": "call", "exercise": "a03-im2col", "member": "im2col", "state": None,
                "args": {"x": xp, "kernel_size": 3}})
    with pytest.raises(OracleError, match="out of any exercise's range"):
        oracle({"op": "call", "exercise": "a03-windows", "member": "windows", "state": None,
                "args": {**args, "kernel": (1 << 30, 1)}})
    with pytest.raises(OracleError) as error:  # the reference rejects it, with its own first line
        oracle({"op": "call", "exercise": "a03-windows", "member": "windows", "state": None,
                "args": {**args, "xp": "not an array"}})
    assert "Traceback" not in str(error.value)
