"""`pip install .` gives working tools: the declared dependencies are the real ones.

A fresh virtual environment (no system site-packages), `pip install` of the repository, then the
installed `autograder` command and both packages run from outside the source tree. pip's wheel
cache, filled by `make install`, keeps this to a minute or two.
"""
from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_pip_install_gives_a_working_autograder_and_engine(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    install = subprocess.run([bin_dir / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", ROOT],
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
