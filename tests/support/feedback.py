"""Feedback pages made without a course: the page nbconvert's own HTMLExporter path makes (what
:class:`autograder.commands.feedback.SafeHTMLExporter` must make, faster), and a page from a
notebook with made-up scores. Used by tests/grader/test_feedback_safety.py and
benchmarks/bench_feedback.py."""
from __future__ import annotations

import json

import nbformat
from nbconvert.exporters import HTMLExporter
from nbgrader.converters import GenerateFeedback
from traitlets.config import Config

from autograder.commands.feedback import MathBudget, SafeHTMLExporter
from autograder.course.nbgrader_glue import configure_feedback
from autograder.course.safe_html import SanitizingHTMLExporter


class NbconvertPage(SafeHTMLExporter):
    """The feedback page as nbconvert's own HTMLExporter makes it: its BeautifulSoup pass over the
    whole page, a fresh Jinja environment, every cell highlighted and rendered anew."""

    def _create_environment(self):
        return HTMLExporter._create_environment(self)

    def from_notebook_node(self, nb, resources=None, **kw):
        self.math = MathBudget()
        return SanitizingHTMLExporter.from_notebook_node(self, nb, resources, **kw)

    def _rendered_markdown(self, context, source):
        return SanitizingHTMLExporter.markdown2html(self, context, source)


def feedback_page(exporter_class, nb: dict, name: str, heading: str = "") -> str:
    """The feedback page of notebook ``nb`` (its JSON form) made by a new exporter of ``exporter_class``,
    as nbgrader's GenerateFeedback makes one for each student, with scores made up for it; ``heading``:
    the notebook's heading (the page's title) and its exercise's title, as the student's markdown has them."""
    resources = {"nbgrader": {"notebook": name, "score": 1.0, "max_score": 2.0, "late_penalty": 0,
                              "auto_score": 1.0, "auto_points": 2.0, "pending": 0, "heading": heading,
                              "exercises": [{"id": "a00-square", "title": heading or "Square", "anchor": "a00-square",
                                             "score": 1.0, "points": 2.0, "written": False, "pending": False,
                                             "message": "your code raised <ValueError>"}]}}
    nb = nbformat.reads(json.dumps(nb), as_version=4)
    for cell in nb.cells:  # what nbgrader's GetGrades reads from the gradebook
        meta = cell.metadata.get("nbgrader", {})
        meta.update({"score": 0.5 * float(meta.get("points", 0)), "needs_manual_grade": False, "comment": None})
    config = GenerateFeedback(config=configure_feedback(Config())).config  # with nbgrader's template paths
    return exporter_class(config=config).from_notebook_node(nb, resources)[0]
