"""Sealed references: the sandbox's stand-ins for exercises whose reference stays with the judge.

When an exercise of assignment A is judged, the other exercises of A are neither the student's
(isolation: one bug costs points once) nor the reference's code (the sandbox would hand it out):
the kit's body of each is the one line ``return __import__("_sealed").call(id, kind, locals())``.
The call goes over the channel to the trusted judge, which runs the reference on plain data
(arrays, numbers, tuples) and answers with plain data. Nothing of the reference's code enters
the sandbox. What comes back depends on what the call was given:

- plain data (``im2col(x, 3, 3)``, ``Softmax.forward``): the reference's result;
- Tensors (``unbroadcast(grad, shape)``, ``pad2d(x, 1)``) or ``Function.backward``: each Tensor
  the reference returns becomes a node of the student's graph whose value, and whose gradient
  with respect to each input, the judge computes. The gradient of a sealed node is itself a
  sealed node, so gradients of gradients (``create_graph=True``) work to any order;
- scalar ``Value``s (assignment 1's ops): a Value with the reference's data, children and a
  ``_backward`` closure that sends the reference's local derivatives;
- ``kind == "walk"`` (a graph walk such as ``toposort``): the judge runs the reference on a
  mirror of the graph's structure and answers with the order of its nodes.

Like ``runner``, only the standard library, NumPy and ``wire``.
"""
from __future__ import annotations

import builtins
import importlib
import sys

from wire import WireError, decode, encode, pack, write

_channel: list = []  # [reader, out fd], set by the runner before any student code runs
_node_class: list = []


def connect(reader, out_fd: int) -> None:
    _channel[:] = [reader, out_fd]


def _ask(request: dict):
    blobs: list[bytes] = []
    try:
        frame = encode(request, blobs)
    except WireError as error:
        raise TypeError(f"exercise {request.get('exercise')}: the course's version runs with the judge and "
                        f"takes Tensors, arrays, numbers, strings and tuples of them ({error})") from None
    reader, out = _channel
    write(out, pack({"oracle": frame}, blobs))
    reply, blobs = reader.read()
    if "err" in reply:
        raise _error(reply["err"])
    return decode(reply.get("value"), blobs)


def _error(err) -> BaseException:
    name, message = str(err.get("type", "RuntimeError")), str(err.get("msg", ""))
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    try:
        return cls(message)
    except Exception:  # noqa: BLE001 (a builtin whose constructor wants more arguments)
        return RuntimeError(message)


def _plain(value) -> bool:
    try:
        encode(value, [])
    except WireError:
        return False
    return True


def _state(obj) -> dict:
    """The plain-data attributes of an op or object (its parameters: axis, shape, stride, ...)."""
    try:
        items = list(vars(obj).items())
    except TypeError:
        return {}
    return {k: v for k, v in items if isinstance(k, str) and _plain(v)}


def _engine():
    return importlib.import_module("coursekit.engine")


def _scalar_value():
    return getattr(sys.modules.get("coursekit.engine.scalar"), "Value", None)


def call(exercise: str, kind: str, args: dict):
    """The body of a sealed exercise (``args`` are its ``locals()``: the arguments)."""
    member = sys._getframe(1).f_code.co_name
    args = dict(args)
    this = args.pop("self", None)
    engine = _engine()
    if kind == "walk":
        return _walk(exercise, member, args)
    if this is not None and member == "backward" and isinstance(this, engine.Function):
        desc = {"exercise": exercise, "member": member, "state": _state(this), "n": len(this.inputs),
                "needs": [bool(n) for n in this.needs_input_grad]}
        return _graph(desc, [*this.inputs, *args.values()])
    state = None if this is None else _state(this)
    Value = _scalar_value()
    if Value is not None and any(isinstance(v, Value) for v in args.values()):
        return _scalar(exercise, member, args, Value)
    if any(isinstance(v, engine.Tensor) for v in args.values()):
        tensors: list = []
        template = []
        for name, value in args.items():
            if isinstance(value, engine.Tensor):
                template.append([name, len(tensors), None])
                tensors.append(value)
            else:
                template.append([name, None, value])
        return _graph({"exercise": exercise, "member": member, "state": state, "template": template}, tensors)
    if member == "__exit__":  # the exception being raised stays here (it is not data): None, None, None
        args = {name: (None,) * len(value) if isinstance(value, tuple) else None for name, value in args.items()}
    reply = _ask({"op": "call", "exercise": exercise, "member": member, "state": state, "args": args,
                  "grad_mode": bool(engine.is_grad_enabled())})
    if this is not None and isinstance(reply.get("state"), dict):
        for key, value in reply["state"].items():
            if isinstance(key, str) and not key.startswith("__"):
                try:
                    setattr(this, key, value)
                except Exception:  # noqa: BLE001 (a student's class may refuse attributes)
                    pass
    if isinstance(reply.get("grad_mode"), bool) and reply["grad_mode"] != engine.is_grad_enabled():
        engine.set_grad_enabled(reply["grad_mode"])
    return reply.get("value")


