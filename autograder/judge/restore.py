"""Rebuild a submitted notebook on the structure of its release template, before it is graded.

Students can damage the nbgrader structure of the notebook they hand in: delete, empty, copy-paste,
re-type (code -> markdown) or relabel a test cell, edit the points or the grade_id in a cell's
metadata, add cells of their own that carry nbgrader grade metadata. Stock nbgrader 0.9.6 then
misgrades or stops. Seen with this course's ``OverwriteCells.add_missing_cells = True``: a copied
test cell makes ``DeduplicateIds`` empty the nbgrader metadata of all copies but the *last*, and
``OverwriteCells`` then fails on them with ``KeyError: 'grade_id'``; a test cell deleted together
with the answer cell before it fails with ``KeyError`` on the answer's id (a missing cell goes back
only after the cell that precedes it in the source, which must be present). The rule here is
simpler: the template wins and grading goes on.

:func:`restore` is pure (notebooks in, notebook out, no gradebook, no kernel). With the template's
cells in three kinds:

* **fixed** cells (autograder tests, visible or hidden; locked read-only cells and tasks with a
  grade_id) come from the template: source, type, nbgrader metadata, no outputs. Each appears once.
* **answer** cells (``solution``: code answers, written answers) keep the student's source, under the
  template's type and nbgrader metadata. A deleted one comes back as the release stub.
* every other template cell (text, the import cell) is the student's to edit or delete, as in nbgrader.

A submitted cell is matched to a template cell by its grade_id only; a cell whose grade_id the
template does not know is a plain student cell and loses its nbgrader metadata, so it can never
carry points. Matched cells keep their place in the submission as long as they are in template
order; the others, and the missing ones, go back right after the nearest preceding template cell.
"""

from __future__ import annotations

import bisect
import copy
import re
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder.course import notebook

FIXED, ANSWER = "fixed", "answer"
# nbgrader's defaults (ClearSolutions.code_stub["python"], text_stub and the region delimiters,
# matched anywhere in a line as nbgrader does): the course config does not change them.
FLAGS = ("grade", "solution", "locked", "task")
CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # nbformat 4.5's pattern for cell ids


def restore(template: NotebookNode, submitted: NotebookNode) -> tuple[NotebookNode, list[str]]:
    """The submitted notebook rebuilt on the template's structure, and what was repaired (messages
    for the instructor log).

    ``template`` is the assignment's source notebook (solutions, hidden tests) or its release copy:
    fixed cells are copied from it as they are, so pass the source for hidden tests to come back.
    """
    messages: list[str] = []
    tcells = [_normalised(c) for c in _cells(template)]
    kinds: dict[str, tuple[int, str]] = {}  # grade_id -> (template index, kind); the first of a repeated id wins
    for i, cell in enumerate(tcells):
        meta = _nbgrader(cell)
        kind = _kind(meta) if meta is not None else None
        if kind and meta is not None and meta["grade_id"] not in kinds:
            kinds[meta["grade_id"]] = (i, kind)

    cells = [_normalised(c) for c in _cells(submitted)]
    # The copies that may stand for a template cell: any copy of a fixed cell (each is the template's
    # cell again), only the first copy of an answer (the answer; later copies are the student's own).
    copies: dict[str, list[int]] = {}
    for j, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid in kinds and (kinds[gid][1] == FIXED or gid not in copies):
            copies.setdefault(gid, []).append(j)
    kept = _in_order([(gid, copies[gid]) for gid in sorted(copies, key=lambda g: kinds[g][0])])

    # The submission's cells in their order, each with the template index it stands for (None: the
    # student's own cell). Fixed cells are marked so that their template ids win over the student's.
    out: list[tuple[NotebookNode, int | None, bool]] = []
    moved: dict[str, NotebookNode] = {}  # grade_id -> the student's cell, to put back in template order
    for j, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid in kinds:
            ti, kind = kinds[gid]
            what = _label(tcells[ti], kind)
            if kept.get(gid) == j:
                restored, notes = _rebuild(tcells[ti], kind, cell)
                out.append((restored, ti, kind == FIXED))
                messages += notes
            elif gid not in kept and copies[gid][0] == j:
                moved[gid] = cell
            elif kind == FIXED:
                messages.append(f"dropped a duplicate of {what} {gid}")
            else:
                out.append((_plain(cell), None, False))
                messages.append(f"turned a duplicate of {what} {gid} into a plain cell")
        else:
            if _has_nbgrader(cell):
                name = gid if gid is not None else f"#{j + 1}"
                messages.append(f"removed nbgrader metadata from an extra cell '{name}'")
            out.append((_plain(cell), None, False))

    graded = {ti for ti, _ in kinds.values()}
    _match_plain_cells(tcells, graded, out)
    for gid, (ti, kind) in sorted(kinds.items(), key=lambda item: item[1][0]):
        if gid in kept:
            continue
        what = _label(tcells[ti], kind)
        student = moved.get(gid)
        restored, notes = _rebuild(tcells[ti], kind, student)
        out.insert(_position(out, ti, graded), (restored, ti, kind == FIXED))
        if student is None:
            messages.append(f"restored {what} {gid} (deleted)" + (" with the release stub" if kind == ANSWER else ""))
        else:
            messages.append(f"moved {what} {gid} back to its place in the template order")
            messages += notes

    nb = nbformat.v4.new_notebook()
    nb.nbformat = template.get("nbformat", nb.nbformat)
    nb.nbformat_minor = template.get("nbformat_minor", nb.nbformat_minor)
    metadata = submitted.get("metadata")
    nb.metadata = copy.deepcopy(metadata) if isinstance(metadata, dict) else {}
    given = template.get("metadata")
    for key in ("kernelspec", "language_info"):
        if isinstance(given, dict) and key in given:
            nb.metadata[key] = copy.deepcopy(given[key])
    nb.cells = _with_cell_ids(out, (nb.nbformat, nb.nbformat_minor) >= (4, 5))
    return nbformat.from_dict(nb), messages


