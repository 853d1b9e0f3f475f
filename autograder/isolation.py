"""Grade one exercise on its own: move a student's object into the reference engine.

A student's notebook builds on the course kit (`coursekit.engine`, a copy of the reference engine
with the exercises stubbed out) and on the student's own earlier answers: their `Mul.backward`
calls *their* `unbroadcast`. The grader wants neither. :func:`isolate` rebuilds the student's
class or function so that

- every kit object it refers to (`Tensor`, `Function`, `swapaxes`, ...) is the reference one from
  `solutions`, so the object runs inside the reference engine (`with override(Mul=...)`);
- every *other* exercise name of the assignment (`unbroadcast` inside `Mul.backward`) resolves to
  the reference implementation, so one early bug does not cost points on later exercises;
- helpers the student defined in the notebook are rebuilt the same way.

Functions are rebuilt with `types.FunctionType(code, patched_globals, ...)`, where
`patched_globals` is a copy of the notebook's globals with those replacements; classes are rebuilt
from their rebuilt methods on the reference base classes. The student's own objects are not
modified. This all happens in the student's process, so it is a convenience for honest students,
not a security boundary.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import types
from typing import Any, Iterator

# Module prefixes of the students' kit and their reference counterparts.
KIT_TO_REFERENCE = (
    ("coursekit.engine", "solutions"),
    ("coursekit.testing", "solutions.testing"),
    ("coursekit.data", "solutions.data"),
)


def reference_module_name(name: str) -> str | None:
    for kit, ref in KIT_TO_REFERENCE:
        if name == kit or name.startswith(kit + "."):
            return ref + name[len(kit):]
    return None


def to_reference(value: Any) -> Any:
    """The reference counterpart of a kit object (module, class, function), else `value` itself."""
    if isinstance(value, types.ModuleType):
        ref = reference_module_name(value.__name__)
        return importlib.import_module(ref) if ref else value
    if not isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return value  # instances (a notebook's tensors, arrays) are data, not engine code
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return value
    ref = reference_module_name(module)
    if ref is None:
        return value
    try:
        obj: Any = importlib.import_module(ref)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return value
    return obj


class _Rebuilder:
    """Rebuilds the objects of one student namespace against patched globals (memoized)."""

    def __init__(self, namespace: dict, overlay: dict[str, Any]):
        self.namespace = namespace
        self.patched: dict[str, Any] = {}
        self.memo: dict[int, Any] = {}
        self.module_name = namespace.get("__name__", "__main__")
        for key, value in namespace.items():
            self.patched[key] = value
        for key, value in namespace.items():
            self.patched[key] = self.translate(value)
        self.patched.update(overlay)

    def is_local(self, value: Any) -> bool:
        if isinstance(value, types.FunctionType):
            return value.__globals__ is self.namespace
        if isinstance(value, type) and value.__module__ == self.module_name:
            return any(isinstance(v, types.FunctionType) and v.__globals__ is self.namespace
                       for v in _functions_of(value))
        return False

    def translate(self, value: Any) -> Any:
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        if self.is_local(value):
            result = self.rebuild_class(value) if isinstance(value, type) else self.rebuild_function(value)
        else:
            result = to_reference(value)
            self.memo[key] = result
        return result

    def rebuild_function(self, f: types.FunctionType, class_cell: Any = None) -> types.FunctionType:
        key = id(f)
        if key in self.memo and class_cell is None:
            return self.memo[key]
        closure = f.__closure__
        if closure is not None and class_cell is not None and "__class__" in f.__code__.co_freevars:
            closure = tuple(class_cell if name == "__class__" else cell
                            for name, cell in zip(f.__code__.co_freevars, closure))
        defaults = None if f.__defaults__ is None else tuple(to_reference(d) for d in f.__defaults__)
        new = types.FunctionType(f.__code__, self.patched, f.__name__, defaults, closure)
        new.__kwdefaults__ = None if f.__kwdefaults__ is None else dict(f.__kwdefaults__)
        new.__qualname__, new.__doc__, new.__module__ = f.__qualname__, f.__doc__, f.__module__
        new.__dict__.update(f.__dict__)
        if class_cell is None:
            self.memo[key] = new
        return new

    def rebuild_class(self, cls: type) -> type:
        key = id(cls)
        if key in self.memo:
            return self.memo[key]
        bases = tuple(self.translate(b) for b in cls.__bases__)
        cell = types.CellType()
        slots = set(getattr(cls, "__slots__", ()) or ())
        namespace: dict[str, Any] = {}
        for name, attr in cls.__dict__.items():
            if name in ("__dict__", "__weakref__") or name in slots:
                continue
            namespace[name] = self.rebuild_attribute(attr, cell)
        metaclass = self.translate(type(cls))
        new = metaclass(cls.__name__, bases, namespace)
        new.__qualname__ = cls.__qualname__
        cell.cell_contents = new
        self.memo[key] = new
        return new

    def rebuild_attribute(self, attr: Any, cell: Any) -> Any:
        if isinstance(attr, types.FunctionType):
            return self.rebuild_function(attr, cell)
        if isinstance(attr, (staticmethod, classmethod)):
            inner = attr.__func__
            return type(attr)(self.rebuild_function(inner, cell) if isinstance(inner, types.FunctionType) else inner)
        if isinstance(attr, property):
            parts = [self.rebuild_function(f, cell) if isinstance(f, types.FunctionType) else f
                     for f in (attr.fget, attr.fset, attr.fdel)]
            return property(*parts, doc=attr.__doc__)
        return attr


def _functions_of(cls: type) -> list[Any]:
    out = []
    for attr in cls.__dict__.values():
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        elif isinstance(attr, property):
            out.extend(f for f in (attr.fget, attr.fset, attr.fdel) if f is not None)
            continue
        out.append(attr)
    return out


def namespace_of(obj: Any) -> dict | None:
    """The globals a student's function or class was defined in (None if it has none)."""
    if isinstance(obj, types.FunctionType):
        return obj.__globals__
    if isinstance(obj, type):
        for f in _functions_of(obj):
            if isinstance(f, types.FunctionType) and f.__module__ == obj.__module__:
                return f.__globals__
    return None


