"""Building blocks of the hidden checks: run untrusted student code, compare, explain.

Rules every check follows:

- the student's object runs first; the reference result of a case is computed only after the
  student's call returned (within one process this is best effort: a determined student can
  still inspect the grader's frames);
- a failure message names the *kind* of mistake and the *pattern* of the case (which input is
  broadcast, which dtype), never the hidden inputs or the expected values;
- whatever the student's code returns (None, an ndarray, nan, a wrong shape) becomes a
  GradingFailure with a clear message, never a crash of the grader.
"""
from __future__ import annotations

import contextlib
import io
import signal
import sysconfig
import threading
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from autograder.harness import GradingFailure
from autograder.isolation import isolate, override_everywhere
from autograder.spec import Spec, load, load_all as _all_specs

_GRADER_DIRS = [Path(__file__).resolve().parent]


# --------------------------------------------------------------------------------------------
# Running untrusted code
# --------------------------------------------------------------------------------------------
class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that a student's `except Exception` cannot eat it."""


@contextlib.contextmanager
def time_limit(seconds: float, message: str) -> Iterator[None]:
    """Turn a run longer than `seconds` into GradingFailure(message) (main thread, POSIX only)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def alarm(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Timeout:
        raise GradingFailure(message) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Student code runs without printing (a print in backward would flood the test cell, and
    anything on stderr fails an nbgrader test cell) and without NumPy warnings."""
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


def _where(error: BaseException) -> str:
    """' (in backward, line 7)': the innermost frame outside the grader, the engine and libraries."""
    def foreign(filename: str) -> bool:
        path = Path(filename)
        if "site-packages" in filename or filename.startswith("<frozen"):
            return False
        if path.is_absolute() and path.resolve().is_relative_to(_STDLIB):
            return False
        try:
            path = path.resolve()
        except OSError:
            return True
        import solutions
        engine = Path(solutions.__file__).resolve().parent
        return not any(path.is_relative_to(d) for d in [*_GRADER_DIRS, engine])

    frames = [f for f in traceback.extract_tb(error.__traceback__) if foreign(f.filename)]
    return f" (in {frames[-1].name}, line {frames[-1].lineno})" if frames else ""


