"""Hidden checks of a05_layers: the Module, initialization, layers, the loss and its numerical
gradient, optimizers and mini-batches.

The exercises are `solutions/nn/module.py`'s `Module` (its registration, walks and state dict),
functions of `solutions/nn/` (fan_in_and_fan_out, kaiming_uniform_, xavier_uniform_, xavier_normal_,
linear, dropout, batch_norm, cross_entropy, numerical_gradient), `solutions/optim.py` (SGD._update,
Adam._update) and `solutions/data.py` (DataLoader.__iter__). Each is graded by the trusted judge: the
student's answer runs in the sandbox's engine, where every other exercise is the reference, on
inputs built there with that engine (Tensors, modules, generators, datasets, running-statistics
arrays); the same case runs through the reference engine here, and only plain data (arrays,
numbers) crosses, so gradients are checked fully. Random parts (initialization, dropout masks,
shuffling) draw from generators made in the sandbox and are checked by their contract, not by the
reference's exact draws: bounds and variances, mask values and rates, permutations,
reproducibility from the given generator. Optimizers are run for several steps with gradients set
by hand and compared with PyTorch's update rules. Messages name the kind of mistake.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    SandboxTimeout,
    close,
    current,
    graded,
    in_sandbox,
    judged,
    run,
    same_object,
    sandbox_type,
    student_engine,
    student_module,
    time_limit,
    type_name,
)

TIME_LIMIT = 30.0


def _slow(name: str) -> str:
    return f"{name}: the checks took more than {TIME_LIMIT:g} s on small inputs; is there an endless loop?"


def _dtype_name(dtype) -> str:
    return np.dtype(dtype).name


# --------------------------------------------------------------------------------------------
# The sandbox side: objects made there, with the student's engine
# --------------------------------------------------------------------------------------------


def _student_rng(seed: int):
    """`np.random.default_rng(seed)`, made in the sandbox (a Generator does not cross)."""
    return current().module("numpy").random.default_rng(seed)


def _sandbox_array(a: np.ndarray):
    """A sandbox copy of `a`, kept there (a proxy): what the student's code changes in place shows
    up in `np.asarray(proxy)`."""
    return in_sandbox(a)


def _sandbox_subclass(base, name: str, namespace: dict):
    """`type(name, (*bases,), namespace)` in the sandbox, for classes of the sandbox (proxies)."""
    bases = base if isinstance(base, tuple) else (base,)
    return sandbox_type(bases[0])(name, bases, namespace)


def _tensor_result(label: str, name: str, out, shape=None):
    if not isinstance(out, student_engine().Tensor):
        raise GradingFailure(f"{label}: {name} returned {type_name(out)}; return a Tensor built with Tensor "
                             "operations")
    if shape is not None and out.shape != tuple(shape):
        raise GradingFailure(f"{label}: {name} returned a Tensor of the wrong shape")
    return out


def _raises(f, *args, **kwargs):
    """The exception f raises (None if it returns); a student's exception also is its builtin
    class (`isinstance(error, ValueError)`)."""
    try:
        f(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 (the student's code: any exception is an answer here)
        return error
    return None


# --------------------------------------------------------------------------------------------
# Module: registration, the walks, the state dict
# --------------------------------------------------------------------------------------------
def _kept(fn, *args):
    """`fn(*args)` called in the sandbox with its result kept there (not copied here): a holder
    whose `[0]` reads the result as it is *now*. A plain dict that a function returns would
    otherwise be copied at once, hiding whether it shares its arrays with the model."""
    np_s = current().module("numpy")
    boxes = [np_s.array([None], dtype="O") for _ in args]
    for box, arg in zip(boxes, args, strict=False):
        box[0] = arg
    return np_s.frompyfunc(fn, len(args), 1)(*boxes)


def _names(pairs, label: str, what: str) -> list[str]:
    if not isinstance(pairs, list) or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
        raise GradingFailure(f"{label}: {what} must yield (name, object) pairs")
    names = [p[0] for p in pairs]
    if not all(isinstance(n, str) for n in names):
        raise GradingFailure(f"{label}: the names {what} yields are strings")
    return names


class _Tree:
    """The same small model built with the student's Module (in the sandbox) or the reference's:

        root ── fc: weight, bias                         (assigned first)
             ── block ── inner ── leaf: weight, buffer running   (a grandchild's grandchild)
                      ── norm: weight, bias = None, buffer mean, buffer unused = None
             ── tied: weight = fc.weight (a shared parameter)
             ── again = block.inner (a shared module)
             scale (the root's own parameter, assigned last), a plain Tensor, a number

    `arrays` keeps each parameter's and buffer's array under its state_dict key; in the sandbox
    they are proxies of the very arrays the model holds, so writing into them changes the model.
    """

    def __init__(self, Module, Parameter, Tensor, array, rng):
        shapes = {"fc.weight": (3, 4), "fc.bias": (3,), "block.inner.leaf.weight": (2, 3),
                  "block.inner.leaf.running": (2,), "block.norm.weight": (3,), "block.norm.mean": (3,),
                  "scale": (1,)}
        self.arrays = {key: array(rng.standard_normal(shape)) for key, shape in shapes.items()}
        a = self.arrays
        self.root = root = Module()
        root.fc = Module()
        root.fc.weight = Parameter(a["fc.weight"])
        root.fc.bias = Parameter(a["fc.bias"])
        root.block = Module()
        root.block.inner = Module()
        root.block.inner.leaf = Module()
        root.block.inner.leaf.weight = Parameter(a["block.inner.leaf.weight"])
        root.block.inner.leaf.register_buffer("running", a["block.inner.leaf.running"])
        root.block.norm = Module()
        root.block.norm.weight = Parameter(a["block.norm.weight"])
        root.block.norm.register_parameter("bias", None)
        root.block.norm.register_buffer("mean", a["block.norm.mean"])
        root.block.norm.register_buffer("unused", None)
        root.tied = Module()
        root.tied.weight = root.fc.weight
        root.again = root.block.inner
        root.scale = Parameter(a["scale"])
        root.plain = Tensor(np.ones(2), requires_grad=True)
        root.number = 3


def _reference_tree(rng_seed: int) -> _Tree:
    from solutions import Tensor
    from solutions.nn import Module, Parameter
    return _Tree(Module, Parameter, Tensor, lambda a: a, np.random.default_rng(rng_seed))


def _student_tree(Module, rng_seed: int) -> _Tree:
    module = student_module("solutions.nn.module")
    return run("building a model with your Module (Module(), attribute assignments, register_buffer)",
               lambda: _Tree(Module, module.Parameter, student_engine().Tensor, in_sandbox,
                             np.random.default_rng(rng_seed)))


def _check_setattr(Module, rng):
    Parameter = student_module("solutions.nn.module").Parameter
    Tensor = student_engine().Tensor
    label = "__setattr__"

    def registry(m, which):
        return list(run(f"{label}: reading self.{which}", lambda: list(getattr(m, which))))

    m = run("Module()", Module)
    w = Parameter(rng.standard_normal((3, 2)))
    run(f"{label}: self.weight = Parameter(...)", lambda: setattr(m, "weight", w))
    run(f"{label}: self.bias = Parameter(...)", lambda: setattr(m, "bias", Parameter(np.zeros(3))))
    run(f"{label}: self.child = Module()", lambda: setattr(m, "child", Module()))
    run(f"{label}: self.gain = Tensor(..., requires_grad=True)",
        lambda: setattr(m, "gain", Tensor(np.ones(3), requires_grad=True)))
    run(f"{label}: self.size = 3", lambda: setattr(m, "size", 3))
    params, children = registry(m, "_parameters"), registry(m, "_modules")
    if "gain" in params:
        raise GradingFailure(f"{label}: only a Parameter is registered as a parameter; a plain Tensor, even one "
                             "that requires grad, stays an ordinary attribute (the book's silent bug)")
    if params != ["weight", "bias"]:
        raise GradingFailure(f"{label}: a Parameter assigned to self.name goes into self._parameters under its "
                             "name, in the order of assignment")
    if children != ["child"]:
        raise GradingFailure(f"{label}: a Module assigned to self.name goes into self._modules (a child)")
    if not same_object(run(f"{label}: reading self.weight", lambda: m.weight), w) or \
            run(f"{label}: reading self.size", lambda: m.size) != 3:
        raise GradingFailure(f"{label}: after filing the value, set the attribute as usual "
                             "(object.__setattr__(self, name, value)), so that self.name reads it back")
    # assigning again: the same place, the new value
    w2 = Parameter(rng.standard_normal((3, 2)))
    run(f"{label}: self.weight = another Parameter", lambda: setattr(m, "weight", w2))
    if registry(m, "_parameters") != ["weight", "bias"] or \
            not same_object(run(label, lambda: m._parameters["weight"]), w2):
        raise GradingFailure(f"{label}: assigning a new Parameter to an existing name replaces it in place: the "
                             "name keeps its position, once")
    error = run(f"{label}: self.weight = a plain Tensor", _raises, setattr, m, "weight", Tensor(np.ones((3, 2))))
    if not isinstance(error, TypeError):
        raise GradingFailure(f"{label}: assigning something other than a Parameter (or None) to a parameter's "
                             "name must raise a TypeError that says to write to .data instead")
    run(f"{label}: self.bias = None", lambda: setattr(m, "bias", None))
    if registry(m, "_parameters") != ["weight", "bias"] or run(label, lambda: m._parameters["bias"]) is not None:
        raise GradingFailure(f"{label}: None assigned to a parameter's name keeps the name reserved, with None "
                             "(as bias=False does)")
    # a name that changes kind moves to the other registry
    run(f"{label}: self.child = Parameter(...)", lambda: setattr(m, "child", Parameter(np.ones(2))))
    if "child" in registry(m, "_modules") or "child" not in registry(m, "_parameters"):
        raise GradingFailure(f"{label}: a name lives in one registry at a time: a child's name given a Parameter "
                             "becomes a parameter (remove it from self._modules)")
    run(f"{label}: self.sub = Module(); self.sub = 5", lambda: (setattr(m, "sub", Module()), setattr(m, "sub", 5)))
    if "sub" in registry(m, "_modules"):
        raise GradingFailure(f"{label}: a child's name given something that is not a Module is no longer a child")
    # buffers: a new array for a buffer's name keeps it a buffer
    run(f"{label}: register_buffer('count', ...)", lambda: m.register_buffer("count", np.zeros(2)))
    run(f"{label}: self.count = a new array", lambda: setattr(m, "count", np.ones(2)))
    buffer = run(label, lambda: m._buffers["count"]) if "count" in registry(m, "_buffers") else None
    if buffer is None or not np.array_equal(np.asarray(buffer), np.ones(2)):
        raise GradingFailure(f"{label}: an ndarray assigned to a buffer's name stays a buffer, with the new array "
                             "in self._buffers (BatchNorm reassigns its counter this way)")
    error = run(f"{label}: self.count = 'text'", _raises, setattr, m, "count", "text")
    if not isinstance(error, TypeError):
        raise GradingFailure(f"{label}: a buffer's name takes an ndarray or None; anything else is a TypeError")


def _check_named_modules(Module, rng):
    label = "named_modules()"
    want = [n for n, _ in _reference_tree(0).root.named_modules()]
    tree = _student_tree(Module, 0)
    got = _names(run(label, lambda: list(tree.root.named_modules())), label, "named_modules")
    if got == want:
        pairs = run(label, lambda: list(tree.root.named_modules()))
        if not same_object(pairs[0][1], tree.root) or not same_object(pairs[2][1], tree.root.block):
            raise GradingFailure(f"{label}: yield the modules themselves with their names")
        prefixed = _names(run("named_modules(prefix='net')", lambda: list(tree.root.named_modules("net"))),
                          "named_modules(prefix='net')", "named_modules")
        if prefixed != ["net"] + [f"net.{n}" for n in want[1:]]:
            raise GradingFailure("named_modules(prefix='net'): the module itself is named prefix, and every name "
                                 "below starts with prefix + '.'")
        return
    if want[1:] == got:
        raise GradingFailure(f"{label}: the module itself comes first, named prefix ('' at the top)")
    if len(got) > len(want) and set(got) >= set(want):
        raise GradingFailure(f"{label}: a module reachable twice (shared by two parents) is listed once, under "
                             "its first name: remember the modules already seen")
    if set(got) < set(want):
        raise GradingFailure(f"{label}: every descendant, grandchildren and deeper too, not only the children: "
                             "recurse into each child's named_modules")
    if sorted(got) == sorted(want):
        raise GradingFailure(f"{label}: depth first, in assignment order: a module, then each child's whole "
                             "subtree in turn")
    if [name.lstrip(".") for name in got] == want:
        raise GradingFailure(f"{label}: no dot at the top: a child of the top module is named by its attribute "
                             "alone ('body', then 'body.0'), since the top module's name is ''")
    raise GradingFailure(f"{label}: wrong names; a child's name is its parent's name + '.' + its attribute")


def _check_named_parameters(Module, rng):
    label = "named_parameters()"
    reference = _reference_tree(1)
    want = [n for n, _ in reference.root.named_parameters()]
    tree = _student_tree(Module, 1)
    pairs = run(label, lambda: list(tree.root.named_parameters()))
    got = _names(pairs, label, "named_parameters")
    if got != want:
        if "tied.weight" in got:
            raise GradingFailure(f"{label}: a parameter shared by two modules (weight tying) is listed once, under "
                                 "its first name: remember the parameters already yielded (by id)")
        if "block.norm.bias" in got:
            raise GradingFailure(f"{label}: a parameter set to None (bias=False) is not listed")
        if "plain" in got:
            raise GradingFailure(f"{label}: only Parameters are listed (a plain Tensor is not one)")
        if set(got) < set(want):
            raise GradingFailure(f"{label}: the parameters of every descendant, grandchildren and deeper too")
        if sorted(got) == sorted(want):
            raise GradingFailure(f"{label}: module by module in named_modules() order, each module's own "
                                 "parameters first, in assignment order")
        raise GradingFailure(f"{label}: wrong names; the dotted path of the module, then the attribute")
    objects = dict(zip(got, [p for _, p in pairs], strict=False))
    if not same_object(objects["fc.weight"], tree.root.fc.weight):
        raise GradingFailure(f"{label}: yield the Parameter objects themselves (the optimizer updates them in "
                             "place), not copies")
    for kwargs, want_names, text in [
        ({"recurse": False}, [n for n, _ in reference.root.named_parameters(recurse=False)], "recurse=False"),
        ({"prefix": "net"}, [n for n, _ in reference.root.named_parameters(prefix="net")], "prefix='net'"),
    ]:
        got = _names(run(f"named_parameters({text})", lambda: list(tree.root.named_parameters(**kwargs))),
                     f"named_parameters({text})", "named_parameters")
        if got != want_names:
            raise GradingFailure(f"named_parameters({text}): " + (
                "recurse=False lists only the module's own parameters" if "recurse" in kwargs else
                "every name starts with prefix + '.'"))
    if [type_name(p) for p in run("parameters()", lambda: list(tree.root.parameters()))] != ["Parameter"] * len(want):
        raise GradingFailure(f"{label}: parameters() (given) yields the parameters of named_parameters()")


def _check_train(Module, rng):
    tree = _student_tree(Module, 2)
    root = tree.root
    reference = _reference_tree(2)
    names = [n for n, _ in reference.root.named_modules()]

    def modes():
        return [bool(run("reading .training", lambda m=m: m.training)) for _, m in
                run("named_modules()", lambda: list(root.named_modules()))]

    out = run("model.eval()", root.eval)
    if not same_object(out, root):
        raise GradingFailure("train(mode) returns the module itself, so that model.eval() and model.train() "
                             "can be chained (model = Net().eval())")
    flags = modes()
    if len(flags) != len(names):
        raise GradingFailure("train(): named_modules() is wrong, see its message")
    if flags[0]:
        raise GradingFailure("eval() (train(False)) sets training = False on the module itself too")
    if any(flags):
        raise GradingFailure("eval() must reach every descendant, grandchildren and deeper too, not only the "
                             "children: walk self.modules()")
    run("model.block.train()", root.block.train)
    want = [n == "block" or n.startswith("block.") for n in names]
    if modes() != want:
        raise GradingFailure("train() on a sub-module sets its own subtree only (its parent stays in eval mode)")
    run("model.train(True)", lambda: root.train(True))
    if not all(modes()):
        raise GradingFailure("train() (mode=True) sets training = True on the module and every descendant")


def _check_state_dict(Module, rng):
    label = "state_dict()"
    reference = _reference_tree(3)
    want = reference.root.state_dict()
    tree = _student_tree(Module, 3)
    holder = run(label, _kept, run("reading Module.state_dict", lambda: Module.state_dict), tree.root,
                 hint=lambda e: ("a parameter set to None (bias=False) has no array: _state_arrays skips it"
                                 if "NoneType" in str(e) else None))
    sd = run(label, lambda: holder[0])
    keys = run(label, lambda: list(sd)) if not isinstance(sd, dict) else list(sd)
    if not all(isinstance(k, str) for k in keys):
        raise GradingFailure(f"{label}: return a dict from dotted names to arrays")
    if keys != list(want):
        buffers = [k for k in want if k.endswith(("running", "mean"))]
        if all(k not in keys for k in buffers) and [k for k in want if k not in buffers] == keys:
            raise GradingFailure(f"{label}: the buffers (running statistics, registered with register_buffer) are "
                                 "part of the state too: a model restored without them is not the same model")
        if set(keys) == set(want):
            raise GradingFailure(f"{label}: module by module in named_modules() order, each module's parameters "
                                 "then its buffers")
        if "block.norm.bias" in keys or "block.norm.unused" in keys:
            raise GradingFailure(f"{label}: a parameter or buffer set to None has no entry")
        raise GradingFailure(f"{label}: one entry per parameter and buffer of every module, keyed by its dotted "
                             "name (as named_parameters and named_buffers name them)")
    for key in keys:
        value = run(label, lambda k=key: sd[k])
        if not isinstance(value, np.ndarray):
            raise GradingFailure(f"{label}: each value is an ndarray (p.data for a parameter), got "
                                 f"{type_name(value)}")
        if value.shape != want[key].shape or not np.array_equal(value, want[key]):
            raise GradingFailure(f"{label}: each value holds the parameter's (or buffer's) current values")
    # training goes on: the model's arrays change in place; a state dict taken before must not
    for key in ("fc.weight", "block.inner.leaf.running"):
        run("changing the model in place", lambda k=key: tree.arrays[k].__setitem__(Ellipsis, 0.0))
    later = run(label, lambda: holder[0])
    for key in ("fc.weight", "block.inner.leaf.running"):
        if not np.array_equal(np.asarray(run(label, lambda k=key: later[k])), want[key]):
            kind = "parameter" if key == "fc.weight" else "buffer"
            raise GradingFailure(f"{label}: the values must be copies (array.copy()): yours share memory with the "
                                 f"model, so training after the state_dict() call changed a {kind} in it")


def _check_load_state_dict(Module, rng):
    label = "load_state_dict"
    reference = _reference_tree(4)
    keys = list(reference.root.state_dict())
    source = _reference_tree(5).root.state_dict()  # other values, the same keys and shapes

    def sandbox_state(state):
        """`state` as a dict in the sandbox, and proxies of its arrays (writing into them changes it)."""
        d = in_sandbox({})
        kept = {}
        for key, value in state.items():
            kept[key] = in_sandbox(np.array(value))
            run(label, lambda k=key: d.__setitem__(k, kept[k]))
        return d, kept

    def load(tree, state, strict=True):
        d, kept = sandbox_state(state)
        return run(f"{label}(state_dict{', strict=False' if not strict else ''})",
                   lambda: tree.root.load_state_dict(d, strict)), kept

    def load_error(tree, state, strict, what):
        """The exception the student's load_state_dict raises (None if it returns)."""
        d, _ = sandbox_state(state)
        return run(f"{label} with {what}", lambda: _raises(tree.root.load_state_dict, d, strict))

    def values(tree):
        return {k: np.asarray(run(label, lambda a=a: np.asarray(a))) for k, a in tree.arrays.items()}

    tree = _student_tree(Module, 4)
    before = {k: np.asarray(a) for k, a in tree.arrays.items()}
    _, kept = load(tree, source)
    now = values(tree)
    tied = run(label, lambda: np.asarray(tree.root.tied.weight.data))
    if all(np.array_equal(now[k], before[k]) for k in now):
        current_values = run(label, lambda: np.asarray(tree.root.fc.weight.data))
        if np.array_equal(current_values, source["fc.weight"]):
            raise GradingFailure(f"{label}: copy the values into the model's existing arrays, in place "
                                 "(array[...] = value): whoever holds them (an optimizer, the other module of "
                                 "a shared weight) must see the new values")
        raise GradingFailure(f"{label}: nothing was loaded: copy each value into the model's array in place "
                             "(array[...] = value); rebinding a name (array = value) does not change the model")
    for key in now:
        if not np.array_equal(now[key], source[key]):
            kind = "buffer" if key.endswith(("running", "mean")) else "parameter"
            raise GradingFailure(f"{label}: every parameter and buffer of every module is loaded, in place "
                                 f"(array[...] = value); a {kind} was not")
    if not np.array_equal(tied, source["fc.weight"]):
        raise GradingFailure(f"{label}: a shared parameter must show the loaded values under both names")
    for key in ("fc.weight", "block.norm.mean"):
        run("changing the state dict after loading", lambda k=key: kept[k].__setitem__(Ellipsis, 7.0))
    if any(np.any(values(tree)[k] == 7.0) for k in ("fc.weight", "block.norm.mean")):
        raise GradingFailure(f"{label}: copy the values: yours makes the model share memory with the state dict, "
                             "so changing the dict afterwards changes the model")
    # strict: missing and unexpected keys are errors that name them; nothing changes then
    for drop, extra, what in [("block.inner.leaf.running", None, "a missing key"),
                              (None, "block.extra", "an unexpected key")]:
        tree = _student_tree(Module, 4)
        state = {k: v for k, v in source.items() if k != drop}
        if extra:
            state[extra] = np.zeros(2)
        before = values(tree)
        error = load_error(tree, state, True, what)
        name = drop or extra
        if not isinstance(error, RuntimeError):
            raise GradingFailure(f"{label} with strict=True and {what}: strict=True must raise on missing and "
                                 "unexpected keys: raise a RuntimeError that names the key"
                                 + (" (yours raised nothing)" if error is None else ""))
        if name not in str(error):
            raise GradingFailure(f"{label} with strict=True and {what}: the error must name the key")
        if any(not np.array_equal(values(tree)[k], before[k]) for k in before):
            raise GradingFailure(f"{label}: check every key and shape before changing anything: a load that "
                                 "fails must leave the model as it was")
        # The student's own exception would quote the hidden checkpoint's keys: say what is wrong instead.
        d, _ = sandbox_state(state)
        returned: list = []
        error = _raises(lambda: returned.append(tree.root.load_state_dict(d, False)))
        if isinstance(error, (SandboxTimeout, NotImplementedError)):
            raise error
        if error is not None:
            raise GradingFailure(f"{label} with strict=False and {what}: strict=False must not raise for missing "
                                 "or unexpected keys (only a shape mismatch is an error then): load what matches "
                                 "and return LoadResult(missing_keys, unexpected_keys); yours raised "
                                 f"{getattr(error, 'remote_type', type(error).__name__)}")
        result = returned[0]
        if result is None:
            raise GradingFailure(f"{label} with strict=False: return LoadResult(missing_keys, unexpected_keys), "
                                 "lists of the keys (yours returned None)")
        missing = run(label, lambda: list(result.missing_keys))
        unexpected = run(label, lambda: list(result.unexpected_keys))
        if missing != ([drop] if drop else []) or unexpected != ([extra] if extra else []):
            raise GradingFailure(f"{label} with strict=False: load what matches and return "
                                 "LoadResult(missing_keys, unexpected_keys), lists of the keys")
        if not np.array_equal(values(tree)["fc.weight"], source["fc.weight"]):
            raise GradingFailure(f"{label} with strict=False: the keys that match are loaded")
    # a shape mismatch is always an error naming the key and both shapes, even a broadcastable one
    for shape in [(1,), (2, 3)]:
        tree = _student_tree(Module, 4)
        state = dict(source)
        state["fc.bias"] = np.ones(shape)
        before = values(tree)
        error = load_error(tree, state, False, "a shape mismatch")
        if not isinstance(error, RuntimeError):
            raise GradingFailure(f"{label}: a value whose shape differs from the parameter's must raise a "
                                 "RuntimeError naming the key and both shapes, even with strict=False and even "
                                 "when NumPy could broadcast it" + (" (yours raised nothing)" if error is None
                                                                    else ""))
        text = str(error)
        if "fc.bias" not in text or str(shape) not in text or "(3,)" not in text:
            raise GradingFailure(f"{label}: the shape-mismatch error names the key and both shapes")
        if any(not np.array_equal(values(tree)[k], before[k]) for k in before):
            raise GradingFailure(f"{label}: check every key and shape before changing anything: a load that "
                                 "fails must leave the model as it was")
    assert keys  # the reference tree has state


@graded("a05-module", "solutions.nn.module:Module",
        regions=("__setattr__", "named_modules", "named_parameters", "train", "_state_arrays", "state_dict",
                 "load_state_dict"),
        points=4)
def check_module(Module, rng):
    with time_limit(TIME_LIMIT, _slow("Module")):
        _check_setattr(Module, rng)
        _check_named_modules(Module, rng)
        _check_named_parameters(Module, rng)
        _check_train(Module, rng)
        _check_state_dict(Module, rng)
        _check_load_state_dict(Module, rng)


# --------------------------------------------------------------------------------------------
# Initialization
# --------------------------------------------------------------------------------------------
@graded("a05-fan-in-fan-out", "solutions.nn.init:fan_in_and_fan_out", points=1)
def check_fan(fan_in_and_fan_out, rng):
    f = fan_in_and_fan_out
    cases = [((5, 3), "a Linear weight (out, in)"), ((8, 3, 3, 3), "a Conv2d weight (K, C, KH, KW)"),
             ((6, 2, 1, 5), "a non-square (K, C, 1, KW) kernel"), ((4, 7, 3), "a Conv1d weight (K, C, KL)"),
             ((16, 4, 1, 1), "a 1x1 convolution"), ((2, 3, 2, 2, 2), "a 3-D convolution weight")]
    for shape, label in cases:
        got = run(f"{label}: fan_in_and_fan_out", f, shape)
        receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        want = (shape[1] * receptive, shape[0] * receptive)
        if not isinstance(got, tuple) or len(got) != 2:
            raise GradingFailure(f"{label}: return a tuple (fan_in, fan_out), as the contract says (a list or "
                                 "an array does not compare equal to a tuple)")
        if not all(isinstance(v, (int, np.integer)) for v in got):
            raise GradingFailure(f"{label}: fan_in and fan_out are ints")
        if tuple(got) == want:
            continue
        if tuple(got) == want[::-1]:
            raise GradingFailure(f"{label}: fan_in and fan_out are swapped: fan_in counts the inputs each output "
                                 "sees (shape[1] x receptive field), fan_out the outputs each input feeds")
        if tuple(got) == (shape[1], shape[0]):
            raise GradingFailure(f"{label}: for a convolution weight each output sees C x KH x KW inputs: multiply "
                                 "by the receptive field (the product of the kernel dimensions)")
        raise GradingFailure(f"{label}: wrong fans; fan_in = shape[1] x receptive field, fan_out = shape[0] x "
                             "receptive field")
    if not isinstance(run("a 1-D shape: fan_in_and_fan_out", _raises, f, (5,)), ValueError):
        raise GradingFailure("a 1-D shape has no fan in and fan out: raise a ValueError")


@graded("a05-kaiming-uniform", "solutions.nn.init:kaiming_uniform_", points=1)
def check_kaiming_uniform(kaiming_uniform_, rng):
    from solutions.nn import init
    Tensor = student_engine().Tensor
    cases = [
        ("the defaults (a=0, fan_in, leaky_relu) on a (300, 400) weight", (300, 400), {}, np.float64),
        ("a=sqrt(5), Linear's default, on a (200, 500) weight", (200, 500), {"a": math.sqrt(5)}, np.float32),
        ("mode='fan_out' on a (64, 32, 3, 3) conv weight", (64, 32, 3, 3), {"mode": "fan_out"}, np.float64),
        ("nonlinearity='relu' on a (40, 16, 5, 5) conv weight", (40, 16, 5, 5), {"nonlinearity": "relu"}, np.float64),
    ]
    with time_limit(TIME_LIMIT, _slow("kaiming_uniform_")):
        for label, shape, kwargs, dtype in cases:
            label = f"{label}, {_dtype_name(dtype)}"
            t = Tensor(np.zeros(shape, dtype=dtype))
            seed = int(rng.integers(1 << 30))
            out = run(f"{label}: kaiming_uniform_", lambda: kaiming_uniform_(t, rng=_student_rng(seed), **kwargs))
            if not same_object(out, t):
                raise GradingFailure(f"{label}: fill the tensor in place and return it (return tensor), as "
                                     "torch.nn.init does")
            w = np.asarray(t.data)
            if w.shape != shape or w.dtype != dtype:
                raise GradingFailure(f"{label}: keep the tensor's shape and dtype (fill tensor.data[...])")
            a, mode, nl = kwargs.get("a", 0.0), kwargs.get("mode", "fan_in"), kwargs.get("nonlinearity", "leaky_relu")
            fan_in, fan_out = init.fan_in_and_fan_out(shape)
            gain = init.calculate_gain(nl, a)
            bound = math.sqrt(3.0) * gain / math.sqrt(fan_in if mode == "fan_in" else fan_out)
            observed = float(np.max(np.abs(w)))
            if observed == 0:
                raise GradingFailure(f"{label}: the tensor is still all zeros: draw U(-b, b) into it")
            if observed <= bound * (1 + 1e-5) and observed >= 0.98 * bound \
                    and abs(float(np.var(w.astype(np.float64))) / (bound * bound / 3) - 1) < 0.05 \
                    and abs(float(np.mean(w))) < 0.02 * bound:
                t2 = Tensor(np.zeros(shape, dtype=dtype))
                run(f"{label}: kaiming_uniform_", lambda: kaiming_uniform_(t2, rng=_student_rng(seed), **kwargs))
                if not np.array_equal(np.asarray(t2.data), w):
                    raise GradingFailure(f"{label}: draw from the generator `rng` you are given, so that a seeded "
                                         "model is the same model every time")
                continue
            ratio = observed / bound
            other_fan = fan_out if mode == "fan_in" else fan_in
            std = gain / math.sqrt(fan_in if mode == "fan_in" else fan_out)
            if abs(ratio - 1 / math.sqrt(3)) < 0.03:
                raise GradingFailure(f"{label}: U(-b, b) has variance b^2/3, so for the variance gain^2/fan the "
                                     "bound is b = gain * sqrt(3/fan): the factor sqrt(3) is missing")
            if abs(observed / (math.sqrt(3.0) * gain / math.sqrt(other_fan)) - 1) < 0.03 and fan_in != fan_out:
                raise GradingFailure(f"{label}: `mode` chooses the fan: fan_in (the default) or fan_out")
            if abs(observed / (math.sqrt(3.0) / math.sqrt(fan_in if mode == "fan_in" else fan_out)) - 1) < 0.03:
                raise GradingFailure(f"{label}: the gain is missing: calculate_gain(nonlinearity, a)")
            if abs(float(np.std(w)) / std - 1) < 0.05 and observed > 1.2 * bound:
                raise GradingFailure(f"{label}: kaiming_uniform_ draws from a uniform distribution, not a normal one")
            raise GradingFailure(f"{label}: the values must be uniform on (-b, b), b = gain * sqrt(3/fan)")


def _filled(label: str, name: str, f, shape, dtype, seed: int, **kwargs) -> np.ndarray:
    """Run an init function on a zero tensor of the student's engine; check the in-place contract
    (returns the very tensor, keeps shape and dtype, draws from the given generator)."""
    Tensor = student_engine().Tensor
    t = Tensor(np.zeros(shape, dtype=dtype))
    out = run(f"{label}: {name}", lambda: f(t, rng=_student_rng(seed), **kwargs))
    if not same_object(out, t):
        raise GradingFailure(f"{label}: fill the tensor in place and return it (return tensor), as torch.nn.init does")
    w = np.asarray(t.data)
    if w.shape != shape or w.dtype != dtype:
        raise GradingFailure(f"{label}: keep the tensor's shape and dtype (fill tensor.data in place)")
    if not np.any(w):
        raise GradingFailure(f"{label}: the tensor is still all zeros: draw the values into it")
    t2 = Tensor(np.zeros(shape, dtype=dtype))
    run(f"{label}: {name}", lambda: f(t2, rng=_student_rng(seed), **kwargs))
    if not np.array_equal(np.asarray(t2.data), w):
        raise GradingFailure(f"{label}: draw from the generator `rng` you are given, so that a seeded model is the "
                             "same model every time")
    return w.astype(np.float64)


XAVIER_CASES = [
    # label, shape, gain, dtype
    ("the default gain 1 on a (300, 400) Linear weight", (300, 400), None, np.float64),
    ("gain 5/3 (tanh) on a (64, 32, 3, 3) conv weight", (64, 32, 3, 3), 5.0 / 3, np.float64),
    ("gain sqrt(2) (relu) on a (200, 500) weight, float32", (200, 500), math.sqrt(2.0), np.float32),
    ("gain 0.5 on a (40, 16, 5, 5) conv weight", (40, 16, 5, 5), 0.5, np.float64),
]


def _xavier_std(shape, gain, fans=None) -> float:
    from solutions.nn import init
    fan_in, fan_out = fans or init.fan_in_and_fan_out(shape)
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def _xavier_mistakes(shape, gain, std: float) -> list[tuple[float, str]]:
    """(the standard deviation a classic mistake gives, its message), for a sample whose std is off."""
    out = []
    if gain != 1.0:
        out.append((std / gain, "the gain is missing: multiply by gain"))
    if len(shape) > 2:
        out.append((_xavier_std(shape, gain, (shape[1], shape[0])), "a conv weight's fans include its receptive "
                    "field (the kernel size): take them from fan_in_and_fan_out(tensor.shape), not from shape[0] "
                    "and shape[1]"))
    out.append((gain * math.sqrt(1.0 / math.prod(shape[1:])), "Xavier averages both fans: the variance is "
                "2 gain^2 / (fan_in + fan_out), not gain^2 / fan_in"))
    return out


@graded("a05-xavier-uniform", "solutions.nn.init:xavier_uniform_", points=1)
def check_xavier_uniform(xavier_uniform_, rng):
    f = xavier_uniform_
    with time_limit(TIME_LIMIT, _slow("xavier_uniform_")):
        for label, shape, gain, dtype in XAVIER_CASES:
            kwargs = {} if gain is None else {"gain": gain}
            gain = 1.0 if gain is None else gain
            w = _filled(label, "xavier_uniform_", f, shape, dtype, int(rng.integers(1 << 30)), **kwargs)
            std = _xavier_std(shape, gain)
            bound = math.sqrt(3.0) * std
            observed, sample_std = float(np.max(np.abs(w))), float(np.std(w))
            if bound * 0.98 <= observed <= bound * (1 + 1e-5) and abs(sample_std / std - 1) < 0.03 \
                    and abs(float(np.mean(w))) < 0.02 * bound:
                continue
            if abs(observed / std - 1) < 0.03:
                raise GradingFailure(f"{label}: U(-b, b) has variance b^2/3, so the bound is b = gain * sqrt(6 / "
                                     "(fan_in + fan_out)); yours is the standard deviation gain * sqrt(2 / ...)")
            if abs(sample_std / std - 1) < 0.03 and observed > 1.2 * bound:
                raise GradingFailure(f"{label}: xavier_uniform_ draws from a uniform distribution U(-b, b), not a "
                                     "normal one")
            for wrong, message in _xavier_mistakes(shape, gain, std):
                if abs(sample_std / wrong - 1) < 0.03:
                    raise GradingFailure(f"{label}: {message}")
            raise GradingFailure(f"{label}: the values must be uniform on (-b, b), b = gain * sqrt(6 / (fan_in + "
                                 "fan_out))")


@graded("a05-xavier-normal", "solutions.nn.init:xavier_normal_", points=1)
def check_xavier_normal(xavier_normal_, rng):
    f = xavier_normal_
    with time_limit(TIME_LIMIT, _slow("xavier_normal_")):
        for label, shape, gain, dtype in XAVIER_CASES:
            kwargs = {} if gain is None else {"gain": gain}
            gain = 1.0 if gain is None else gain
            w = _filled(label, "xavier_normal_", f, shape, dtype, int(rng.integers(1 << 30)), **kwargs)
            std = _xavier_std(shape, gain)
            sample_std, peak = float(np.std(w)), float(np.max(np.abs(w)))
            normal_tails = peak > 3.3 * sample_std  # a uniform sample never exceeds sqrt(3) of its std
            if abs(sample_std / std - 1) < 0.03 and abs(float(np.mean(w))) < 0.02 * std and normal_tails:
                continue
            if abs(sample_std / std - 1) < 0.03 and not normal_tails:
                raise GradingFailure(f"{label}: xavier_normal_ draws from a normal distribution N(0, std^2) "
                                     "(normal_), not a uniform one")
            if abs(sample_std / (math.sqrt(3.0) * std) - 1) < 0.03:
                raise GradingFailure(f"{label}: the standard deviation is gain * sqrt(2 / (fan_in + fan_out)); "
                                     "yours is the uniform version's bound gain * sqrt(6 / ...)")
            if abs(sample_std / std**2 - 1) < 0.03:
                raise GradingFailure(f"{label}: normal_ takes the standard deviation, the square root of the "
                                     "variance 2 gain^2 / (fan_in + fan_out); yours passes the variance")
            for wrong, message in _xavier_mistakes(shape, gain, std):
                if abs(sample_std / wrong - 1) < 0.03:
                    raise GradingFailure(f"{label}: {message}")
            raise GradingFailure(f"{label}: the values must be N(0, std^2) with std = gain * sqrt(2 / (fan_in + "
                                 "fan_out))")


# --------------------------------------------------------------------------------------------
# linear, dropout, batch_norm, cross_entropy (composites: gradients come from the engine's ops)
# --------------------------------------------------------------------------------------------
def _grads_of(E, fn, arrays, needs, upstream, name="the function"):
    """The output and the gradients (arrays) of every input that needs one, through engine E: the
    student's (`student_engine()`, in the sandbox; `fn` the answer) or the reference (`solutions`)."""
    Tensor = E.Tensor
    ts = [None if a is None else Tensor(a.copy(), requires_grad=n) for a, n in zip(arrays, needs, strict=False)]
    out = fn(*ts)
    if not isinstance(out, Tensor):
        raise GradingFailure(f"{name} returned {type_name(out)}; return a Tensor built with Tensor operations")
    wanted = [t for t, n in zip(ts, needs, strict=False) if t is not None and n]
    gs = E.grad(out, wanted, Tensor(upstream.astype(out.dtype)), allow_unused=True) if wanted else []
    return out, [None if g is None else np.array(g.data) for g in gs]


@graded("a05-linear", "solutions.nn.functional:linear", points=1)
def check_linear(linear, rng):
    import solutions as R
    S = student_engine()
    f = linear
    reference = judged().reference()
    cases = [
        ("a batch (5, 3) through a (4, 3) weight with bias", (5, 3), (4, 3), True, np.float64),
        ("a batch (4, 4) through a square (4, 4) weight with bias", (4, 4), (4, 4), True, np.float64),
        ("one sample (3,) through a (2, 3) weight", (3,), (2, 3), True, np.float64),
        ("a (2, 3, 4) sequence batch through a (5, 4) weight without bias", (2, 3, 4), (5, 4), False, np.float64),
        ("a batch (6, 3) through a (3, 3) weight, float32", (6, 3), (3, 3), True, np.float32),
    ]
    for label, xs, ws, with_bias, dtype in cases:
        x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
        b = rng.standard_normal(ws[0]).astype(dtype) if with_bias else None
        needs = (True, True, with_bias)

        def hint(error):
            if "matmul" in str(error) or "mismatch" in str(error):
                return "W has shape (out_features, in_features): y = x W^T + b (transpose the weight)"
            return None

        got, got_grads = run(f"{label}: linear", lambda: _grads_of(S, lambda *t: f(*t), [x, w, b], needs,
                                                                   rng_upstream(x, w), f"{label}: linear"), hint=hint)
        want, want_grads = _grads_of(R, lambda *t: reference(*t), [x, w, b], needs, rng_upstream(x, w))
        _tensor_result(label, "linear", got)
        if got.shape != want.shape:
            raise GradingFailure(f"{label}: the output must be (..., out_features): y = x W^T + b")
        got_data = got.data
        if not close(got_data, want.data, dtype):
            if ws[0] == ws[1] and close(got_data, x @ w + (0 if b is None else b), dtype):
                raise GradingFailure(f"{label}: W has shape (out_features, in_features): y = x W^T + b "
                                     "(transpose the weight)")
            if b is not None and close(got_data, want.data - b, dtype):
                raise GradingFailure(f"{label}: the bias is missing")
            raise GradingFailure(f"{label}: wrong values; y = x W^T + b")
        if got.dtype != dtype:
            raise GradingFailure(f"{label}: keep the dtype of x and W")
        for name, g, h in zip(("x", "W", "b"), got_grads, want_grads, strict=False):
            if g is None or not close(g, h, dtype):
                raise GradingFailure(f"{label}: the gradient with respect to {name} is wrong: build y with Tensor "
                                     "operations (x @ weight.T + bias), not on .data")
    error = run("mismatched features: linear", _raises, f, _t(np.zeros((2, 3))), _t(np.zeros((4, 5))), None)
    if not isinstance(error, ValueError):
        raise GradingFailure("an input with 3 features and a weight expecting 5 must raise a ValueError naming "
                             "both shapes (check x.shape[-1] against weight.shape[1])")
    if "(2, 3)" not in str(error) or "(4, 5)" not in str(error):
        raise GradingFailure("the ValueError for mismatched features must name both shapes, x's and the "
                             "weight's (as tuples, e.g. (2, 3) and (4, 5)), so that the caller sees which is wrong")


def rng_upstream(x, w):
    shape = x.shape[:-1] + (w.shape[0],)
    return np.random.default_rng(5).standard_normal(shape)


def _t(a, requires_grad=False):
    """A Tensor of the student's engine (in the sandbox)."""
    return student_engine().Tensor(a, requires_grad=requires_grad)


@graded("a05-dropout", "solutions.nn.functional:dropout", points=2)
def check_dropout(dropout, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = dropout
    with time_limit(TIME_LIMIT, _slow("dropout")):
        # evaluation and p = 0: the identity
        x = rng.standard_normal((4, 5))
        for label, p, training in [("evaluation mode (training=False), p = 0.5", 0.5, False),
                                   ("training with p = 0", 0.0, True)]:
            out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, _t(x.copy(), True), p, training,
                                                      _student_rng(1)), x.shape)
            if not np.array_equal(out.data, x):
                raise GradingFailure(f"{label}: dropout must return x unchanged (no mask, no scaling)")
        for p, dtype in [(0.3, np.float64), (0.5, np.float32), (0.8, np.float64)]:
            label = f"training with p = {p}, {_dtype_name(dtype)}"
            ones = np.ones((200, 250), dtype=dtype)
            xt = Tensor(ones.copy(), requires_grad=True)
            out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, xt, p, True,
                                                      _student_rng(int(rng.integers(1 << 30)))), ones.shape)
            if out.dtype != dtype:
                raise GradingFailure(f"{label}: keep x's dtype (draw the mask in x's dtype or cast it)")
            v = np.asarray(out.data, dtype=np.float64)
            if not np.all(np.isfinite(v)):
                raise GradingFailure(f"{label}: the output contains nan or inf")
            kept = v != 0
            rate = 1.0 - kept.mean()
            sigma = math.sqrt(p * (1 - p) / v.size)
            scale = 1.0 / (1.0 - p)
            if abs(rate - (1 - p)) < 5 * sigma and abs(p - 0.5) > 0.05:
                raise GradingFailure(f"{label}: zero each element with probability p (keep it with probability "
                                     "1 - p); yours drops 1 - p of them")
            if abs(rate - p) > 5 * sigma:
                raise GradingFailure(f"{label}: about a fraction p of the elements must be zeroed, "
                                     "independently for each element")
            survivors = v[kept]
            if np.allclose(survivors, 1.0):
                raise GradingFailure(f"{label}: inverted dropout scales the kept units by 1/(1-p), so that the "
                                     "expected output equals x and evaluation needs no rescaling; yours does not scale")
            if np.allclose(survivors, 1.0 - p, rtol=1e-5):
                raise GradingFailure(f"{label}: scale the kept units by 1/(1-p), not by (1-p)")
            if not np.allclose(survivors, scale, rtol=1e-5):
                raise GradingFailure(f"{label}: every kept unit is x / (1-p)")
            if not out.requires_grad:
                raise GradingFailure(f"{label}: the output is not part of the graph: multiply the Tensor x by a "
                                     "constant mask array (x * mask), not x.data")
            g = rng.standard_normal(ones.shape).astype(dtype)
            (dx,) = run(f"{label}: the gradient through dropout", lambda: grad(out, [xt], Tensor(g)))
            if not close(dx.data, g * v, dtype):
                raise GradingFailure(f"{label}: the gradient must go through the same mask and scale as the output")
        # the same generator state gives the same mask; the mask depends on it
        x = rng.standard_normal((30, 40))
        first = run("dropout twice with the same seed", f, _t(x.copy()), 0.5, True, _student_rng(7))
        second = run("dropout twice with the same seed", f, _t(x.copy()), 0.5, True, _student_rng(7))
        third = run("dropout with another seed", f, _t(x.copy()), 0.5, True, _student_rng(8))
        first, second, third = (np.asarray(_tensor_result("dropout with a seeded generator", "dropout", out).data)
                                for out in (first, second, third))
        if not np.array_equal(first, second) or np.array_equal(first, third):
            raise GradingFailure("draw the mask from the generator `rng` you are given (rng.random(x.shape)), so "
                                 "that a seeded layer drops the same units on every run")
        if not np.allclose(first[first != 0], 2 * x[first != 0]):
            raise GradingFailure("for an arbitrary x, every kept element is x / (1-p) (here p = 0.5)")
        for p in (-0.1, 1.5):
            if not isinstance(run(f"dropout with p = {p}", _raises, f, _t(np.ones(3)), p, True, _student_rng(1)),
                              ValueError):
                raise GradingFailure(f"p = {p} is not a probability: raise a ValueError for p outside [0, 1]")
        label = "training with rng=None"
        out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, _t(np.ones((40, 50))), 0.5, True, None),
                             (40, 50))
        v = np.asarray(out.data)
        if not (np.all((v == 0) | (v == 2.0)) and 0.35 < (v == 0).mean() < 0.65):
            raise GradingFailure(f"{label}: without a generator draw the mask from a fresh np.random.default_rng()")
        label = "training with p = 1"
        xt = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
        out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, xt, 1.0, True, _student_rng(1),
                                                   hint=lambda e: "p = 1 drops every element: return x * 0 (zeros "
                                                                  "that stay in the graph), never divide by "
                                                                  "1 - p = 0"),
                             (3, 4))
        if not np.all(out.data == 0):
            raise GradingFailure(f"{label}: every element is dropped: the output is all zeros (without dividing by "
                                 "1 - p = 0, which gives nan)")
        if not out.requires_grad:
            raise GradingFailure(f"{label}: keep the output in the graph (x * 0), so that x gets a zero gradient "
                                 "rather than none")