def _graph(desc: dict, tensors: list):
    """The reference's result on ``tensors``, each Tensor of it a sealed node of the graph."""
    reply = _ask({"op": "eval", "exercise": desc["exercise"], "desc": desc, "arrays": [t.data for t in tensors],
                  "paths": None})
    if reply["kind"] == "plain":
        return reply["value"]
    Node = _node()
    outs = [None if value is None else Node.apply(*tensors, desc=desc, path=[j], value=value)
            for j, value in enumerate(reply["values"])]
    if reply["kind"] == "tensor":
        return outs[0]
    return tuple(outs) if reply["kind"] == "tuple" else outs


def _node():
    if not _node_class:
        Function = _engine().Function

        class Sealed(Function):
            """An output of a sealed reference: the judge computes its value and its gradients."""

            def __init__(self, desc: dict, path: list, value=None):
                self.desc, self.path, self.value = desc, path, value

            def forward(self, *arrays):
                if self.value is not None:
                    value, self.value = self.value, None
                    return value
                return _ask({"op": "eval", "exercise": self.desc["exercise"], "desc": self.desc,
                             "arrays": list(arrays), "paths": [self.path]})[0]

            def backward(self, grad):
                needs = list(self.needs_input_grad)
                paths = [[*self.path, i] for i, need in enumerate(needs) if need]
                values = iter(_ask({"op": "eval", "exercise": self.desc["exercise"], "desc": self.desc,
                                    "arrays": [t.data for t in self.inputs] + [grad.data], "paths": paths}))
                outs = [Sealed.apply(*self.inputs, grad, desc=self.desc, path=[*self.path, i], value=next(values))
                        if need else None for i, need in enumerate(needs)]
                return outs[0] if len(outs) == 1 else tuple(outs)

        _node_class.append(Sealed)
    return _node_class[0]


# The judge's answers for assignment 1's scalar ops, by their plain arguments: an op of the
# reference is a function of those alone, and a check's long chains (x + 0.0 + 0.0 + ...) repeat one
# call thousands of times. A reply is plain data, rebuilt into new Values on every call.
_scalar_replies: dict = {}


def _scalar_key(exercise: str, member: str, template: list, data: list):
    """The cache key of a call, or None if an argument is not a plain number, string or None."""
    plain = (bool, int, float, str, type(None))
    parts = [(name, slot, type(value).__name__, value) for name, slot, value in template]
    if not all(type(value) in plain for *_, value in template) or not all(type(d) in (int, float) for d in data):
        return None
    return (exercise, member, tuple(parts), tuple((type(d).__name__, d) for d in data))


def _scalar(exercise: str, member: str, args: dict, Value):
    values: list = []
    template = []
    for name, value in args.items():
        if isinstance(value, Value):
            template.append([name, len(values), None])
            values.append(value)
        else:
            template.append([name, None, value])
    data = [v.data for v in values]
    key = _scalar_key(exercise, member, template, data)
    reply = _scalar_replies.get(key) if key is not None else None
    if reply is None:
        reply = _ask({"op": "scalar", "exercise": exercise, "member": member, "template": template, "data": data})
        if key is not None:
            if len(_scalar_replies) >= 4096:
                _scalar_replies.clear()
            _scalar_replies[key] = reply
    children = tuple(values[i] if i is not None else Value(data) for i, data in reply["children"])
    out = Value(reply["data"], children, reply["op"])
    partials = reply["partials"]

    def _backward():
        for child, partial in zip(children, partials, strict=True):
            if partial is not None:  # None: the reference sends this child nothing at all
                child.grad += partial * out.grad

    out._backward = _backward
    return out


def _walk(exercise: str, member: str, args: dict):
    """Run a graph walk of the reference on the structure of the student's graph."""
    engine, Value = _engine(), _scalar_value()
    nodes: list = []
    index: dict[int, int] = {}
    structure: list = []

    def add(node) -> int:
        if id(node) not in index:
            index[id(node)] = len(nodes)
            nodes.append(node)
            structure.append(None)
            todo.append(node)
        return index[id(node)]

    def encode_arg(value):
        if isinstance(value, engine.Tensor) or (Value is not None and isinstance(value, Value)):
            return {"node": add(value)}
        if isinstance(value, (list, tuple)):
            return [encode_arg(v) for v in value]
        return {"plain": value}

    todo: list = []
    template = [[name, encode_arg(value)] for name, value in args.items()]
    while todo:
        node = todo.pop()
        k = index[id(node)]
        if isinstance(node, engine.Tensor):
            fn = node.grad_fn
            inputs = [add(x) for x in fn.inputs] if fn is not None else None
            structure[k] = ["tensor", bool(node.requires_grad), inputs]
        else:
            structure[k] = ["value", None, [add(c) for c in node._children]]
    order = _ask({"op": "walk", "exercise": exercise, "member": member, "template": template, "nodes": structure})
    return [nodes[i] for i in order]
