"""The hidden checks, in-process and fast (no nbgrader): they pass the reference, catch every
mutant with the right kind of message, isolate one exercise from the others, and survive garbage.

The end-to-end version (mutants planted in the notebooks and graded by nbgrader) is
`autograder check`, tested by the autograder's own tests.
"""
from __future__ import annotations

import importlib
import inspect
import re
import time

import numpy as np
import pytest

from autograder import spec as spec_module
from autograder.harness import PACKAGE_EXERCISES, check
from autograder.mutants import Mutant, load_mutants
from autograder.regions import locate

# Every assignment with a registry of hidden checks (autograder/exercises/aNN_name.py).
ASSIGNMENTS = sorted(p.stem for p in PACKAGE_EXERCISES.glob("a[0-9][0-9]_*.py"))
SPECS = [s for a in ASSIGNMENTS for s in spec_module.load(a)]
MUTANTS = [(a, m) for a in ASSIGNMENTS for m in load_mutants(a)]


def failure(exercise_id: str, obj) -> str:
    """The student-facing message of a failing check ('' if it passes)."""
    try:
        check(exercise_id, obj)
    except AssertionError as error:
        return str(error)
    return ""


def notebook_namespace(exercise_id: str, mutant: Mutant | None = None) -> tuple[dict, spec_module.Spec]:
    """The reference module of an exercise, optionally with a mutant planted, executed as a
    student's notebook would be: exercise names are defined by this (student) code, everything
    else (Value, Function, helpers: what the kit gives) is the reference object."""
    spec = spec_module.by_id(exercise_id)
    source = spec.path.read_text()
    if mutant is not None:
        lines = source.split("\n")
        hits = []
        for qualname in spec.defs:
            body = locate(source, qualname)
            start = sum(len(line) + 1 for line in lines[: body.start - 1])
            end = start + len("\n".join(lines[body.start - 1: body.end]))
            at = source.find(mutant.find, start, end)
            while at != -1 and at + len(mutant.find) <= end:
                hits.append(at)
                at = source.find(mutant.find, at + 1, end)
        assert len(hits) == 1, f"mutant {mutant.id}: `find` occurs {len(hits)} times in the solution regions " \
                               f"of {mutant.exercise}; it must occur exactly once (did solutions/ change?)"
        source = source[: hits[0]] + mutant.replace + source[hits[0] + len(mutant.find):]
    module = importlib.import_module(spec.module)
    namespace = {"__name__": "student_notebook", "__package__": module.__package__}
    label = f"mutant {mutant.id}" if mutant else "the reference solution"
    exec(compile(source, f"<notebook with {label}>", "exec"), namespace)
    exercise_names = {s.name for s in spec_module.load(exercise_id)}
    for name, value in vars(module).items():
        if name not in exercise_names and not name.startswith("__"):
            namespace[name] = value
    return namespace, spec


def mutated_namespace(mutant: Mutant) -> tuple[dict, spec_module.Spec]:
    return notebook_namespace(mutant.exercise, mutant)


# --------------------------------------------------------------------------------------------
# The reference passes; every mutant is caught with the right message
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_reference_solution_passes(spec):
    namespace, _ = notebook_namespace(spec.id)
    assert failure(spec.id, namespace[spec.name]) == ""


def test_the_reference_itself_is_refused():
    """The grading machine has solutions/ installed: importing the answer from it scores nothing."""
    for exercise_id in ("a02-mul", "a01-backward"):
        spec = spec_module.by_id(exercise_id)
        assert "must be your own code" in failure(exercise_id, spec.reference())
    import solutions.ops.elementwise as E
    inherited = type("Mul", (E.Mul,), {"__module__": "student_notebook"})
    assert "does not define backward itself" in failure("a02-mul", inherited)
    borrowed = type("Mul", (E.Function,), {"forward": E.Mul.forward, "backward": E.Mul.backward})
    assert "must be your own code" in failure("a02-mul", borrowed)