@np.errstate(all="ignore")
def _bn_reference(x, rm, rv, w, b, training, momentum, eps, unbiased_norm=False, inverted=False,
                  biased_running=False, axes=None):
    """batch_norm in NumPy with knobs for the classic mistakes (hints only): (y, running_mean, running_var)."""
    x = x.astype(np.float64)
    C = x.shape[1]
    shape = (1, C) + (1,) * (x.ndim - 2)
    per_channel = (0,) + tuple(range(2, x.ndim))
    axes = per_channel if axes is None else axes
    rm = None if rm is None else rm.astype(np.float64).copy()
    rv = None if rv is None else rv.astype(np.float64).copy()
    if training:
        n = int(np.prod([x.shape[a] for a in axes]))
        mean = x.mean(axis=axes, keepdims=True)
        var = x.var(axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt((var * n / (n - 1) if unbiased_norm else var) + eps)
        if rm is not None and axes == per_channel:
            m = 1 - momentum if inverted else momentum
            rm = (1 - m) * rm + m * mean.reshape(C)
            rv = (1 - m) * rv + m * (var if biased_running else var * n / (n - 1)).reshape(C)
    else:
        y = (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y, rm, rv


@graded("a05-batch-norm", "solutions.nn.functional:batch_norm", points=3)
def check_batch_norm(batch_norm, rng):
    import solutions as R
    S = student_engine()
    f = batch_norm
    reference = judged().reference()
    cases = [
        # label, x shape, training, affine, running stats, momentum, eps, dtype
        ("training on (N, C) = (8, 3), affine, running statistics", (8, 3), True, True, True, 0.1, 1e-5, np.float64),
        ("training on (N, C, L) = (4, 3, 5)", (4, 3, 5), True, True, True, 0.1, 1e-5, np.float64),
        ("training on (N, C, H, W) = (2, 3, 4, 5), momentum 0.3, eps 1e-3", (2, 3, 4, 5), True, True, True, 0.3,
         1e-3, np.float64),
        ("training without affine parameters or running statistics", (6, 4), True, False, False, 0.1, 1e-5,
         np.float64),
        ("evaluation mode on (N, C, H, W) = (3, 2, 3, 3) with running statistics", (3, 2, 3, 3), False, True, True,
         0.1, 1e-5, np.float64),
        ("training on (N, C) = (16, 5), float32", (16, 5), True, True, True, 0.1, 1e-5, np.float32),
    ]
    with time_limit(TIME_LIMIT, _slow("batch_norm")):
        for label, shape, training, affine, stats, momentum, eps, dtype in cases:
            label = f"{label}, {_dtype_name(dtype)}" if dtype != np.float32 else label
            C = shape[1]
            x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
            w = rng.uniform(0.5, 1.5, C).astype(dtype) if affine else None
            b = rng.standard_normal(C).astype(dtype) if affine else None
            rm0 = rng.standard_normal(C).astype(dtype) if stats else None
            rv0 = rng.uniform(0.5, 2.0, C).astype(dtype) if stats else None
            # the student's running statistics live in the sandbox, where they are updated in place
            rm, rv = (None if rm0 is None else _sandbox_array(rm0.copy())), \
                (None if rv0 is None else _sandbox_array(rv0.copy()))
            upstream = rng.standard_normal(shape)
            needs = (True, False, False, affine, affine)

            def call(xt, _rm, _rv, wt, bt, fn=f, rm=rm, rv=rv):
                return fn(xt, rm, rv, wt, bt, training, momentum, eps)

            got, got_grads = run(f"{label}: batch_norm", _grads_of, S, call, [x, None, None, w, b], needs, upstream,
                                 f"{label}: batch_norm")
            _tensor_result(label, "batch_norm", got, shape)
            rm_obj, rv_obj = (None if rm is None else np.asarray(rm)), (None if rv is None else np.asarray(rv))
            ref_rm, ref_rv = (None if rm0 is None else rm0.copy()), (None if rv0 is None else rv0.copy())

            def ref_call(xt, _rm, _rv, wt, bt):
                return reference(xt, ref_rm, ref_rv, wt, bt, training, momentum, eps)

            want, want_grads = _grads_of(R, ref_call, [x, None, None, w, b], needs, upstream)
            args = (x, rm0, rv0, w, b, training, momentum, eps)
            got_data = got.data
            if not close(got_data, want.data, dtype):
                if training and close(got_data, _bn_reference(*args, unbiased_norm=True)[0], dtype):
                    raise GradingFailure(f"{label}: normalize with the *biased* batch variance (divide by n, as "
                                         "x.var() does); the unbiased one (n - 1) is only for running_var")
                if not training and stats and close(got_data, _bn_reference(*args[:5], True, momentum, eps)[0], dtype):
                    raise GradingFailure(f"{label}: in evaluation mode normalize with the running statistics, not "
                                         "the batch's")
                if training and len(shape) > 2 and close(got_data, _bn_reference(*args, axes=(0,))[0], dtype):
                    raise GradingFailure(f"{label}: the statistics are per channel (axis 1), over N and every "
                                         "spatial axis: reduce over axes (0, 2, ...), not axis 0 only")
                shape1 = (1, C) + (1,) * (len(shape) - 2)
                mean = x.astype(np.float64).mean(axis=(0,) + tuple(range(2, len(shape))), keepdims=True)
                var = x.astype(np.float64).var(axis=(0,) + tuple(range(2, len(shape))), keepdims=True)
                outside = (x - mean) / (np.sqrt(var) + eps)
                if training and affine:
                    outside = outside * w.reshape(shape1) + b.reshape(shape1)
                if training and close(got_data, outside, dtype):
                    raise GradingFailure(f"{label}: eps goes inside the square root: (x - mean) / sqrt(var + eps)")
                raise GradingFailure(f"{label}: wrong output; y = weight * (x - mean) / sqrt(var + eps) + bias, per "
                                     "channel")
            if got.dtype != dtype:
                raise GradingFailure(f"{label}: keep x's dtype")
            for name, g, h in zip(("x", "weight", "bias"), got_grads, want_grads, strict=False):
                if g is None or not close(g, h, dtype):
                    raise GradingFailure(f"{label}: the gradient with respect to {name} is wrong: compute the "
                                         "statistics and the normalization with Tensor operations on x (the mean "
                                         "and variance depend on x too)")
            if stats and training:
                if rm_obj is not None and np.array_equal(rm_obj, rm0) and np.array_equal(rv_obj, rv0):
                    raise GradingFailure(f"{label}: update running_mean and running_var in place "
                                         "(running_mean *= ..., +=): the module keeps these very arrays")
                if not (close(rm_obj, ref_rm, dtype) and close(rv_obj, ref_rv, dtype)):
                    _, inv_m, inv_v = _bn_reference(*args, inverted=True)
                    if close(rm_obj, inv_m, dtype):
                        raise GradingFailure(f"{label}: running statistics: momentum m is the weight of the *new* "
                                             "batch statistic: r <- (1 - m) r + m s (yours is inverted)")
                    _, _, biased_v = _bn_reference(*args, biased_running=True)
                    if close(rm_obj, ref_rm, dtype) and close(rv_obj, biased_v, dtype):
                        raise GradingFailure(f"{label}: running_var is updated with the *unbiased* batch variance "
                                             "(times n / (n - 1)), PyTorch's convention")
                    raise GradingFailure(f"{label}: wrong running statistics: r <- (1 - m) r + m s, with the batch "
                                         "mean and the unbiased batch variance")
            if stats and not training and not (np.array_equal(rm_obj, rm0) and np.array_equal(rv_obj, rv0)):
                raise GradingFailure(f"{label}: evaluation mode must not change the running statistics")
        x = S.Tensor(rng.standard_normal((1, 3)))
        error = run("training on one sample: batch_norm", _raises, f, x, np.zeros(3), np.ones(3), None, None, True)
        if not isinstance(error, ValueError):
            raise GradingFailure("training on a single value per channel (input (1, C)) cannot estimate a variance: "
                                 "raise a ValueError")


@graded("a05-cross-entropy", "solutions.nn.functional:cross_entropy", points=2)
def check_cross_entropy(cross_entropy, rng):
    import solutions as R
    S = student_engine()
    f = cross_entropy
    reference = judged().reference()
    cases = [
        ("logits (5, 4), reduction='mean'", (5, 4), 1.0, "mean", 0.0, np.float64),
        ("logits (6, 3), reduction='sum'", (6, 3), 1.0, "sum", 0.0, np.float64),
        ("logits (4, 5), reduction='none'", (4, 5), 1.0, "none", 0.0, np.float64),
        ("logits (5, 4) with label_smoothing=0.1", (5, 4), 1.0, "mean", 0.1, np.float64),
        ("large logits (about 1000)", (4, 6), 1000.0, "mean", 0.0, np.float64),
        ("large logits (about 100), float32", (4, 6), 100.0, "mean", 0.0, np.float32),
        ("one sample, logits (1, 3)", (1, 3), 1.0, "mean", 0.0, np.float64),
    ]
    for label, shape, scale, reduction, smoothing, dtype in cases:
        logits = (rng.standard_normal(shape) * scale).astype(dtype)
        target = rng.integers(0, shape[1], size=shape[0])
        out_shape = (shape[0],) if reduction == "none" else ()
        upstream = rng.standard_normal(out_shape)

        def call(z, fn):
            return fn(z, target.copy(), reduction, smoothing)

        got, got_grads = run(f"{label}: cross_entropy", _grads_of, S, lambda z: call(z, f), [logits], (True,),
                             upstream, f"{label}: cross_entropy")
        want, want_grads = _grads_of(R, lambda z: call(z, reference), [logits], (True,), upstream)
        _tensor_result(label, "cross_entropy", got)
        got_data = got.data
        if not np.all(np.isfinite(np.asarray(got_data, dtype=np.float64))) or \
                (got_grads[0] is not None and not np.all(np.isfinite(got_grads[0]))):
            raise GradingFailure(f"{label}: your cross-entropy overflows for large logits (nan or inf): use "
                                 "log_softmax, which subtracts each row's max, instead of exp and log of softmax")
        if got.shape != want.shape:
            raise GradingFailure(f"{label}: reduction='{reduction}' gives " +
                                 ("one loss per sample, shape (N,)" if reduction == "none" else "a 0-d Tensor"))
        if not close(got_data, want.data, dtype):
            d = np.asarray(got_data, dtype=np.float64)
            w = np.asarray(want.data, dtype=np.float64)
            if reduction == "mean" and close(d, w * shape[0], dtype):
                raise GradingFailure(f"{label}: reduction='mean' averages over the N samples (you summed)")
            if reduction == "sum" and close(d, w / shape[0], dtype):
                raise GradingFailure(f"{label}: reduction='sum' adds the N losses (you averaged)")
            if close(d, -w, dtype):
                raise GradingFailure(f"{label}: the sign: the loss is -log p of the target class, which is >= 0")
            if smoothing:
                log_p = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) \
                    - logits.max(1, keepdims=True)
                picked = -log_p[np.arange(shape[0]), target]
                summed = ((1 - smoothing) * picked - smoothing * log_p.sum(axis=1)).mean()
                if close(d, summed, dtype):
                    raise GradingFailure(f"{label}: the smoothing term is eps times the *mean* over the K classes "
                                         "of -log p (the uniform target puts eps/K on each class), not the sum")
                raise GradingFailure(f"{label}: with label smoothing eps the loss is (1 - eps)(-log p_target) + "
                                     "eps * mean over the classes of (-log p)")
            raise GradingFailure(f"{label}: wrong loss; l_i = logsumexp(z_i) - z_i[t_i]")
        if got.dtype != dtype:
            raise GradingFailure(f"{label}: keep the logits' dtype")
        if got_grads[0] is None or not close(got_grads[0], want_grads[0], dtype):
            raise GradingFailure(f"{label}: the gradient with respect to the logits is wrong: build the loss with "
                                 "Tensor operations (log_softmax, indexing, mean), not on .data")
    logits = _t(rng.standard_normal((3, 4)))
    for what, target, error_type in [("a target out of range", np.array([0, 4, 1]), IndexError),
                                     ("one target too few", np.array([0, 1]), ValueError),
                                     ("float targets", np.array([0.0, 1.0, 2.0]), TypeError)]:
        if not isinstance(run(f"{what}: cross_entropy", _raises, f, logits, target), error_type):
            raise GradingFailure(f"{what}: check the targets with the given _class_targets(\"cross_entropy\", "
                                 f"logits, target), which raises a {error_type.__name__} for them")


# --------------------------------------------------------------------------------------------
# The numerical gradient (central differences), as chapter 5 checks cross-entropy's gradient
# --------------------------------------------------------------------------------------------
def _central(f, x: np.ndarray, eps: float) -> np.ndarray:
    """The central differences of f at x, here (x is not changed)."""
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        grad[i] = (f(plus) - f(minus)) / (2 * eps)
    return grad


def _one_sided(f, x: np.ndarray, eps: float) -> np.ndarray:
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        plus = x.copy()
        plus[i] += eps
        grad[i] = (f(plus) - f(x)) / eps
    return grad


@graded("a05-numerical-gradient", "solutions.nn.numerical:numerical_gradient", points=2)
def check_numerical_gradient(numerical_gradient, rng):
    np_s = current().module("numpy")
    f = numerical_gradient

    def call(label, fn, x, *eps):
        """numerical_gradient(fn, x, *eps) on a sandbox copy of x; (the result, x as it is afterwards)."""
        xs = in_sandbox(x.copy())
        grad = run(f"{label}: numerical_gradient", f, fn, xs, *eps,
                   hint=lambda e: "x may have any shape, even 0-d: loop over np.ndindex(x.shape)"
                   if x.ndim != 1 and getattr(e, "remote_type", "") in ("IndexError", "TypeError") else None)
        after = np.asarray(xs)
        if not isinstance(grad, np.ndarray) or grad.shape != x.shape:
            raise GradingFailure(f"{label}: return an ndarray of x's shape, one partial derivative per entry"
                                 + ("" if isinstance(grad, np.ndarray) else f" (got {type_name(grad)})"))
        if not np.array_equal(after, x):
            if np.allclose(after, x, rtol=1e-12, atol=0):
                raise GradingFailure(f"{label}: x must come back exactly: keep each entry's original value and put "
                                     "it back (x[i] = original); adding and subtracting eps again is off in the "
                                     "last bits")
            raise GradingFailure(f"{label}: x must be restored: after its two evaluations, put each entry back to "
                                 "its original value (the caller's array is changed in place)")
        return grad.astype(np.float64)

    norm = np.linalg.norm
    with time_limit(TIME_LIMIT, _slow("numerical_gradient")):
        for label, shape, eps in [("f = the norm of x, x of shape (6,), eps 1e-3", (6,), 1e-3),
                                  ("f = the norm of x, x of shape (3, 4), eps 1e-3", (3, 4), 1e-3),
                                  ("f = the norm of x, x of shape (2, 3, 2), eps 1e-2", (2, 3, 2), 1e-2),
                                  ("f = the norm of x, a 0-d x, eps 1e-3", (), 1e-3)]:
            x = np.array(rng.standard_normal(shape) + 0.5)  # an ndarray, even 0-d
            got = call(label, np_s.linalg.norm, x, eps)
            want = _central(norm, x, eps)
            if np.allclose(got, want, rtol=1e-6, atol=1e-9):
                continue
            if np.allclose(got, 2 * want, rtol=1e-6, atol=1e-9):
                raise GradingFailure(f"{label}: the two points x - eps and x + eps are 2 eps apart: divide the "
                                     "difference by 2 eps")
            if np.allclose(got, _one_sided(norm, x, eps), rtol=1e-6, atol=1e-9):
                raise GradingFailure(f"{label}: use central differences, (f(x + eps) - f(x - eps)) / (2 eps), "
                                     "accurate to O(eps^2); yours is one-sided, (f(x + eps) - f(x)) / eps, only "
                                     "O(eps)")
            if np.allclose(got, _central(norm, x, 1e-6), rtol=1e-4, atol=1e-7):
                raise GradingFailure(f"{label}: use the eps you are given")
            if len(shape) != 1:
                raise GradingFailure(f"{label}: wrong values for an x of {len(shape)} dimension(s): every entry "
                                     "of x has its own partial derivative, whatever x's shape (np.ndindex(x.shape))")
            raise GradingFailure(f"{label}: wrong values; grad[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)")
        # Entries that do not survive adding and subtracting eps ((x - eps) + eps is off in the last
        # bit): "put every entry back exactly" is checked bitwise where arithmetic would not do it.
        label = "f = the norm of x, x of shape (9,), eps 1e-2, entries that x - eps + eps does not give back"
        eps = 1e-2
        pool = rng.standard_normal(400)
        back = pool[(pool - eps) + eps != pool][:3]  # x[i] = x - eps, later x[i] += eps
        there_and_back = pool[((pool + eps) - 2 * eps) + eps != pool][:3]  # += eps, -= 2 eps, += eps
        x = np.concatenate([[-1.0, 0.5, 2.0], back, there_and_back])
        got = call(label, np_s.linalg.norm, x, eps)
        if not np.allclose(got, _central(norm, x, eps), rtol=1e-6, atol=1e-9):
            raise GradingFailure(f"{label}: wrong values; grad[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)")
        # the default eps: f = the variance (quadratic: central differences are exact up to rounding)
        label = "f = the variance of x, x of shape (8,), the default eps"
        x = rng.standard_normal(8)
        got = call(label, np_s.var, x)
        if not np.allclose(got, 2 * (x - x.mean()) / x.size, rtol=1e-4, atol=1e-6):
            raise GradingFailure(f"{label}: wrong values with the default eps = 1e-6")
        # f may read x from outside: x.dot(arg) is x . x only when the argument *is* x, changed in place
        label = "f = x.dot, which reads x itself as well as its argument"
        x = rng.standard_normal(5)
        xs = in_sandbox(x.copy())
        got = run(f"{label}: numerical_gradient", f, xs.dot, xs, 1e-4)
        if not isinstance(got, np.ndarray) or got.shape != x.shape:
            raise GradingFailure(f"{label}: return an ndarray of x's shape")
        if not np.array_equal(np.asarray(xs), x):
            raise GradingFailure(f"{label}: x must be restored exactly after each entry")
        if np.allclose(got, x, rtol=1e-5, atol=1e-8):
            raise GradingFailure(f"{label}: change x itself, in place (x[i] = original + eps), and call f(x): f may "
                                 "read x from outside (lambda _: loss(W)), so perturbing a copy misses it")
        if not np.allclose(got, 2 * x, rtol=1e-5, atol=1e-8):
            raise GradingFailure(f"{label}: wrong values; grad[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)")


# --------------------------------------------------------------------------------------------
# Optimizers: several steps with gradients set by hand, compared with PyTorch's rules
# --------------------------------------------------------------------------------------------
SHAPES = [(3, 4), (5,)]
STEPS = 4


def _run_optimizer(E, cls, kwargs, grads, p0, label, name, student=False, change_first=False):
    """Each parameter's values after each step, and the optimizer, with `cls` and Tensors of engine E:
    the student's (`student=True`: in the sandbox, where `p.data` is changed in place; reading it
    here copies it) or the reference.

    The student's gradients are arrays kept in the sandbox, so that `p.grad.data` *is* the array
    given: after every step each one must still hold what the caller put there (step() must not
    write into a gradient). With `change_first`, the caller then overwrites the first step's
    gradients with zeros (as code that reuses its gradient arrays would), which must not change
    what the optimizer keeps."""
    Tensor = E.Tensor
    params = [Tensor(a.copy(), requires_grad=True) for a in p0]
    opt = run(f"{label}: {name}(...)", lambda: cls(params, **kwargs))
    history, given = [], []
    for step, gs in enumerate(grads):
        for p, g in zip(params, gs, strict=False):
            if g is None:
                p.grad = None
                continue
            array = in_sandbox(g.copy()) if student else g.copy()
            p.grad = Tensor(array)
            given.append([array, g.copy()])
        run(f"{label}: {name}.step()", opt.step)
        history.append([np.array(p.data, dtype=np.float64) for p in params])
        if student and any(not np.array_equal(np.asarray(array), values) for array, values in given):
            raise GradingFailure(f"{label}: {name}.step() changed a gradient array: g is p.grad's own array, so "
                                 "compute new arrays (g = g + ..., never g += ... or g *= ...), and start any state "
                                 "from a copy of the gradient (g.copy()), never from g itself")
        if change_first and step == 0:
            for entry in given:
                entry[0][...] = 0.0
                entry[1][...] = 0.0
    return history, opt


def _saved_state(opt, label: str, name: str) -> dict:
    """The optimizer's per-parameter state by parameter position, as Optimizer.state_dict saves it."""
    state = run(f"{label}: {name}.state_dict() (given)", lambda: opt.state_dict())["state"]
    return {int(k): v for k, v in state.items()}


def _same(a, b, dtype=np.float64) -> bool:
    return all(close(x, y, dtype) for hx, hy in zip(a, b, strict=False) for x, y in zip(hx, hy, strict=False))


def _grads(rng, dtype, skip=False):
    out = []
    for step in range(STEPS):
        gs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        if skip and step == 1:
            gs[1] = None  # a parameter unused in one step: its state does not advance
        out.append(gs)
    return out


@np.errstate(all="ignore")
def _sgd_sim(p0, grads, lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0, variant=""):
    params = [a.astype(np.float64).copy() for a in p0]
    bufs: list = [None] * len(params)
    kept: list = [None] * len(params)
    history = []
    for gs in grads:
        for i, g in enumerate(gs):
            if g is None:
                continue
            g = g.astype(np.float64)
            sign = -1 if variant == "wd-sign" else 1
            if weight_decay:
                g = g + sign * weight_decay * params[i]
            if momentum:
                if bufs[i] is None or variant == "no-state":
                    bufs[i] = (1 - dampening) * g if variant == "dampen-first" else g.copy()
                    kept[i] = bufs[i]
                elif variant == "buffer-not-kept":  # b_t computed from b_1, which the state keeps forever
                    bufs[i] = momentum * kept[i] + (1 - dampening) * g
                else:
                    bufs[i] = momentum * bufs[i] + (-1 if variant == "momentum-sign" else 1) * (1 - dampening) * g
                if nesterov and variant == "nesterov-ignored":
                    d = bufs[i]
                elif nesterov and variant == "nesterov-swapped":
                    d = bufs[i] + momentum * g
                elif nesterov:
                    d = g + momentum * bufs[i]
                else:
                    d = bufs[i]
            else:
                d = g
            params[i] = params[i] + lr * d if variant == "ascent" else params[i] - lr * d
        history.append([p.copy() for p in params])
    return history


@graded("a05-sgd", "solutions.optim:SGD", regions=("_update",), points=3, title="SGD._update")
def check_sgd(SGD, rng):
    import solutions as R
    S = student_engine()
    cls = SGD
    reference = judged().reference()
    configs = [
        ("plain SGD, lr 0.1", dict(lr=0.1)),
        ("momentum 0.9", dict(lr=0.1, momentum=0.9)),
        ("momentum 0.9 with dampening 0.5", dict(lr=0.1, momentum=0.9, dampening=0.5)),
        ("momentum 0.9 with nesterov=True", dict(lr=0.1, momentum=0.9, nesterov=True)),
        ("weight_decay 0.05", dict(lr=0.1, weight_decay=0.05)),
        ("momentum 0.8, nesterov=True and weight_decay 0.05", dict(lr=0.05, momentum=0.8, nesterov=True,
                                                                   weight_decay=0.05)),
    ]
    with time_limit(TIME_LIMIT, _slow("SGD")):
        for k, (label, kwargs) in enumerate(configs):
            dtype = np.float32 if k == 1 else np.float64
            label = f"{label}, {STEPS} steps, {_dtype_name(dtype)}" + (", a parameter without grad in one step"
                                                                       if k in (1, 3) else "")
            p0 = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
            grads = _grads(rng, dtype, skip=k in (1, 3))
            got, opt = _run_optimizer(S, cls, kwargs, grads, p0, label, "SGD", student=True)
            want, ref_opt = _run_optimizer(R, reference, kwargs, grads, p0, label, "SGD")
            if _same(got, want, dtype):
                if kwargs.get("momentum"):
                    state, ref_state = _saved_state(opt, label, "SGD"), _saved_state(ref_opt, label, "SGD")
                    for i, ref in ref_state.items():
                        buf = state.get(i, {}).get("momentum_buffer") if isinstance(state.get(i), dict) else None
                        if buf is None or not close(np.asarray(buf), ref["momentum_buffer"], dtype):
                            raise GradingFailure(f"{label}: keep the momentum buffer b in "
                                                 "state['momentum_buffer'] (Optimizer.state_dict saves it in a "
                                                 "checkpoint)")
                continue
            variants = [("wd-sign", "weight decay adds lambda * theta to the gradient (g + lambda theta); yours "
                                    "subtracts it, which makes the weights grow"),
                        ("nesterov-ignored", "with nesterov=True the direction is g + mu * b, not the buffer b"),
                        ("nesterov-swapped", "Nesterov: the direction is g + mu * b (the gradient plus mu times the "
                                             "updated buffer), not b + mu * g"),
                        ("dampen-first", "the first step sets the buffer to the gradient itself, without dampening "
                                         "(PyTorch's rule); dampening applies from the second step on"),
                        ("no-state", "the momentum buffer must persist between steps, in "
                                     "state['momentum_buffer'] (the per-parameter state dict)"),
                        ("buffer-not-kept", "the momentum buffer must carry over from step to step: update "
                                            "state['momentum_buffer'] in place (buf *= mu; buf += ...) or store the "
                                            "new array back in the state; yours binds it to a local name only, so "
                                            "the state keeps the first step's buffer"),
                        ("momentum-sign", "the buffer adds the new gradient, b = mu * b + (1 - dampening) * g; "
                                          "yours subtracts it (a sign error)"),
                        ("ascent", "each step moves theta against the gradient, theta <- theta - lr * d; yours "
                                   "adds lr * d (gradient ascent)")]
            for variant, message in variants:
                if _same(got, _sgd_sim(p0, grads, variant=variant, **kwargs), dtype):
                    raise GradingFailure(f"{label}: {message}")
            first = [np.asarray(a) for a in got[0]]
            if not all(close(a, b, dtype) for a, b in zip(first, want[0], strict=False)):
                raise GradingFailure(f"{label}: the first step is already wrong: theta <- theta - lr * d, with d the "
                                     "gradient (plus weight decay), or the momentum buffer b_1 = g_1")
            raise GradingFailure(f"{label}: the steps after the first are wrong: b_t = mu b_(t-1) + (1 - dampening) "
                                 "g_t, kept in the state between steps")
        # the caller reuses its gradient arrays after a step: the buffer must not be one of them
        label = f"momentum 0.9, {STEPS} steps, the gradient arrays overwritten by the caller after the first step"
        kwargs = dict(lr=0.1, momentum=0.9)
        p0 = [rng.standard_normal(s) for s in SHAPES]
        grads = _grads(rng, np.float64)
        got, _ = _run_optimizer(S, cls, kwargs, grads, p0, label, "SGD", student=True, change_first=True)
        want, _ = _run_optimizer(R, reference, kwargs, grads, p0, label, "SGD", change_first=True)
        if not _same(got, want):
            raise GradingFailure(f"{label}: the momentum buffer must start as a copy of the gradient "
                                 "(np.array(g, copy=True)): yours shares memory with p.grad, so a gradient changed "
                                 "after step() changed the buffer")


@np.errstate(all="ignore")
def _adam_sim(p0, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False, variant=""):
    params = [a.astype(np.float64).copy() for a in p0]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    t = [0] * len(params)
    history = []
    b1, b2 = betas
    for gs in grads:
        for i, g in enumerate(gs):
            if g is None:
                continue
            g = g.astype(np.float64)
            t[i] += 1
            step_count = max(t) if variant == "shared-step" else t[i]
            if weight_decay:
                if decoupled != (variant == "decay-kind"):
                    params[i] = params[i] * (1 - lr * weight_decay)
                else:
                    g = g + weight_decay * params[i]
            if variant == "moments-not-kept":  # the state's m and v stay at zero
                m[i], v[i] = np.zeros_like(g), np.zeros_like(g)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * (g if variant == "v-not-squared" else g * g)
            bc1, bc2 = 1 - b1 ** step_count, 1 - b2 ** step_count
            if variant == "no-bias-correction":
                step = m[i] / (np.sqrt(v[i]) + eps)
            elif variant == "m-corrected-only":
                step = m[i] / bc1 / (np.sqrt(v[i]) + eps)
            elif variant == "eps-inside-sqrt":
                step = m[i] / bc1 / np.sqrt(v[i] / bc2 + eps)
            else:
                step = (m[i] / bc1) / (np.sqrt(v[i] / bc2) + eps)
            params[i] = params[i] - lr * step
        history.append([p.copy() for p in params])
    return history


@graded("a05-adam", "solutions.optim:Adam", regions=("_update",), points=3, title="Adam._update")
def check_adam(Adam, rng):
    import solutions as R
    S = student_engine()
    cls = Adam
    reference = judged().reference()
    configs = [
        ("Adam, lr 0.01", dict(lr=0.01), False),
        ("Adam with betas (0.8, 0.95) and a large eps 1e-3", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-3), False),
        ("Adam with L2 weight_decay 0.1", dict(lr=0.01, weight_decay=0.1), False),
        ("AdamW (a subclass of your Adam with _decoupled = True), weight_decay 0.1",
         dict(lr=0.01, weight_decay=0.1), True),
    ]
    with time_limit(TIME_LIMIT, _slow("Adam")):
        for k, (label, kwargs, decoupled) in enumerate(configs):
            dtype = np.float32 if k == 2 else np.float64
            label = f"{label}, {STEPS} steps, {_dtype_name(dtype)}" + (", a parameter without grad in one step"
                                                                       if k == 1 else "")
            p0 = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
            grads = _grads(rng, dtype, skip=k == 1)
            student = _sandbox_subclass(cls, "AdamW", {"_decoupled": True}) if decoupled else cls
            ref = type("AdamW", (reference,), {"_decoupled": True}) if decoupled else reference
            got, opt = _run_optimizer(S, student, kwargs, grads, p0, label, "Adam", student=True)
            want, ref_opt = _run_optimizer(R, ref, kwargs, grads, p0, label, "Adam")
            if _same(got, want, dtype):
                state, ref_state = _saved_state(opt, label, "Adam"), _saved_state(ref_opt, label, "Adam")
                for i, reference_state in ref_state.items():
                    mine = state.get(i)
                    if not isinstance(mine, dict) or any(k not in mine for k in ("step", "exp_avg", "exp_avg_sq")):
                        raise GradingFailure(f"{label}: keep the state in state['step'], state['exp_avg'] and "
                                             "state['exp_avg_sq'] (Optimizer.state_dict saves them in a checkpoint)")
                    if int(np.asarray(mine["step"])) != reference_state["step"]:
                        raise GradingFailure(f"{label}: state['step'] counts the steps of *this* parameter (one "
                                             "without a gradient in a step does not advance)")
                    if not (close(np.asarray(mine["exp_avg"]), reference_state["exp_avg"], dtype) and
                            close(np.asarray(mine["exp_avg_sq"]), reference_state["exp_avg_sq"], dtype)):
                        raise GradingFailure(f"{label}: state['exp_avg'] and state['exp_avg_sq'] hold the moments m "
                                             "and v (not bias-corrected)")
                continue
            variants = [
                ("no-bias-correction", "the bias correction is missing: m and v start at 0, so divide them by "
                                       "(1 - beta1^t) and (1 - beta2^t)"),
                ("m-corrected-only", "correct both moments: v_hat = v / (1 - beta2^t) as well as m_hat"),
                ("eps-inside-sqrt", "eps is added after the square root: m_hat / (sqrt(v_hat) + eps)"),
                ("v-not-squared", "the second moment averages the *squared* gradient, g * g"),
                ("shared-step", "t counts the steps of *this* parameter (state['step']): a parameter without a "
                                "gradient in some step is one step behind the others, and yours used a count "
                                "shared by every parameter"),
                ("moments-not-kept", "m and v must carry over from step to step: update state['exp_avg'] and "
                                     "state['exp_avg_sq'] in place (m *= beta1; m += ...) or store the new arrays "
                                     "back in the state; yours binds them to local names only, so the state stays "
                                     "at zero"),
                ("decay-kind", "L2 weight decay (Adam) adds lambda theta to the gradient; decoupled decay (AdamW, "
                               "self._decoupled) shrinks theta by (1 - lr lambda) directly: yours uses the wrong one"),
            ]
            for variant, message in variants:
                if _same(got, _adam_sim(p0, grads, decoupled=decoupled, variant=variant, **kwargs), dtype):
                    raise GradingFailure(f"{label}: {message}")
            raise GradingFailure(f"{label}: wrong steps; m_t = b1 m + (1 - b1) g, v_t = b2 v + (1 - b2) g^2, "
                                 "theta -= lr * m_hat / (sqrt(v_hat) + eps) with the bias-corrected moments, and a "
                                 "step count t per parameter")


