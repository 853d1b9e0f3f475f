"""``autograder release``: nbgrader generate_assignment, then a scan that proves nothing leaked.

nbgrader strips solution regions and hidden tests from notebook cells, but not from helper files
released beside the notebook, not from a markdown cell that quotes a solution, and not from a
cell an author forgot to mark. The scan reads every released file (notebook cells and outputs,
text files) and reports, by file and line:

* nbgrader markers: ``BEGIN SOLUTION`` / ``END SOLUTION`` / ``BEGIN HIDDEN TESTS`` / ``END HIDDEN TESTS``;
* any line that is also a secret line, compared after normalisation (comments and spacing
  ignored) and only for meaningful lines (:mod:`autograder.course.codelines`), docstrings left
  out. Secret lines are the lines inside the solution
  regions of every source notebook of the course (quoting another exercise's answer is caught
  too), and the reference code students do not get:

  - an assignment whose notebooks import the course kit (``coursekit``, :mod:`autograder.kit`:
    ``solutions/`` with every exercise body stubbed out) gives students all of ``solutions/``
    but the exercise bodies, so the bodies are secret (``autograder.kit.body_lines``); ``release``
    generates the kit into the release folder, and checks it for bodies (``autograder.kit.leaks``);
  - an assignment without the kit gives none of it: every line of ``solutions/`` is secret.

A released line that must quote secret code on purpose ends with ``# release-scan: allow``. The
generated kit is scanned like every other released file; the few lines of its given code that
repeat a line of some solution region without revealing the answer are listed, each with its
reason, in :data:`KIT_SHARED_LINES`.
"""

from __future__ import annotations

import ast
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from nbformat.v4 import new_markdown_cell
from nbgrader.utils import parse_utc, temp_attrs
from traitlets.config import Config

from autograder.course import CourseError, notebook
from autograder.course.codelines import quotes, quoting, signature
from autograder.course.directory import Course, nbgrader_errors
from autograder.course.ngshare import is_ngshare
from autograder.course.term import note_release

KIT = "coursekit"
MARKERS = (notebook.BEGIN_SOLUTION, notebook.END_SOLUTION, notebook.BEGIN_HIDDEN, notebook.END_HIDDEN)
ALLOW = "release-scan: allow"
# Lines of the kit's given code that also occur in a solution region, and why that reveals nothing.
KIT_SHARED_LINES = {
    "if isinstance(x, Tensor):": "the type dispatch that opens every array-or-Tensor function of the kit",
    "if self.needs_input_grad[0]:": "every op's backward asks which inputs need a gradient",
    "if self.needs_input_grad[1]:": "every op's backward asks which inputs need a gradient",
}


@dataclass(frozen=True)
class Leak:
    file: str
    where: str
    what: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.what}: {self.text.strip()}"


def _docstring_lines(source: str) -> set[int]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def solution_index(solutions: Path) -> dict[str, str]:
    """Normalised meaningful lines of the reference code -> where each first occurs."""
    if not solutions.is_dir():
        raise CourseError(f"no reference solutions at {solutions} to scan the release against "
                          "(pass --solutions DIR)")
    index: dict[str, str] = {}
    for path in sorted(solutions.rglob("*.py")):
        source = path.read_text(errors="replace")
        docstrings = _docstring_lines(source)
        for lineno, line in enumerate(source.splitlines(), 1):
            key = None if lineno in docstrings else signature(line)
            if key:
                index.setdefault(key, f"{path.relative_to(solutions.parent)}:{lineno}")
    return index


def _solution_regions(path: Path):
    """(cell number, line number, line) of the lines inside ``### BEGIN/END SOLUTION`` regions."""
    for number, cell in enumerate(notebook.read(path).cells, 1):
        for lineno, line in notebook.solution_lines(cell.source):
            yield number, lineno, line


def secret_index(course: Course, assignment: str, solutions: Path) -> dict[str, str]:
    """Everything a release of ``assignment`` must not contain -> where it comes from."""
    index: dict[str, str] = {}
    for other in course.assignments():
        for path in sorted(course.source_dir(other).glob("*.ipynb")):
            for cell, _lineno, line in _solution_regions(path):
                key = signature(line)
                if key:
                    index.setdefault(key, f"{path.relative_to(course.root)} cell {cell} (a solution)")
    if uses_kit(course, assignment):
        from autograder.kit import body_lines

        for where, line in body_lines():
            key = signature(line)
            if key:
                index.setdefault(key, f"the exercise body {where}")
    else:
        for key, where in solution_index(solutions).items():
            index.setdefault(key, where)
    return index


