"""The catalogue of exercises: what each one is and how it is checked, declared once with :func:`graded`.

A catalogue module holds the checks of one assignment (``autograder/exercises/aNN_name.py``, or a
package ``aNN_name/`` whose ``__init__`` imports its parts in the notebook's order, as a05's)::

    from autograder.judge.checks import GradingFailure, graded, student_engine

    @graded("a02-mul", "solutions.ops.elementwise:Mul", regions=("backward",))
    def check_mul(Mul, rng):
        ...                      # drive the student's Mul (a proxy: it runs in the sandbox)
        raise GradingFailure("the gradient of x has the shape of the output, not of x: "
                             "sum it back over the broadcast axes (unbroadcast)")

``@graded`` is the one place an exercise's id, reference, points, budget, kind, the later
assignments its check drives and the kit's diagnoses it is part of are stated; everything else
reads them from its :class:`Spec`:

- the judge (:mod:`autograder.judge.judge`) checks that the answer is of the exercise's kind
  (a class that defines its solution methods itself, or a function), then calls the check with a
  proxy of it and a generator seeded by the id (a rerun sees the same inputs); a check reaches its
  own spec through :func:`autograder.judge.checks.judged`. A GradingFailure's message is the
  student's feedback: it says what kind of mistake was made, never the hidden inputs or values;
- `autograder sync` copies each spec's bodies from solutions/ into the notebook's solution regions;
- `autograder kit` stubs the same bodies out of the students' copy of the engine.

The hidden test cell of a notebook only names the exercise (``check("a02-mul", Mul)``); it is
never executed. Where modules are found: for an id ``aNN-...`` the modules ``aNN_*.py`` of every
folder of ``$AUTOGRADER_EXERCISES`` (``os.pathsep``-separated; tests use it for toy exercises),
then of ``autograder/exercises/``, each imported once per process, by path. An id declared twice
with different specs is an error.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE_EXERCISES = Path(__file__).resolve().parents[1] / "exercises"


Check = Callable[[Any, np.random.Generator], None]


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
    given_title: str = field(default="", compare=False)
    given_name: str = ""  # the notebook's name for an exercise without a reference in solutions/
    # The capstone kind: judged on the student's whole engine (every exercise of every assignment
    # is the student's, loaded from their earlier submissions), not with the reference around it.
    whole_engine: bool = False
    budget: float | None = None  # seconds for this exercise, when it needs more than the course's default
    # Later assignments whose exercises its check drives, sealed in its sandbox rather than stubbed:
    # run_backward is tested on graphs of Tensor ops, whose backward methods are assignment 2's.
    drives: tuple[str, ...] = ()
    # Exercises of its own assignment its check withholds (stubs rather than sealed in its sandbox):
    # those whose reference computes this exercise's answer without calling it (attention_backward
    # holds the softmax's gradient), which an answer could otherwise call to be served by the course.
    withholds: tuple[str, ...] = ()
    # The pieces of the kit's `coursekit.diagnose()` made of this exercise ("x * y (broadcast)"): a
    # piece that fails names the exercises it is made of (the kit's _exercises.py lists them).
    diagnosed_by: tuple[str, ...] = ()
    check: Check | None = field(default=None, compare=False, repr=False)

    @property
    def title(self) -> str:
        """What feedback calls the exercise: the name the notebook defines, unless given."""
        return self.given_title or self.name

    @property
    def kind(self) -> str:
        """"class" (its solution regions are methods) or "function"."""
        return "class" if self.regions else "function"

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

    @property
    def seed(self) -> int:
        """A seed that depends on the id only (not on Python's per-process str hash)."""
        return int.from_bytes(hashlib.sha256(self.id.encode()).digest()[:8], "little")


_CATALOGUE: dict[str, Spec] = {}
_IMPORTED: set[Path] = set()


def graded(exercise_id: str, source: str | None = None, regions: tuple[str, ...] | list[str] = (), points: int = 2,
           title: str = "", name: str = "", whole_engine: bool = False, budget: float | None = None,
           drives: tuple[str, ...] = (), withholds: tuple[str, ...] = (),
           diagnose: tuple[str, ...] = ()) -> Callable[[Check], Check]:
    """Declare the exercise ``exercise_id`` and its check ``run(answer, rng)``.

    ``source`` names the reference in solutions/ ("solutions.ops.elementwise:Mul"); an exercise
    of a course without the kit has none and gives the ``name`` its notebook defines instead.
    ``title`` only where feedback should not call the exercise by that name. ``drives``: later
    assignments ("a02") whose exercises the check drives; ``withholds``: exercises of its assignment
    whose reference would compute its answer (:class:`Spec`); ``diagnose``: the pieces of the kit's
    ``diagnose()`` this exercise is part of (:class:`Spec`).
    """
    if (source is None) == (not name):
        raise ValueError(f"exercise {exercise_id}: give either source= (a reference in solutions/) or name=")

    def decorate(run: Check) -> Check:
        spec = Spec(exercise_id, source, tuple(regions), points, given_title=title, given_name=name,
                    whole_engine=whole_engine, budget=budget, drives=tuple(drives), withholds=tuple(withholds),
                    diagnosed_by=tuple(diagnose),
                    check=run)
        known = _CATALOGUE.get(exercise_id)
        if known is not None:
            if known != spec:
                raise ValueError(f"exercise {exercise_id} is declared twice with different specs "
                                 f"({getattr(known.check, '__module__', '?')} and {run.__module__})")
            return run  # its module was imported a second time (by name): keep the first
        _CATALOGUE[exercise_id] = spec
        return run

    return decorate


def search_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("AUTOGRADER_EXERCISES", "").split(os.pathsep) if p]
    return [*extra, PACKAGE_EXERCISES]


