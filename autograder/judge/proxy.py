"""What a check holds of the student's answer: proxies of objects that live in the sandbox.

Every operation on a :class:`Proxy` (an attribute, a call, an operator, ``len``, ``np.asarray``)
is a request to its :class:`~autograder.judge.session.Session`, executed in the sandbox on
inputs the judge chose; what comes back is plain data or another proxy. An exception of the
student's code comes back as a :class:`StudentError` that also derives from the builtin exception
of the same name, so a check's ``except ValueError`` works as if the code had run here.
"""
from __future__ import annotations

import builtins
from typing import Any, Protocol

from autograder.sandbox import wire


class Session(Protocol):
    """What a proxy needs of :class:`autograder.judge.session.Session`: its requests."""

    def request(self, op: str, *args: Any, name: str | None = None, **kwargs: Any) -> Any: ...


def send_handle(value):
    if isinstance(value, Proxy):
        return {"$r": object.__getattribute__(value, "_id")}
    raise wire.WireError(f"cannot send a {type(value).__module__}.{type(value).__name__} to the sandbox: "
                         "pass arrays, numbers, tuples or proxies of sandbox objects")


def wrap(session: Session, value):
    if isinstance(value, wire.Handle):
        return Proxy(session, value)
    if isinstance(value, tuple):
        return tuple(wrap(session, v) for v in value)
    if isinstance(value, list):
        return [wrap(session, v) for v in value]
    if isinstance(value, dict):
        return {k: wrap(session, v) for k, v in value.items()}
    return value


class StudentError(Exception):
    """An exception raised by student code in the sandbox, rebuilt here as data.

    Its class also derives from the builtin exception of the same name (or the nearest builtin
    base), so a check's ``except ValueError`` or ``except NotImplementedError`` works as if the
    code had run here. ``where`` is " (in backward, line 7)" for the student's innermost frame.
    """

    remote_type: str = "Exception"
    where: str = ""


_BUILTIN_ERRORS = {name: obj for name, obj in vars(builtins).items()
                   if isinstance(obj, type) and issubclass(obj, Exception)}
_ERROR_CLASSES: dict[tuple[str, type], type] = {}


def student_exception(err) -> StudentError:
    if not isinstance(err, dict):
        err = {}
    type_name = str(err.get("type", "Exception"))[:200]
    mro = [str(n) for n in err.get("mro", [])][:64] if isinstance(err.get("mro"), list) else []
    base = next((_BUILTIN_ERRORS[n] for n in mro if n in _BUILTIN_ERRORS), Exception)
    key = (type_name, base)
    if key not in _ERROR_CLASSES:
        try:
            cls = type(type_name if type_name.isidentifier() else "StudentException",
                       (StudentError,) if base is Exception else (StudentError, base), {})
        except TypeError:  # an exception type whose layout cannot be combined
            cls = type("StudentException", (StudentError,), {})
        _ERROR_CLASSES[key] = cls
    cls = _ERROR_CLASSES[key]
    message = str(err.get("msg", ""))[:2000]
    try:
        error = cls(message)
    except Exception:  # noqa: BLE001 (a builtin whose constructor wants more arguments)
        error = StudentError(message)
    error.remote_type = type_name
    error.where = str(err.get("where", ""))[:300]
    return error


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor")


class Proxy:
    """A stand-in for an object that lives in the sandbox.

    Attribute access, calls, operators, indexing, ``len``, iteration, ``with`` and
    ``isinstance(x, proxy_of_a_class)`` are requests to the sandbox; plain results come back as
    values, anything else as another proxy. ``repr`` is local (it never shows student text).
    """

    __slots__ = ("_session", "_id", "_type", "_mro", "_kind")
    __array_ufunc__ = None  # `array * proxy` goes to the proxy's __rmul__, not through NumPy

    def __init__(self, session: Session, handle: wire.Handle):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_id", handle.id)
        object.__setattr__(self, "_type", handle.type)
        object.__setattr__(self, "_mro", tuple(handle.mro))
        object.__setattr__(self, "_kind", handle.kind)

    def _request(self, op: str, *args, **kwargs):
        return object.__getattribute__(self, "_session").request(op, *args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__") and name not in ("__name__", "__qualname__",
                                                                           "__module__", "__doc__"):
            raise AttributeError(name)
        return self._request("getattr", self, name)

    def __setattr__(self, name: str, value) -> None:
        self._request("setattr", self, name, value)

    def __call__(self, *args, **kwargs):
        return self._request("call", self, *args, **kwargs)

    def __repr__(self) -> str:
        kind, kind_type = object.__getattribute__(self, "_kind"), object.__getattribute__(self, "_type")
        return f"<sandbox {kind} {kind_type}>"

    def __instancecheck__(self, obj) -> bool:
        return isinstance(obj, Proxy) and bool(self._request("operator", obj, self, name="isinstance"))

    def __subclasscheck__(self, cls) -> bool:
        return isinstance(cls, Proxy) and bool(self._request("operator", cls, self, name="issubclass"))

    def __len__(self) -> int:
        return self._request("operator", self, name="len")

    def __iter__(self):
        return iter(self._request("operator", self, name="list"))

    def __bool__(self) -> bool:
        return bool(self._request("operator", self, name="bool"))

    def __float__(self) -> float:
        return float(self._request("operator", self, name="float"))

    def __int__(self) -> int:
        return int(self._request("operator", self, name="int"))

    def __index__(self) -> int:
        return int(self._request("operator", self, name="index"))

    def __array__(self, dtype=None, copy=None):
        import numpy as np
        return np.asarray(self._request("operator", self, name="asarray"), dtype=dtype)

    def __getitem__(self, key):
        return self._request("operator", self, key, name="getitem")

    def __setitem__(self, key, value) -> None:
        self._request("operator", self, key, value, name="setitem")

    def __contains__(self, item) -> bool:
        return bool(self._request("operator", self, item, name="contains"))

    def __enter__(self):
        return self._request("method", self, "__enter__")

    def __exit__(self, kind, value, tb):
        self._request("method", self, "__exit__", None, None, None)
        return False

    def __neg__(self):
        return self._request("operator", self, name="neg")

    def __pos__(self):
        return self._request("operator", self, name="pos")

    def __abs__(self):
        return self._request("operator", self, name="abs")

    def __lt__(self, other):
        return self._request("operator", self, other, name="lt")

    def __le__(self, other):
        return self._request("operator", self, other, name="le")

    def __gt__(self, other):
        return self._request("operator", self, other, name="gt")

    def __ge__(self, other):
        return self._request("operator", self, other, name="ge")

    __hash__ = object.__hash__


def _binary(name: str):
    def forward(self, other):
        return self._request("operator", self, other, name=name)

    def reflected(self, other):
        return self._request("operator", other, self, name=name)
    return forward, reflected


for _name in _BINARY:
    _dunder = _name.rstrip("_")
    _fwd, _ref = _binary(_name)
    setattr(Proxy, f"__{_dunder}__", _fwd)
    setattr(Proxy, f"__r{_dunder}__", _ref)
