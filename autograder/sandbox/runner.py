"""The sandbox side: execute a student's cells, then answer the trusted judge's requests.

Started by :mod:`autograder.judge.session` as ``python -I -B runner.py`` inside the sandbox, with
the channel on standard input and output. Before any student code runs it moves the channel to
private descriptors, points descriptors 0-2 at /dev/null (so prints and a C library's writes to
fd 2 go nowhere and cannot corrupt the channel) and sets the resource limits. Then:

1. **setup**: the engine the answer runs in (compiled modules, kept in memory: the course kit
   with only the judged exercise left out), the student's code cells, and which name is judged;
2. the cells run in one namespace, in order; an error in one cell is recorded and the next runs;
3. isolation: every exercise object the cells replaced in the engine (``use(...)``) is put back,
   the other exercises' names in the notebook namespace are bound to the engine's, and the
   student's answer is plugged into the engine in place of its stub;
4. **requests** (get an attribute, call, apply an operator, ...) until the judge closes the
   channel. Results that are plain data (numbers, strings, arrays, tuples of them) are sent by
   value; anything else stays here and is sent as a handle.

Nothing here compares or scores: whatever this process says is data for the judge.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import operator
import os
import resource
import sys
import traceback
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `python -I` leaves the script's folder out
import sealed  # noqa: E402
from memory import Modules  # noqa: E402
from wire import Reader, Ref, WireError, decode, encode, pack, write  # noqa: E402

CELL_PREFIX = "<cell "
MAX_MESSAGE = 1 << 30
OPERATORS = {name: getattr(operator, name) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "pos", "abs", "invert",
    "lt", "le", "eq", "ne", "gt", "ge", "getitem", "setitem", "delitem", "contains", "and_", "or_", "xor")}
OPERATORS.update(float=float, int=int, index=operator.index, asarray=np.asarray, len=len, bool=bool,
                 list=list, str=lambda x: str(x)[:10000], repr=lambda x: repr(x)[:10000], type=type,
                 isinstance=isinstance, issubclass=issubclass, callable=callable, hasattr=hasattr,
                 copy_array=np.array, defines=lambda cls, name: isinstance(cls, type) and name in vars(cls))


def _nothing(*args, **kwargs) -> list:
    return []


class _Shell:
    """What ``get_ipython()`` returns: magics (``%matplotlib inline``, ``!pip ...``) do nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


# What a check may use in the sandbox besides the kit: NumPy, and the stdlib's iteration tools, with
# which the sandbox builds a graph of 10 000 nodes in one request instead of one request per node.
JUDGE_IMPORTS = frozenset({"numpy", "functools", "itertools", "operator"})


