"""The course's notebook conventions, in one place: cells, their nbgrader metadata, their regions.

Every trusted module that reads a notebook goes through here (the two that ship to students and
run beside their code, ``kit/shipped/`` and ``sandbox/``, carry the few lines they need of it):

- ``read`` / ``write``: a notebook as nbformat v4 (``write`` replaces the file atomically);
- ``nbgrader(cell)``, ``grade_id(cell)``, ``is_answer``, ``is_test``: the metadata, read so that a
  student's damaged notebook (metadata of the wrong type, a list for a source) never raises;
- ``exercise_of(grade_id)``: the exercise a cell belongs to (``a02-mul-hidden`` -> ``a02-mul``);
- solution and hidden-test regions: ``solution_lines``, ``solution_spans``, and ``released`` (what
  nbgrader's own ClearSolutions and ClearHiddenTests make of a source cell, run on a copy);
- ``cut_hidden_regions``: the same cut on any text (a feedback page), in linear time.
"""
from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder.course.files import write_file

BEGIN_SOLUTION, END_SOLUTION = "BEGIN SOLUTION", "END SOLUTION"   # a line holding it is a marker
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"      # nbgrader's default stubs
TEXT_STUB = "YOUR ANSWER HERE"
SUFFIX = re.compile(r"-(visible|hidden|written)(-[0-9]+)?$")


# -- files ---------------------------------------------------------------------------------------

def read(path: Path | str) -> NotebookNode:
    return nbformat.read(path, as_version=4)


def validated(value: str) -> NotebookNode:
    """``value`` (a file's text) as a notebook; raises when it is not a valid nbformat 4 notebook."""
    nb = nbformat.reads(value, as_version=4)
    nbformat.validate(nb)
    return nb


def write(nb: Any, path: Path | str) -> None:
    """Write ``nb`` to ``path`` whole or not at all (a crash never leaves half a notebook), never
    through a link (:func:`autograder.course.files.write_file`); ends with a newline, as nbformat's."""
    write_file(path, nbformat.writes(nbformat.from_dict(nb)).rstrip("\n") + "\n")


# -- cells ---------------------------------------------------------------------------------------

def text(source: Any) -> str:
    """A cell's source as one string (raw JSON allows a list of lines)."""
    if isinstance(source, str):
        return source
    if isinstance(source, list):
        return "".join(s if isinstance(s, str) else str(s) for s in source)
    return "" if source is None else str(source)


