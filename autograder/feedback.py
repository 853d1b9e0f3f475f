"""``autograder feedback``: per-student HTML feedback, without hidden tests, with math offline.

Stock nbgrader 0.9.6 feedback shows hidden tests (its GenerateFeedback preprocessors do not clear
them, and a failed test's traceback quotes the cell) and loads MathJax 2 from a CDN. Here
nbgrader's GenerateFeedback runs as :func:`autograder.nbgrader_glue.configure_feedback` sets it:

* one more preprocessor, :class:`~autograder.nbgrader_glue.RedactHiddenTests`: hidden regions are
  cut, and each output (only the judge's messages are left) is reduced to one capped line;
* the ``autograder_feedback`` template (``autograder/templates/``), which is nbgrader's feedback
  template with nbconvert's ``mathjax`` macro shadowed to load MathJax 3 from a ``mathjax/``
  folder next to the page. The files come from the ``sphinx-mathjax-offline`` package and are
  hard-linked (copied across file systems) into each student's feedback folder, so each folder
  is self-contained and can be handed to its student as is.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
from pathlib import Path

from nbgrader.converters import GenerateFeedback
from nbgrader.utils import capture_log, temp_attrs

from .course import Course, CourseError
from .nbgrader_glue import configure_feedback

# What a feedback page needs of MathJax 3: the TeX+CHTML component, its fonts, the TeX extensions
# it autoloads (\color, \cancel, ...) and the context menu with its accessibility parts.
MATHJAX_PARTS = ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y")
_REMOTE = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


def mathjax_dir() -> Path:
    dist = importlib.metadata.distribution("sphinx-mathjax-offline")
    path = Path(dist.locate_file("sphinx-mathjax-offline/static/mathjax"))
    if not (path / "tex-chtml.js").is_file():
        raise CourseError(f"MathJax 3 not found at {path}: install sphinx-mathjax-offline (requirements.txt)")
    return path


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(src, dst)


def install_mathjax(folder: Path) -> None:
    source = mathjax_dir()
    target = folder / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, copy_function=_link_or_copy)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(str(source / part), str(target / part))


def feedback(course: Course, assignment: str) -> list[Path]:
    """Write feedback/<student>/<assignment>/*.html for every autograded student; return the pages."""
    students = [s for s in course.submitted_students(assignment) if course.autograded_dir(s, assignment).is_dir()]
    if not students:
        raise CourseError(f"nothing autograded for {assignment} yet: run `autograder grade {assignment}` first")
    config = configure_feedback(course.config())
    api = course.api(config)
    pages = []
    for student in students:
        with temp_attrs(api.coursedir, assignment_id=assignment, student_id=student):
            app = GenerateFeedback(coursedir=api.coursedir, parent=api)
            app.force = True
            result = capture_log(app)
        if not result["success"]:
            errors = [line for line in (result.get("log") or "").splitlines() if line.startswith("[ERROR]")]
            raise CourseError(f"nbgrader generate_feedback failed for {student}/{assignment}:\n"
                              + "\n".join(errors[:5] or [result.get("error", "")]))
        folder = course.feedback_dir(student, assignment)
        install_mathjax(folder)
        for page in sorted(folder.glob("*.html")):
            remote = _REMOTE.search(page.read_text())
            if remote:  # a template or nbconvert change brought a CDN back: fail loudly
                raise CourseError(f"{page} still loads something from the network: {remote.group(0)}")
            pages.append(page)
    return pages