def test_enough_auto_graded_exercises_and_mutants():
    counts = {a: len(spec_module.load(a)) for a in ASSIGNMENTS}
    assert counts["a01_graphs"] >= 6 and counts["a02_broadcasting"] >= 10, counts
    assert sum(counts.values()) >= 39, counts
    per_assignment = {a: len(load_mutants(a)) for a in ASSIGNMENTS}
    assert all(per_assignment.values()), f"an assignment without mutants: {per_assignment}"
    assert len(MUTANTS) >= 50, per_assignment


@pytest.mark.parametrize("assignment,mutant", MUTANTS, ids=[f"{a}:{m.id}" for a, m in MUTANTS])
def test_mutant_is_caught_with_the_kind_of_mistake(assignment, mutant):
    expected = importlib.import_module(f"autograder.mutants.{assignment}").EXPECTED[mutant.id]
    namespace, spec = mutated_namespace(mutant)
    message = failure(mutant.exercise, namespace[spec.name])
    assert message, f"mutant {mutant.id} ({mutant.why}) passes the hidden check of {mutant.exercise}"
    assert message.startswith(f"{mutant.exercise}: ")
    assert expected in message, f"mutant {mutant.id}: the message should name the mistake ({expected!r}): {message}"
    # Student-facing: no hidden values (floats with several digits), no checker internals.
    assert not re.search(r"\d\.\d{3,}", message), message
    assert "autograder/" not in message and "Traceback" not in message


@pytest.mark.parametrize("assignment,mutant", MUTANTS, ids=[f"{a}:{m.id}" for a, m in MUTANTS])
def test_mutant_costs_no_other_exercise(assignment, mutant):
    """Isolation: the other exercises defined in the same (mutated) file still pass, although
    their code refers to the mutated function (`BroadcastTo.backward` calls `unbroadcast`)."""
    namespace, spec = mutated_namespace(mutant)
    others = [s for s in spec_module.load(assignment) if s.id != spec.id and s.path == spec.path]
    for other in others:
        assert failure(other.id, namespace[other.name]) == "", f"mutant {mutant.id} also breaks {other.id}"


# --------------------------------------------------------------------------------------------
# Isolation across files: a buggy unbroadcast in the notebook does not cost Mul its points
# --------------------------------------------------------------------------------------------
def _student_namespace(module_name: str, **names) -> dict:
    module = importlib.import_module(module_name)
    namespace = {k: v for k, v in vars(module).items() if not k.startswith("__")}
    namespace.update(__name__="student_notebook", **names)
    return namespace


def test_mul_is_graded_with_the_reference_unbroadcast():
    bad_unbroadcast = mutated_namespace(next(m for _, m in MUTANTS if m.id == "unbroadcast-axis0-only"))[0]["unbroadcast"]
    import solutions.ops.elementwise as E

    namespace = _student_namespace("solutions.ops.elementwise", unbroadcast=bad_unbroadcast)
    exec(compile(inspect.getsource(E.Mul), "<notebook>", "exec"), namespace)
    student_mul = namespace["Mul"]
    # Run as is (no isolation), the student's Mul is wrong because of their unbroadcast ...
    from solutions import Tensor, override
    x, y = Tensor(np.ones((4, 3)), requires_grad=True), Tensor(np.ones((4, 1)), requires_grad=True)
    with override(Mul=student_mul):
        with pytest.raises(RuntimeError, match="unbroadcast"):
            (x * y).backward(np.ones((4, 3)))
    # ... but its grade only depends on Mul itself.
    assert failure("a02-mul", student_mul) == ""
    assert "only axis 0" in failure("a02-unbroadcast", bad_unbroadcast)


def test_backward_is_graded_with_the_reference_topological_order():
    def topological_order(root):
        return [root]  # wrong: only the root

    namespace = _student_namespace("solutions.scalar", topological_order=topological_order)
    exec(compile(inspect.getsource(importlib.import_module("solutions.scalar").backward), "<notebook>", "exec"),
         namespace)
    assert failure("a01-backward", namespace["backward"]) == ""
    assert failure("a01-topological-order", topological_order) != ""