def _import(path: Path) -> None:
    """Import a catalogue module (a file, or a package's folder) once, under a name of its own."""
    path = path.resolve()
    if path in _IMPORTED:
        return
    _IMPORTED.add(path)
    name = f"autograder_exercises_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}_{path.stem}"
    if path.is_dir():  # a package: its __init__ imports its parts, relatively
        module_spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                             submodule_search_locations=[str(path)])
    else:
        module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None, path
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # before it runs: its relative imports look their package up there
    module_spec.loader.exec_module(module)


def modules(directory: Path, prefix: str = "a[0-9][0-9]") -> list[Path]:
    """The catalogue modules in ``directory`` whose assignment matches ``prefix``: one per
    assignment, named after its folder, a file (``a02_broadcasting.py``) or a package
    (``a05_layers/``, its checks split by topic)."""
    found = [p for p in directory.glob(f"{prefix}_*") if not p.name.startswith(".")
             and ((p.is_file() and p.suffix == ".py") or (p / "__init__.py").is_file())]
    return sorted(found, key=lambda p: p.name)


def assignment_names() -> list[str]:
    """The assignments of the package's catalogue ("a01_graphs", ...), one per catalogue module."""
    return [p.stem for p in modules(PACKAGE_EXERCISES)]


def _prefix(name: str) -> str:
    return re.split(r"[_-]", name, maxsplit=1)[0]


def assignment(name: str) -> list[Spec]:
    """The exercises of one assignment ("a02_broadcasting", "a02" or one of its ids "a02-mul"),
    in the order their modules declare them."""
    prefix = _prefix(name)
    for directory in search_path():
        for path in modules(directory, prefix):
            _import(path)
    return [s for s in _CATALOGUE.values() if s.prefix == prefix]


def declared(exercise_id: str) -> Spec | None:
    """The one lookup of an exercise by id: its spec, or None when no catalogue module declares it."""
    if exercise_id not in _CATALOGUE:
        assignment(exercise_id)
    return _CATALOGUE.get(exercise_id)


def exercise(exercise_id: str) -> Spec:
    """The spec of ``exercise_id``; LookupError (a course error) when none declares it."""
    spec = declared(exercise_id)
    if spec is None:
        searched = ", ".join(str(d) for d in search_path())
        raise LookupError(f"no exercise '{exercise_id}' is registered (searched {searched}); "
                          "this is a problem with the course, not with your code")
    return spec


def assignment_name(prefix: str) -> str:
    """The assignment folder of a prefix ("a02" -> "a02_broadcasting"): a catalogue module is named
    after its assignment's folder (the prefix itself when no module declares it)."""
    for directory in search_path():
        for path in modules(directory, prefix):
            return path.stem
    return prefix


def prefixes() -> list[str]:
    """Assignment prefixes ("a01", ...) that have a catalogue module in the package."""
    return sorted({name.split("_", 1)[0] for name in assignment_names()})


def title(exercise_id: str) -> str:
    """What a student and the instructor call an exercise (feedback, the class page): the title its
    check declares, else the id itself (an exercise no catalogue module declares any more)."""
    spec = declared(exercise_id)
    return spec.title or exercise_id if spec is not None else exercise_id


def in_engine() -> list[Spec]:
    """Every exercise of every assignment of the package whose reference is in solutions/."""
    return [s for p in prefixes() for s in assignment(p) if s.in_engine]
