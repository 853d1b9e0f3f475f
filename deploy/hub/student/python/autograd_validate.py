"""nbgrader's Validate, in the course's words: one sentence per exercise that is not finished.

nbgrader 0.9's Validate button (its ``validate_assignment`` server extension) lists every test cell
that fails with the cell's whole code and the traceback of its error: a half-done notebook shows
pages of tests the student did not write and Python's internals. Its Validator has no setting for
that (only widths, indents and which cells it checks), so this server extension, enabled by
``jupyter_server_config.json`` in the students' configuration folder and imported from this folder
(``PYTHONPATH``, deploy/hub/jupyterhub_config.py), has the button's handler use
:class:`CourseValidator`: the same checks, whose failures are reported one per exercise, by the
heading the student read above it ("Exercise · Mul.backward"), with one sentence saying what is
wrong. JupyterLab's dialog still heads each with its own "The following cell failed:".

Nothing of the grader is imported: the hub's servers do not have it (deploy/hub.py installs it
apart, for instructors), and this runs in the student's own server, on their own notebook.
"""
from __future__ import annotations

import html
import re

from nbgrader.validator import Validator

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _heading(source: str) -> str:
    """A markdown cell's first heading, as plain words ("Exercise · Mul.backward")."""
    line = next((line for line in source.split("\n") if line.startswith("#")), "")
    return line.lstrip("#").replace("`", "").strip()


def what_is_wrong(cell) -> str:
    """One sentence from a failing cell's outputs: the error a test stopped with, in plain words."""
    if cell.get("cell_type") == "markdown":  # a written answer, still as released
        return "not answered yet: write your answer where its cell says YOUR ANSWER HERE"
    for output in cell.get("outputs", []):
        if output.get("output_type") != "error":
            continue
        name, value = output.get("ename", ""), _ANSI.sub("", str(output.get("evalue", ""))).strip()
        value = value.split("\n")[0][:300]
        if name == "NotImplementedError" and not value:
            # the words of the notebook's instructions: "replace `raise NotImplementedError()`"
            return "not done yet: its cell still raises NotImplementedError() where your code goes"
        if name == "NotImplementedError":
            return value  # the kit's stub of another exercise: it says which, and where to write it
        if name == "AssertionError":
            return f"its visible test fails: {value}" if value else "its visible test fails"
        return f"its visible test stops with {name}: {value}" if value else f"its visible test stops with {name}"
    return "its test does not pass yet"


class CourseValidator(Validator):
    """nbgrader's Validator whose ``failed`` entries are one per exercise: ``source`` the exercise's
    heading, ``error`` one sentence (HTML-escaped: JupyterLab puts it in the page as HTML)."""

    def _get_failed_cells(self, nb):
        failed = super()._get_failed_cells(nb)
        heading, above = "", {}
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                heading = _heading(cell.source) or heading
            above[id(cell)] = heading
        self._failed = [(above[id(cell)], cell) for cell in failed]
        return failed

    def validate(self, filename: str) -> dict:
        self._failed: list = []
        results = super().validate(filename)
        if "failed" in results:
            sentences: dict[str, str] = {}
            for heading, cell in self._failed:
                sentences.setdefault(heading or "A test of this notebook", what_is_wrong(cell))
            results["failed"] = [{"source": heading, "error": html.escape(sentence), "raw_error": sentence}
                                 for heading, sentence in sentences.items()]
        return results


def _jupyter_server_extension_points():
    return [{"module": "autograd_validate"}]


def _load_jupyter_server_extension(serverapp) -> None:
    from nbgrader.server_extensions.validate_assignment import handlers

    handlers.Validator = CourseValidator  # the name its handler builds a validator from, per request
