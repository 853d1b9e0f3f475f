"""Other exercises' references in the sandbox (issue 19, item 2): sealed, stubbed or scrubbed.

When an exercise of assignment A is judged, the sandbox holds the reference code of the earlier
assignments only: the other exercises of A are sealed (the judge runs them, see
autograder/judge/sealed.py), those of later assignments are stubs. Each case is the source
notebook of an assignment (its solution regions are the reference answers) with one answer cell
replaced by what a hostile or careless student could write, judged as `autograder grade` does.
"""
from __future__ import annotations

import base64
import dis
import functools
import json
import re

import numpy as np
import pytest

from autograder import kit
from autograder.commands.release import signature
from autograder.course import catalogue
from autograder.judge import scrub
from autograder.judge.bubblewrap import Sandbox
from autograder.judge.sealed import Oracle, OracleError

from support import REPO, judging

SOURCE = REPO / "assignments" / "source"
SANDBOX = Sandbox()


@functools.cache
def notebook(assignment: str) -> dict:
    (path,) = sorted((SOURCE / assignment).glob("*.ipynb"))
    return json.loads(path.read_text())


def verdict(exercise_id: str, answers: dict[str, str] | None = None):
    """The verdict on ``exercise_id`` for the source notebook with the cells of ``answers``
    ({grade_id: new source}) replaced."""
    result = judging.verdict(exercise_id, answers=answers, budget=120)
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
    assert not result.passed, result
    assert ("conv2d_backward_derived, an exercise of a later assignment (a04 · The convolution's backward pass, "
            "derived)") in result.message, result


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


# --------------------------------------------------------------------------------------------
# No exercise is served by another exercise's reference, whatever the student did of that other
# exercise (issue 29, section 5; issue 37: a blank and a wrong answer are alike)
# --------------------------------------------------------------------------------------------
def not_done(signature: str) -> str:
    """An answer cell as nbgrader releases it."""
    return f"{signature}\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"


SOFTMAX_BACKWARD_BY = '''
from coursekit.engine import grad as gradient, set_grad_enabled
from coursekit.engine.ops.attention import attention_backward, scaled_dot_product_attention

class MaskedSoftmax(Function):
    def __init__(self, mask):
        self.mask = mask

    def forward(self, x):
        return masked_softmax_array(x, self.mask)

    def backward(self, grad):
        {body}
'''
# attention_backward with P = s, V = K = I and scale 1: its dQ is the softmax's VJP, s * (g - <g, s>)
BY_ATTENTION_BACKWARD = SOFTMAX_BACKWARD_BY.format(body="""s = self.output
        eye = Tensor(np.broadcast_to(np.eye(s.shape[-1], dtype=s.dtype), s.shape[:-2] + (s.shape[-1],) * 2).copy())
        q = Tensor(np.zeros(s.shape, dtype=s.dtype))
        return attention_backward(grad, q, eye, eye, s, 1.0, (True, False, False))[0]""")
# the gradient of attention with K = V = I: the judge's attention runs attention_backward
BY_ATTENTION_GRADIENT = SOFTMAX_BACKWARD_BY.format(body="""(x,) = self.inputs
        eye = Tensor(np.eye(x.shape[-1], dtype=x.dtype))
        with set_grad_enabled(True):
            mask = None if self.mask is None else np.broadcast_to(self.mask, x.shape).copy()
            out = scaled_dot_product_attention(x, eye, eye, attn_mask=mask, scale=1.0)
            return gradient(out, [x], grad, create_graph=True)[0]""")
