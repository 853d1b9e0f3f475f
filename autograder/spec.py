"""What each exercise is, as data: its reference object in solutions/ and its solution regions.

The registry modules (`autograder/exercises/aNN_*.py`) declare every exercise with
:func:`graded`, which registers the hidden check in the registry (:mod:`autograder.judge.registry`) *and* records a
:class:`Spec`.
The spec is what the other tools read:

- `autograder.sync` copies each spec's bodies from solutions/ into the notebook's solution regions;
- `autograder.kit` stubs the same bodies out of the students' copy of the engine;
- `autograder.judge` builds the sandbox's kit with only the judged exercise stubbed (the others: the reference).

Specs are loaded through the registry (which imports each registry module once, by path), so a
registry module is never executed twice in one process.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from autograder.judge import registry

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Spec:
    """One auto-graded exercise.

    `source` names the reference object, "module:qualname" ("solutions.ops.elementwise:Mul").
    For a function, its body is the one solution region (`regions` empty). For a class, `regions`
    lists the methods whose bodies are solution regions (("backward",) for most ops; a class's
    trivial forward stays given, which keeps the students' engine running).
    `points` is what the hidden test cell is worth.
    """

    id: str
    source: str | None
    regions: tuple[str, ...] = ()
    points: int = 2
    title: str = field(default="", compare=False)
    given_name: str = ""  # the notebook's name for an exercise without a reference in solutions/
    # The capstone kind: judged on the student's whole engine (every exercise of every assignment
    # is the student's, loaded from their earlier submissions), not with the reference around it.
    whole_engine: bool = False
    budget: float | None = None  # seconds for this exercise, when it needs more than the course's default

    @property
    def in_engine(self) -> bool:
        """Whether the reference lives in solutions/ (then the kit stubs it, and sync copies it)."""
        return self.source is not None

    @property
    def reference_source(self) -> str:
        """``source`` of an exercise whose reference is in solutions/ ("solutions.ops:Mul")."""
        if self.source is None:
            raise AttributeError(f"exercise {self.id} has no reference in solutions/")
        return self.source

    @property
    def module(self) -> str:
        return self.reference_source.split(":")[0]

    @property
    def name(self) -> str:
        """The name the notebook defines (and the judge plugs in): "Mul", "unbroadcast"."""
        if self.source is None:
            return self.given_name
        return self.source.split(":")[1].split(".")[-1]

    @property
    def qualname(self) -> str:
        return self.reference_source.split(":")[1]

    @property
    def prefix(self) -> str:
        return self.id.split("-", 1)[0]

    @property
    def defs(self) -> tuple[str, ...]:
        """Qualified names of the defs whose bodies are solution regions."""
        if self.regions:
            return tuple(f"{self.qualname}.{m}" for m in self.regions)
        return (self.qualname,)

    @property
    def path(self) -> Path:
        """The reference source file."""
        module = importlib.import_module(self.module)
        return Path(str(module.__file__))

    def reference(self) -> Any:
        obj: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        return obj


_SPECS: dict[str, Spec] = {}


def graded(exercise_id: str, source: str | None = None, regions: tuple[str, ...] | list[str] = (), points: int = 2,
           title: str = "", name: str = "", whole_engine: bool = False, budget: float | None = None) -> Callable:
    """Decorator for a registry module: `run(answer, rng)` is the hidden check of the exercise.

    ``source`` names the reference in solutions/ ("solutions.ops.elementwise:Mul"); an exercise
    of a course without the kit has none and gives the ``name`` its notebook defines instead.
    """
    if (source is None) == (not name):
        raise ValueError(f"exercise {exercise_id}: give either source= (a reference in solutions/) or name=")
    spec = Spec(exercise_id, source, tuple(regions), points, title, name, whole_engine, budget)

    def decorate(run: Callable) -> Callable:
        if exercise_id in _SPECS:
            if _SPECS[exercise_id] != spec:
                raise ValueError(f"exercise {exercise_id} is declared twice with different specs")
            return run  # the registry module was imported a second time (by name): keep the first
        _SPECS[exercise_id] = spec
        registry.register(registry.Exercise(id=exercise_id, run=run))
        return run

    return decorate


def prefixes() -> list[str]:
    """Assignment prefixes ("a01", ...) that have a registry module in the package."""
    return sorted({p.name.split("_", 1)[0] for p in registry.PACKAGE_EXERCISES.glob("a[0-9][0-9]_*.py")})


def load(assignment: str) -> list[Spec]:
    """The specs of one assignment ("a02_broadcasting", "a02" or an exercise id "a02-mul")."""
    prefix = re.split(r"[_-]", assignment, maxsplit=1)[0]
    try:
        registry.find(f"{prefix}-")  # imports every registry module aNN_*.py of the prefix, once
    except LookupError:
        pass
    return [s for s in _SPECS.values() if s.prefix == prefix]


def load_all() -> list[Spec]:
    """Every spec of every assignment of the package whose reference is in solutions/."""
    return [s for p in prefixes() for s in load(p) if s.in_engine]


def by_id(exercise_id: str) -> Spec:
    for s in load(exercise_id):
        if s.id == exercise_id:
            return s
    raise LookupError(f"no exercise spec {exercise_id!r}")
