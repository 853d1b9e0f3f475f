"""`Module` and `Parameter`: how a network keeps track of its own weights.

Book: chapter 6. Tests: `tests/test_layers.py`.

A `Module` notices what is assigned to it: a `Parameter` attribute becomes one of its parameters,
a `Module` attribute one of its children, and `register_buffer` adds an array that is state but
not trained (BatchNorm's running statistics). Everything else (`parameters()`, `state_dict()`,
`train()`, `zero_grad()`, the printed tree) walks those three registries, in assignment order,
so the order in which a layer's `__init__` assigns its weights is the order an optimizer sees.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np

from ..graph import Tensor


class Parameter(Tensor):
    """A Tensor that is a trainable weight of a Module: it requires grad, and assigning it to a
    Module attribute registers it."""

    def __init__(self, data: Any, requires_grad: bool = True, dtype: Any = None):
        super().__init__(data, requires_grad=requires_grad, dtype=dtype)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class LoadResult(NamedTuple):
    """What `load_state_dict(strict=False)` could not match (PyTorch's `_IncompatibleKeys`)."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every layer and model.

    Subclasses call `super().__init__()` first, assign their parameters and sub-modules as
    attributes, and define `forward`. Calling the module runs `forward`.
    """

    training: bool

    def __init__(self) -> None:
        # object.__setattr__: our own __setattr__ needs these dicts to exist already.
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # -- registration ---------------------------------------------------------------------
    def _registries(self) -> tuple[dict, dict, dict]:
        try:
            return self.__dict__["_parameters"], self.__dict__["_buffers"], self.__dict__["_modules"]
        except KeyError:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes in __init__"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        params, buffers, modules = self._registries()
        if isinstance(value, Parameter):
            buffers.pop(name, None), modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params.pop(name, None), buffers.pop(name, None)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(
                    f"{type(self).__name__}.{name} is a parameter: assign a Parameter (or None), "
                    f"not {type(value).__name__}; to change its values write to .{name}.data"
                )
            params[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, np.ndarray):
                raise TypeError(f"{type(self).__name__}.{name} is a buffer: assign an ndarray (or None), not {type(value).__name__}")
            buffers[name] = value
        elif name in modules and value is None:
            modules[name] = None
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for registry in self._registries():
            registry.pop(name, None)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter by name; None reserves the name (e.g. `bias=False`) without a tensor."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, not {type(param).__name__}")
        self._registries()[0][name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name: str, array: np.ndarray | None) -> None:
        """Add state that is saved in `state_dict` but not trained, such as running statistics."""
        if array is not None and not isinstance(array, np.ndarray):
            raise TypeError(f"register_buffer: {name!r} must be an ndarray or None, not {type(array).__name__}")
        self._registries()[1][name] = array
        object.__setattr__(self, name, array)

    def add_module(self, name: str, module: "Module | None") -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module, not {type(module).__name__}")
        self._registries()[2][name] = module
        object.__setattr__(self, name, module)

    # -- running -------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # -- walking the tree ----------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        """This module (named `prefix`) and every descendant, depth first, each once."""
        seen: set[int] = set()
        stack: list[tuple[str, Module]] = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            kids = [(f"{name}.{n}" if name else n, c) for n, c in m.named_children()]
            stack.extend(reversed(kids))

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs in registration order; a shared parameter is listed once."""
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for mod_name, m in modules:
            for name, p in m._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mod_name}.{name}" if mod_name else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, np.ndarray]]:
        for mod_name, m in self.named_modules(prefix):
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mod_name}.{name}" if mod_name else name), b

    def buffers(self) -> Iterator[np.ndarray]:
        for _, b in self.named_buffers():
            yield b

    # -- modes and gradients ---------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode here and in every descendant (Dropout and BatchNorm read it)."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (set it to None, as PyTorch does by default)."""
        for p in self.parameters():
            p.grad = None

    def to(self, dtype: Any) -> "Module":
        """Cast every parameter and floating-point buffer to `dtype`, in place (e.g. float64 for gradcheck)."""
        dtype = np.dtype(dtype)
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None:
                    p.data, p.grad = p.data.astype(dtype), None
            for name, b in list(m._buffers.items()):
                if b is not None and np.issubdtype(b.dtype, np.floating):
                    m.register_buffer(name, b.astype(dtype))
        return self

    # -- saving and loading ------------------------------------------------------------------
    def _state_entries(self) -> Iterator[tuple[str, Module, str, bool]]:
        """(key, owning module, attribute, is_parameter) for every entry of the state dict."""
        for mod_name, m in self.named_modules():
            dot = f"{mod_name}." if mod_name else ""
            for name, p in m._parameters.items():
                if p is not None:
                    yield dot + name, m, name, True
            for name, b in m._buffers.items():
                if b is not None:
                    yield dot + name, m, name, False

    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """Every parameter and buffer by dotted name, as ndarray *copies* (later training does not change them)."""
        out: OrderedDict[str, np.ndarray] = OrderedDict()
        for key, m, name, is_param in self._state_entries():
            value = getattr(m, name)
            out[key] = np.array(value.data if is_param else value, copy=True)
        return out

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> LoadResult:
        """Copy values from `state_dict` into this module's parameters and buffers, in place.

        With `strict`, the keys must match exactly; a shape mismatch is always an error. Values
        are cast to the existing dtype, so a float64 checkpoint loads into a float32 model.
        """
        entries = {key: (m, name, is_param) for key, m, name, is_param in self._state_entries()}
        missing = [k for k in entries if k not in state_dict]
        unexpected = [k for k in state_dict if k not in entries]
        problems = []
        if strict and missing:
            problems.append("missing key(s): " + ", ".join(repr(k) for k in missing))
        if strict and unexpected:
            problems.append("unexpected key(s): " + ", ".join(repr(k) for k in unexpected))
        for key, (m, name, is_param) in entries.items():
            if key in state_dict:
                current = getattr(m, name)
                shape = (current.data if is_param else current).shape
                got = np.shape(getattr(state_dict[key], "data", state_dict[key]))
                if got != shape:
                    problems.append(f"shape mismatch for {key!r}: checkpoint has {got}, this model has {shape}")
        if problems:
            raise RuntimeError(f"load_state_dict: cannot load into {type(self).__name__}: " + "; ".join(problems))
        for key, (m, name, is_param) in entries.items():
            if key not in state_dict:
                continue
            value = np.asarray(getattr(state_dict[key], "data", state_dict[key]))
            target = getattr(m, name).data if is_param else getattr(m, name)
            target[...] = value  # in place: an optimizer holding this parameter keeps seeing it
        return LoadResult(missing, unexpected)

    def save(self, path: str | Path) -> Path:
        """Write `state_dict()` to an uncompressed `.npz` file (the suffix is added if missing)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **self.state_dict())
        return path

    def load(self, path: str | Path, strict: bool = True) -> "Module":
        """Load a file written by `save` into this module; errors name the file."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as f:
                state = {k: f[k] for k in f.files}
        except FileNotFoundError:
            raise FileNotFoundError(f"{type(self).__name__}.load: no such file {str(path)!r}") from None
        try:
            self.load_state_dict(state, strict=strict)
        except RuntimeError as e:
            raise RuntimeError(f"{e} (from file {str(path)!r})") from None
        return self

    # -- printing -----------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses when printed, e.g. `in_features=3, ...`."""
        return ""

    def __repr__(self) -> str:
        kids = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self.named_children()]
        extra = self.extra_repr()
        if not kids:
            return f"{type(self).__name__}({extra})"
        lines = ([extra] if extra else []) + kids
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


class Sequential(Module):
    """Modules applied one after another; child i is named "i", so keys read `0.weight`, `1.bias`."""

    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, not a Module")
            self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self
