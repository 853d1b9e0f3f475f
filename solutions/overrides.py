"""Swap one piece of the reference engine for another implementation, temporarily.

The grader tests a student's op *inside* the reference engine: `with override(Mul=StudentMul):`
makes every `a * b` (and every backward that multiplies) use the student's class, while the rest
of the engine stays the reference one. It works because the lowercase op functions and
`Tensor.backward` look their collaborators up by module-global name at call time.
"""
from __future__ import annotations

import importlib
import pkgutil
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Iterator


def _modules() -> list[ModuleType]:
    """The engine's modules: the graph and every op module (not layers, optimizers or examples,
    whose names, such as the `Tanh` layer, would otherwise shadow the ops')."""
    import solutions.ops

    mods = [importlib.import_module("solutions.graph")]
    for info in pkgutil.walk_packages(solutions.ops.__path__, prefix="solutions.ops."):
        mods.append(importlib.import_module(info.name))
    return mods


def _home(name: str, value: Any) -> ModuleType:
    """The one module that defines `name` (where its callers look it up)."""
    homes = [
        mod for mod in _modules()
        if mod.__dict__.get(name) is not None and getattr(mod.__dict__[name], "__module__", None) == mod.__name__
    ]
    if not homes:
        raise KeyError(f"override: the reference engine defines nothing called {name!r}")
    if len(homes) > 1:
        raise KeyError(f"override: {name!r} is defined in several modules: {[m.__name__ for m in homes]}")
    (home,) = homes
    original = home.__dict__[name]
    if isinstance(original, type) != isinstance(value, type) or not callable(value):
        raise TypeError(f"override: {name} must be replaced by a {type(original).__name__}, got {type(value).__name__}")
    return home


@contextmanager
def override(**replacements: Any) -> Iterator[None]:
    """Within the block, each name=object replaces the engine's `name` everywhere it is bound:
    in its home module and in every engine module that imported it by name (as `unbroadcast`
    is imported by the op modules)."""
    import solutions
    import solutions.ops

    saved = []
    try:
        for name, value in replacements.items():
            original = _home(name, value).__dict__[name]
            for mod in [solutions, solutions.ops, *_modules()]:
                if mod.__dict__.get(name) is original:
                    saved.append((mod, name, original))
                    setattr(mod, name, value)
        yield
    finally:
        for mod, name, original in reversed(saved):
            setattr(mod, name, original)
