"""The sandbox that runs student code for the judge: what it hides, what it limits, how it dies.

Each test plays a hostile (or clumsy) student's cell inside a real sandbox (bubblewrap, as
`autograder grade` uses it) and asserts what the trusted side sees. The sandbox must hold with
nothing but plain data crossing it: see autograder/judge/session.py and autograder/sandbox/.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from autograder.judge.bubblewrap import Sandbox, SandboxLimits, sandbox_uid
from autograder.judge.proxy import StudentError
from autograder.judge.session import WALL_STRETCH, SandboxDied, SandboxProtocolError, SandboxTimeout, Session, probe

from support import REPO


def test_a_sandbox_can_be_made_here():
    """`make test` installs bubblewrap; without it every test below fails the same way."""
    assert probe() is None


def start(cells: str | list[str], judged: str = "answer", budget: float = 20, **limits) -> tuple[Session, object]:
    sandbox = Sandbox(limits=SandboxLimits(**limits)) if limits else Sandbox()
    session = Session(sandbox, budget=budget)
    cells = [cells] if isinstance(cells, str) else cells
    ready = session.setup(modules={}, exercises={}, cells=[(str(i), c) for i, c in enumerate(cells)],
                          judged=judged, others=[])
    return session, ready


def answer_of(cell: str, **kw):
    session, ready = start(cell, **kw)
    try:
        assert ready.cells[0]["error"] is None, ready.cells
        return ready.answer
    finally:
        session.close()


# -- what the sandbox cannot see ----------------------------------------------------------------

def test_runs_as_an_unprivileged_user_with_an_empty_environment():
    uid, env, caps = answer_of("import os\nanswer = (os.getuid(), dict(os.environ), "
                               "open('/proc/self/status').read().split('CapEff:')[1].split()[0])")
    assert uid not in (0, os.getuid()) and uid == sandbox_uid()
    assert int(caps, 16) == 0
    secret_free = {k: v for k, v in env.items() if k not in ("HOME", "PATH", "PWD", "LC_CTYPE", "PYTHONHASHSEED")
                   and not k.endswith("_NUM_THREADS") and not k.startswith("MPL")}
    assert secret_free == {}, secret_free


def test_sees_nothing_of_the_course_the_reference_or_the_grader():
    seen = answer_of(
        "import os, importlib.util\n"
        f"paths = {[str(REPO / p) for p in ('solutions', 'autograder/exercises', 'assignments', 'tests')]}\n"
        "answer = ([p for p in paths if os.path.exists(p)], sorted(os.listdir('/')),\n"
        "          [m for m in ('solutions', 'autograder', 'autograder.exercises') "
        "if importlib.util.find_spec(m.split('.')[0])],\n"
        "          sorted(os.listdir('/proc')),\n"
        f"          sorted(os.listdir({str(REPO)!r})) if os.path.isdir({str(REPO)!r}) else [])")
    existing, root, importable, proc, repository = seen
    assert existing == [] and importable == []
    # The venv is mounted at its own path (inside the repository here); nothing else of the repository is.
    assert set(repository) <= {".venv"}, f"the sandbox sees the repository: {repository}"
    pids = [p for p in proc if p.isdigit()]
    assert len(pids) <= 3, f"the sandbox sees processes outside itself: {pids}"


def test_sees_only_numpy_of_the_installed_packages():
    """Of every site-packages folder only NumPy is mounted: nothing of the grader, nbgrader or
    the reference, whether installed editable or not (`pip install .` puts them there)."""
    import site
    import sys
    folders = sorted({p for p in [*site.getsitepackages(), *sys.path]
                      if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)})
    listing, importable = answer_of(
        "import os, importlib.util\n"
        f"answer = ({{p: sorted(os.listdir(p)) for p in {folders!r} if os.path.isdir(p)}},\n"
        "          [m for m in ('nbgrader', 'autograder', 'solutions', 'IPython', 'scipy', 'pip') "
        "if importlib.util.find_spec(m)])")
    assert importable == []
    assert listing and all(name.startswith("numpy") for names in listing.values() for name in names), listing
    assert any("numpy" in names for names in listing.values())


def test_cannot_write_outside_its_tmp_and_files_are_size_limited():
    result = answer_of(
        "import os, sys\n"
        "out = []\n"
        "for path in [sys.prefix + '/x.pth', '/usr/x', '/sandbox/x.py']:\n"
        "    try:\n"
        "        open(path, 'w').write('x'); out.append(path)\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    open('/tmp/big', 'wb').write(b'0' * (64 << 20)); out.append('big')\n"
        "except OSError:\n"
        "    pass\n"
        "answer = out", fsize_mb=8)
    assert result == []


def test_has_no_network(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        error = answer_of("import socket\ntry:\n"
                          f"    socket.create_connection(('127.0.0.1', {port}), timeout=2); answer = 'connected'\n"
                          "except OSError as e:\n    answer = type(e).__name__")
        assert error != "connected"
    finally:
        server.close()


# -- what crosses the boundary --------------------------------------------------------------------

def test_plain_values_cross_by_value_and_objects_as_proxies():
    session, ready = start("import numpy as np\nclass Box:\n    def __init__(self, v):\n        self.v = v\n"
                           "    def twice(self):\n        return self.v * 2\n"
                           "answer = Box")
    with session:
        box = ready.answer(np.arange(3.0))
        assert isinstance(box, ready.answer) and not isinstance(np.zeros(1), ready.answer)
        twice = box.twice()
        assert isinstance(twice, np.ndarray) and twice.tolist() == [0.0, 2.0, 4.0]
        assert box.v.dtype == np.float64 and (box.v + 1).tolist() == [1.0, 2.0, 3.0]
        assert (ready.answer.__name__, len(box.v), list(box.v)) == ("Box", 3, [0.0, 1.0, 2.0])


def test_student_exceptions_arrive_as_their_builtin_kind_with_the_students_line():
    session, ready = start("def answer(x):\n    if x:\n        raise ValueError('shapes (2, 3) and (4,)')\n"
                           "    raise NotImplementedError")
    with session:
        with pytest.raises(ValueError) as error:
            ready.answer(1)
        assert isinstance(error.value, StudentError) and "(2, 3) and (4,)" in str(error.value)
        assert error.value.where == " (in answer, line 3)"
        with pytest.raises(NotImplementedError):
            ready.answer(0)


def test_a_cell_that_raises_is_reported_and_the_next_cells_still_run():
    session, ready = start(["raise RuntimeError('oops')", "import sys\nsys.exit(3)", "answer = 42"])
    with session:
        assert [c["error"]["type"] if c["error"] else None for c in ready.cells] == \
            ["RuntimeError", "SystemExit", None]
        assert ready.answer == 42


def test_writes_to_stderr_and_stdout_from_c_code_cost_nothing():
    answer = answer_of("import os, sys, ctypes\nos.write(2, b'a C library warning\\n' * 1000)\n"
                       "os.write(1, b'x' * 100000)\nprint('noise', file=sys.stderr)\n"
                       "ctypes.CDLL(None).fputs(b'libc on stderr', "
                       "ctypes.c_void_p.in_dll(ctypes.CDLL(None), 'stderr'))\n"
                       "answer = 'fine'")
    assert answer == "fine"


def test_a_forged_message_on_stdout_is_just_noise():
    """The channel is on private descriptors: writing a frame to fd 1 cannot answer for the runner."""
    from autograder.sandbox.wire import pack
    frame = pack({"ready": True, "cells": [], "defined": True, "value": 35}, [])
    answer = answer_of(f"import os\nos.write(1, {frame!r})\nanswer = 'honest'")
    assert answer == "honest"


# -- how it ends ----------------------------------------------------------------------------------

@pytest.mark.parametrize("code,reason", [
    ("import os\nos._exit(0)", "exited"),
    ("import ctypes\nctypes.string_at(0)", "segmentation fault"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "killed"),
])
def test_a_death_while_judged_is_a_sandbox_failure_with_a_reason(code, reason):
    session, ready = start("def answer():\n" + "".join(f"    {line}\n" for line in code.split("\n")))
    with session, pytest.raises(SandboxDied) as died:
        ready.answer()
    assert reason in str(died.value)
    with pytest.raises(SandboxDied):  # and every later request fails the same way, without hanging
        ready.answer()


@pytest.mark.slow
def test_an_endless_loop_is_cut_when_its_own_clock_reaches_the_budget():
    """The budget is counted on the sandbox's clock (its CPU time, or the wall time it was not kept
    off the CPU): on a busy machine the cut comes later in wall time, never past the backstop."""
    session, ready = start("def answer():\n    while True:\n        pass", budget=2)
    with session, pytest.raises(SandboxTimeout):
        ready.answer()
    assert time.monotonic() - session.started < WALL_STRETCH * 2 + 5


@pytest.mark.slow
def test_a_sleep_is_cut_at_the_wall_clock_budget():
    """Waiting is the sandbox's own time: a sleeping answer is not stretched by the load."""
    session, ready = start("import time\ndef answer():\n    time.sleep(600)", budget=2)
    with session, pytest.raises(SandboxTimeout):
        ready.answer()
    assert time.monotonic() < session.wall_deadline