def _first_line(error: BaseException, limit: int = 200) -> str:
    text = str(error).strip().split("\n")[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run(what: str, fn: Callable, *args: Any, hint: Callable[[BaseException], str | None] | None = None) -> Any:
    """Call student code. NotImplementedError passes through (the harness says "not implemented
    yet"); any other exception becomes a GradingFailure naming `what` and, when known, the fix."""
    try:
        with quiet():
            return fn(*args)
    except (NotImplementedError, GradingFailure, _Timeout):
        raise
    except RecursionError as error:
        raise GradingFailure(f"{what}: Python's recursion limit was exceeded{_where(error)}; "
                             "use a loop with an explicit stack instead of recursion") from None
    except Exception as error:  # noqa: BLE001 (anything the student's code raises)
        extra = hint(error) if hint else None
        message = f"{what}: your code raised {type(error).__name__}: {_first_line(error)}{_where(error)}"
        raise GradingFailure(message + (f". {extra}" if extra else "")) from None


# --------------------------------------------------------------------------------------------
# The student's object, moved into the reference engine
# --------------------------------------------------------------------------------------------
def _reference_code(f: Any) -> bool:
    """Whether a function's code comes from the reference engine's files."""
    import solutions

    code = getattr(f, "__code__", None)
    if code is None:
        return False
    try:
        return Path(code.co_filename).resolve().is_relative_to(Path(solutions.__file__).resolve().parent)
    except (OSError, ValueError):
        return False


def prepare(obj: Any, exercise_id: str, kind: str) -> Any:
    """Validate the student's object and isolate it (see autograder.isolation).

    `kind` is "class" or "function". The code of every solution region must be the student's own:
    the grading machine has the reference engine installed, and importing it from there (or
    inheriting a region method from it) would pass every check."""
    spec = next(s for s in load(exercise_id) if s.id == exercise_id)
    if kind == "class" and not isinstance(obj, type):
        raise GradingFailure(f"expected the class {spec.name}, got {type(obj).__name__}; "
                             f"run the cell that defines `class {spec.name}` first")
    if kind == "function" and (isinstance(obj, type) or not callable(obj)):
        raise GradingFailure(f"expected the function {spec.name}, got {type(obj).__name__}")
    if kind == "class":
        for method in spec.regions:
            if not isinstance(obj.__dict__.get(method), type(prepare)):
                raise GradingFailure(f"your class {spec.name} does not define {method} itself; "
                                     f"write {spec.name}.{method} in the exercise cell")
        regions = [obj.__dict__[m] for m in spec.regions]
    else:
        regions = [obj]
    if any(_reference_code(f) for f in regions):
        raise GradingFailure(f"{spec.name} must be your own code, defined in the notebook")
    others = {s.name: s.reference() for s in load(exercise_id) if s.id != exercise_id}
    return isolate(obj, spec.name, others)


def spec_of(exercise_id: str) -> Spec:
    return next(s for s in load(exercise_id) if s.id == exercise_id)


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
    rows, float32"), never the values. `call(*tensors)` applies the op through the engine's
    lowercase function (`solutions.ops.mul`), so an override of the class takes effect."""

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


def _tensor(a: np.ndarray, requires_grad: bool):
    from solutions import Tensor
    return Tensor(np.array(a, copy=True), requires_grad=requires_grad)


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
    from solutions import Tensor
    if g is None:
        raise GradingFailure(f"{label}: {op}.backward returned None for {name}, which needs a gradient")
    if isinstance(g, np.ndarray):
        raise GradingFailure(f"{label}: {op}.backward returned a NumPy array for {name}; return a Tensor "
                             "built with Tensor operations (so that gradients of gradients work)")
    if not isinstance(g, Tensor):
        raise GradingFailure(f"{label}: {op}.backward returned {type(g).__name__} for {name}; return a Tensor")
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
    """Run every case through the student's op `cls` (already isolated) inside the reference engine.

    Forward values, backward gradients (shape, type, finiteness, values) and, for cases with
    `second_order`, gradients of gradients (create_graph=True) are compared with the reference.
    """
    with time_limit(OP_TIME_LIMIT, f"{name}: the checks took more than {OP_TIME_LIMIT:g} s on small tensors; "
                                   "is there an endless loop in your code?"):
        _check_op(cls, name, cases, rng, hint, shape_hint, forward_hint, forward_given, exception_hint)


OP_TIME_LIMIT = 30.0


def _check_op(cls, name, cases, rng, hint, shape_hint, forward_hint, forward_given, exception_hint) -> None:
    from solutions import Tensor, set_grad_enabled

    original = next(s.reference() for s in _all_specs() if s.name == name)

    def override(**named):
        ((key, value),) = named.items()
        return override_everywhere(key, value, original)

    for case in cases:
        needs = case.needs_grad or (True,) * len(case.inputs)
        xs = [_tensor(a, r) for a, r in zip(case.inputs, needs)]
        with override(**{name: cls}):
            out = run(f"{case.label}: {name}.forward", case.call, *xs, hint=exception_hint)
        if not isinstance(out, Tensor):
            raise GradingFailure(f"{case.label}: {name}.apply returned {type(out).__name__}, not a Tensor")
        data = out.data
        if data.dtype == object:
            raise GradingFailure(f"{case.label}: {name}.forward must return a NumPy array "
                                 "(it receives arrays, not Tensors)")
        ref_xs = [_tensor(a, r) for a, r in zip(case.inputs, needs)]
        ref_out = case.call(*ref_xs)
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
        with override(**{name: cls}), set_grad_enabled(False):
            result = run(f"{case.label}: {name}.backward", fn.backward, _tensor(g, False), hint=exception_hint)
        result = _as_tuple(result, len(xs), name)
        with set_grad_enabled(False):
            want = _as_tuple(ref_out.grad_fn.backward(_tensor(g, False)), len(xs), name)
        want_arrays = [None if w is None else np.array(w.data, dtype=np.float64) for w in want]
        ctx = Context(case, [np.array(a, dtype=np.float64) for a in case.inputs], np.array(g, dtype=np.float64),
                      np.array(ref_out.data, dtype=np.float64), [None] * len(xs), want_arrays, dtype=dtype)
        for i, (x, r) in enumerate(zip(case.inputs, result)):
            if not needs[i]:
                continue
            ctx.index = i
            special = shape_hint(ctx, np.shape(getattr(r, "data", None))) if shape_hint else None
            if isinstance(r, Tensor) and np.shape(r.data) != x.shape and special:
                raise GradingFailure(f"{case.label}: {special}")
            ctx.got[i] = _check_gradient(name, case.label, case.names[i], r, x.shape, ref_out.shape)
        for i in range(len(xs)):
            if not needs[i] or close(ctx.got[i], want_arrays[i], dtype):
                continue
            ctx.index = i
            message = hint(ctx) if hint else None
            raise GradingFailure(f"{case.label}: " + (message or f"the gradient of {case.names[i]} has wrong values"))

        if case.second_order:
            _check_second_order(cls, name, case, g, needs, override)


def _check_second_order(cls: Any, name: str, case: Case, g: np.ndarray, needs: tuple, override) -> None:
    """Gradients of gradients: the backward must be built from Tensor operations on graph tensors."""
    from solutions import Tensor, grad

    def second(student: bool) -> list[np.ndarray]:
        xs = [_tensor(a, r) for a, r in zip(case.inputs, needs)]
        gt = _tensor(g, True)
        leaves = [x for x in xs if x.requires_grad]
        out = case.call(*xs)
        firsts = grad(out, leaves, gt, create_graph=True)
        total = None
        for f in firsts:
            v = np.random.default_rng(7).standard_normal(f.shape).astype(f.dtype)
            term = (f * Tensor(v)).sum()
            total = term if total is None else total + term
        wanted = leaves + [gt]
        if not total.requires_grad:
            return [np.zeros(w.shape) for w in wanted]
        seconds = grad(total, wanted, allow_unused=True)
        return [np.zeros(w.shape) if s is None else np.array(s.data, dtype=np.float64) for s, w in zip(seconds, wanted)]

    with override(**{name: cls}):
        got = run(f"{case.label} with create_graph=True: {name}.backward", second, True)
    want = second(False)
    for k, (a, b) in enumerate(zip(got, want)):
        if not close(a, b, case.inputs[0].dtype):
            raise GradingFailure(
                f"{case.label}: gradients of your gradients (create_graph=True) are wrong: build the "
                "gradient from Tensor operations on tensors of the graph (grad, self.inputs, self.output), "
                "not from .data arrays or new Tensors, so that it can itself be differentiated")
