"""``autograder feedback``: per-student HTML feedback, without hidden tests, with math offline.

Stock nbgrader 0.9.6 feedback shows hidden tests (its GenerateFeedback preprocessors do not clear
them, and a failed test's traceback quotes the cell) and loads MathJax 2 from a CDN. Here
nbgrader's GenerateFeedback runs as :func:`autograder.course.nbgrader_glue.configure_feedback` sets it:

* one more preprocessor, :class:`~autograder.course.nbgrader_glue.RedactHiddenTests`: hidden regions are
  cut, and each output (only the judge's messages are left) is reduced to one capped line;
* the ``autograder_feedback`` template (``autograder/templates/``), which is nbgrader's feedback
  template with nbconvert's ``mathjax`` macro shadowed to load MathJax 3 from a ``mathjax/``
  folder next to the page. The files come from the ``sphinx-mathjax-offline`` package, copied
  once into the course (:func:`course_mathjax`: never linked to the grader's install) and
  hard-linked from there into each student's feedback folder, so each folder is self-contained
  and can be handed to its student as is. A page released through nbgrader's exchange travels
  alone, so it carries MathJax inside it, speech included (:func:`inline_mathjax`).

The page shows what a student wrote, and the instructor opens it too, so nothing of the student's
may run in it or reach out of it. :class:`SafeHTMLExporter` renders the notebook:

* every piece of HTML from the notebook (rendered markdown, written answers, raw cells, any output)
  goes through the course's one sanitizer (:mod:`autograder.course.safe_html`, which the
  formgrader on the class's hub uses too): nothing that runs, loads or leaves the page;
* MathJax works within bounds: the TeX input gets ``maxMacros`` and ``maxBuffer`` limits (the
  template), and a markdown cell whose math is larger than :class:`MathBudget` allows, or that
  comes after the page's budget is spent, is shown with its TeX as text instead of typeset;
* control characters (ESC, BEL, ...) are removed from the written page.

One student's failure never stops the others: it is reported with its reason
(:class:`FeedbackReport`) and the other pages are written.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from bs4 import BeautifulSoup
from jinja2 import BytecodeCache, pass_context
from nbconvert.exporters import TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbgrader.converters import GenerateFeedback
from nbgrader.utils import capture_log, temp_attrs

from autograder.course import CourseError, written
from autograder.course.directory import Course
from autograder.course.exchange import SECRET, SECRET_FILE, release_feedback
from autograder.course.nbgrader_glue import TEMPLATES, configure_feedback
from autograder.course.ngshare import STAMP_FILE, Ngshare, Unreachable, is_ngshare, parse_stamp
from autograder.course.safe_html import CONTROL, SanitizingHTMLExporter

# What a feedback page needs of MathJax 3: the TeX+CHTML component, its fonts, the TeX extensions
# it autoloads (\color, \cancel, ...) and the context menu with its accessibility parts: speech needs
# the speech rule engine's maps (sre/) and the MathML input it reads (input/mml.js) too: without
# them a page with speech on shows no formula.
MATHJAX_PARTS = ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y", "sre",
                 "input/mml.js")
MATHJAX_INLINE = "tex-svg-full.js"  # what a page that travels alone carries (see inline_mathjax)
# ... and, inert until a reader turns speech on, MathJax's accessibility parts and the speech rule
# engine's maps for English (base.json is what every locale builds on; nemeth.json is braille).
MATHJAX_SPEECH_PARTS = ("input/mml", "a11y/sre", "a11y/semantic-enrich", "a11y/explorer", "a11y/complexity")
MATHJAX_SPEECH_LOCALES = ("base", "en", "nemeth")
_REMOTE = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)
# -- how much math a page typesets -------------------------------------------------------------------

@dataclass
class MathBudget:
    """How much TeX one page hands to MathJax; a markdown cell over it is shown as TeX text.

    What MathJax spends on one formula is bounded by its ``maxMacros``/``maxBuffer`` (the
    template); its time on a page grows with the formulas and their size (measured in headless
    Chromium on a loaded 2-core machine: 5,000 ``\\frac{a}{b}`` took 69 s, 300 formulas nesting
    ``\\frac`` 10 deep 20 s). The course's own pages hold at most 103 formulas and 1,842 characters
    of TeX, 21 formulas and 374 characters in a cell, nesting braces 2 deep: the limits leave
    several times that to a student's answers.
    """

    cell_formulas: int = 100
    cell_tex: int = 3_000
    depth: int = 10
    page_formulas: int = 400
    page_tex: int = 8_000
    spent_formulas: int = 0
    spent_tex: int = 0

    def refuse(self, source: str) -> str | None:
        """Why the math of ``source`` is not typeset, or None (then it is counted as spent)."""
        formulas, tex = count_tex(source)
        if not formulas:
            return None
        if formulas > self.cell_formulas or tex > self.cell_tex:
            return f"this cell has more math than a feedback page typesets ({formulas} formulas, {tex:,} characters)"
        if _brace_depth(source) > self.depth:
            return f"braces nested more than {self.depth} deep"
        if self.spent_formulas + formulas > self.page_formulas or self.spent_tex + tex > self.page_tex:
            return "the page has more math than a feedback page typesets"
        self.spent_formulas += formulas
        self.spent_tex += tex
        return None


_MATH_TOKEN = re.compile(r"\\\$|\$\$|\$|\\[()\[\]]|\\(?:begin|end)\{")
_CLOSER = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}


def count_tex(text: str) -> tuple[int, int]:
    """(formulas, characters of TeX) that MathJax would find in ``text``, in one pass: ``$...$``,
    ``$$...$$``, ``\\(...\\)``, ``\\[...\\]`` and ``\\begin{...}...\\end{...}``; ``\\$`` is a dollar."""
    formulas = chars = start = environments = 0
    closer = None
    for token in _MATH_TOKEN.finditer(text):
        kind = token.group()
        if kind == "\\$":
            continue
        if closer is None and environments == 0:
            if kind in _CLOSER:
                closer, start = _CLOSER[kind], token.end()
            elif kind == "\\begin{":
                environments, start = 1, token.start()
        elif closer is not None:
            if kind == closer:
                formulas, chars, closer = formulas + 1, chars + token.start() - start, None
        elif kind == "\\begin{":
            environments += 1
        elif kind == "\\end{":
            environments -= 1
            if environments == 0:
                formulas, chars = formulas + 1, chars + token.end() - start
    if closer is not None or environments:  # an unclosed formula: MathJax reads to the end
        formulas, chars = formulas + 1, chars + len(text) - start
    return formulas, chars


def _brace_depth(text: str) -> int:
    depth = deepest = 0
    for brace in re.findall(r"(?<!\\)[{}]", text):
        depth = depth + 1 if brace == "{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


class _CompiledTemplates(BytecodeCache):
    """Jinja's compiled templates, kept for the process: each student's GenerateFeedback makes a new
    exporter, and with it a new Jinja environment that would compile nbgrader's and nbconvert's
    templates again (a sixth of a page's time). Jinja reuses an entry only for the same template
    name, file and source (its checksum)."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def get_bucket(self, environment, name, filename, source):
        # what else the compiled code depends on: the environment's async mode and extensions
        setting = f"{name}\0{environment.is_async}\0{','.join(sorted(environment.extensions))}"
        return super().get_bucket(environment, setting, filename, source)

    def load_bytecode(self, bucket) -> None:
        if bucket.key in self._code:
            bucket.bytecode_from_string(self._code[bucket.key])

    def dump_bytecode(self, bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


_COMPILED_TEMPLATES = _CompiledTemplates()
_MARKDOWN: dict[tuple, str] = {}  # see SafeHTMLExporter._rendered_markdown


class _SharedHighlight(Highlight2HTML):
    """nbconvert's code highlighting, each cell's once for the process: the cells a class did not
    write (the given code, the restored test cells) are the same on every page, and Pygments was a
    third of a page's time. Its output depends on these arguments only (with no formatter options
    configured; with some, every cell is highlighted again)."""

    def __call__(self, source, language=None, metadata=None):
        if self.extra_formatter_options or len(source) > 20_000:  # a long cell is a student's own
            return super().__call__(source, language, metadata)
        return _highlighted(source, language or self.pygments_lexer, (metadata or {}).get("magics_language"))


@functools.lru_cache(maxsize=1024)
def _highlighted(source: str, language: str, magics: str | None) -> str:
    metadata = {"magics_language": magics} if magics is not None else None
    return Highlight2HTML(pygments_lexer=language)(source, language, metadata)


class SafeHTMLExporter(SanitizingHTMLExporter):
    """The sanitizing exporter (:mod:`autograder.course.safe_html`) with the page's math within a
    :class:`MathBudget`.

    Without nbconvert's last pass over a page with no image: its HTMLExporter parses the whole page
    again with BeautifulSoup, in pure Python (40 % of a page's CPU time), to give an ``alt`` to
    images without one and a ``tabindex`` to JupyterLab's cell wrappers, and writes it out again.
    The feedback template is nbgrader's classic layout (no JupyterLab wrappers), so the pass
    changes nothing but an image's ``alt``; a page with an ``<img`` still gets it, as nbconvert
    does it. tests/grader/test_feedback_safety.py checks that the page is the one nbconvert makes.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.math = MathBudget()

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _COMPILED_TEMPLATES
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        self.math = MathBudget()  # one budget per page
        nb.metadata.pop("widgets", None)  # as SanitizingHTMLExporter, whose from_notebook_node is skipped here
        # nbconvert's HTMLExporter.from_notebook_node up to its BeautifulSoup pass
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        resources = self._init_resources(resources)
        self.register_filter("highlight_code",
                             self.filters.get("highlight_code", _SharedHighlight(pygments_lexer=lexer, parent=self)))
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata,
                                                                       parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if "<img" in html:  # perhaps an image without alt text: nbconvert's pass, as nbconvert does it
            soup = BeautifulSoup(html, features="html.parser")
            for image in soup.select("img:not([alt])"):
                image.attrs["alt"] = "No description has been provided for this image"
            html = str(soup)
        return html, resources

    def _rendered_markdown(self, context, source: str) -> str:
        """The cell's markdown as sanitized HTML, each text once for the process (the assignment's
        own text is on every page, and rendering it was a third of a page's time). The HTML depends
        on the text and the exporter's settings only, unless the cell has attachments or images are
        embedded from files beside the notebook: those are rendered each time."""
        if context.get("cell", {}).get("attachments") or self.embed_images or self.lexer_options \
                or len(source) > 20_000:
            return super().markdown2html(context, source)
        key = (source, self.anchor_link_text, self.exclude_anchor_links)
        html = _MARKDOWN.get(key)
        if html is None:
            html = _MARKDOWN[key] = super().markdown2html(context, source)
            while len(_MARKDOWN) > 1024:
                del _MARKDOWN[next(iter(_MARKDOWN))]  # the oldest first
        return html

    @pass_context
    def markdown2html(self, context, source: str) -> str:
        html = self._rendered_markdown(context, source)
        refused = self.math.refuse(source)
        if refused is None:
            return html
        # Sanitized first, so the fragment is balanced and cannot close the wrapper early.
        return (f'<div class="tex2jax_ignore"><p class="math-as-text">Math shown as TeX: {refused}.</p>'
                f"{html}</div>")


def mathjax_dir() -> Path:
    dist = importlib.metadata.distribution("sphinx-mathjax-offline")
    path = Path(str(dist.locate_file("sphinx-mathjax-offline/static/mathjax")))
    if not (path / "tex-chtml.js").is_file():
        raise CourseError(f"MathJax 3 not found at {path}: install sphinx-mathjax-offline (requirements.txt)")
    return path


def course_mathjax(course: Course) -> Path:
    """The course's own copy of the MathJax parts a page needs, made once per MathJax version.

    Copied, never linked: a hard link to the grader's install would be one file with two owners'
    folders around it, and whoever later changes its owner or mode in one place changes it in the
    other. Each feedback folder links to this copy instead (the course's own files)."""
    version = importlib.metadata.version("sphinx-mathjax-offline")
    copy = course.state_dir / "mathjax" / version
    if (copy / ".complete").is_file():
        return copy
    source = mathjax_dir()
    staging = copy.with_name(f".{version}.incoming")
    shutil.rmtree(staging, ignore_errors=True)
    copy_mathjax(source, staging)
    (staging / ".complete").write_text(version)
    shutil.rmtree(copy, ignore_errors=True)
    os.replace(staging, copy)
    return copy


def copy_mathjax(source: Path, target: Path, link: bool = False) -> None:
    """The MATHJAX_PARTS of the MathJax folder ``source`` into ``target``: copied (links in the
    source followed), or ``link``: hard-linked where the file system allows (links kept as links)."""
    copy = _link_or_copy if link else shutil.copyfile
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, symlinks=link, copy_function=copy)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            copy(str(source / part), str(target / part))


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(src, dst, follow_symlinks=False)


def install_mathjax(course: Course, folder: Path) -> None:
    """MathJax beside a student's pages: links to the course's copy (:func:`course_mathjax`)."""
    source = course_mathjax(course)
    target = folder / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    copy_mathjax(source, target, link=True)


@dataclass
class FeedbackReport:
    pages: list[Path] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)      # student, reason: no page
    released: list[str] = field(default_factory=list)                # students whose pages are in the exchange
    waiting: int = 0  # answers of these students still to be graded by hand (autograder.course.written)
    unreleased: list[tuple[str, str]] = field(default_factory=list)  # student, reason: a page, not in the exchange


def inline_mathjax(html: str) -> str:
    """The page with MathJax inside it, for where the ``mathjax/`` folder does not follow: nbgrader's
    release_feedback hands a student the ``*.html`` only. The SVG component with every TeX
    extension (the bounds of the template's ``window.MathJax`` still apply) draws its glyphs
    itself, so it needs neither font files nor extension files beside the page. Speech (MathJax's
    menu, Accessibility) comes from parts carried inert in the page (``speech_parts.js`` says how):
    about 1.2 MB more than the 2.2 MB of MathJax, and no page that a screen reader cannot speak."""
    tag = re.search(r'<script\b[^>]*\bsrc="mathjax/tex-chtml\.js"[^>]*>\s*</script>', html)
    if tag is None:
        raise CourseError("the feedback page has no MathJax script to inline: the template changed")
    return f"{html[:tag.start()]}{_carried()}{html[tag.end():]}"


@functools.cache
def _carried() -> str:
    """What a page that travels alone carries in place of its MathJax script (3.4 MB, read once)."""
    source = mathjax_dir()
    hooks = (TEMPLATES / "autograder_feedback" / "speech_parts.js").read_text(encoding="utf-8")
    parts = [f'<script type="text/plain" data-mathjax-part="{name}">{_inlinable(source / f"{name}.js")}</script>'
             for name in MATHJAX_SPEECH_PARTS]
    maps = [f'<script type="application/json" data-mathjax-locale="{locale}">'
            f'{_inlinable(source / "sre" / "mathmaps" / f"{locale}.json")}</script>'
            for locale in MATHJAX_SPEECH_LOCALES]
    return "".join([f"<script>{hooks}</script>", *parts, *maps,
                    f'<script id="MathJax-script">{_inlinable(source / MATHJAX_INLINE)}</script>'])


def _inlinable(path: Path) -> str:
    code = path.read_text(encoding="utf-8")
    if re.search(r"</?script|<body", code, re.I):
        # HTML ends a script element at "</script" (and "<!--" followed by "<script" changes how
        # it reads on); escaping them in minified code could break a regex literal: refuse instead.
        # "<body" too: the course page puts its way back after the page's first one.
        raise CourseError(f"MathJax's {path.name} contains a script tag and cannot be inlined into a page")
    return code


def with_note(html: str, note: str) -> str:
    """The page with ``note`` (our own HTML, never a student's) first in its body."""
    body = re.search(r"<body\b[^>]*>", html)
    if body is None:
        raise CourseError("the feedback page has no <body> to put the submission's note in: the template changed")
    return f"{html[:body.end()]}\n{note}\n{html[body.end():]}"


def feedback(course: Course, assignment: str, exchange: str | Path | None = None,
             students: Collection[str] | None = None, note: Callable[[str], str] | None = None) -> FeedbackReport:
    """Write feedback/<student>/<assignment>/*.html for every autograded student.

    A student whose page cannot be made is reported with the reason; the others' pages are written.
    With ``exchange`` (``None`` for no exchange, ``""`` for the course's ``c.Exchange.root``) the
    pages carry MathJax inside them and each student's are put in the exchange, where their
    *Fetch Feedback* finds them (by the submission's secret, as nbgrader's release_feedback names
    them; :func:`autograder.course.exchange.release_feedback`), or, when ``exchange`` is ngshare's
    URL, uploaded to ngshare as the feedback of the submission collected last. ``students``: only these (the
    grading service's one student, or those a regrade changed); ``note(student)``: HTML put at the
    top of that student's pages (which submission the page is about).
    """
    release = course.exchange_config(exchange) if exchange is not None else None  # a missing exchange fails first
    only = None if students is None else set(students)
    graded = [s for s in course.submitted_students(assignment) if course.autograded_dir(s, assignment).is_dir()]
    if not graded:
        raise CourseError(f"nothing autograded for {assignment} yet: run `autograder grade {assignment}` first")
    if only is not None:
        unknown = sorted(only - set(graded))
        if unknown:
            raise CourseError(f"no graded submission of {assignment} from: {', '.join(unknown)}")
    chosen = [s for s in graded if only is None or s in only]
    with course.gradebook() as gb:
        waiting = written.waiting(gb, assignment, chosen)
    config = configure_feedback(course.config())
    config.GenerateFeedback.exporter_class = SafeHTMLExporter
    api = course.api(config)
    report = FeedbackReport(waiting=waiting)
    for student in chosen:
        try:
            report.pages += _student_feedback(course, api, assignment, student, inline=release is not None,
                                              note=note(student) if note else "")
        except Exception as error:  # this student's page only; the reason goes in the report
            message = str(error) if isinstance(error, CourseError) else f"{type(error).__name__}: {error}"
            report.failed.append((student, message))
    if release is not None:
        put = (_to_ngshare(course, assignment, str(exchange)) if is_ngshare(exchange)
               else _to_folder(course, assignment, Path(release.Exchange.root) / course.course_id / "feedback"))
        failed = {student for student, _ in report.failed}
        for student in chosen:
            if student not in failed:
                folder = course.feedback_dir(student, assignment)
                pages = {page.stem: page.read_bytes() for page in sorted(folder.glob("*.html"))
                         if not page.is_symlink()}
                unreleased = put(student, pages)
                if unreleased:
                    report.unreleased.append((student, unreleased))
                else:
                    report.released.append(student)
    return report


def _to_folder(course: Course, assignment: str, outbound: Path) -> Callable[[str, dict[str, bytes]], str]:
    """Puts a student's pages into the exchange's folder, where their *Fetch Feedback* finds them by
    the submission's secret; returns why not, for one who cannot be released (no secret: collected
    from an LMS export, or the student removed it)."""
    if not outbound.is_dir():
        outbound.mkdir(parents=True)
        outbound.chmod(0o711)  # nbgrader's mode: a student reaches their page by its name, lists nothing

    def put(student: str, pages: dict[str, bytes]) -> str:
        secret = _beside(course, student, assignment, SECRET_FILE)
        if not SECRET.fullmatch(secret):
            return ("no submission secret beside the submission (collected from an LMS export, not the "
                    "exchange?): hand the page over another way")
        try:
            release_feedback(outbound, pages, secret)
        except OSError as error:
            return f"cannot be written to the exchange ({error.strerror or error})"
        return ""
    return put


def _to_ngshare(course: Course, assignment: str, url: str) -> Callable[[str, dict[str, bytes]], str]:
    """Uploads a student's pages to ngshare as the feedback of the submission collected last (its
    timestamp beside it), which that student's *Fetch Feedback* brings; returns why not."""
    client = Ngshare(url, course.course_id)

    def put(student: str, pages: dict[str, bytes]) -> str:
        stamp = _beside(course, student, assignment, STAMP_FILE)
        if parse_stamp(stamp) is None:
            return "not collected from ngshare (no ngshare timestamp beside the submission): hand the page over " \
                   "another way"
        try:
            client.release_feedback(assignment, student, stamp, pages)
        except Unreachable:  # ngshare away: for everyone, not this student; the caller says so
            raise
        except CourseError as error:
            return str(error)
        return ""
    return put


def _beside(course: Course, student: str, assignment: str, name: str) -> str:
    """A small file collect wrote beside the submission (never read through a link), or ""."""
    path = course.submitted_dir(student, assignment) / name
    return path.read_text().strip() if path.is_file() and not path.is_symlink() else ""


def _student_feedback(course: Course, api, assignment: str, student: str, inline: bool = False,
                      note: str = "") -> list[Path]:
    with temp_attrs(api.coursedir, assignment_id=assignment, student_id=student):
        app = GenerateFeedback(coursedir=api.coursedir, parent=api)
        app.force = True
        result = capture_log(app)
    if not result["success"]:
        errors = [line for line in (result.get("log") or "").splitlines() if line.startswith("[ERROR]")]
        raise CourseError("nbgrader generate_feedback failed: " + "; ".join(errors[:5] or [result.get("error", "")]))
    folder = course.feedback_dir(student, assignment)
    # release_feedback reads the submission's time and secret beside the page (as nbgrader's own
    # feedback folder has them); the secret names the page in the exchange for the student's fetch.
    for name in ("timestamp.txt", "submission_secret.txt"):
        source = course.submitted_dir(student, assignment) / name
        if source.is_file() and not source.is_symlink():
            shutil.copyfile(source, folder / name)
    install_mathjax(course, folder)
    pages = sorted(folder.glob("*.html"))
    for page in pages:
        html = page.read_text()
        remote = _REMOTE.search(html)
        if remote:  # a template or nbconvert change brought a network load back: no page rather than that one
            page.unlink()
            raise CourseError(f"{page.name} would load something from the network ({remote.group(0)[:100]}); "
                              "page removed")
        html = CONTROL.sub("", html)
        if note:
            html = with_note(html, note)
        page.write_text(inline_mathjax(html) if inline else html)
    return pages