def nbgrader(cell: Any) -> dict:
    """The cell's nbgrader metadata; {} when it has none or it is not a dict."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def grade_id(cell: Any) -> str:
    value = nbgrader(cell).get("grade_id")
    return value if isinstance(value, str) else ""


def is_answer(cell: Any) -> bool:
    """An "Autograded answer" or "Manually graded answer" cell: the student writes it."""
    return bool(nbgrader(cell).get("solution"))


def is_test(cell: Any) -> bool:
    """An "Autograder tests" cell: a code cell with ``grade`` and without ``solution``."""
    meta = nbgrader(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def exercise_of(cell_id: str) -> str:
    """The exercise a cell belongs to: its grade_id without the -visible/-hidden/-written suffix.

    ``a02-mul-hidden-2`` -> ``a02-mul``; an answer cell's id is the exercise itself.
    """
    return SUFFIX.sub("", cell_id)


# -- regions -------------------------------------------------------------------------------------

def _regions(lines: list[str], begin: str, end: str) -> Iterator[tuple[int, int]]:
    """(line of a BEGIN marker, line of its END marker or len(lines)) of each region, as nbgrader
    reads them: a line holding the marker opens or closes a region."""
    start = None
    for index, line in enumerate(lines):
        if begin in line and start is None:
            start = index
        elif end in line and start is not None:
            yield start, index
            start = None
    if start is not None:
        yield start, len(lines)


def solution_lines(source: Any) -> list[tuple[int, str]]:
    """(1-based line number, line) of every line inside a solution region."""
    lines = text(source).splitlines()
    return [(i + 1, lines[i]) for b, e in _regions(lines, BEGIN_SOLUTION, END_SOLUTION) for i in range(b + 1, e)]


def solution_spans(source: Any) -> list[tuple[int, int]]:
    """Character spans of the text inside each complete solution region."""
    lines = text(source).splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return [(offsets[b + 1], offsets[e]) for b, e in _regions(lines, BEGIN_SOLUTION, END_SOLUTION) if e < len(lines)]


def typed_in(source: Any, body: str | None = None) -> str:
    """``source`` with each complete solution region, its two marker lines included, as a student
    leaves it after typing: ``body`` in its place, indented as the BEGIN line was (default: the
    region's own lines, the reference answer without its markers). An unclosed region stays."""
    lines = text(source).splitlines(keepends=True)
    out, done = [], 0
    for begin, end in _regions(lines, BEGIN_SOLUTION, END_SOLUTION):
        if end == len(lines):
            continue
        out += lines[done:begin]
        if body is None:
            out += lines[begin + 1:end]
        else:
            marker = lines[begin]
            out.append(marker[:len(marker) - len(marker.lstrip())] + body + ("\n" if lines[end].endswith("\n") else ""))
        done = end + 1
    return "".join(out + lines[done:])


@functools.cache
def _release_preprocessors():
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
    return ClearSolutions(code_stub={"python": CODE_STUB}, text_stub=TEXT_STUB), ClearHiddenTests()


def released(cell: NotebookNode) -> str:
    """The source of ``cell`` (a source notebook's) as nbgrader's generate_assignment releases it:
    its solution regions stubbed (a whole answer cell when it has none), its hidden tests removed."""
    clear_solutions, clear_hidden = _release_preprocessors()
    cell = copy.deepcopy(cell)
    cell, _ = clear_solutions.preprocess_cell(cell, {"language": "python"}, 0)
    cell, _ = clear_hidden.preprocess_cell(cell, {}, 0)
    return cell.source


def cut_hidden_regions(value: str) -> str:
    """``value`` without its whole BEGIN ... END HIDDEN TESTS regions: from the line of a BEGIN to the
    line of the next END after it, both lines included. A BEGIN with no END after it stays.

    For any text (a student's cell quoting the markers), in one pass over the lines: the regular
    expression this replaced took time quadratic in the cell (17 s for 4,000 lines).
    """
    lines = value.splitlines(keepends=True)
    next_end = [len(lines)] * (len(lines) + 1)  # the first line at or after i holding an END
    for i in range(len(lines) - 1, -1, -1):
        next_end[i] = i if END_HIDDEN in lines[i] else next_end[i + 1]
    kept, i = [], 0
    while i < len(lines):
        line = lines[i]
        at = line.rfind(BEGIN_HIDDEN)
        if at >= 0 and END_HIDDEN in line[at + len(BEGIN_HIDDEN):]:
            i += 1  # BEGIN ... END on one line
        elif at >= 0 and next_end[i + 1] < len(lines):
            i = next_end[i + 1] + 1
        else:
            kept.append(line)
            i += 1
    return "".join(kept)


# -- the judge's verdict on an autograded test cell ------------------------------------------------
# A failed exercise's test cells carry one error output: nbgrader scores the cell 0 from it, and its
# text, "<exercise id>: <message>", is what the student reads (feedback strips the id again).
FAILED = "Incorrect"    # its ename
MAX_MESSAGE = 2000      # characters of a judge message kept in the notebook


def failure_output(exercise: str, message: str) -> NotebookNode:
    value = f"{exercise}: {message}"
    value = value if len(value) <= MAX_MESSAGE else value[: MAX_MESSAGE - 1] + "…"
    return nbformat.v4.new_output("error", ename=FAILED, evalue=value, traceback=[f"{FAILED}: {value}"])


def failure_message(output: Any, exercise: str) -> str:
    """The message of an error output on one of ``exercise``'s test cells, without the id."""
    return str(output.get("evalue", "")).removeprefix(f"{exercise}: ")
