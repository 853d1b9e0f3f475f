"""The judge's half of sealed references (:mod:`autograder.sandbox.sealed` is the sandbox's half).

When exercise E of assignment A is judged, the sandbox's kit holds the reference of the earlier
assignments only. E is stubbed; the exercises of later assignments are stubbed too (the student's
own kit has stubs there), and so are the few exercises of A whose reference computes E's answer
without calling E (``@graded(..., withholds=...)``). Every other exercise of A, answered or not,
is *sealed*: its body is a call over the channel, answered here by :class:`Oracle`, which runs
the reference on plain data and answers with plain data. So a student's wrong or missing
``unbroadcast`` cannot fail ``Mul`` (the engine's unbroadcast is the reference's), E's verdict
depends on E's answer alone, yet no line of the reference's code is ever in the sandbox, and the
oracle answers for the sealed exercises only, never for E.

The oracle runs a reference in an engine of its own (:class:`Engine`): the kit as the sandbox has
it, with the sealed exercises' bodies in place and the same stubs, imported here under a private
name, and E a stub while a request runs (:meth:`Engine.without`). So a sealed reference that
calls E (Add's backward calls ``unbroadcast``) meets E's stub and the answer is told so, never
served by E's reference; and the reference engine's private fast kernels (which compute an
exercise's work inside another op's node) are not there to answer for it.

An error of the reference's (arguments it cannot take) comes back as its type and the first line
of its message, unless that line quotes an exercise body (then a sentence of ours).
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import inspect
import itertools
import sys
import weakref
from collections import OrderedDict
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np

from autograder import kit
from autograder.course import catalogue
from autograder.course.catalogue import Spec
from autograder.judge.scrub import quotes
from autograder.sandbox.memory import Modules

MAX_ELEMENTS = 1 << 24      # all arrays of one request together
MAX_INTEGER = 1 << 20       # a parameter (a shape, a stride) past this is an attack, not a case


class Engine:
    """A private copy of the kit's engine in this process, for the oracle to run references in.

    ``stubbed``: the exercises that are stubs in it, as in the sandbox (every other exercise body
    is the reference's). Imported from memory under a name of its own (``_oracle<n>``), so it
    shares nothing with ``solutions`` (the checks' reference engine) or another copy.
    """

    _count = itertools.count()

    def __init__(self, stubbed: frozenset[str]):
        specs = catalogue.in_engine()
        self.package = f"_oracle{next(self._count)}"
        modules = kit.kit_modules([s for s in specs if s.id in stubbed], specs, package=self.package)
        self._finder = Modules(kit.compiled(modules))
        sys.meta_path.append(self._finder)
        self.root = importlib.import_module(f"{self.package}.engine")

    def module(self, reference_name: str) -> Any:
        """This engine's counterpart of a reference module ("solutions.scalar")."""
        return importlib.import_module(kit.rename(reference_name, top_level=False, package=self.package))

    def reference(self, s: Spec) -> Any:
        """The exercise's reference object in this engine (``Spec.reference``, here)."""
        obj: Any = self.module(s.module)
        for part in s.qualname.split("."):
            obj = getattr(obj, part)
        return obj

    @contextlib.contextmanager
    def without(self, s: Spec | None) -> Iterator[None]:
        """This engine with the exercise ``s`` a stub for the time of the block, its reference put
        back after (a class's solution methods, or every module global bound to a function): one
        engine per assignment serves every exercise judged in it, each with its own exercise out."""
        if s is None or not s.in_engine:
            yield
            return
        message = kit.stub_message(s)  # what the kit's own stub says (the judge reads it back)

        def stub(*args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(message)

        reference = self.reference(s)
        saved: list[tuple[Any, str, Any]]  # (owner, name, what it held)
        if isinstance(reference, type):
            saved = [(reference, m, reference.__dict__[m]) for m in s.regions if m in reference.__dict__]
        else:
            modules = [m for name, m in list(sys.modules.items())
                       if m is not None and (name == self.package or name.startswith(self.package + "."))]
            saved = [(m, k, v) for m in modules for k, v in list(vars(m).items()) if v is reference]
        try:
            for owner, name, _ in saved:
                setattr(owner, name, stub)
            yield
        finally:
            for owner, name, value in saved:
                setattr(owner, name, value)

    def close(self) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for name in [n for n in sys.modules if n == self.package or n.startswith(self.package + ".")]:
            del sys.modules[name]


_ENGINES: OrderedDict[frozenset[str], Engine] = OrderedDict()
# A grading worker judges one notebook's exercises in turn, each assignment with its own few stubs:
# room for one per assignment and one per exercise that withholds others (9 in all, made in the
# forkserver, see autograder.judge.worker).
ENGINES_KEPT = 10


def engine(stubbed: Collection[str]) -> Engine:
    """The oracle's engine with the exercises ``stubbed`` stubbed, made once and kept for the next
    exercises judged with the same stubs (the last :data:`ENGINES_KEPT` of them)."""
    key = frozenset(stubbed)
    if key in _ENGINES:
        _ENGINES.move_to_end(key)
        return _ENGINES[key]
    made = _ENGINES[key] = Engine(key)
    while len(_ENGINES) > ENGINES_KEPT:
        _ENGINES.popitem(last=False)[1].close()
    return made


class OracleError(Exception):
    """An answer the oracle refuses or the reference rejects; sent to the sandbox as an exception."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _bounded(value: Any, depth: int = 0) -> None:
    if depth > 16:
        raise OracleError("ValueError", "arguments nested too deeply")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and abs(int(value)) > MAX_INTEGER:
        raise OracleError("ValueError", f"a parameter of {int(value)} is out of any exercise's range")
    if isinstance(value, (list, tuple)):
        for v in value:
            _bounded(v, depth + 1)
    if isinstance(value, dict):
        for v in value.values():
            _bounded(v, depth + 1)
    if isinstance(value, slice):
        _bounded((value.start, value.stop, value.step), depth + 1)


class Oracle:
    """Answers the sandbox's requests for the sealed exercises ``specs`` (by exercise id), running
    their references in the engine whose ``stubbed`` exercises are stubs (made at the first request)."""

    def __init__(self, specs: list[Spec], stubbed: Collection[str] = (), judged: Spec | None = None):
        self.specs = {s.id: s for s in specs}
        self.stubbed = frozenset(stubbed)
        # The exercise being checked, a stub in the engine while a request runs (Engine.without):
        # a sealed reference that calls it meets the stub, and the answer is told so.
        self.judged = judged
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = engine(self.stubbed)
        return self._engine

    def __call__(self, request: Any) -> Any:
        if not isinstance(request, dict) or request.get("exercise") not in self.specs:
            raise OracleError("NotImplementedError", "no such sealed exercise in this sandbox")
        s = self.specs[request["exercise"]]
        op = request.get("op")
        R = self.engine.root
        # A member may switch the engine's grad mode (no_grad.__enter__): it is the oracle's, so it
        # comes back as it was whatever the member did.
        with R.set_grad_enabled(R.is_grad_enabled()), self.engine.without(self.judged):
            return self._answer(s, op, request)

    def _answer(self, s: Spec, op: Any, request: dict) -> Any:
        try:
            _bounded([request.get("args"), request.get("template"), request.get("desc"), request.get("paths")])
            arrays = [a for a in request.get("arrays") or [] if isinstance(a, np.ndarray)]
            if sum(a.size for a in arrays) > MAX_ELEMENTS:
                raise OracleError("ValueError", "arrays too large for any exercise")
            if op == "call":
                return self._call(s, request)
            if op == "eval":
                return self._eval(s, request)
            if op == "scalar":
                return self._scalar(s, request)
            if op == "walk":
                return self._walk(s, request)
        except OracleError:
            raise
        except NotImplementedError as error:
            j = self.judged
            met = kit.stubbed(str(error).split("\n", 1)[0])
            if j is not None and met is not None and met.id == j.id:
                # The reference of s calls the exercise being checked: the course's version of it
                # is not there to serve the answer (the student's own kit would call their own).
                raise OracleError("RuntimeError", f"{s.title} calls {j.title} itself, so the grader does not run it "
                                                  f"while {j.title} is checked: write {j.title} without "
                                                  f"calling {s.title}") from None
            raise OracleError("NotImplementedError", _message(error) or "not implemented") from None
        except Exception as error:  # noqa: BLE001 (the reference rejected what it was given)
            kind = type(error).__name__ if getattr(builtins, type(error).__name__, None) is type(error) \
                else "RuntimeError"
            raise OracleError(kind, _message(error) or f"the course's {s.name} (run by the judge) could not take "
                                    f"these arguments ({kind}); check what your code passes to it") from None
        raise OracleError("ValueError", f"unknown request {str(op)[:40]!r}")

    # -- the reference's member, on the reference's objects ----------------------------------------
    def _member(self, s: Spec, member: Any, state: Any):
        """The reference function, or the bound method of a fresh instance with ``state``."""
        reference = self.engine.reference(s)
        if not isinstance(reference, type):
            if member != s.name and member != s.qualname.split(".")[-1]:
                raise OracleError("NotImplementedError", f"{s.name} has no sealed member {member!r}")
            return reference
        if member not in s.regions:
            raise OracleError("NotImplementedError", f"{s.name} has no sealed member {member!r}")
        obj = reference.__new__(reference)  # type: ignore[call-overload]
        if isinstance(state, dict):
            for key, value in state.items():
                if isinstance(key, str) and not key.startswith("__"):
                    object.__setattr__(obj, key, value)
        return getattr(obj, member)

    def _call(self, s: Spec, request: dict) -> dict:
        """The member's result, the instance's plain state after it and the grad mode after it: a
        member that changes its object (``self.previous = ...``) or the engine's mode (``no_grad``'s
        ``__enter__``) changes the sandbox's, which the sandbox applies."""
        R = self.engine.root
        function = self._member(s, request.get("member"), request.get("state"))
        args = request.get("args")
        if not isinstance(args, dict):
            raise OracleError("TypeError", "malformed arguments")
        if isinstance(request.get("grad_mode"), bool):
            R.set_grad_enabled(request["grad_mode"])
        value = _invoke(function, {k: _copy(v) for k, v in args.items()})
        this = getattr(function, "__self__", None)
        state = None
        if this is not None and not isinstance(this, type) and hasattr(this, "__dict__"):
            state = {k: v for k, v in vars(this).items() if isinstance(k, str) and not k.startswith("__") and _plain(v)}
        return {"value": value, "state": state, "grad_mode": R.is_grad_enabled()}

    # -- Tensor functions and backward: values and gradients of any order -----------------------
    def _base(self, s: Spec, desc: dict, ts: list) -> Any:
        """The reference's result on the reference's tensors ``ts`` (with the graph recorded)."""
        R = self.engine.root
        if desc.get("member") == "backward":
            n = int(desc["n"])
            xs, grad = ts[:n], ts[n]
            fn = self._member(s, "backward", desc.get("state")).__self__
            out = R.Tensor(fn.forward(*[x.data for x in xs]))
            fn.inputs = tuple(xs)
            fn.needs_input_grad = tuple(bool(b) for b in desc["needs"])
            fn._output_ref = weakref.ref(out)
            out.grad_fn = fn
            out._requires_grad = True
            result = fn.backward(grad)
            result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            return ("tuple" if n > 1 else "tensor"), result, out
        function = self._member(s, desc.get("member"), desc.get("state"))
        kwargs = {}
        for name, slot, value in desc["template"]:
            kwargs[name] = ts[slot] if slot is not None else _copy(value)
        result = _invoke(function, kwargs)
        if isinstance(result, R.Tensor):
            return "tensor", (result,), None
        if isinstance(result, (tuple, list)) and result and all(r is None or isinstance(r, R.Tensor) for r in result):
            return ("tuple" if isinstance(result, tuple) else "list"), tuple(result), None
        return "plain", result, None

    def _program(self, s: Spec, desc: dict, path: list, ts: list):
        """Node ``path`` of the sealed call: output path[0] of the reference, then the gradient with
        respect to input path[k] of the node before, with the last tensor as the upstream gradient."""
        R = self.engine.root
        if len(path) == 1:
            kind, outs, keep = self._base(s, desc, ts)
            if kind == "plain" or not 0 <= path[0] < len(outs) or outs[path[0]] is None:
                raise OracleError("ValueError", "no such output")
            return outs[path[0]], keep
        *inputs, upstream = ts
        y, keep = self._program(s, desc, path[:-1], inputs)
        i = path[-1]
        if not 0 <= i < len(inputs):
            raise OracleError("ValueError", "no such input")
        x = inputs[i]
        zero = R.Tensor(np.zeros_like(x.data))
        if not (y.requires_grad and x.requires_grad):
            return zero, keep
        (d,) = R.grad(y, [x], upstream, create_graph=True, allow_unused=True)
        return (zero if d is None else d), (keep, y)

    def _eval(self, s: Spec, request: dict) -> Any:
        R = self.engine.root
        desc, paths = request.get("desc"), request.get("paths")
        arrays = request.get("arrays")
        if not isinstance(desc, dict) or not isinstance(arrays, list) \
                or not all(isinstance(a, np.ndarray) for a in arrays):
            raise OracleError("TypeError", "malformed request")
        with R.set_grad_enabled(True):
            ts = [R.Tensor(a.copy(), requires_grad=a.dtype.kind == "f") for a in arrays]
            if paths is None:
                kind, outs, _ = self._base(s, desc, ts)
                if kind == "plain":
                    return {"kind": "plain", "value": outs}
                return {"kind": kind, "values": [None if o is None else np.array(o.data) for o in outs]}
            values = []
            for path in paths:
                if not isinstance(path, list) or not path or not all(type(p) is int for p in path):
                    raise OracleError("TypeError", "malformed request")
                node, _ = self._program(s, desc, path, list(ts))
                values.append(np.array(node.data))
            return values

    # -- assignment 1's scalar ops ----------------------------------------------------------------
    def _scalar(self, s: Spec, request: dict) -> dict:
        Value = self.engine.module("solutions.scalar").Value
        function = self._member(s, request.get("member"), None)
        data = request.get("data")
        if not isinstance(data, list):
            raise OracleError("TypeError", "malformed request")
        values = [Value(d) for d in data]
        kwargs = {name: values[slot] if slot is not None else _copy(value)
                  for name, slot, value in request["template"]}
        out = _invoke(function, kwargs)
        if not isinstance(out, Value):
            raise OracleError("TypeError", f"{s.name} did not give a Value")
        own = {id(v): i for i, v in enumerate(values)}
        children = [[own.get(id(c)), None if id(c) in own else c.data] for c in out._children]
        partials = []
        for probe in (1.0, float("nan")):
            for c in out._children:
                c.grad = 0.0
            out.grad = probe
            out._backward()
            partials.append([c.grad for c in out._children])
        # A child left at exactly 0 by a nan upstream gradient was sent nothing at all.
        sent = [p if not (q == 0.0) else None for p, q in zip(partials[0], partials[1], strict=True)]
        return {"data": out.data, "op": out._op, "children": children, "partials": sent}

    # -- graph walks --------------------------------------------------------------------------------
    def _walk(self, s: Spec, request: dict) -> list[int]:
        R = self.engine.root
        Value = self.engine.module("solutions.scalar").Value
        function = self._member(s, request.get("member"), None)
        structure = request.get("nodes")
        if not isinstance(structure, list):
            raise OracleError("TypeError", "malformed request")
        nodes: list = []
        for kind, requires_grad, _ in structure:
            nodes.append(Value(0.0) if kind == "value" else R.Tensor(np.zeros(()), requires_grad=bool(requires_grad)))
        for node, (kind, _, inputs) in zip(nodes, structure, strict=True):
            if kind == "value":
                node._children = tuple(nodes[i] for i in inputs)
            elif inputs is not None:
                fn = R.Function()
                fn.inputs = tuple(nodes[i] for i in inputs)
                node.grad_fn = fn

        def decode(arg):
            if isinstance(arg, dict):
                return nodes[arg["node"]] if "node" in arg else _copy(arg.get("plain"))
            return [decode(a) for a in arg]
        order = _invoke(function, {name: decode(arg) for name, arg in request["template"]})
        where = {id(n): i for i, n in enumerate(nodes)}
        return [where[id(n)] for n in order]


def _message(error: BaseException) -> str | None:
    """The first line of the reference's message (it names the op and the shapes, as a student's
    own kit would), unless it quotes a line of an exercise body."""
    text = str(error).strip().split("\n")[0][:300]
    if not text or quotes(text, "~"):  # every assignment's bodies
        return None
    return text


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` crosses the channel as data (what an op's parameters are)."""
    if isinstance(value, (bool, int, float, str, type(None), np.ndarray, np.generic)):
        return True
    if isinstance(value, (tuple, list)) and depth < 4:
        return all(_plain(v, depth + 1) for v in value)
    return False


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value


def _invoke(function, kwargs: dict) -> Any:
    """Call ``function`` with ``kwargs`` named as in its signature (``*args`` and ``**kw`` unpacked)."""
    args: list = []
    named: dict = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if name not in kwargs:
            continue
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            args.extend(kwargs[name])
        elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
            named.update(kwargs[name])
        elif parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            args.append(kwargs[name])
        else:
            named[name] = kwargs[name]
    return function(*args, **named)
