"""Kernels started from the course's venv print no "running over TCP without encryption" warning.

`make install` copies autograder/templates/kernel/ipython_kernel_config.py into the venv, where every
IPython kernel reads it; it filters out that one log message (the file says why that is safe).
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from support import REPO

ROOT = REPO
TEMPLATE = ROOT / "autograder" / "templates" / "kernel" / "ipython_kernel_config.py"


def test_the_venv_holds_the_courses_kernel_configuration():
    installed = Path(sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.py"
    assert installed.is_file(), f"{installed} is missing: run `make install`"
    assert installed.read_text() == TEMPLATE.read_text(), f"{installed} is stale: run `make install`"


def test_a_kernel_runs_in_another_folder_without_the_tcp_warning(capfd, tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import logging, os\nlogging.getLogger('x').warning('a warning of the notebook')\nprint(6 * 7, os.getcwd())")])
    client = NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert f"42 {tmp_path}" in text and "a warning of the notebook" in text  # the notebook's own logs still show
    out, err = capfd.readouterr()  # the kernel's own stderr is this process's file descriptor 2
    assert "Kernel is running over TCP" not in out + err
