"""Swap a piece of the engine for another implementation: the one way answers are plugged in.

It works because the lowercase op functions and `Tensor.backward` look their collaborators up by
module-global name at call time: rebinding `Mul` wherever the engine bound it makes every `a * b`
(and every backward that multiplies) run the new class, while the rest of the engine stays as it was.

- `override(Mul=StudentMul)`: within a block (the tests run a student's op inside the reference);
- `use(Mul)`: for good (the course kit's `coursekit.use`, and the students' answers it loads);
- `snapshot(names)` / `restore(saved)`: put back whatever the code in between rebound, by these
  functions or by hand (the grader's sandbox, around the student's cells);
- `plug(obj)`: the step all of them take, returning what `restore` needs to undo it.

The file is the reference engine's and, renamed, the kit's (`coursekit/engine/overrides.py`): the
engine is the package this module lives in, whatever its name.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

_ENGINE = __name__.rsplit(".", 1)[0]   # "solutions", or "coursekit.engine" in the kit
_ROOT = __name__.split(".", 1)[0]      # every module bound to the engine's objects: the kit's testing too

# What restore() puts back: (module, name, object) bindings and (class, bases) pairs.
Saved = list[tuple[Any, ...]]


def _loaded() -> list[tuple[str, ModuleType]]:
    return [(n, m) for n, m in list(sys.modules.items())
            if m is not None and (n == _ROOT or n.startswith(_ROOT + "."))]


def _core() -> list[ModuleType]:
    """The engine's graph and op modules: where an op's name has its home. Layers, optimizers and
    the private fast kernels define classes of the same names (the `Tanh` layer), never the op."""
    importlib.import_module(f"{_ENGINE}.ops")
    return [m for n, m in _loaded()
            if n == f"{_ENGINE}.graph" or (n.startswith(f"{_ENGINE}.ops.") and not n.rsplit(".", 1)[1].startswith("_"))]


def _defines(module: ModuleType, name: str) -> bool:
    value = vars(module).get(name)
    return value is not None and getattr(value, "__module__", None) == module.__name__


def home(name: str, where: str | None = None) -> ModuleType:
    """The one module that defines `name` (where its callers look it up): `where` when given,
    else the graph or op module that does, else the one engine module that does."""
    if where is not None:
        return importlib.import_module(where)
    homes = [m for m in _core() if _defines(m, name)] or \
        [m for n, m in _loaded() if n.startswith(_ENGINE) and _defines(m, name)]
    if not homes:
        raise ValueError(f"the engine defines nothing called {name!r}")
    if len(homes) > 1:
        raise ValueError(f"{name!r} is defined in several modules of the engine: {[m.__name__ for m in homes]}")
    return homes[0]


def plug(obj: Any, name: str | None = None, *, where: str | None = None, rebase: bool = True) -> Saved:
    """Make the engine use `obj` wherever it used its own `name` (default: `obj.__name__`): in the
    name's home module and in every module bound to the same object (the op modules import
    `unbroadcast` by name). With `rebase`, the engine's own subclasses of a replaced class (AdamW of
    Adam) inherit from `obj` instead. Returns what `restore` needs to undo it."""
    name = name if name is not None else getattr(obj, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"{obj!r} has no name; pass the class or function itself")
    old = vars(home(name, where))[name]
    if isinstance(old, type) != isinstance(obj, type) or not callable(obj):
        kind = "a class" if isinstance(old, type) else "a function"
        raise TypeError(f"the engine's {name} is {kind}, so replace it with {kind}, not {type(obj).__name__}")
    saved: Saved = []
    for _, module in _loaded():
        if vars(module).get(name) is old:
            saved.append((module, name, old))
            setattr(module, name, obj)
    if rebase and isinstance(old, type) and old is not obj:
        for sub in old.__subclasses__():
            if sub is not obj and sub.__module__.startswith(_ROOT) and not issubclass(obj, sub):
                saved.append((sub, sub.__bases__))
                sub.__bases__ = tuple(obj if base is old else base for base in sub.__bases__)
    return saved


def snapshot(names: Iterable[str]) -> Saved:
    """Every binding of `names` in the engine's modules, and the bases of every engine class."""
    names = set(names)
    saved: Saved = []
    for n, module in _loaded():
        for key, value in list(vars(module).items()):
            if key in names:
                saved.append((module, key, value))
            if isinstance(value, type) and str(getattr(value, "__module__", "")).startswith(_ROOT) and \
                    value.__module__ == n:
                saved.append((value, value.__bases__))
    return saved


def restore(saved: Saved) -> None:
    """Undo: put back every binding and base of `saved`, the last change first."""
    for entry in reversed(saved):
        if len(entry) == 3:
            module, name, value = entry
            if vars(module).get(name) is not value:
                setattr(module, name, value)
        else:
            cls, bases = entry
            if cls.__bases__ != bases:
                cls.__bases__ = bases


def use(*objs: Any, homes: Mapping[str, str] | None = None) -> None:
    """Make the engine use each of `objs` (classes and functions) by its name, for good.
    `homes`: name -> module, for names the engine defines in several places."""
    for obj in objs:
        name = getattr(obj, "__name__", None)
        try:
            plug(obj, where=(homes or {}).get(name) if isinstance(name, str) else None)
        except (TypeError, ValueError) as error:
            raise type(error)(f"use: {error}") from None


@contextmanager
def override(**replacements: Any) -> Iterator[None]:
    """Within the block, each name=object replaces the engine's `name` everywhere it is bound."""
    saved: Saved = []
    try:
        for name, value in replacements.items():
            try:
                saved += plug(value, name)
            except (TypeError, ValueError) as error:
                raise type(error)(f"override: {error}") from None
        yield
    finally:
        restore(saved)
