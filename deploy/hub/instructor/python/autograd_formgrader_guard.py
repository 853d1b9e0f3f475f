"""The instructors' Jupyter server on the class's hub: no student's script runs in it.

The formgrader shows a student's written answers, markdown and outputs in a page of the
instructor's own server. A script there acts as the instructor: their files, their terminal, the
course's ``nbgrader_config.py`` that their commands run. So, as a Jupyter server extension
(enabled by ``jupyter_server_config.json`` in the instructors' configuration folder):

* the formgrader renders a submission through the course's sanitizer, the one the feedback pages
  use (``autograd_safe_html``: a copy of ``autograder/course/safe_html.py`` that ``deploy/hub.py
  install`` puts beside this file, since the grader is not installed where the hub's servers
  run), and escapes the names it shows;
* its math is typeset by MathJax 3 served by this server (the feedback pages' configuration, with
  its bounds: ``autograd_formgrade/mathjax.html.j2``, a copy of the feedback template's, shadows
  the formgrade template's MathJax 2 from a CDN), never loaded from outside;
* every page of the server carries a strict Content-Security-Policy: a script runs only if it
  is the server's own (same origin, or inline with the page's nonce) -- the nonce goes to every
  inline script of a page the server renders itself, but in a formgrader page only to those of its
  ``<head>``, its body being the student's work --, the formgrader's two inline handlers by their
  hashes, no inline handler or ``javascript:`` address of anyone else's, nothing loaded from
  another origin, no plugin, no ``<base>``, no form sent elsewhere, no framing by another site.
  A page served as a file (``/files/``) gets no nonce at all.

The submission page is also mended for every reader (WCAG 2.1 AA, issue 40; axe-core checks it in
tests/deploy/test_formgrader_guard.py): a language, a label on each score box and comment, a
breadcrumb that is a list rather than lists nested in lists, underlined links and text colours of
4.5:1 at least (:func:`accessible`, on nbgrader 0.9's formgrade markup; the colours are the
feedback page's, ``autograder/templates/autograder_feedback/readable.css``).
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import secrets
from pathlib import Path

from tornado.web import OutputTransform, StaticFileHandler

try:  # on the hub: the copies beside this file
    from autograd_safe_html import SanitizingHTMLExporter
    from autograd_written import waiting, warning
except ImportError:  # from the repository (its tests)
    from autograder.course.safe_html import SanitizingHTMLExporter
    from autograder.course.written import waiting, warning

# nbgrader's formgrade template shows and hides the student's name with these inline handlers.
FORMGRADER_HANDLERS = ("toggle_name(true);", "toggle_name(false);")
_SCRIPT = re.compile(rb"<script\b", re.I)
_HEAD_END = re.compile(rb"</head\s*>", re.I)


def _hash(source: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()}'"


def policy(nonce: str) -> str:
    """The Content-Security-Policy of a page whose own inline scripts carry ``nonce``."""
    # 'unsafe-eval': JupyterLab compiles its settings schemas (ajv) and the formgrader its
    # templates (underscore) with new Function; it runs no text of a page, only the app's own.
    scripts = " ".join(["'self'", f"'nonce-{nonce}'", "'unsafe-eval'", "'unsafe-hashes'",
                        *map(_hash, FORMGRADER_HANDLERS)])
    return "; ".join([
        "default-src 'self'", f"script-src {scripts}", "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:", "font-src 'self' data:", "connect-src 'self'", "worker-src 'self' blob:",
        "frame-src 'self'", "object-src 'none'", "base-uri 'self'", "form-action 'self'",
        "frame-ancestors 'self'"])


def with_nonce(page: bytes, nonce: str, head_only: bool) -> bytes:
    """``page`` with ``nonce`` on its script elements (only those before ``</head>``, if asked)."""
    tag = f'<script nonce="{nonce}"'.encode()
    if not head_only:
        return _SCRIPT.sub(tag, page)
    end = _HEAD_END.search(page)
    if end is None:
        return page
    return _SCRIPT.sub(tag, page[:end.start()]) + page[end.start():]


class GuardPages(OutputTransform):
    """Sets the policy on every response, and the nonce on the scripts of the pages the server renders."""

    def __init__(self, request) -> None:
        self.path = request.path

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        nonce = secrets.token_urlsafe(18)
        headers["Content-Security-Policy"] = policy(nonce)
        rendered = "/files/" not in self.path and "/static/" not in self.path
        if rendered and finishing and headers.get("Content-Type", "").startswith("text/html"):
            chunk = with_nonce(chunk, nonce, head_only="/formgrader/" in self.path)
            if "Content-Length" in headers:
                headers["Content-Length"] = str(len(chunk))
        return status_code, headers, chunk


HERE = Path(__file__).resolve().parent
LABELS = {"input.score": "Score of {}", "input.extra-credit": "Extra credit of {}", "textarea.comment": "Comment on {}"}


def _readable_css() -> str:
    installed = HERE / "autograd_formgrade" / "readable.css"  # deploy/hub.py install puts it there
    if not installed.is_file():  # from the repository
        installed = HERE.parents[3] / "autograder" / "templates" / "autograder_feedback" / "readable.css"
    return installed.read_text()


def accessible(page: str) -> str:
    """nbgrader's formgrade page with a language, labelled fields, one list for its breadcrumb and
    readable links and code (the feedback page's colours, ``readable.css``). Parsed as nbconvert's
    own last pass parses it (BeautifulSoup)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    if soup.html is None or soup.head is None:
        return page
    soup.html["lang"] = "en"
    style = soup.new_tag("style")
    style.string = _readable_css()
    soup.head.append(style)
    for outer in soup.select("ul.nav.text-center"):  # lists nested in lists around the breadcrumb
        outer.name = "div"
    for selector, label in LABELS.items():
        for field in soup.select(selector):
            name = str(field.get("id", "")).removesuffix("_extra_credit").removesuffix("-comment")
            field["aria-label"] = label.format(name)
    return str(soup)


class GuardedExporter(SanitizingHTMLExporter):
    """The formgrader's exporter with every piece of the student's HTML sanitized, names escaped,
    the page made accessible."""

    def from_filename(self, filename, resources=None, **kw):
        resources = dict(resources or {})
        for key in ("first_name", "last_name", "student"):
            if isinstance(resources.get(key), str):
                resources[key] = html.escape(resources[key])
        page, resources = super().from_filename(filename, resources=resources, **kw)
        return accessible(page), resources




def mathjax_folder() -> Path:
    """MathJax 3 for the formgrader: $AUTOGRAD_MATHJAX (the hub: the grader's copy), else the
    sphinx-mathjax-offline package where this server runs."""
    if os.environ.get("AUTOGRAD_MATHJAX"):
        return Path(os.environ["AUTOGRAD_MATHJAX"])
    import importlib.metadata
    dist = importlib.metadata.distribution("sphinx-mathjax-offline")
    return Path(str(dist.locate_file("sphinx-mathjax-offline/static/mathjax")))


def _guarded_exporter(handler) -> GuardedExporter:
    settings = handler.settings
    if "autograd_guarded_exporter" not in settings:
        original = settings["nbgrader_exporter"]
        settings["autograd_guarded_exporter"] = GuardedExporter(
            config=original.config, template_name="autograd_formgrade",
            extra_template_basedirs=[str(HERE), *original.extra_template_basedirs])
    return settings["autograd_guarded_exporter"]


# -- Only what the course supports (issue 39) --
# The formgrader's other buttons run nbgrader's own steps, which the course replaces by its commands
# in the instructor's terminal (deploy/README.md): each is hidden, and its API refused in one sentence.
RELEASE = ('On this course an assignment is released from your terminal: autograder --course ~/course release '
           'ASSIGNMENT --exchange "$AUTOGRAD_EXCHANGE" (it checks the student version for solutions first).')
REFUSED = {
    "AssignHandler": RELEASE, "ReleaseHandler": RELEASE, "UnReleaseHandler": RELEASE, "AssignmentHandler": RELEASE,
    "CollectHandler": "On this course submissions are collected from your terminal: autograder --course ~/course "
                      'collect ASSIGNMENT --exchange "$AUTOGRAD_EXCHANGE" (it reads the exchange safely).',
    "AutogradeHandler": "On this course submissions are graded from your terminal: autograder --course ~/course "
                        "grade ASSIGNMENT (each in a sandbox; the formgrader would run the students' code as you).",
    "GenerateAllFeedbackHandler": "On this course feedback is made from your terminal: autograder --course ~/course "
                                  'feedback ASSIGNMENT --exchange "$AUTOGRAD_EXCHANGE" (without the hidden tests).',
}
REFUSED["GenerateFeedbackHandler"] = REFUSED["GenerateAllFeedbackHandler"]
# The columns of the buttons above (nbgrader 0.9's tables), hidden; the instructions that describe them too.
HIDDEN_COLUMNS = {"manage_assignments.tpl": (4, 5, 7, 8, 10), "manage_submissions.tpl": (6, 7)}
NOTE = ('<p class="alert alert-info" id="autograd-course-note">Releasing, collecting, grading and making feedback '
        "are the course's commands, typed in your JupyterLab terminal (deploy/README.md). Here: each assignment's "
        "submissions, the written answers to grade by hand (Manage Students) and Release Feedback.</p>")


def refuse(sentence: str):
    """A handler method that answers the formgrader's request with ``sentence`` (its modals show an
    answer's log: no traceback, no path) and does nothing."""
    def refused(self, *args, **kwargs):
        self.set_status(403)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"success": False, "error": "", "log": sentence, "message": sentence}))
    return refused


