"""``autograder demo``: the whole grading loop on synthetic submissions, in a scratch course.

For any assignment in ``source/``, in a scratch copy of the course (the real gradebook and
folders are never touched), it fakes an LMS export of five students built from the source
notebooks:

* ``alice_<nb>.ipynb``   correct: the source notebooks, solutions in;
* ``<nb>_bob.ipynb``     partly wrong: the first mutant of the catalogue applied (or, without a
  catalogue, the first solution region replaced by the unanswered stub);
* ``carol/<nb>.ipynb``   empty: the released notebooks;
* ``dave_<nb>.ipynb``    broken: not JSON;
* ``eve_homework.ipynb`` a wrong file name;
* ``frank_<nb>.ipynb``   bob's mistake, made on his own (the mutant, with the catalogue's other
  styles for the exercises that have one);
* ``grace_<nb>.ipynb``   bob's notebook, copied with its comments changed;

then runs, and prints, the commands an instructor would: release, collect (of the zipped export),
grade, feedback and report, and ends with the instructor's page: bob, frank and grace in one group
of the same mistake, grace and bob a pair of similar code.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder.course import DEFAULT_SOLUTIONS, CourseError, notebook
from autograder.course.directory import Course
from autograder.mutants import apply_mutant, load_alternatives, load_mutants

MARKER = ".autograder-demo"


def _workdir(out: str | None) -> Path:
    if out is None:
        return Path(tempfile.mkdtemp(prefix="autograder-demo-"))
    work = Path(out).resolve()
    if work.exists() and any(work.iterdir()):
        if not (work / MARKER).exists():
            raise CourseError(f"{work} is not empty and not an earlier demo: choose another --out")
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return work


def _partly_wrong(source: dict[str, Any], assignment: str) -> tuple[dict[str, Any], str]:
    mutants = load_mutants(assignment)
    if mutants:
        name, mutated = apply_mutant(source, mutants[0], assignment)
        return {**source, name: mutated}, f"mutant '{mutants[0].id}' ({mutants[0].why or mutants[0].exercise})"
    for name, nb in source.items():
        for cell in nb.cells:
            if cell.cell_type == "code" and notebook.solution_lines(cell.source):
                cell.source = notebook.released(cell)  # as nbgrader releases it: the stub in place
                return source, f"the first solution region of {name}.ipynb left unanswered"
    return source, "unchanged (no solution region found)"


def _restyled(notebooks: dict[str, Any], assignment: str, mutated: str) -> dict[str, Any]:
    """``notebooks`` with the catalogue's first alternative style of each exercise but ``mutated``."""
    done = {mutated}
    for alternative in load_alternatives(assignment):
        if alternative.exercise not in done:
            done.add(alternative.exercise)
            name, changed = apply_mutant(notebooks, alternative, assignment)
            notebooks = {**notebooks, name: changed}
    return notebooks


def _recommented(nb: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``nb`` as a student hands in a classmate's work: every answer's comments changed."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and notebook.is_answer(cell):
            lines = notebook.text(cell["source"]).split("\n")
            cell["source"] = "\n".join(line.split("  #")[0].rstrip() + ("  # my own approach" if "#" in line else "")
                                       if "###" not in line else line for line in lines)
    return nb


def _export(course: Course, assignment: str, folder: Path) -> list[str]:
    """Write the fake LMS export; return one line per student saying what it holds."""
    def read(path: Path) -> dict[str, dict]:
        return {p.stem: notebook.read(p) for p in sorted(path.glob("*.ipynb"))}

    source, released = read(course.source_dir(assignment)), read(course.release_dir(assignment))
    wrong, how = _partly_wrong(read(course.source_dir(assignment)), assignment)
    mutants = load_mutants(assignment)
    own = _restyled(wrong, assignment, mutants[0].exercise) if mutants else wrong
    folder.mkdir(parents=True)
    (folder / "carol").mkdir()
    for name in source:
        (folder / f"alice_{name}.ipynb").write_text(json.dumps(source[name], indent=1))
        (folder / f"{name}_bob.ipynb").write_text(json.dumps(wrong[name], indent=1))
        (folder / "carol" / f"{name}.ipynb").write_text(json.dumps(released[name], indent=1))
        (folder / f"dave_{name}.ipynb").write_text(json.dumps(source[name])[:200])
        (folder / f"frank_{name}.ipynb").write_text(json.dumps(own[name], indent=1))
        (folder / f"grace_{name}.ipynb").write_text(json.dumps(_recommented(wrong[name]), indent=1))
    (folder / "eve_homework.ipynb").write_text(json.dumps(next(iter(source.values()))))
    return ["alice: correct (the source notebooks)", f"bob: partly wrong: {how}",
            "carol: empty (the released notebooks)", "dave: broken (not JSON)",
            "eve: a wrong file name (eve_homework.ipynb)",
            "frank: bob's mistake, on his own (other styles elsewhere)",
            "grace: bob's notebook, copied, its comments changed"]


def demo(course: Course, assignment: str, run: Callable[[list[str]], int], out: str | None = None, *,
         jobs: int = 2) -> Path:
    """The loop in a scratch copy of ``course``, each command given to ``run`` as its argv (the
    command line's own ``main``)."""
    work = _workdir(out)
    (work / MARKER).write_text("made by `autograder demo`; deleted by the next demo with the same --out\n")
    scratch_root = work / "course"
    scratch_root.mkdir()
    shutil.copy(course.root / "nbgrader_config.py", scratch_root)
    shutil.copytree(course.source_dir(assignment), Course(scratch_root, "").source_dir(assignment),
                    ignore=shutil.ignore_patterns(*course.coursedir().ignore))
    scratch = Course.open(scratch_root)
    print(f"demo of {assignment} in {work} (a scratch copy of the course)\n")

    def step(*args: str) -> None:
        print(f"$ autograder --course {scratch_root} {' '.join(args)}", flush=True)
        run(["--course", str(scratch_root), *args])
        print(flush=True)

    step("release", assignment, "--solutions", str(DEFAULT_SOLUTIONS))
    export = work / "lms_export"
    print("fake LMS export:\n  " + "\n  ".join(_export(scratch, assignment, export)) + "\n")
    archive = work / "lms_export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(export.rglob("*")):
            zf.write(path, path.relative_to(export))
    step("collect", assignment, str(archive))
    step("grade", assignment, "--jobs", str(jobs))
    step("feedback", assignment)
    print(f"bob's feedback: {scratch.feedback_dir('bob', assignment)}\n")
    step("report", assignment)  # its last line: the instructor's page
    return work
