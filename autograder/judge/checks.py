"""Building blocks of the hidden checks: drive the student's answer in the sandbox, compare, explain.

A check runs in the trusted judge (:mod:`autograder.judge.judge`); the answer it is given is a
proxy of the student's object, which lives in a sandbox whose engine is the course kit with
the *other* exercises the reference's (sealed, for those of the same assignment: the judge
computes them, see :mod:`autograder.judge.sealed`). ``student_engine()`` is that engine
(``S``); the reference engine is ``solutions`` (``R``), here. A check builds the student's inputs with ``S``, calls the
answer, pulls plain results back (arrays, numbers) and compares them with what ``R`` computes.

Rules every check follows:

- the student's side and the reference side never mix: ``S`` tensors go to the answer,
  ``R`` tensors to the reference; only arrays and numbers cross;
- a failure message names the *kind* of mistake and the *pattern* of the case (which input is
  broadcast, which dtype), never the hidden inputs or the expected values;
- whatever the student's code returns (None, an ndarray, nan, a wrong shape) becomes a
  GradingFailure with a clear message, never a crash of the judge.
"""
from __future__ import annotations

import contextlib
import copy
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

# A catalogue module imports what it needs from here alone, these re-exports included: declaring
# (graded), reaching the sandbox (current, student_module, Proxy) and its own spec (judged); failing
# (GradingFailure) is the judge's own, defined below.
from autograder.course.catalogue import Spec as Spec
from autograder.course.catalogue import graded as graded
from autograder.judge.context import current as current
from autograder.judge.context import judged as judged
from autograder.judge.context import student_module as student_module
from autograder.judge.proxy import Proxy as Proxy
from autograder.judge.proxy import StudentError as StudentError
from autograder.judge.session import SandboxTimeout as SandboxTimeout
from autograder.judge.verdict import CRASH, WRONG


class GradingFailure(Exception):
    """Raised by a check: the message is shown to the student as feedback, and ``kind`` is the
    verdict's (:mod:`autograder.judge.verdict`): a diagnosis of a wrong answer unless said otherwise."""

    def __init__(self, message: str, kind: str = WRONG) -> None:
        super().__init__(message)
        self.kind = kind


def raised(error: StudentError) -> str:
    """The kind of a verdict on an answer that raised: wrong when the message can quote the line of
    the student's that raised (a bug of that code), a crash when there is none to show."""
    return WRONG if error.where else CRASH


def student_engine():
    """The sandbox's engine (the kit's ``coursekit.engine``), where the student's answer is plugged in."""
    return student_module("solutions")


def reference_engine():
    import solutions
    return solutions