# -- reading cells whatever the student did to them ------------------------------------------------

def _cells(nb: Any) -> list:
    cells = nb.get("cells") if isinstance(nb, dict) else None
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def _normalised(cell: dict) -> NotebookNode:
    """A deep copy of ``cell`` that nbformat's schema accepts: string source, dict metadata, a known type."""
    cell = copy.deepcopy(dict(cell))
    cell["source"] = notebook.text(cell.get("source"))
    if not isinstance(cell.get("metadata"), dict):
        cell["metadata"] = {}
    if cell.get("cell_type") not in ("code", "markdown", "raw"):
        cell["cell_type"] = "raw"  # keeps the text without running it
    return _as_type(nbformat.from_dict(cell), cell["cell_type"])


def _as_type(cell: NotebookNode, cell_type: str) -> NotebookNode:
    cell.cell_type = cell_type
    if cell_type == "code":
        if not isinstance(cell.get("outputs"), list):
            cell.outputs = []
        if not isinstance(cell.get("execution_count"), int) or isinstance(cell.get("execution_count"), bool):
            cell.execution_count = None
        cell.pop("attachments", None)
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
        if not isinstance(cell.get("attachments", {}), dict):
            del cell["attachments"]
    return cell


def _nbgrader(cell: NotebookNode) -> dict | None:
    """The cell's nbgrader metadata when it names a grade_id (the cells nbgrader grades or locks)."""
    meta = notebook.nbgrader(cell)
    return meta if isinstance(meta.get("grade_id"), str) else None


def _has_nbgrader(cell: NotebookNode) -> bool:
    return cell.metadata.get("nbgrader") not in (None, {})  # any value: even one of the wrong type is removed


def _grade_id(cell: NotebookNode) -> str | None:
    meta = _nbgrader(cell)
    return meta["grade_id"] if meta is not None else None


def _kind(meta: dict) -> str | None:
    if meta.get("solution"):
        return ANSWER
    if meta.get("grade") or meta.get("locked") or meta.get("task"):
        return FIXED
    return None


def _label(tcell: NotebookNode, kind: str) -> str:
    meta = notebook.nbgrader(tcell)
    if kind == ANSWER:
        return "answer cell"
    return "test cell" if meta.get("grade") else "task cell" if meta.get("task") else "read-only cell"


# -- one cell ------------------------------------------------------------------------------------

def _rebuild(tcell: NotebookNode, kind: str, cell: NotebookNode | None) -> tuple[NotebookNode, list[str]]:
    """Template cell ``tcell`` as it goes into the output, given the student's copy ``cell`` (None: missing)."""
    gid = notebook.grade_id(tcell)
    what = _label(tcell, kind)
    if kind == FIXED or cell is None:
        restored = _as_type(copy.deepcopy(tcell), tcell.cell_type)
        if restored.cell_type == "code":
            restored.outputs, restored.execution_count = [], None
        if kind == ANSWER:
            restored.source = notebook.released(tcell)  # the stub, as nbgrader releases the cell
    else:
        restored = _as_type(copy.deepcopy(cell), tcell.cell_type)
        restored.metadata["nbgrader"] = copy.deepcopy(tcell.metadata["nbgrader"])
    if cell is None:
        return restored, []

    notes = []
    # the released copy of a test cell lacks its hidden tests: that is not an edit
    as_given = {tcell.source.strip(), notebook.released(tcell).strip()}
    if cell.cell_type != tcell.cell_type:
        notes.append(f"restored the type of {what} {gid} to {tcell.cell_type} (was {cell.cell_type})")
    elif kind == FIXED and cell.source.strip() not in as_given:
        notes.append(f"restored the source of {what} {gid} (edited)")
    theirs, ours = notebook.nbgrader(cell), notebook.nbgrader(tcell)
    if "points" in ours and not _same_points(theirs.get("points"), ours["points"]):
        notes.append(f"reset points of {gid} to {_number(ours['points'])}")
    for flag in FLAGS:
        if theirs.get(flag, False) != ours.get(flag, False):
            notes.append(f"reset {flag} of {gid} to {ours.get(flag, False)}")
    return restored, notes