@pytest.mark.slow
def test_an_endless_loop_in_a_cell_is_cut_too():
    sandbox = Sandbox()
    session = Session(sandbox, budget=2)
    with session, pytest.raises(SandboxTimeout):
        session.setup(modules={}, exercises={}, cells=[("0", "while True: pass")], judged="answer", others=[])


def test_memory_is_capped():
    session, ready = start("import numpy as np\ndef answer():\n    return np.ones(10**10).sum()", memory_mb=1024)
    with session, pytest.raises(MemoryError):
        ready.answer()


def test_a_fork_bomb_is_bounded_and_everything_dies_with_the_session():
    session, ready = start(
        "import os, time\n"
        "def answer():\n"
        "    made = 0\n"
        "    for _ in range(10000):\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(600); os._exit(0)\n"
        "            made += 1\n"
        "        except OSError:\n"
        "            break\n"
        "    return made\n", nproc=64)
    with session:
        made = ready.answer()
        assert made < 64
    pids_of_sandbox_user = [p for p in os.listdir("/proc") if p.isdigit() and _uid(p) == sandbox_uid()]
    deadline = time.monotonic() + 5
    while pids_of_sandbox_user and time.monotonic() < deadline:
        time.sleep(0.1)
        pids_of_sandbox_user = [p for p in os.listdir("/proc") if p.isdigit() and _uid(p) == sandbox_uid()]
    assert pids_of_sandbox_user == []