class Runner:
    def __init__(self, reader: Reader, out_fd: int):
        self.reader, self.out = reader, out_fd
        self.objects: dict[int, object] = {}
        self.namespace: dict = {"__name__": "__main__", "__builtins__": builtins}

    # -- the channel ------------------------------------------------------------------------------
    def handle(self, obj) -> dict:
        if isinstance(obj, _Keep):
            obj = obj.value
        key = id(obj)
        self.objects[key] = obj
        cls = obj if isinstance(obj, type) else type(obj)
        kind = ("type" if isinstance(obj, type) else "module" if isinstance(obj, types.ModuleType)
                else "function" if callable(obj) else "object")
        try:
            mro = [c.__name__ for c in cls.__mro__]
        except Exception:  # noqa: BLE001 (a student's metaclass may do anything)
            mro = ["object"]
        return {"$h": key, "type": str(getattr(cls, "__name__", "?"))[:200], "mro": mro[:64], "kind": kind}

    def send(self, message: dict, value=None, has_value: bool = False) -> None:
        blobs: list[bytes] = []
        if has_value:
            try:
                message["value"] = encode(value, blobs, self.handle)
            except WireError as error:
                message = {"err": {"type": "WireError", "mro": ["WireError", "Exception"],
                                   "msg": str(error), "where": ""}}
                blobs = []
        write(self.out, pack(message, blobs))

    def resolve(self, value):
        if isinstance(value, Ref):
            if value.id not in self.objects:
                raise LookupError("unknown handle")
            return self.objects[value.id]
        if isinstance(value, tuple):
            return tuple(self.resolve(v) for v in value)
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict):
            return {self.resolve(k): self.resolve(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(self.resolve(value.start), self.resolve(value.stop), self.resolve(value.step))
        return value

    # -- setup ------------------------------------------------------------------------------------
    def setup(self, message: dict) -> None:
        # The kit's sealed exercises call the judge over this channel (see sealed.py).
        sealed.connect(self.reader, self.out)
        sys.modules["_sealed"] = sealed
        sys.meta_path.insert(0, Modules(message["modules"]))
        exercises = message["exercises"]  # every exercise name -> its home module in the engine
        for home in sorted(set(exercises.values())):
            importlib.import_module(home)
        whole = "earlier" in message  # the capstone kind: the whole engine is the student's
        if whole:
            answers = importlib.import_module("coursekit.answers")
            for assignment, notebook_cells in message["earlier"]:
                self.send({"running": f"{assignment} (the answers loaded from it)"})
                answers.load_cells(assignment, notebook_cells)
        # The kit's one swap mechanism (coursekit/engine/overrides.py): what the cells rebind, by
        # `use` or by hand, is put back before the judged answer alone is plugged in.
        # (a course without a kit has no exercise in the engine, and nothing to swap). Both functions
        # are taken before the cells could rebind them.
        swap = importlib.import_module("coursekit.engine.overrides") if exercises else None
        plug, restore = (swap.plug, swap.restore) if swap else (_nothing, _nothing)
        saved = swap.snapshot(exercises) if swap else []
        self.namespace["get_ipython"] = _Shell
        self.namespace["display"] = lambda *args, **kwargs: None
        cells = []
        for label, source in message["cells"]:
            self.send({"running": label})  # the judge knows where a crash happened
            cells.append(self.run_cell(label, source))
        judged = message["judged"]
        if whole:  # this notebook's answers join the earlier ones in the engine, as `use` would
            for name in [judged, *message["others"]]:
                if name in exercises and name in self.namespace:
                    try:
                        plug(self.namespace[name], name, where=exercises[name])
                    except Exception:  # noqa: BLE001 (not a class or function: the stub stays)
                        pass
            self.send({"ready": True, "cells": cells, "defined": judged in self.namespace},
                      self.namespace.get(judged), has_value=True)
            return
        restore(saved)  # undo the cells' use(...) of their own answers
        for name in message["others"]:  # the other exercises of the assignment: the engine's
            if name in self.namespace:
                home = sys.modules.get(exercises.get(name, ""))
                if home is not None and hasattr(home, name):
                    self.namespace[name] = getattr(home, name)
        answer = self.namespace.get(judged)
        if answer is not None and judged in exercises:
            # isolation: the engine's subclasses of a judged class keep the kit's base
            with contextlib.suppress(Exception):  # not a class or function: the check says so
                plug(answer, judged, where=exercises[judged], rebase=False)
        self.send({"ready": True, "cells": cells, "defined": judged in self.namespace},
                  answer, has_value=True)

    def run_cell(self, label: str, source: str) -> dict:
        try:
            code = compile(source, f"{CELL_PREFIX}{label}>", "exec")
            exec(code, self.namespace)
        except BaseException as error:  # noqa: BLE001 (a student's cell may raise anything, SystemExit too)
            return {"label": label, "error": describe(error)}
        return {"label": label, "error": None}

    # -- requests ---------------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            try:
                message, blobs = self.reader.read()
            except EOFError:
                return
            op = message.get("op")
            if op == "exit":
                return
            try:
                args = self.resolve(decode(message.get("args", {"$l": []}), blobs))
                kwargs = self.resolve(decode(message.get("kwargs", {"$d": []}), blobs))
                result = self.perform(op, message, args, kwargs)
            except BaseException as error:  # noqa: BLE001 (the student's code may raise anything)
                self.send({"err": describe(error)})
                continue
            self.send({"ok": True}, result, has_value=True)

    def perform(self, op: str, message: dict, args: list, kwargs: dict):
        if op == "getattr":
            return getattr(args[0], args[1])
        if op == "setattr":
            setattr(args[0], args[1], args[2])
            return None
        if op == "call":
            return args[0](*args[1:], **kwargs)
        if op == "method":
            return getattr(args[0], args[1])(*args[2:], **kwargs)
        if op == "operator":
            return OPERATORS[message["name"]](*args)
        if op == "import":
            name = args[0]
            if not (name == "coursekit" or name.startswith("coursekit.") or name in JUDGE_IMPORTS):
                raise ImportError(f"the judge may import only the course kit, NumPy and "
                                  f"{', '.join(sorted(JUDGE_IMPORTS - {'numpy'}))}, not {name}")
            return importlib.import_module(name)
        if op == "global":
            return self.namespace[args[0]]
        if op == "ref":  # a value sent by reference: the judge keeps a handle to it
            return _Keep(args[0])
        raise ValueError(f"unknown request {op!r}")


class _Keep:
    """Wraps a result that must stay in the sandbox (sent as a handle even if it is an array)."""

    def __init__(self, value):
        self.value = value


def describe(error: BaseException) -> dict:
    """The student-facing facts of an exception: its type, message and the student's line."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(CELL_PREFIX)]
    where = f" (in {frames[-1].name}, line {frames[-1].lineno})" if frames else ""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001
        text = "(the exception's message could not be read)"
    cls = type(error)
    return {"type": cls.__name__[:200], "mro": [c.__name__ for c in cls.__mro__][:64], "msg": text[:2000],
            "where": where[:300]}


def limit(limits: dict) -> None:
    limits = {k: v for k, v in limits.items() if k != "tmpfs_mb" and k != "message_mb"}
    pairs = {"memory_mb": (resource.RLIMIT_AS, 2**20), "cpu_s": (resource.RLIMIT_CPU, 1),
             "nproc": (resource.RLIMIT_NPROC, 1), "fsize_mb": (resource.RLIMIT_FSIZE, 2**20),
             "nofile": (resource.RLIMIT_NOFILE, 1)}
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, (which, unit) in pairs.items():
        if limits.get(key):
            value = int(limits[key] * unit)
            resource.setrlimit(which, (value, value))


def main() -> None:
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    reader = Reader(in_fd, MAX_MESSAGE)
    frame, blobs = reader.read()
    message = decode(frame["setup"], blobs)
    limit(message.get("limits", {}))
    runner = Runner(reader, out_fd)
    runner.setup(message)
    runner.serve()
    os._exit(0)  # no atexit handlers or finalizers of the student's


if __name__ == "__main__":
    main()
