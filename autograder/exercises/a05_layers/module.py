"""Hidden checks of a05_layers: the Module: registration, the walks, the state dict."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    SandboxTimeout,
    current,
    graded,
    in_sandbox,
    raises,
    run,
    same_object,
    student_engine,
    student_module,
    time_limit,
    type_name,
)

from .common import (
    TIME_LIMIT,
    _slow,
)


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
    error = run(f"{label}: self.weight = a plain Tensor", raises, setattr, m, "weight", Tensor(np.ones((3, 2))))
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
    error = run(f"{label}: self.count = 'text'", raises, setattr, m, "count", "text")
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
        return run(f"{label} with {what}", lambda: raises(tree.root.load_state_dict, d, strict))

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
        error = raises(lambda: returned.append(tree.root.load_state_dict(d, False)))
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
        points=4, diagnose=("Module.parameters",))
def check_module(Module, rng):
    with time_limit(TIME_LIMIT, _slow("Module")):
        _check_setattr(Module, rng)
        _check_named_modules(Module, rng)
        _check_named_parameters(Module, rng)
        _check_train(Module, rng)
        _check_state_dict(Module, rng)
        _check_load_state_dict(Module, rng)