def test_a_double_forked_daemon_does_not_outlive_its_session():
    session, ready = start(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "answer = 1")
    session.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_uid(p) == sandbox_uid() for p in os.listdir("/proc") if p.isdigit()):
        time.sleep(0.1)
    assert not any(_uid(p) == sandbox_uid() for p in os.listdir("/proc") if p.isdigit())


def test_an_oversized_answer_is_refused_not_read():
    session, ready = start("import numpy as np\ndef answer():\n    return np.zeros(2**24)", message_mb=16)
    with session, pytest.raises(SandboxProtocolError, match="over the limit"):
        ready.answer()


def test_the_judge_cannot_be_handed_code_objects_or_pickles():
    """Only plain data comes back: a student object that pretends to be an array is a proxy."""
    session, ready = start("import numpy as np\nclass Fake(np.ndarray):\n    def __reduce__(self):\n"
                           "        raise SystemExit\nanswer = lambda: (np.zeros(3).view(Fake), np.array([object()]))")
    with session:
        fake, objects = ready.answer()
        assert type(fake) is np.ndarray and fake.tolist() == [0.0, 0.0, 0.0]
        assert not isinstance(objects, np.ndarray)  # an object array stays behind as a proxy


def test_two_sessions_at_once_do_not_see_each_other():
    results = []

    def one(tag):
        results.append(answer_of(f"import os\nopen('/tmp/mark', 'w').write('{tag}')\nimport time\ntime.sleep(0.5)\n"
                                 "answer = (open('/tmp/mark').read(), sorted(os.listdir('/tmp')))"))
    threads = [threading.Thread(target=one, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r[0] for r in results) == ["a", "b"]


def _uid(pid: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