# --------------------------------------------------------------------------------------------
# Running the student's code
# --------------------------------------------------------------------------------------------
def first_line(error: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message, cut at ``limit`` characters (what feedback shows)."""
    text = str(error).strip().split("\n")[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run(what: str, fn: Callable, *args: Any, hint: Callable[[BaseException], str | None] | None = None) -> Any:
    """Call student code. NotImplementedError passes through (the judge says "not implemented
    yet"); any other exception of the student's becomes a GradingFailure naming `what` and, when
    known, the fix. A sandbox failure (time, death) passes through: the judge reports it."""
    try:
        return fn(*args)
    except (NotImplementedError, GradingFailure):
        raise
    except RecursionError as error:
        where = getattr(error, "where", "")
        raise GradingFailure(f"{what}: Python's recursion limit was exceeded{where}; "
                             "use a loop with an explicit stack instead of recursion") from None
    except StudentError as error:
        extra = hint(error) if hint else None
        message = f"{what}: your code raised {error.remote_type}: {first_line(error, 200)}{error.where}"
        raise GradingFailure(message + (f". {extra}" if extra else ""), raised(error)) from None


def recorded_calls(function: Callable, thunk: Callable[[], Any]) -> list[tuple[tuple, dict, Any]]:
    """The calls of ``function`` (a reference exercise, in solutions/) that ``thunk`` makes here,
    in the reference engine, as [(args, kwargs, result)], arrays and tensors copied.

    Where a sibling's reference calls the exercise being checked (Mul's backward calls
    unbroadcast), the sandbox's sealed sibling cannot call the student's answer and its reference
    must not answer for it (:func:`autograder.judge.judge._engine`): a check runs the sibling here
    instead, and drives the answer with the arguments the sibling passes, which the student's code
    does not choose. Every module global of solutions/ bound to ``function`` is rebound to a
    recorder while ``thunk`` runs (with the teaching kernels, which call it by name)."""
    calls: list[tuple[tuple, dict, Any]] = []

    def recorder(*args: Any, **kwargs: Any) -> Any:
        kept = copy.deepcopy((args, kwargs))
        result = function(*args, **kwargs)
        calls.append((*kept, copy.deepcopy(result)))
        return result

    from solutions.ops.kernels import teaching_kernels
    with teaching_kernels():
        homes = [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "solutions" and m is not None]
        bound = [(m, k) for m in homes for k, v in list(vars(m).items()) if v is function]
        try:
            for m, k in bound:
                setattr(m, k, recorder)
            thunk()
        finally:
            for m, k in bound:
                setattr(m, k, function)
    return calls


def raises(f: Callable, *args: Any, **kwargs: Any) -> BaseException | None:
    """The exception ``f(*args, **kwargs)`` raises, None if it returns: what a check asks of an answer
    that must refuse its input. A student's exception also is its builtin class (``isinstance(error,
    ValueError)``); a sandbox's failure (a BaseException) passes through."""
    try:
        f(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 (the student's code: any exception is an answer here)
        return error
    return None


def value_error_text(f: Callable, *args: Any) -> str | None:
    """The text of the ValueError ``f(*args)`` raises, or None when it raises none."""
    try:
        f(*args)
    except ValueError as error:
        return str(error)
    return None


def names_shape(text: str, shape: tuple) -> bool:
    """Whether an error message names ``shape``, as (2, 3, 5), [2, 3, 5], 2x3x5 or 2 x 3 x 5."""
    return bool(re.search(r"\D" + r"\s*[,x×]\s*".join(str(n) for n in shape) + r"\D", f" {text} "))


def too_slow(name: str, seconds: float, on: str = "small inputs", advice: str = "is there an endless loop?") -> str:
    """The message of a check's :func:`time_limit`: what ran over ``seconds`` on which inputs, and the
    likely cause (each assignment's own, bound once in its catalogue module with ``functools.partial``)."""
    return f"{name}: the checks took more than {seconds:g} s on {on}; {advice}"


def dtype_name(dtype: Any) -> str:
    """A dtype as messages name it: "float32"."""
    return np.dtype(dtype).name


@contextlib.contextmanager
def time_limit(seconds: float, message: str) -> Iterator[None]:
    """Turn a sandbox that runs longer than ``seconds`` within the block into GradingFailure(message).

    The sandbox is killed at the limit (the exercise's check ends there), so a check can name
    the likely cause ("exponential", "endless loop") instead of the judge's generic time-out.
    """
    session = student_engine_session()
    saved = session.deadline
    session.deadline = min(saved, time.monotonic() + seconds)
    try:
        yield
    except SandboxTimeout:
        if session.deadline < saved:
            raise GradingFailure(message) from None
        raise
    finally:
        session.deadline = saved


def kind(obj: Any) -> str:
    """"type", "function", "module" or "object" for a proxy; the Python kind for a local value."""
    if isinstance(obj, Proxy):
        return object.__getattribute__(obj, "_kind")
    return "type" if isinstance(obj, type) else "function" if callable(obj) else "object"


def type_name(obj: Any) -> str:
    """The class name of a value, or of the sandbox object a proxy stands for (never "Proxy")."""
    if isinstance(obj, Proxy):
        return object.__getattribute__(obj, "_type")
    return type(obj).__name__


def in_sandbox(value: Any) -> Any:
    """A copy of `value` (an array, say) that stays in the sandbox: a proxy. The student's code can
    write into it, and ``np.asarray(proxy)`` reads it back; a value passed as it is would be copied
    over for each call, so an in-place change there would never be seen here. None (an optional
    argument left out) stays None."""
    return None if value is None else student_engine_session().request("ref", value)


def student_rng(seed: int) -> Any:
    """``np.random.default_rng(seed)``, made in the sandbox (a Generator does not cross): for an
    answer that takes a generator."""
    return student_engine_session().module("numpy").random.default_rng(seed)


def sandbox_type(obj: Any) -> Any:
    """``type(obj)`` of a value in the sandbox (``sandbox_type([])`` is the sandbox's ``list``):
    calling it makes objects there, e.g. a subclass of a kit class as ``sandbox_type(Base)(name,
    bases, namespace)``, with no code of the judge's."""
    return student_engine_session().request("operator", obj, name="type")


def chain_in_sandbox(step: Any, first: Any, operand: Any, length: int, *, every: bool = True) -> Any:
    """``[first, step(first, operand), step(step(first, operand), operand), ...]``, ``length`` steps,
    built by the sandbox in one request (the nodes come back as proxies; with ``every=False`` only
    the last): built from here, a chain of 10 000 nodes would cost 10 000 requests. ``step`` is a
    sandbox callable (an op of the kit, or ``sandbox_operator("add")`` for the kit's ``+``)."""
    session = student_engine_session()
    tools = session.module("itertools")
    if not every:
        return session.module("functools").reduce(step, tools.repeat(operand, length), first)
    return sandbox_type([])(tools.accumulate(tools.repeat(operand, length), step, initial=first))


def sandbox_operator(name: str) -> Any:
    """The sandbox's ``operator.<name>`` (``operator.add`` is ``+`` on the sandbox's objects)."""
    return getattr(student_engine_session().module("operator"), name)


def identity(obj: Any) -> tuple[str, int]:
    """What `is` compares, across the boundary: two proxies of one sandbox object share it."""
    if isinstance(obj, Proxy):
        return ("sandbox", object.__getattribute__(obj, "_id"))
    return ("here", id(obj))


def same_object(a: Any, b: Any) -> bool:
    """`a is b`, where a and b may be proxies (each request returns a new local stand-in)."""
    return identity(a) == identity(b)


def defines(cls: Any, name: str) -> bool:
    """Whether the student's class defines ``name`` itself (not inherited)."""
    try:
        return bool(student_engine_session().request("operator", cls, name, name="defines"))
    except StudentError:
        return False


def student_engine_session():
    return current()


# --------------------------------------------------------------------------------------------
# The student's object
# --------------------------------------------------------------------------------------------
def prepare(obj: Any, spec: Spec) -> Any:
    """Validate the student's answer (a proxy) before its check sees it: a class that defines its
    solution methods itself, or a function (the spec's kind). The answer is already plugged into
    the sandbox's engine, isolated: the other exercises around it are the reference."""
    got = kind(obj)
    if spec.kind == "class" and got != "type":
        raise GradingFailure(f"expected the class {spec.name}, got {'a function' if got == 'function' else got}; "
                             f"run the cell that defines `class {spec.name}` first")
    if spec.kind == "function" and (got == "type" or got not in ("function", "object")):
        raise GradingFailure(f"expected the function {spec.name}, got a class")
    if spec.kind == "class":
        for method in spec.regions:
            if not defines(obj, method):
                raise GradingFailure(f"your class {spec.name} does not define {method} itself; "
                                     f"write {spec.name}.{method} in the exercise cell")
    return obj


# --------------------------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------------------------
def tolerances(dtype: np.dtype) -> tuple[float, float]:
    return (2e-4, 1e-5) if np.dtype(dtype) == np.float32 else (1e-6, 1e-9)


def close(got: np.ndarray, want: np.ndarray, dtype: Any = np.float64) -> bool:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False
    rtol, atol = tolerances(dtype)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0))) if want.size else 1.0
    return bool(np.allclose(got, want, rtol=rtol, atol=atol * scale, equal_nan=False))


