"""Kernels started by the book build and the tests use IPC: no "running over TCP" warning in the output."""
from __future__ import annotations

import nbformat
from nbclient import NotebookClient


def test_a_notebook_runs_over_ipc_without_the_tcp_warning(capfd):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    client = NotebookClient(nb, kernel_name="python3", timeout=120)
    client.execute()  # conftest.py made IPC the default, as book/_ext/coursekit_book.py does for the book
    assert nb.cells[0].outputs[0]["text"] == "42\n"
    out, err = capfd.readouterr()  # the kernel's own stderr is this process's file descriptor 2
    assert "without encryption" not in out + err