# --------------------------------------------------------------------------------------------
# DataLoader
# --------------------------------------------------------------------------------------------
def _list_dataset(n: int):
    """A plain Dataset (not a TensorDataset), made in the sandbox: sample i is (features of i, label i).

    Its class derives from the kit's `Dataset` and from `list` (which gives `len` and indexing),
    so it needs no code of the judge's in the sandbox."""
    data = student_module("solutions.data")
    list_type = sandbox_type([])
    cls = _sandbox_subclass((list_type, data.Dataset), "_ListDataset", {})
    return cls([(np.full(3, float(i)), i) for i in range(n)])


def _ids(batches, label):
    """The sample ids of each batch (the label column holds each sample's index)."""
    Tensor = student_engine().Tensor
    out = []
    for b in batches:
        if not isinstance(b, tuple) or not all(isinstance(t, Tensor) for t in b):
            raise GradingFailure(f"{label}: a batch is a tuple of Tensors (features, labels), got "
                                 f"{type_name(b)}")
        x, y = b
        ids = np.asarray(y.data).astype(int).tolist()
        if x.shape[0] != len(ids) or not np.allclose(np.asarray(x.data)[:, 0], ids):
            raise GradingFailure(f"{label}: the features and labels of a batch must come from the same samples")
        out.append(ids)
    return out


