"""The registry of hidden checks: one ``run(answer, rng)`` per exercise id, found by assignment prefix.

A registry module holds the checks of one assignment, each declared with
:func:`autograder.spec.graded` (the one way to declare a check)::

    # autograder/exercises/a02_broadcasting.py
    from autograder.judge.registry import GradingFailure
    from autograder.spec import graded

    @graded("a02-mul", "solutions.ops.elementwise:Mul", regions=("backward",), points=2)
    def check_mul(Mul, rng):
        ...                      # drive the student's Mul (a proxy: it runs in the sandbox)
        raise GradingFailure("the gradient of x has the shape of the output, not of x: "
                             "sum it back over the broadcast axes (unbroadcast)")

The trusted judge (:mod:`autograder.judge.judge`) calls ``run(answer, rng)`` with a proxy of the
student's answer and a generator seeded by the exercise id (a rerun sees the same inputs); a
GradingFailure's message is the student's feedback. Messages say what kind of mistake was made,
never the hidden inputs or the expected values. The hidden test cell of a notebook only names
the exercise (``check("a02-mul", Mul)``); it is never executed.

Where checks are looked up: for an id ``aNN-...`` the registry imports the modules ``aNN_*.py``
from each directory in ``$AUTOGRADER_EXERCISES`` (``os.pathsep``-separated; tests use it for a
toy registry), then from ``autograder/exercises/``. An id that is registered twice is an error.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE_EXERCISES = Path(__file__).resolve().parents[1] / "exercises"


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
    assert spec is not None and spec.loader is not None, path
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
