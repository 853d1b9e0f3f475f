"""The book for every reader (WCAG 2.1 AA; tests/book/test_book_a11y.py runs axe-core on each page).

1. **Every figure says what it shows.** A figure is a code cell's output; its alt text is a sentence
   in the cell's own header, next to the code that draws it (myst-nb's cell option)::

       ```{code-cell} ipython3
       ---
       tags: [remove-input]
       mystnb:
         image:
           alt: The loss falls fast for ten epochs, then flattens near 0.1.
       ---
       ```

   Without one, Sphinx writes the image's file path as its alt text, and a screen reader reads a
   hash. The build warns (an error under ``-W``, as the tests build) on an image whose alt text is
   empty or a file name: :func:`alt_problem`.
2. **What the theme and docutils leave out**, mended in the pages' HTML:
   - pydata-sphinx-theme's expand/collapse control in the sidebar (``<summary>`` holding only a
     decorative chevron) has no accessible name: it gets "Sections of <the chapter's title>";
   - docutils marks each bibliography entry ``role="doc-biblioentry"``, a role ARIA 1.3 deprecates,
     inside ``role="list"``, which then has no list items: each entry becomes a ``listitem``.
3. **Speech turned on from MathJax's menu keeps the page's formulas**: MathJax 3.2.2 drops them all
   (mathjax/MathJax#3124); its maintainers' work-around (:data:`MENU_RERENDER`) goes on every page
   that loads MathJax. The feedback pages the grader writes carry the same lines in their template.
"""
from __future__ import annotations

import html
import re
from pathlib import PurePosixPath

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

IMAGE_FILE = re.compile(r"\.(svg|png|jpe?g|gif|webp|pdf)$", re.I)
# The sidebar's toggle as pydata-sphinx-theme writes it, after the link to its page.
TOGGLE = re.compile(r'(<a class="[^"]*\breference internal\b[^"]*" href="[^"]*">(.*?)</a>'
                    r'<details(?: open="open")?>)<summary>')


def alt_problem(alt: str | None, uri: str) -> str | None:
    """Why ``alt`` tells a reader nothing about the image at ``uri``, or None when it may."""
    text = (alt or "").strip()
    if not text:
        return "has no alt text"
    if text == uri or PurePosixPath(text).name == PurePosixPath(uri).name or IMAGE_FILE.search(text):
        return f"has a file name as its alt text ({text!r})"
    if len(text.split()) < 4:
        return f"has alt text that is not a sentence ({text!r})"
    return None


def _check_alt(app, doctree, docname) -> None:
    for image in doctree.findall(nodes.image):
        problem = alt_problem(image.get("alt"), image.get("uri", ""))
        if problem:
            cell = image.parent
            while cell is not None and "cell_index" not in cell.attributes:
                cell = cell.parent
            where = f"the figure of code cell {cell['cell_index']}" if cell is not None else "a figure"
            logger.warning("%s %s: write what a reader should see in its cell's header "
                           "(mystnb: image: alt: ..., book/_ext/accessible.py)", where, problem, location=image)


def name_toggles(markup: str) -> str:
    def named(match: re.Match) -> str:
        title = html.escape(html.unescape(re.sub(r"<[^>]+>", "", match.group(2))).strip(), quote=True)
        return f'{match.group(1)}<summary aria-label="Sections of {title}">'

    return TOGGLE.sub(named, markup)


def bibliography_roles(markup: str) -> str:
    return markup.replace('role="doc-biblioentry"', 'role="listitem"')


# Runs before MathJax (which Sphinx loads deferred, after the page is read), so that the menu's
# re-render, which speech triggers before its parts are ready, is retried instead of dropping
# every formula (mathjax/MathJax#3124, fixed in MathJax 4).
MENU_RERENDER = """window.MathJax.startup = Object.assign(window.MathJax.startup || {}, {
    ready() {
        const {mathjax} = MathJax._.mathjax;
        const {STATE} = MathJax._.core.MathItem;
        const {Menu} = MathJax._.ui.menu.Menu;
        const rerender = Menu.prototype.rerender;
        Menu.prototype.rerender = function (start = STATE.TYPESET) {
            mathjax.handleRetriesFor(() => rerender.call(this, start));
        };
        MathJax.startup.defaultReady();
    }
});"""


def _mathjax_menu(app, pagename, templatename, context, doctree) -> None:
    # the pages sphinx.ext.mathjax gives MathJax and its window.MathJax configuration to
    if app.config.mathjax3_config and app.env.get_domain("math").has_equations(pagename):
        app.builder.add_js_file("", body=MENU_RERENDER)


def _page(app, pagename, templatename, context, doctree) -> None:
    if "body" in context:
        context["body"] = bibliography_roles(context["body"])
    toctree = context.get("generate_toctree_html")
    if toctree is not None:
        from markupsafe import Markup

        context["generate_toctree_html"] = lambda *args, **kwargs: Markup(name_toggles(str(toctree(*args, **kwargs))))


def setup(app):
    app.connect("doctree-resolved", _check_alt)
    app.connect("html-page-context", _page, priority=900)  # after the theme adds its toctree function
    app.connect("html-page-context", _mathjax_menu, priority=600)  # after sphinx.ext.mathjax's (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