def sum_to(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """NumPy unbroadcast: sum `a` over the axes that broadcasting `shape` up to a.shape added."""
    shape = tuple(shape)
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and a.shape[lead + i] != 1)
    return np.sum(a, axis=axes, keepdims=True).reshape(shape)


# --------------------------------------------------------------------------------------------
# Checking a Function subclass (an op) case by case
# --------------------------------------------------------------------------------------------
@dataclass
class Case:
    """One hidden case. `label` describes the pattern for messages ("y broadcast along the
    rows, float32"), never the values. `call(E, *tensors)` applies the op through engine E's
    lowercase function (`E.ops.mul(x, y)`): E is the student's engine (the answer is plugged in)
    or the reference."""

    label: str
    inputs: list[np.ndarray]
    call: Callable[..., Any]
    names: tuple[str, ...] = ("x", "y")
    needs_grad: tuple[bool, ...] | None = None
    second_order: bool = False
    upstream: np.ndarray | None = None
    params: dict = field(default_factory=dict)  # the op's parameters, for hints (axis, index)


@dataclass
class Context:
    """What a hint function sees after a mismatch (all arrays float64 copies)."""

    case: Case
    inputs: list[np.ndarray]
    g: np.ndarray  # upstream gradient
    out: np.ndarray  # reference output
    got: list[np.ndarray | None]  # the student's gradients
    want: list[np.ndarray | None]  # the reference gradients
    index: int = 0  # the input whose gradient is wrong
    dtype: Any = np.float64
    extra: dict = field(default_factory=dict)

    def matches(self, candidate: np.ndarray, index: int | None = None) -> bool:
        got = self.got[self.index if index is None else index]
        return got is not None and close(got, candidate, self.dtype)

    @property
    def name(self) -> str:
        return self.case.names[self.index]