def _released_lines(path: Path):
    """(where, line) for every line of a released file; notebooks cell by cell, outputs included."""
    if path.suffix == ".ipynb":
        try:
            cells = notebook.read(path).cells
        except Exception:  # noqa: BLE001 (whatever it is, it is not a notebook students can open)
            yield "whole file", "not a readable notebook"
            return
        for number, cell in enumerate(cells, 1):
            for lineno, line in enumerate(notebook.text(cell.get("source")).splitlines(), 1):
                yield f"cell {number} line {lineno}", line
            for output in cell.get("outputs", []):
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                for lineno, line in enumerate("".join(text).splitlines(), 1):
                    yield f"cell {number} output line {lineno}", line
        return
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return  # binary data (images, arrays) cannot quote code
    for lineno, line in enumerate(text.splitlines(), 1):
        yield f"line {lineno}", line


def scan(folder: Path, index: dict[str, str], relative_to: Path) -> list[Leak]:
    kit = folder / KIT
    shared = {signature(line) for line in KIT_SHARED_LINES}
    quoted = quoting(index)  # a secret line also counts when quoted inside a longer line
    leaks = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = str(path.relative_to(relative_to))
        for where, line in _released_lines(path):
            marker = next((m for m in MARKERS if m in line), None)
            if marker:
                leaks.append(Leak(name, where, f"nbgrader marker '{marker}'", line))
                continue
            if ALLOW in line or not index:
                continue
            found = quotes(quoted, line)
            if found and path.is_relative_to(kit) and signature(line) in shared:
                continue
            if found:
                leaks.append(Leak(name, where, f"same code as {index[found.group(0).strip()]}", line))
    if kit.is_dir():
        from autograder.kit import leaks as kit_leaks

        leaks += [Leak(str(kit.relative_to(relative_to)), "generated kit", "an exercise body", found)
                  for found in kit_leaks(kit)]
    return leaks


def uses_kit(course: Course, assignment: str) -> bool:
    """Whether the assignment's notebooks import the course kit."""
    for path in course.source_dir(assignment).glob("*.ipynb"):
        for cell in notebook.read(path).cells:
            if cell.cell_type == "code" and re.search(rf"\b(from|import)\s+{KIT}\b", cell.source):
                return True
    return False


def add_release_files(course: Course, assignment: str) -> None:
    """Generate what the release needs besides nbgrader's output: the kit, if the notebooks use it.

    Grading copies the release folder's extra files next to each submission, so the students'
    code runs against what they were given (see :class:`autograder.grading.workers.Run`).
    """
    if uses_kit(course, assignment):
        from autograder.kit import build_kit

        build_kit(course.release_dir(assignment))


def parse_due(text: str) -> datetime:
    """A due date as nbgrader stores it (naive UTC); a time zone may be given, UTC otherwise."""
    try:
        return parse_utc(text)
    except (ValueError, OverflowError):
        raise CourseError(f"--due {text!r} is not a date: write it like '2026-12-01 17:00' "
                          "or '2026-12-01 17:00 Europe/Paris'") from None


def release(course: Course, assignment: str, solutions: str | Path, due: str | None = None) -> list[Leak]:
    """Generate ``release/<assignment>/`` with nbgrader and return what the scan found in it.

    ``due`` sets the assignment's due date in the gradebook: nbgrader then records how late each
    submission is, and applies the course's late-submission policy
    (``c.LateSubmissionPlugin.penalty_method``) when grading.
    """
    duedate = parse_due(due) if due else None
    result = course.api().generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        raise CourseError(f"nbgrader generate_assignment failed for {assignment}:\n{nbgrader_errors(result)}")
    with course.gradebook() as gb:
        if duedate is not None:
            gb.update_or_create_assignment(assignment, duedate=duedate)
        duedate = gb.find_assignment(assignment).duedate  # a re-release keeps the due date set before
    note_release(course, assignment)
    if duedate is not None:
        show_due(course.release_dir(assignment), duedate)
    kernel_metadata(course.release_dir(assignment))
    add_release_files(course, assignment)
    index = secret_index(course, assignment, Path(solutions).resolve())
    return scan(course.release_dir(assignment), index, course.root)


DUE_CELL = "autograder-due-date"  # the tag of the cell that states the due date in a released notebook


def show_due(folder: Path, duedate: datetime) -> None:
    """State the due date at the top of every released notebook, where the student works: one
    markdown cell (no grade metadata: grading ignores it), replaced on each release."""
    text = (f"**Due {duedate:%A %Y-%m-%d %H:%M} UTC.** Hand in before then; an extension you were given "
            "moves your own due date, and your feedback says if a submission came in after it.")
    for path in sorted(folder.glob("*.ipynb")):
        nb = notebook.read(path)
        nb.cells = [c for c in nb.cells if DUE_CELL not in c.get("metadata", {}).get("tags", [])]
        cell = new_markdown_cell(text, metadata={"tags": [DUE_CELL]})
        if nb.nbformat_minor < 5:  # cell ids came with nbformat 4.5
            del cell["id"]
        nb.cells.insert(0, cell)
        notebook.write(nb, path)