def _same_points(theirs: Any, ours: float) -> bool:
    try:
        return float(theirs) == float(ours)
    except (TypeError, ValueError):
        return False


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _plain(cell: NotebookNode) -> NotebookNode:
    cell.metadata.pop("nbgrader", None)
    return cell


# -- order ---------------------------------------------------------------------------------------

def _in_order(groups: list[tuple[str, list[int]]]) -> dict[str, int]:
    """Which copy stays where the student has it, by grade_id.

    ``groups`` lists template cells in template order, each with the submitted positions of its
    copies. The answer is a longest run of increasing positions, one copy per cell at most (a longest
    increasing subsequence; a cell's copies are fed last to first, so two copies of one cell never
    chain and, between copies that fit equally well, the first one stays).
    """
    items = [(gid, position) for gid, positions in groups for position in reversed(positions)]
    tails: list[int] = []   # tails[k]: the smallest last position of an increasing run of length k + 1
    ends: list[int] = []    # ends[k]: the index in ``items`` of that run's last element
    previous: list[int] = []
    for i, (_, position) in enumerate(items):
        k = bisect.bisect_left(tails, position)
        previous.append(ends[k - 1] if k else -1)
        if k == len(tails):
            tails.append(position)
            ends.append(i)
        else:
            tails[k], ends[k] = position, i
    kept, i = {}, ends[-1] if ends else -1
    while i >= 0:
        kept[items[i][0]] = items[i][1]
        i = previous[i]
    return kept


def _match_plain_cells(tcells: list[NotebookNode], graded: set[int], out: list) -> None:
    """Pair the student's plain cells with the template's ungraded cells (same cell id, else same
    source), so that a cell put back goes after the text that introduces it, not before."""
    free = {i: c for i, c in enumerate(tcells) if i not in graded}
    for p, (cell, ti, fixed) in enumerate(out):
        if ti is not None:
            continue
        match = next((i for i, c in free.items() if c.get("id") is not None and c.get("id") == cell.get("id")), None)
        if match is None and cell.source.strip():
            match = next((i for i, c in free.items()
                          if c.cell_type == cell.cell_type and c.source == cell.source), None)
        if match is not None:
            out[p] = (cell, match, fixed)
            del free[match]


def _position(out: list, ti: int, graded: set[int]) -> int:
    """Where template cell ``ti`` goes back: right after the nearest preceding template cell present,
    but never before a graded cell that precedes it in the template, nor after one that follows it."""
    lo, hi = -1, len(out)
    for p, (_, t, _) in enumerate(out):
        if t in graded and t < ti:
            lo = p
        elif t in graded and t > ti:
            hi = p
            break
    floor = out[lo][1] if lo >= 0 else -1
    best = lo
    for p in range(lo + 1, hi):
        t = out[p][1]
        if t is not None and floor < t < ti and (best == lo or t > out[best][1]):
            best = p
    return best + 1


# -- cell ids ------------------------------------------------------------------------------------

def _with_cell_ids(out: list, wanted: bool) -> list[NotebookNode]:
    """The output's cells with unique valid ids (nbformat >= 4.5) or none (older formats).

    The template's fixed cells keep their own ids; a student cell whose id is missing, invalid or
    taken (a copy of a test cell keeps the test cell's id) gets a fresh one derived from it.
    """
    cells = [cell for cell, _, _ in out]
    if not wanted:
        for cell in cells:
            cell.pop("id", None)
        return cells
    used: set[str] = set()
    order = sorted(range(len(out)), key=lambda p: not out[p][2])  # fixed cells first, stable
    for p in order:
        cell = cells[p]
        cid = cell.get("id")
        if not (isinstance(cid, str) and CELL_ID.match(cid)) or cid in used:
            base = re.sub(r"[^a-zA-Z0-9_-]", "", cid if isinstance(cid, str) else "")[:50] or "cell"
            k = 1
            while f"{base}-{k}" in used:
                k += 1
            cid = f"{base}-{k}"
        cell.id = cid
        used.add(cid)
    return cells