ATTENTION_BACKWARD = "def attention_backward(grad, q, k, v, p, scale, needs=(True, True, True)):"
# the softmax's VJP is log-softmax's with the upstream gradient g * s
SOFTMAX_BY_LOG_SOFTMAX = '''from coursekit.engine.ops.activation import LogSoftmax

class Softmax(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        e = np.exp(x - np.max(x, axis=self.axis, keepdims=True))
        return e / np.sum(e, axis=self.axis, keepdims=True)

    def backward(self, grad):
        (x,) = self.inputs
        fn = LogSoftmax(self.axis)
        fn.inputs, fn.needs_input_grad = (x,), (True,)
        fn.forward(x.data)
        return fn.backward(grad * self.output)
'''
# a sealed sibling whose reference calls the exercise: Add's backward sums back with unbroadcast
UNBROADCAST_BY_ADD = '''from coursekit.engine import grad as gradient

def unbroadcast(grad, shape):
    x = Tensor(np.zeros(shape, grad.data.dtype), requires_grad=True)
    out = x + Tensor(np.zeros(grad.shape, grad.data.dtype))
    return gradient(out, [x], grad, create_graph=True)[0]
'''
BACKWARD = "class {name}(Function):\n    def backward(self, grad):"
WRONG_ATTENTION_BACKWARD = f"{ATTENTION_BACKWARD}\n    return None, None, None\n"
SIBLING = {  # the sibling an answer leans on: as released, answered wrongly, answered rightly (None)
    "blank": lambda signature: not_done(signature),
    "wrong": lambda signature: f"{signature}\n    return None\n",
    "right": lambda signature: None,
}


@pytest.mark.parametrize("sibling", SIBLING)
@pytest.mark.parametrize("judged,answer,other,signature,expected", [
    ("a07-softmax-backward", BY_ATTENTION_BACKWARD, "a07-attention-backward", ATTENTION_BACKWARD,
     "your code calls attention_backward, which is not run while"),
    ("a07-softmax-backward", BY_ATTENTION_GRADIENT, "a07-attention-backward", ATTENTION_BACKWARD,
     "your code calls attention_backward, which is not run while"),
    ("a02-softmax", SOFTMAX_BY_LOG_SOFTMAX, "a02-log-softmax", BACKWARD.format(name="LogSoftmax"),
     "your code calls LogSoftmax, which is not run while"),
    ("a02-unbroadcast", UNBROADCAST_BY_ADD, "a02-add", BACKWARD.format(name="Add"),
     "Add calls unbroadcast itself, so the grader does not run it while unbroadcast is checked"),
], ids=["a07-called-from-the-kit", "a07-second-order-through-a-sealed-op", "a02-softmax-by-log-softmax",
        "a02-unbroadcast-by-add"])
def test_no_exercise_is_served_by_another_exercises_reference(judged, answer, other, signature, expected, sibling):
    """`judged` answered by a call of `other`, whose reference would compute its answer (or call the
    judged exercise's reference). Before issue 29 MaskedSoftmax.backward as one call of
    attention_backward earned 2/2; before issue 37, still, when attention_backward was answered."""
    result = verdict(judged, {judged: answer, other: SIBLING[sibling](signature)})
    assert not result.passed, f"{judged} passed, served by the course's {other}"
    assert expected in result.message, result.message
    assert "not done" not in result.message, result.message


@pytest.mark.parametrize("judged,missing,stub", [
    ("a02-mul", "a02-unbroadcast", "def unbroadcast(grad, shape):"),
    ("a03-conv2d", "a03-im2col", "def im2col(x, kernel_size, stride=1, padding=0, dilation=1):"),
    ("a07-attention", "a07-attention-backward", ATTENTION_BACKWARD),
])
def test_a_sibling_left_blank_or_wrong_costs_the_model_answer_nothing(judged, missing, stub):
    """The reference answer of `judged`, which calls `missing` (or whose check reaches it in the
    engine), with `missing` as released or answered wrongly: its points are its own (issue 37)."""
    for sibling in (not_done(stub), f"{stub}\n    return None\n"):
        result = verdict(judged, {missing: sibling})
        assert result.passed, result


def test_an_answered_exercise_is_the_judges_reference_for_the_others():
    """Isolation stays: the exercise below, answered (wrongly here), is sealed for the one above."""
    assert verdict("a07-attention", {"a07-attention-backward": WRONG_ATTENTION_BACKWARD}).passed


# --------------------------------------------------------------------------------------------
# No form of an earlier assignment's reference comes back in a message (issue 29, section 5)
# --------------------------------------------------------------------------------------------
def _dis_line(code) -> str:
    return " | ".join(line.strip() for line in dis.Bytecode(code).dis().splitlines() if line.strip())


