"""Import modules from code held in memory: how the sandbox gets its engine, and the judge its oracle's.

The engine is never on the sandbox's disk: the judge compiles the kit's modules once and sends their
code objects (``marshal``: the judge and the sandbox run the same interpreter), which also saves
compiling the engine in every sandbox. The judge imports its own copies of the engine the same way
(:mod:`autograder.judge.sealed`). Standard library only, like the rest of this folder.
"""
from __future__ import annotations

import importlib.util
import marshal


class Modules:
    """A finder and loader for ``{dotted name: [is_package, marshalled code, filename]}``.

    The import system asks only for these three methods; the classes of ``importlib.abc`` would
    add nothing but their import (importlib.resources with it), a sixth of every sandbox's start."""

    def __init__(self, modules: dict):
        self.modules = modules

    def find_spec(self, name, path=None, target=None):
        if name not in self.modules:
            return None
        return importlib.util.spec_from_loader(name, self, is_package=bool(self.modules[name][0]))

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        _, code, filename = self.modules[module.__name__]
        module.__file__ = filename
        exec(marshal.loads(code), vars(module))
