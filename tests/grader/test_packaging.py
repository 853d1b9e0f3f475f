"""`pip install .` gives working tools: the declared dependencies are the real ones.

A fresh virtual environment (no system site-packages), `pip install` of the repository, then the
installed `autograder` command and both packages run from outside the source tree. pip's wheel
cache, filled by `make install`, keeps this to a minute or two. In that install (no source tree
beside the package, `solutions` and `autograder` in site-packages) the whole loop works from a
course folder, and a student cannot reach the installed reference or checks from the sandbox.
"""
from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from support import REPO

ROOT = REPO


@pytest.mark.slow
def test_pip_install_gives_a_working_autograder_and_engine(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    # --no-compile: byte-compiling the ~130 installed distributions was half of pip's CPU time, and
    # proves nothing about what is declared (Python compiles what it imports).
    install = subprocess.run([bin_dir / "python", "-m", "pip", "install", "-q", "--no-compile",
                              "--disable-pip-version-check", ROOT],
                             capture_output=True, text=True, cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-3000:]

    help_text = subprocess.run([bin_dir / "autograder", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert help_text.returncode == 0, help_text.stderr[-3000:]
    assert "usage: autograder" in help_text.stdout

    # Every module of both packages imports: a dependency used anywhere but not declared fails here.
    probe = (
        "import importlib, pkgutil, solutions, autograder\n"
        "for package in (solutions, autograder):\n"
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        if not module.name.endswith('__main__'):\n"
        "            importlib.import_module(module.name)\n"
        "from solutions import Tensor\n"
        "print((Tensor([1.0, 2.0], requires_grad=True) * 3).sum().item())\n"
        "print(solutions.__file__)\n"
    )
    run = subprocess.run([bin_dir / "python", "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[0] == "9.0"
    assert str(env_dir) in run.stdout, "imported the source tree, not the installed package"
    assert sys.prefix not in run.stdout

    site = run.stdout.splitlines()[1].rsplit("/solutions/", 1)[0]
    _grade_a_hostile_submission_in_the_installed_tools(tmp_path, bin_dir, site)


def _grade_a_hostile_submission_in_the_installed_tools(tmp_path: Path, bin_dir: Path, site: str) -> None:
    """release a02 into a scratch course, grade an unanswered a02 whose cells reach for the
    installed reference and checks (imports, exec of their files, their text in a message)."""
    from autograder.course.directory import Course

    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    shutil.copy(ROOT / "assignments" / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "assignments" / "source" / "a02_broadcasting", course / "source" / "a02_broadcasting")

    def tool(*args: str) -> str:
        done = subprocess.run([bin_dir / "autograder", "--course", str(course), *args], capture_output=True,
                              text=True, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done.stdout
    assert "scan clean" in tool("release", "a02_broadcasting")

    nb = json.loads((course / "release" / "a02_broadcasting" / "a02_broadcasting.ipynb").read_text())
    files = {"reference": "solutions/ops/elementwise.py", "checks": "autograder/exercises/a02_broadcasting.py"}
    steal = ("import sys\n"
             f"FILES, SITE = {files!r}, {site!r}\n"
             "def steal(name, marker):\n"
             "    for folder in [SITE, *sys.path]:\n"
             "        try:\n"
             "            text = open(folder + '/' + FILES[name]).read()\n"
             "        except OSError:\n"
             "            continue\n"
             "        if marker in text:\n"
             "            return text[text.index(marker):][:280]\n"
             "    return 'nothing found'\n")
    answers = {
        "a02-unbroadcast": "from solutions.ops.shape import unbroadcast",
        "a02-add": "import solutions.ops.elementwise as E\nAdd = E.Add",
        "a02-mul": f"exec(open({site + '/' + files['reference']!r}).read())",
        "a02-div": "class Div(Function):\n    def forward(self, x, y):\n        return x / y\n\n"
                   "    def backward(self, grad):\n        raise ValueError(steal('checks', '@graded(\"a02-mul\"'))\n",
        "a02-exp": "class Exp(Function):\n    def forward(self, x):\n        return np.exp(x)\n\n"
                   "    def backward(self, grad):\n        raise ValueError(steal('reference', 'class Div'))\n",
        "a02-log": "import autograder.exercises.a02_broadcasting as checks\nLog = checks",
    }
    hostile = copy.deepcopy(nb)
    for cell in hostile["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    hostile["cells"].insert(2, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                "source": steal})
    folder = course / "submitted" / "mallory" / "a02_broadcasting"
    folder.mkdir(parents=True)
    (folder / "a02_broadcasting.ipynb").write_text(json.dumps(hostile))
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")

    tool("grade", "a02_broadcasting", "--cell-timeout", "20")
    with Course.open(course).gradebook() as gb:
        submission = gb.find_submission("a02_broadcasting", "mallory")
        assert (submission.score, submission.max_score > 0) == (0, True)
    # the judge's messages, as the feedback shows them (the autograded notebook's outputs)
    graded = json.loads((course / "autograded" / "mallory" / "a02_broadcasting" / "a02_broadcasting.ipynb").read_text())
    graded = json.dumps([c.get("outputs", []) for c in graded["cells"]])
    assert "your code raised ValueError: nothing found" in graded  # the steal ran, and found nothing
    for secret in ("@graded(", "check_mul", "check_op(Mul", "grad / y", "y * y"):
        assert secret not in graded, secret