def _specialised(code_owner) -> bytes:
    """The adaptive bytecode of Adam._update after it ran often enough to specialise."""
    import solutions as R
    p = R.Tensor(np.ones(3), requires_grad=True)
    opt = R.optim.Adam([p], lr=0.1)
    for _ in range(64):
        p.grad = R.Tensor(np.ones(3))
        opt.step()
    return code_owner.__code__._co_code_adaptive


def _reformatted(body_lines: tuple[str, ...]) -> str:
    """A decompiler's version of a body: same names, its own spacing, parentheses and line breaks."""
    text = " ; ".join(line.strip() for line in body_lines if line.strip() and not line.strip().startswith("#"))
    return re.sub(r"\s*([=*+/-])\s*", r" \1 (", text)[:400]


def _forms():
    from solutions.optim import Adam
    code = Adam._update.__code__
    (body,) = [b for items in kit.exercise_bodies([catalogue.exercise("a05-adam")]).values() for _, b in items]
    return {
        "disassembly": _dis_line(code),
        "names loaded and stored": " ".join(str(i.argval) for i in dis.get_instructions(code)),
        "co_names and co_varnames": repr(code.co_names) + repr(code.co_varnames),
        "co_code in hex": code.co_code.hex(),
        "co_code as bytes": repr(code.co_code),
        "co_code as numbers": str(list(code.co_code)),
        "co_code in base64": base64.b64encode(code.co_code).decode(),
        "adaptive code in hex": _specialised(Adam._update).hex(),
        "a code object": repr(code),
        "a decompiled body": _reformatted(body.lines),
    }


@pytest.mark.parametrize("form", list(_forms()))
def test_every_form_of_an_earlier_body_is_recognised(form):
    """What a student's code in a07's sandbox can make of a05's Adam._update, in the 200 characters
    a message of theirs shows: each form is recognised as a05's code (and only where a05 is held)."""
    text = _forms()[form][:200]
    assert scrub.quotes(text, "a07"), text
    assert scrub.scrub(f"your code raised ValueError: {text}", "a07-causal-mask") == scrub.NOTICE


@pytest.mark.parametrize("message", [
    "your code raised ValueError: unbroadcast: a gradient of shape (2, 3) cannot be summed back to shape (4,)",
    "x broadcast along a new leading axis, float64: the gradient of x has the output's shape, not x's; did you "
    "sum back over the broadcast axes (unbroadcast)?",
    "your code raised TypeError: unsupported operand type(s) for *: 'NoneType' and 'float' (in backward, line 4)",
    "your code raised ValueError: operands could not be broadcast together with shapes (2,3,4) (2,4,3)",
    "your code raised KeyError: 'exp_avg' (in _update, line 9)",
    "scores (N, L, S) = (2, 5, 5) with a causal (L, S) mask: the outputs of a row are coupled through the "
    "normalization: the VJP is s * (g - <g, s>) along the last axis",
])
def test_an_honest_message_is_shown(message):
    assert not scrub.quotes(message, "~"), message


# What a student's answer in a07 makes of earlier references: the attack and its relatives.
DECOMPILE = '''
import base64, dis
import coursekit.engine.optim as optim
from coursekit.engine.nn import functional as F

def causal_mask(L, S=None):
    code = {target}.__code__
    raise ValueError({form})
'''


@pytest.mark.parametrize("target,form", [
    ("optim.Adam._update", '" | ".join(l.strip() for l in dis.Bytecode(code).dis().splitlines() if l.strip())'),
    ("F.batch_norm", '" ".join(str(i.argval) for i in dis.get_instructions(code))'),
    ("optim.Adam._update", "repr(code.co_names) + repr(code.co_varnames)"),
    ("F.batch_norm", "code.co_code.hex()"),
    ("optim.Adam._update", "base64.b64encode(code.co_code).decode()"),
], ids=["disassembly", "names", "co_names", "hex", "base64"])
def test_a_decompiled_earlier_reference_never_reaches_the_feedback(target, form):
    result = verdict("a07-causal-mask", {"a07-causal-mask": DECOMPILE.format(target=target, form=form)})
    assert not result.passed
    assert result.message == scrub.NOTICE, result.message