Hint = Callable[[Context], "str | None"]


def _tensor(a: np.ndarray, requires_grad: bool, engine: Any = None):
    engine = engine if engine is not None else reference_engine()
    return engine.Tensor(np.array(a, copy=True), requires_grad=requires_grad)


def _as_tuple(result: Any, n: int, op: str) -> tuple:
    if result is None:
        raise GradingFailure(f"{op}.backward returned None; return " +
                             (f"one gradient per input, a tuple of {n}" if n > 1 else "the gradient of the input"))
    if isinstance(result, list):
        result = tuple(result)
    if not isinstance(result, tuple):
        result = (result,)
    if len(result) != n:
        raise GradingFailure(f"{op}.backward returned {len(result)} gradient(s) for {n} input(s); "
                             f"return one per input, in order (a tuple of {n})" if n > 1 else
                             f"{op}.backward returned {len(result)} values; return the one gradient")
    return result


def _check_gradient(op: str, label: str, name: str, g: Any, shape: tuple, out_shape: tuple) -> np.ndarray:
    Tensor = student_engine().Tensor
    if g is None:
        raise GradingFailure(f"{label}: {op}.backward returned None for {name}, which needs a gradient")
    if isinstance(g, np.ndarray):
        raise GradingFailure(f"{label}: {op}.backward returned a NumPy array for {name}; return a Tensor "
                             "built with Tensor operations (so that gradients of gradients work)")
    if not isinstance(g, Tensor):
        raise GradingFailure(f"{label}: {op}.backward returned {type_name(g)} for {name}; return a Tensor")
    data = np.asarray(g.data)
    if not np.issubdtype(data.dtype, np.floating):
        raise GradingFailure(f"{label}: the gradient of {name} has dtype {data.dtype}; gradients are floating point")
    if data.shape != shape:
        if data.shape == out_shape:
            raise GradingFailure(f"{label}: the gradient of {name} has the output's shape, not {name}'s; "
                                 "did you sum back over the broadcast axes (unbroadcast)?")
        raise GradingFailure(f"{label}: the gradient of {name} does not have {name}'s shape "
                             "(a gradient always has the shape of its input)")
    if not np.all(np.isfinite(data)):
        raise GradingFailure(f"{label}: the gradient of {name} contains nan or inf for finite inputs")
    return np.array(data, dtype=np.float64)