@graded("a05-dataloader", "solutions.data:DataLoader", regions=("__iter__",), points=2, title="DataLoader.__iter__")
def check_dataloader(DataLoader, rng):
    TensorDataset = student_module("solutions.data").TensorDataset
    with time_limit(TIME_LIMIT, _slow("DataLoader")):
        for n, batch, drop_last, plain in [(10, 4, False, False), (10, 4, True, False), (10, 5, True, False),
                                           (7, 3, False, True), (3, 8, False, False), (9, 2, True, True)]:
            kind = "a plain Dataset" if plain else "a TensorDataset"
            label = f"{n} samples of {kind}, batch_size {batch}, drop_last={drop_last}, no shuffle"
            dataset = _list_dataset(n) if plain else TensorDataset(np.repeat(np.arange(n, dtype=float)[:, None], 3, 1),
                                                                 np.arange(n))
            loader = run(f"{label}: DataLoader(...)",
                         lambda: DataLoader(dataset, batch_size=batch, drop_last=drop_last))
            batches = _ids(run(f"{label}: iterating", lambda: list(loader)), label)
            full = [list(range(i, min(i + batch, n))) for i in range(0, n, batch)]
            want = [b for b in full if len(b) == batch] if drop_last else full
            if batches == want:
                again = _ids(run(f"{label}: a second epoch", lambda: list(loader)), label)
                if again != want:
                    raise GradingFailure(f"{label}: a second pass over the loader (the next epoch) must give every "
                                         "batch again: build the batches inside __iter__")
                continue
            if batches == full[:-1] and not drop_last:
                raise GradingFailure(f"{label}: without drop_last the last, smaller batch is kept")
            if batches == full and drop_last:
                raise GradingFailure(f"{label}: drop_last drops the last batch when it is smaller than batch_size")
            if drop_last and batches == want[:-1]:
                raise GradingFailure(f"{label}: drop_last drops only a *smaller* last batch, never a full one")
            if sorted(sum(batches, [])) == list(range(n)):
                raise GradingFailure(f"{label}: without shuffle the batches follow the dataset's order, "
                                     "samples 0, 1, 2, ...")
            raise GradingFailure(f"{label}: wrong batches; consecutive slices of batch_size samples")

        n, batch = 23, 5
        dataset = TensorDataset(np.repeat(np.arange(n, dtype=float)[:, None], 3, 1), np.arange(n))
        label = f"{n} samples, batch_size {batch}, shuffle=True, seed 3, three epochs"
        loader = run(f"{label}: DataLoader(...)", lambda: DataLoader(dataset, batch_size=batch, shuffle=True, seed=3))
        epochs = [_ids(run(f"{label}: iterating", lambda: list(loader)), label) for _ in range(3)]
        for batches in epochs:
            flat = sum(batches, [])
            if [len(b) for b in batches] != [5, 5, 5, 5, 3]:
                raise GradingFailure(f"{label}: with shuffle the batches still have batch_size samples (the last "
                                     "one fewer)")
            if sorted(flat) != list(range(n)):
                raise GradingFailure(f"{label}: an epoch must visit every sample exactly once: shuffle with a "
                                     "permutation (rng.permutation(n)), not random draws with replacement")
        orders = [sum(b, []) for b in epochs]
        if orders[0] == list(range(n)):
            raise GradingFailure(f"{label}: shuffle=True must shuffle the order of the samples")
        if orders[0] == orders[1] == orders[2]:
            raise GradingFailure(f"{label}: every epoch has the same order: draw each epoch's permutation from "
                                 "self.rng (seeded once, in __init__), do not re-seed in __iter__")
        twin = run(f"{label}: DataLoader(...)", lambda: DataLoader(dataset, batch_size=batch, shuffle=True, seed=3))
        twin_orders = [sum(_ids(run(f"{label}: iterating", lambda: list(twin)), label), []) for _ in range(3)]
        if twin_orders != orders:
            raise GradingFailure(f"{label}: two loaders with the same seed must give the same epochs: draw the "
                                 "permutations from self.rng, not from NumPy's global generator")