def kernel_metadata(folder: Path) -> None:
    """Each released notebook's ``language_info`` as its kernel reports it (ipykernel on this Python,
    the hub's: the grader runs in the students' environment). JupyterLab writes the kernel's report
    into the notebook once the kernel connects; the sources keep only the language's name, so a
    fetched notebook opened marked modified before the student typed anything (issue 39)."""
    from ipykernel.ipkernel import IPythonKernel

    for path in sorted(folder.glob("*.ipynb")):
        nb = notebook.read(path)
        if nb.metadata.get("language_info") != IPythonKernel.language_info:
            nb.metadata["language_info"] = dict(IPythonKernel.language_info)
            notebook.write(nb, path)


def publish(course: Course, assignment: str, exchange: str | Path | None = None) -> str:
    """Copy ``release/<assignment>/`` into nbgrader's exchange: students then see it in JupyterLab.

    nbgrader's own release_assignment (the exchange's outbound folder, where the Assignments tab
    of the students' JupyterLab lists and fetches from). Call it only on a release whose scan was
    clean. A re-release replaces the published version (students who fetched keep their copy).
    """
    config = course.exchange_config(exchange)
    if is_ngshare(exchange):  # through nbgrader's ngshare plugin, as the instructor's server would
        try:
            from ngshare_exchange import configureExchange
        except ImportError:
            raise CourseError(f"{exchange} is ngshare, whose nbgrader plugin is not installed here: "
                              "pip install --no-deps ngshare-exchange (deploy/kubernetes/README.md)") from None
        configureExchange(config, str(exchange))
    config.ExchangeReleaseAssignment.force = True
    result = course.api(config).release_assignment(assignment)
    if not result["success"]:
        raise CourseError(f"nbgrader release_assignment failed for {assignment}:\n{nbgrader_errors(result)}")
    root = str(exchange) if is_ngshare(exchange) else config.Exchange.root
    outbound = Path(root) / course.course_id / "outbound" / assignment  # the folder exchange's only
    missing = _not_in_exchange(course, assignment, config, outbound)
    if missing:
        raise CourseError(
            f"nbgrader reported {assignment} released, but its exchange ({root}, "
            f"{_exchange_name(config)}) does not hold {', '.join(missing[:5])}"
            + (f" and {len(missing) - 5} more file(s)" if len(missing) > 5 else "")
            + ": students would find nothing to fetch. Check the exchange's log (an ngshare service on "
              "SQLAlchemy 2 reports success and stores nothing: give it sqlalchemy<2) and publish again")
    return f"{exchange} (ngshare)" if is_ngshare(exchange) else str(outbound)


def _exchange_name(config: Config) -> str:
    name = config.get("ExchangeFactory", {}).get("list")
    return f"listed by {getattr(name, '__name__', name)}" if name else "nbgrader's filesystem exchange"


def _not_in_exchange(course: Course, assignment: str, config: Config, outbound: Path) -> list[str]:
    """What the release holds and the exchange, asked back, does not: notebooks, then files.

    An exchange's own ``success`` is not proof (ngshare on SQLAlchemy 2 reports success and
    stores nothing), so the release is listed back through the same exchange plugin the
    students' Assignments tab uses; the filesystem exchange's outbound folder is also compared
    file by file (the course kit travels beside the notebooks).
    """
    from nbgrader.exchange.default import ExchangeList as FilesystemList

    release_dir = course.release_dir(assignment)
    api = course.api(config)
    with tempfile.TemporaryDirectory(prefix="autograder-list-") as empty, \
            temp_attrs(api.coursedir, assignment_id=assignment):
        lister = api.exchange.List(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
        # an assignment folder of the same name in the working directory would be listed as
        # "fetched" from there instead of from the exchange: list from an empty folder
        lister.assignment_dir = empty
        lister.inbound = lister.cached = lister.remove = False
        try:
            listed = lister.start() or []
        except Exception as error:  # each exchange plugin fails in its own way; name the step
            raise CourseError(f"could not list {assignment} back from the exchange after releasing it: "
                              f"{type(error).__name__}: {error}") from None
    entries = [e for e in listed if e.get("assignment_id") == assignment and e.get("course_id") == course.course_id]
    held = {nb.get("notebook_id") for entry in entries for nb in entry.get("notebooks", [])}
    missing = [] if entries else [f"the assignment {assignment}"]
    missing += [p.name for p in sorted(release_dir.glob("*.ipynb")) if p.stem not in held]
    if isinstance(lister, FilesystemList):
        for path in sorted(p for p in release_dir.rglob("*") if p.is_file()):
            name, copy = str(path.relative_to(release_dir)), outbound / path.relative_to(release_dir)
            if name not in missing and (not copy.is_file() or copy.read_bytes() != path.read_bytes()):
                missing.append(name)
    return missing