def supported_only(name: str, page: str) -> str:
    """A formgrader page without the columns of the refused buttons, its "Add new assignment..." row
    and its instructions about them; a note says where those steps are."""
    columns = HIDDEN_COLUMNS.get(name)
    if columns is None:
        return page
    hide = ", ".join(f"table.table tr > :nth-child({n})" for n in columns)
    style = f"<style>{hide}, table.table tfoot, #accordion {{ display: none; }}</style>"
    page = re.sub(r"</head\s*>", lambda m: style + m.group(0), page, count=1, flags=re.I)
    return page.replace('<div class="panel-group" id="accordion"', NOTE + '<div class="panel-group" id="accordion"', 1)


def release_feedback_warned(original):
    """nbgrader's Release Feedback, then, if answers of the assignment still wait to be graded by
    hand, the sentence that says how many (shown in the formgrader's success modal, as its log)."""
    def release(self, assignment_id, *student):
        result = original(self, assignment_id, *student)  # writes nbgrader's reply: replaced below
        try:
            reply = json.loads(b"".join(self._write_buffer))
        except ValueError:  # refused before releasing (not logged in, no XSRF token): that answer stands
            return result
        self.gradebook.db.expire_all()  # grades written meanwhile by the instructor's commands
        count = waiting(self.gradebook, assignment_id, set(student) or None)
        if count:
            reply["log"] = warning(assignment_id, count)
        self._write_buffer.clear()
        self.write(json.dumps(reply))
        return result
    return release


