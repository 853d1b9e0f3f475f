"""The grading API that hidden test cells call: ``check(exercise_id, obj)``.

A hidden test cell holds no test logic of its own::

    ### BEGIN HIDDEN TESTS
    from autograder.harness import check
    check("a02-mul-backward", Mul)
    ### END HIDDEN TESTS

The logic lives in a registry of exercises, one module per assignment::

    # autograder/exercises/a02_broadcasting.py
    from autograder.harness import GradingFailure, exercise

    @exercise("a02-mul-backward")
    def mul_backward(Mul, rng):
        ...                      # call the student's Mul on inputs drawn from rng
        raise GradingFailure("the gradient of x has the shape of the output, not of x: "
                             "sum it back over the broadcast axes (unbroadcast)")

``check`` finds the exercise, calls ``run(obj, rng)`` with a generator seeded by the exercise id
(so a rerun sees the same inputs) and turns a failure into an ``AssertionError`` whose message is
the student's feedback. Messages say what kind of mistake was made, never the hidden inputs or the
expected values.

Where exercises are looked up: for an id ``aNN-...`` the harness imports the modules ``aNN_*.py``
from each directory in ``$AUTOGRADER_EXERCISES`` (``os.pathsep``-separated; tests use it for a
toy registry), then from ``autograder/exercises/``. An id that is registered twice is an error.

Keep ``run`` to the object it is given (call it, inspect its results), never the notebook's
globals: then a later version can move the check out of the student's kernel (send ``obj``'s
source to a separate grading process) without touching any notebook cell. Today the check runs
inside the student's kernel, so a student who monkeypatches this module can defeat it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE_EXERCISES = Path(__file__).resolve().parent / "exercises"


class GradingFailure(Exception):
    """Raised by an exercise's run: the message is shown to the student as feedback."""


@dataclass(frozen=True)
class Exercise:
    id: str
    run: Callable[[Any, np.random.Generator], None]


_REGISTRY: dict[str, Exercise] = {}
_IMPORTED: set[Path] = set()


def register(ex: Exercise) -> Exercise:
    if ex.id in _REGISTRY and _REGISTRY[ex.id].run is not ex.run:
        raise ValueError(f"exercise '{ex.id}' is registered twice "
                         f"({_REGISTRY[ex.id].run.__module__} and {ex.run.__module__})")
    _REGISTRY[ex.id] = ex
    return ex


def exercise(exercise_id: str) -> Callable:
    """Decorator: register ``run(obj, rng)`` as the hidden check of ``exercise_id``."""
    def decorate(run: Callable) -> Callable:
        register(Exercise(exercise_id, run))
        return run
    return decorate


def search_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("AUTOGRADER_EXERCISES", "").split(os.pathsep) if p]
    return [*extra, PACKAGE_EXERCISES]


def _import(path: Path) -> None:
    path = path.resolve()
    if path in _IMPORTED:
        return
    _IMPORTED.add(path)
    name = f"autograder_exercises_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def find(exercise_id: str) -> Exercise:
    if exercise_id not in _REGISTRY:
        prefix = exercise_id.split("-", 1)[0]
        for directory in search_path():
            for path in sorted(directory.glob(f"{prefix}_*.py")):
                _import(path)
    if exercise_id not in _REGISTRY:
        searched = ", ".join(str(d) for d in search_path())
        raise LookupError(f"no exercise '{exercise_id}' is registered (searched {searched}); "
                          "this is a problem with the course, not with your code")
    return _REGISTRY[exercise_id]


def seed(exercise_id: str) -> int:
    """A seed that depends on the exercise id only (not on Python's per-process str hash)."""
    return int.from_bytes(hashlib.sha256(exercise_id.encode()).digest()[:8], "little")


def _where(error: BaseException) -> str:
    """The innermost frame of the student's code in a traceback, as ' (in add, line 4)'."""
    checker_dirs = [Path(__file__).resolve().parent, *(d.resolve() for d in search_path())]

    def is_student(filename: str) -> bool:
        path = Path(filename).resolve()
        return not any(path.is_relative_to(d) for d in checker_dirs) \
            and "site-packages" not in filename and not filename.startswith("<frozen")

    frames = [f for f in traceback.extract_tb(error.__traceback__) if is_student(f.filename)]
    return f" (in {frames[-1].name}, line {frames[-1].lineno})" if frames else ""


def check(exercise_id: str, obj: Any) -> None:
    """Run the hidden check of ``exercise_id`` on the student's ``obj``; AssertionError = feedback."""
    ex = find(exercise_id)
    rng = np.random.default_rng(seed(exercise_id))
    try:
        ex.run(obj, rng)
    except GradingFailure as failure:
        message = str(failure)
    except NotImplementedError:
        message = "not implemented yet (the function still raises NotImplementedError)"
    except Exception as error:  # the student's code raised: name it, hide the checker's frames
        message = f"your code raised {type(error).__name__}: {error}{_where(error)}"
    else:
        return
    # `from None`: the traceback shown to the student stops here and does not reveal the checker.
    raise AssertionError(f"{exercise_id}: {message}") from None