def check_op(
    cls: Any,
    name: str,
    cases: Sequence[Case],
    rng: np.random.Generator,
    hint: Hint | None = None,
    shape_hint: Callable[[Context, tuple], "str | None"] | None = None,
    forward_hint: Callable[[Case, np.ndarray, np.ndarray], "str | None"] | None = None,
    forward_given: bool = True,
    exception_hint: Callable[[BaseException], "str | None"] | None = None,
) -> None:
    """Run every case through the student's op `cls` (plugged into the sandbox's engine).

    Forward values, backward gradients (shape, type, finiteness, values) and, for cases with
    `second_order`, gradients of gradients (create_graph=True) are compared with the reference.
    """
    S, R = student_engine(), reference_engine()
    for case in cases:
        needs = case.needs_grad or (True,) * len(case.inputs)
        xs = [_tensor(a, r, S) for a, r in zip(case.inputs, needs, strict=False)]
        out = run(f"{case.label}: {name}.forward", case.call, S, *xs, hint=exception_hint)
        if not isinstance(out, S.Tensor):
            raise GradingFailure(f"{case.label}: {name}.apply returned {type_name(out)}, not a Tensor")
        data = out.data
        if not isinstance(data, np.ndarray) or data.dtype == object:
            raise GradingFailure(f"{case.label}: {name}.forward must return a NumPy array "
                                 "(it receives arrays, not Tensors)")
        ref_xs = [_tensor(a, r, R) for a, r in zip(case.inputs, needs, strict=False)]
        ref_out = case.call(R, *ref_xs)
        dtype = ref_out.data.dtype
        if data.shape != ref_out.shape or not close(data, ref_out.data, dtype) or data.dtype != dtype:
            message = forward_hint(case, np.array(data), np.array(ref_out.data)) if forward_hint else None
            if message is None:
                if data.shape != ref_out.shape:
                    message = f"{name}.forward returned the wrong shape"
                elif data.dtype != dtype:
                    message = (f"{name}.forward returned {data.dtype} for {dtype} inputs; "
                               "keep the input's dtype")
                elif not np.all(np.isfinite(data)):
                    message = f"{name}.forward returned nan or inf"
                else:
                    message = f"{name}.forward returned wrong values"
                if forward_given:
                    message += " (the forward is given code: did you change it?)"
            raise GradingFailure(f"{case.label}: {message}")
        fn = out.grad_fn
        if fn is None or not isinstance(fn, cls):
            raise GradingFailure(f"{case.label}: the output was not recorded in the graph by {name}; "
                                 "leave Function.apply and the given forward as they are")

        g = case.upstream if case.upstream is not None else rng.standard_normal(ref_out.shape)
        g = np.asarray(g, dtype=np.float64).astype(dtype)
        with S.set_grad_enabled(False):
            result = run(f"{case.label}: {name}.backward", fn.backward, _tensor(g, False, S), hint=exception_hint)
        result = _as_tuple(result, len(xs), name)
        with R.set_grad_enabled(False):
            want = _as_tuple(ref_out.grad_fn.backward(_tensor(g, False, R)), len(xs), name)
        want_arrays = [None if w is None else np.array(w.data, dtype=np.float64) for w in want]
        ctx = Context(case, [np.array(a, dtype=np.float64) for a in case.inputs], np.array(g, dtype=np.float64),
                      np.array(ref_out.data, dtype=np.float64), [None] * len(xs), want_arrays, dtype=dtype)
        for i, (x, r) in enumerate(zip(case.inputs, result, strict=False)):
            if not needs[i]:
                continue
            ctx.index = i
            special = shape_hint(ctx, np.shape(_data_or_none(r, S))) if shape_hint else None
            if isinstance(r, S.Tensor) and np.shape(r.data) != np.shape(x) and special:
                raise GradingFailure(f"{case.label}: {special}")
            ctx.got[i] = _check_gradient(name, case.label, case.names[i], r, np.shape(x), ref_out.shape)
        for i in range(len(xs)):
            # an input that needs a gradient has one on both sides here (checked just above)
            if not needs[i] or close(ctx.got[i], want_arrays[i], dtype):  # type: ignore[arg-type]
                continue
            ctx.index = i
            message = hint(ctx) if hint else None
            raise GradingFailure(f"{case.label}: " + (message or f"the gradient of {case.names[i]} has wrong values"))

        if case.second_order:
            _check_second_order(name, case, g, needs)


def _data_or_none(r: Any, S: Any) -> Any:
    return r.data if isinstance(r, S.Tensor) else None


def second_order(engine: Any, case: Case, g: np.ndarray, needs: tuple) -> list[np.ndarray]:
    """Gradients of <first gradients, v> with respect to the inputs and the upstream gradient."""
    xs = [_tensor(a, r, engine) for a, r in zip(case.inputs, needs, strict=False)]
    gt = _tensor(g, True, engine)
    leaves = [x for x in xs if x.requires_grad]
    out = case.call(engine, *xs)
    firsts = engine.grad(out, leaves, gt, create_graph=True)
    total: Any = None
    for f in firsts:
        v = np.random.default_rng(7).standard_normal(f.shape).astype(f.dtype)
        term = (f * engine.Tensor(v)).sum()
        total = term if total is None else total + term
    wanted = leaves + [gt]
    if not total.requires_grad:
        return [np.zeros(w.shape) for w in wanted]
    seconds = engine.grad(total, wanted, allow_unused=True)
    return [np.zeros(w.shape) if s is None else np.array(s.data, dtype=np.float64)
            for s, w in zip(seconds, wanted, strict=False)]


def _check_second_order(name: str, case: Case, g: np.ndarray, needs: tuple) -> None:
    """Gradients of gradients: the backward must be built from Tensor operations on graph tensors."""
    got = run(f"{case.label} with create_graph=True: {name}.backward", second_order, student_engine(), case, g, needs)
    want = second_order(reference_engine(), case, g, needs)
    for a, b in zip(got, want, strict=False):
        if not close(a, b, case.inputs[0].dtype):
            raise GradingFailure(
                f"{case.label}: gradients of your gradients (create_graph=True) are wrong: build the "
                "gradient from Tensor operations on tensors of the graph (grad, self.inputs, self.output), "
                "not from .data arrays or new Tensors, so that it can itself be differentiated")