def _only_what_the_course_supports() -> None:
    from nbgrader.server_extensions.formgrader import apihandlers, base

    for name, sentence in REFUSED.items():
        handler = getattr(apihandlers, name)
        for method in ("post", "put"):
            if method in vars(handler):
                setattr(handler, method, refuse(sentence))
    for name in ("ReleaseAllFeedbackHandler", "ReleaseFeedbackHandler"):
        handler = getattr(apihandlers, name)
        handler.post = release_feedback_warned(handler.post)
    render = base.BaseHandler.render
    base.BaseHandler.render = lambda self, name, **ns: supported_only(name, render(self, name, **ns))


def _jupyter_server_extension_points():
    return [{"module": "autograd_formgrader_guard"}]


def _load_jupyter_server_extension(serverapp) -> None:
    from nbgrader.server_extensions.formgrader import base

    base.BaseHandler.exporter = property(_guarded_exporter)  # whichever extension loads first
    _only_what_the_course_supports()
    serverapp.web_app.transforms.insert(0, GuardPages)  # before any compression of the body
    # the macro loads mathjax/tex-chtml.js relative to the page: served beside each submission page
    prefix = serverapp.web_app.settings.get("base_url", "/")
    serverapp.web_app.add_handlers(".*$", [(rf"{re.escape(prefix)}formgrader/submissions/[^/]+/mathjax/(.*)",
                                            StaticFileHandler, {"path": str(mathjax_folder())})])
    serverapp.log.info("autograd_formgrader_guard: formgrader sanitized, Content-Security-Policy on every page")


try:
    from nbgrader.exchange.abc import ExchangeCollect as _ExchangeCollect
    from nbgrader.exchange.abc import ExchangeError as _ExchangeError
except ImportError:  # pragma: no cover (nbgrader is in every environment this runs in)
    _ExchangeCollect, _ExchangeError = object, RuntimeError  # type: ignore[assignment,misc]


class RefusedCollect(_ExchangeCollect):  # type: ignore[misc,valid-type]
    """The formgrader's Collect button, refused: nbgrader's collect follows a student's links and
    takes the student's word for whose submission it is and when it was made."""

    def start(self):
        raise _ExchangeError("collect with `autograder collect ASSIGNMENT --exchange` in a terminal: it reads the "
                             "exchange safely (nbgrader's collect follows a student's links)")
