"""The grader's middle has one of each: one catalogue of exercises (and one title of an exercise),
one notebook model, one swap, one write-then-rename, one way to escape the class page.

Each was once implemented two to five times (issue 22). A second implementation creeping back is
found here by what it would have to contain: the catalogue's dict and decorator, the nbgrader
metadata read by hand, the region markers spelled out, a module attribute or a class's bases
rebound outside solutions/overrides.py.
"""
from __future__ import annotations

import re
from pathlib import Path

from support import REPO

PACKAGE = REPO / "autograder"

# What ships to students or runs beside their code carries the few lines it needs (it cannot
# import the grader): the kit's shipped files and the sandbox.
STANDALONE = {*(PACKAGE / "kit" / "shipped").glob("*.py"), *(PACKAGE / "sandbox").glob("*.py")}


def sources(exclude: set[Path] = frozenset()) -> dict[Path, str]:
    files = [*PACKAGE.rglob("*.py"), *(REPO / "solutions").rglob("*.py"), *(REPO / "book" / "_ext").rglob("*.py")]
    return {p: p.read_text() for p in files if p not in exclude and "__pycache__" not in p.parts}


def offenders(pattern: str, allowed: set[Path], exclude: set[Path] = frozenset()) -> list[str]:
    regex = re.compile(pattern)
    return [f"{p.relative_to(REPO)}:{text[:m.start()].count(chr(10)) + 1}"
            for p, text in sources(exclude).items() if p not in allowed for m in regex.finditer(text)]


def test_one_catalogue_of_exercises():
    catalogue = PACKAGE / "course" / "catalogue.py"
    assert not offenders(r"\ndef graded\(", {catalogue})
    # what an exercise is called: one title() (the students' kit reads the titles the catalogue wrote into it)
    assert not offenders(r"\ndef _?title\(\s*exercise", {catalogue}, exclude=STANDALONE)
    assert not offenders(r"\ndef (exercise|declared|by_id|spec_of|spec_by_id|find)\(\s*exercise_id", {catalogue})
    assert not offenders(r"^_\w+: dict\[str, (Spec|Exercise)\]", {catalogue})
    assert not (PACKAGE / "spec.py").exists() and not (PACKAGE / "judge" / "registry.py").exists()


def test_one_write_then_rename():
    """A file written whole or not at all, never through a link: course/files.py, the one temporary name."""
    files = PACKAGE / "course" / "files.py"
    assert not offenders(r"""\.tmp["']""", {files})


def test_the_class_page_escapes_through_its_templates():
    """The pages of analytics/ are Jinja2 templates with autoescape, not f-strings escaped by hand."""
    assert not offenders(r"html\.escape\(", set(), {p for p in sources() if p.parent.name != "analytics"})


def test_one_notebook_model():
    model = PACKAGE / "course" / "notebook.py"
    restore = PACKAGE / "judge" / "restore.py"  # rebuilds metadata: it writes, and removes any value
    assert not offenders(r"""get\(["']nbgrader["']""", {model, restore}, STANDALONE)
    assert not offenders(r"""metadata\s*\[["']nbgrader["']\]\s*(\[|\.get)|metadata\.nbgrader\b""", {model}, STANDALONE)
    assert not offenders(r"""["'](### )?(BEGIN|END) (SOLUTION|HIDDEN TESTS)["']""", {model}, STANDALONE)
    assert not offenders(r"nbformat\.(read|reads|write)\(", {model}, STANDALONE)
    assert not offenders(r"json\.loads?\([^)]*(ipynb|notebook)", {model}, STANDALONE)
    assert not offenders(r"def grade_id_exercise|\(visible\|hidden\|written\)", {model}, STANDALONE)


def test_one_swap_mechanism():
    overrides = REPO / "solutions" / "overrides.py"
    assert not offenders(r"\.__bases__ = ", {overrides})
    # rebinding a name in an engine module: setattr(module, name, ...) on something from sys.modules
    assert not offenders(r"setattr\((module|mod|home), ", {overrides})
    kit = (PACKAGE / "kit" / "shipped" / "coursekit_init.py").read_text()
    assert "overrides.use(" in kit and "__subclasses__" not in kit  # the kit's use only delegates
    runner = (PACKAGE / "sandbox" / "runner.py").read_text()
    assert "coursekit.engine.overrides" in runner and "__bases__ =" not in runner


def test_the_grader_is_laid_out_by_audience():
    """A folder per audience (autograder/__init__.py says which serves whom): the top level holds
    the command line alone, and nothing beside student code imports the grader."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py", "cli.py"]
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {"analytics", "authoring", "commands", "course", "exercises", "grading", "judge", "kit",
                       "mutants", "sandbox", "templates"}, folders
    for path in STANDALONE:
        assert not re.search(r"^\s*(from|import) (autograder|solutions)\b", path.read_text(), re.M), path