def isolate(obj: Any, own_name: str, others: dict[str, Any]) -> Any:
    """`obj` rebuilt to run inside the reference engine, with `others` (other exercise names ->
    reference objects) resolved to the reference. Objects without globals (builtins, callables
    of other kinds) are translated from the kit if they come from it, else returned as they are."""
    namespace = namespace_of(obj)
    if namespace is None:
        return to_reference(obj)
    module = sys.modules.get(namespace.get("__name__", ""))
    if module is not None and vars(module) is namespace and module.__name__.split(".")[0] == "solutions":
        return obj  # the reference itself: nothing to move
    overlay = {k: v for k, v in others.items() if k != own_name}
    rebuilder = _Rebuilder(namespace, overlay)
    rebuilt = rebuilder.translate(obj)
    rebuilder.patched[own_name] = rebuilt  # recursion and self-references reach the rebuilt object
    return rebuilt


@contextlib.contextmanager
def override_everywhere(name: str, value: Any, original: Any, package: str = "solutions") -> Iterator[None]:
    """Within the block, every module of `package` that holds `original` under `name` holds `value`.

    Unlike `solutions.override` (which finds the home module by name, first match wins), this goes
    by identity, so it is exact even when two modules define the same name (`add` in
    `solutions.scalar` and in `solutions.ops.elementwise`), and it also reaches modules that
    imported the name (`from .shape import unbroadcast`).
    """
    importlib.import_module(package)
    modules = [m for n, m in list(sys.modules.items())
               if m is not None and (n == package or n.startswith(package + "."))]
    saved = [m for m in modules if vars(m).get(name) is original]
    if not saved:
        raise KeyError(f"override_everywhere: no module of {package} holds {original!r} as {name!r}")
    try:
        for m in saved:
            setattr(m, name, value)
        yield
    finally:
        for m in saved:
            setattr(m, name, original)