# --------------------------------------------------------------------------------------------
# Garbage from student code: clear failures, never a crash of the grader
# --------------------------------------------------------------------------------------------
def _op(name: str, backward, base="solutions.ops.elementwise"):
    module = importlib.import_module(base)
    reference = getattr(module, name)
    return type(name, (reference.__mro__[1],), {"forward": reference.forward, "backward": backward,
                                                  "__init__": reference.__init__, "__module__": "student_notebook"})


@pytest.mark.parametrize("returned,expected", [
    (lambda self, grad: None, "returned None"),
    (lambda self, grad: (grad.data, grad.data), "NumPy array"),
    (lambda self, grad: (grad, grad, grad), "3 gradient(s) for 2 input(s)"),
    (lambda self, grad: ("x", "y"), "returned str"),
    (lambda self, grad: (grad * np.nan, grad), "nan or inf"),
    (lambda self, grad: (grad.sum(), grad.sum()), "shape"),
    (lambda self, grad: 1 / 0, "ZeroDivisionError"),
])
def test_garbage_from_an_op_backward(returned, expected):
    message = failure("a02-mul", _op("Mul", returned))
    assert message and expected in message, message


FUNCTIONS = [s for s in SPECS if not s.regions]


@pytest.mark.parametrize("spec", FUNCTIONS, ids=[s.id for s in FUNCTIONS])
def test_garbage_from_any_exercise_function(spec):
    """None, or an exception, from any function exercise: a failure that says so, never a crash of
    the checker reported as the student's (an AttributeError on the None it returned)."""
    namespace = {"__name__": "student_notebook"}
    exec(f"def {spec.name}(*args, **kwargs):\n    return None\n", namespace)
    message = failure(spec.id, namespace[spec.name])
    assert message.startswith(f"{spec.id}: ") and "your code raised" not in message, message
    exec(f"def {spec.name}(*args, **kwargs):\n    raise ValueError('boom')\n", namespace)
    message = failure(spec.id, namespace[spec.name])
    assert "your code raised ValueError: boom" in message and "autograder/" not in message, message


def test_garbage_from_scalar_functions():
    assert "return the new output Value" in failure("a01-add", lambda a, b: None)
    assert "return the new output Value" in failure("a01-exp", lambda a: 3.0)
    assert "return a list" in failure("a01-topological-order", lambda root: {root})
    assert "raised TypeError" in failure("a01-backward", lambda root: len(root))


def test_not_implemented_and_wrong_kind():
    def unbroadcast(grad, shape):
        raise NotImplementedError()

    assert "not implemented yet" in failure("a02-unbroadcast", unbroadcast)
    assert "expected the class Mul" in failure("a02-mul", lambda x, y: x)


def test_an_exponential_topological_order_is_stopped_by_the_time_limit():
    def topological_order(root):  # correct order, but every path is walked: exponential
        order = []

        def visit(node):
            for child in node._children:
                visit(child)
            order.append(node)

        import sys
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 50_000))
        try:
            visit(root)
        finally:
            sys.setrecursionlimit(limit)
        return list(dict.fromkeys(order))

    start = time.perf_counter()
    message = failure("a01-topological-order", topological_order)
    assert "exponential" in message, message
    assert time.perf_counter() - start < 10


def test_the_checks_are_deterministic():
    namespace, spec = mutated_namespace(next(m for _, m in MUTANTS if m.id == "div-wrong-power"))
    assert failure(spec.id, namespace[spec.name]) == failure(spec.id, namespace[spec.name])


def test_an_endless_loop_in_an_op_is_stopped(monkeypatch):
    import autograder.checks
    import solutions.ops.elementwise as E

    def backward(self, grad):
        while True:
            pass

    monkeypatch.setattr(autograder.checks, "OP_TIME_LIMIT", 1.0)
    endless = type("Exp", (E.Function,), {"forward": E.Exp.forward, "backward": backward, "__module__": "nb"})
    assert "endless loop" in failure("a02-exp", endless)
