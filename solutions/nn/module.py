"""`Module` and `Parameter`: how a network keeps track of its own weights.

Book: chapter 5 (`book/05_layers.md`).
Tests: `tests/engine/test_layers.py`. Assignment: a05 (`a05-module`: the methods of `Module`).

A `Module` notices what is assigned to it: a `Parameter` attribute becomes one of its parameters,
a `Module` attribute one of its children, and `register_buffer` adds an array that is state but
not trained (BatchNorm's running statistics). Everything else (`parameters()`, `state_dict()`,
`train()`, `zero_grad()`, the printed tree) walks those three registries, in assignment order,
so the order in which a layer's `__init__` assigns its weights is the order an optimizer sees.

Two classes share the work. `ModuleBase` is the bookkeeping: the registries, calling `forward`,
and conveniences (`parameters`, `buffers`, `eval`, `zero_grad`, `to`, `save`/`load`, printing).
`Module` adds what chapter 5 is about: filing each assignment (`__setattr__`), walking the tree
(`named_modules`, `named_parameters`, `train`), and saving and loading its state (`state_dict`,
`load_state_dict`).
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

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


class ModuleBase:
    """The bookkeeping every Module shares: the three registries (`_parameters`, `_buffers`,
    `_modules`, ordered dicts from name to value), calling `forward`, and the conveniences built on
    the walks that `Module` defines (`modules`, `parameters`, `buffers`, `eval`, `zero_grad`, `to`,
    `save`, `load`, printing)."""

    training: bool
    _parameters: OrderedDict[str, Parameter | None]
    _buffers: OrderedDict[str, np.ndarray | None]
    _modules: OrderedDict[str, Any]   # the children: Modules (None where one was unset)

    if TYPE_CHECKING:  # Module defines the walks; the conveniences here are built on them
        def named_modules(self, prefix: str = "") -> Iterator[tuple[str, ModuleBase]]: ...
        def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]: ...
        def train(self, mode: bool = True) -> ModuleBase: ...
        def state_dict(self) -> OrderedDict[str, np.ndarray]: ...
        def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> LoadResult: ...

    def __init__(self) -> None:
        # object.__setattr__: Module's own __setattr__ needs these dicts to exist already.
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def _registries(self) -> tuple[dict, dict, dict]:
        """(parameters, buffers, children): this module's three registries."""
        try:
            return self.__dict__["_parameters"], self.__dict__["_buffers"], self.__dict__["_modules"]
        except KeyError:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes in __init__"
            ) from None

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

    def add_module(self, name: str, module: "ModuleBase | None") -> None:
        if module is not None and not isinstance(module, ModuleBase):
            raise TypeError(f"add_module: {name!r} must be a Module, not {type(module).__name__}")
        self._registries()[2][name] = module
        object.__setattr__(self, name, module)

    # -- running -------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # -- the tree, through Module's walks --------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Any]]:
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self) -> Iterator[Any]:
        for _, m in self.named_children():
            yield m

    def modules(self) -> Iterator[Any]:
        for _, m in self.named_modules():
            yield m

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, np.ndarray]]:
        for module_name, module in self.named_modules(prefix):
            for name, array in module._buffers.items():
                if array is not None:
                    yield (f"{module_name}.{name}" if module_name else name), array

    def buffers(self) -> Iterator[np.ndarray]:
        for _, b in self.named_buffers():
            yield b

    def eval(self) -> Any:
        return self.train(False)

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (set it to None, as PyTorch does by default)."""
        for p in self.parameters():
            p.grad = None

    def to(self, dtype: Any) -> Any:
        """Cast every parameter and floating-point buffer to `dtype`, in place (e.g. float64 for gradcheck)."""
        dtype = np.dtype(dtype)
        for module in self.modules():
            for p in module._parameters.values():
                if p is not None:
                    p.data, p.grad = p.data.astype(dtype), None
            for name, array in list(module._buffers.items()):
                if array is not None and np.issubdtype(array.dtype, np.floating):
                    module.register_buffer(name, array.astype(dtype))
        return self

    # -- files ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write `state_dict()` to an uncompressed `.npz` file (the suffix is added if missing)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        # numpy's stub lets a ** mapping also fill savez's allow_pickle flag, hence the ignore
        np.savez(path, **self.state_dict())  # type: ignore[arg-type]
        return path

    def load(self, path: str | Path, strict: bool = True) -> Any:
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


class Module(ModuleBase):
    """Base class of every layer and model.

    Subclasses call `super().__init__()` first, assign their parameters and sub-modules as
    attributes, and define `forward`. Calling the module runs `forward`.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        """`self.name = value`: file a Parameter among the parameters and a Module among the
        children, then set the attribute as usual."""
        params, buffers, modules = self._registries()
        if isinstance(value, Parameter):
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value  # a name assigned again keeps its place
        elif isinstance(value, Module):
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(
                    f"{type(self).__name__}.{name} is a parameter: assign a Parameter (or None), "
                    f"not {type(value).__name__}; to change its values write to .{name}.data"
                )
            params[name] = None  # None keeps the name reserved, as bias=False does
        elif name in buffers:
            if value is not None and not isinstance(value, np.ndarray):
                raise TypeError(f"{type(self).__name__}.{name} is a buffer: assign an ndarray (or None), "
                                f"not {type(value).__name__}")
            buffers[name] = value  # a buffer given a new array stays a buffer
        elif name in modules:
            del modules[name]  # anything else in a child's place: no longer a child
        object.__setattr__(self, name, value)

    def named_modules(self, prefix: str = "", memo: set[int] | None = None) -> Iterator[tuple[str, "Module"]]:
        """This module (named `prefix`) and every descendant, depth first, each module once."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs in registration order; a shared parameter is listed once."""
        seen = set()  # ids of the parameters already yielded
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_name, m in modules:
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{module_name}.{name}" if module_name else name), p

    def train(self, mode: bool = True) -> "Module":
        """Set training mode here and in every descendant (Dropout and BatchNorm read it)."""
        for m in self.modules():
            m.training = bool(mode)
        return self

    def _state_arrays(self) -> "OrderedDict[str, np.ndarray]":
        """Every parameter's array (`p.data`) and every buffer, by dotted name, module by module:
        the live arrays, not copies."""
        arrays = OrderedDict()
        for module_name, m in self.named_modules():
            dot = f"{module_name}." if module_name else ""
            for name, p in m._parameters.items():
                if p is not None:
                    arrays[dot + name] = p.data
            for name, b in m._buffers.items():
                if b is not None:
                    arrays[dot + name] = b
        return arrays

    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """Every parameter and buffer by dotted name, as ndarray *copies* (later training does not change them)."""
        return OrderedDict((key, array.copy()) for key, array in self._state_arrays().items())

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> LoadResult:
        """Copy the arrays of `state_dict` into this module's parameters and buffers, in place.

        With `strict`, the keys must match exactly; a shape mismatch is always an error, and on an
        error nothing is changed. Values are cast to the existing dtype, so a float64 checkpoint
        loads into a float32 model.
        """
        own = self._state_arrays()
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        errors = []
        if strict and missing:
            errors.append("missing key(s): " + ", ".join(repr(key) for key in missing))
        if strict and unexpected:
            errors.append("unexpected key(s): " + ", ".join(repr(key) for key in unexpected))
        for key, array in own.items():
            if key in state_dict and np.shape(state_dict[key]) != array.shape:
                errors.append(f"shape mismatch for {key!r}: checkpoint has {np.shape(state_dict[key])}, "
                              f"this model has {array.shape}")
        if errors:  # every check before any change: a failed load leaves the model as it was
            raise RuntimeError(f"load_state_dict: cannot load into {type(self).__name__}: " + "; ".join(errors))
        for key, array in own.items():
            if key in state_dict:
                array[...] = state_dict[key]  # in place: an optimizer holding this parameter keeps seeing it
        return LoadResult(missing, unexpected)


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
