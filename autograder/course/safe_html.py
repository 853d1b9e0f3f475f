"""The HTML a student wrote, made safe to show: the one sanitizer of every page that shows it.

The feedback pages (:mod:`autograder.commands.feedback`), the instructor's pages and the
formgrader on the class's hub (``deploy/hub/instructor/python/``, which gets a copy of this file:
it runs in the hub's environment, where the grader is not installed, so it imports nothing of
``autograder``) all show a student's markdown, written answers and outputs. Nothing of theirs may
run in the page or reach out of it: everything goes through :func:`sanitize_html`, built on
``nh3`` (the binding of the Rust sanitizer ammonia): an allow-list of tags and attributes, no
script, style, iframe, object, SVG or event handler, links only to ``#anchors``, http(s) and
mailto, images only as ``data:image/...`` (a remote or relative image loses its source and shows
its alt text); control characters (ESC, BEL, ...) are removed.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import nh3
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter

# C0 and C1 control characters but tab, newline and carriage return; DEL.
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# -- what a student's HTML may keep ----------------------------------------------------------------

# Text structure, tables, code, images; the classes and ids nbconvert's markup and anchors use.
TAGS = (nh3.ALLOWED_TAGS - {"area", "map"}) | {"main", "section", "input"}
ATTRIBUTES = {
    "*": {"class", "id", "title", "lang", "dir"},
    "a": {"href", "name"},
    "img": {"src", "alt", "width", "height"},
    "input": {"type", "checked", "disabled"},  # markdown task lists
    "ol": {"start"},
    "td": {"align", "colspan", "rowspan", "style"},
    "th": {"align", "colspan", "rowspan", "style"},
}
# Dropped with everything inside them (ammonia drops other unknown tags but keeps their text).
DROP_WITH_CONTENT = {"script", "style", "iframe", "frame", "frameset", "object", "embed", "applet",
                     "noscript", "template", "svg", "math", "textarea", "select", "title"}


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """What an allowed attribute may hold: no address the page would load or run."""
    if attribute == "src":  # only images inside the page itself
        return value if value.strip().lower().startswith("data:image/") else None
    if attribute == "href":  # an anchor of the page, or a link the reader chooses to follow
        url = value.strip()
        if url.startswith("#"):
            return url
        parts = urlsplit(url)
        return url if parts.scheme.lower() in ("http", "https", "mailto") and (parts.netloc or parts.path) else None
    if attribute == "type":
        return value if value.lower() == "checkbox" else None
    return value


_CLEANER = nh3.Cleaner(tags=TAGS, clean_content_tags=DROP_WITH_CONTENT, attributes=ATTRIBUTES,
                       attribute_filter=_keep_attribute, url_schemes={"http", "https", "mailto", "data"},
                       filter_style_properties={"text-align"}, link_rel="noopener noreferrer nofollow")


def sanitize_html(html: str) -> str:
    """A student's HTML with nothing that runs, loads or leaves the page (see the module docstring)."""
    # Control characters are removed after cleaning: a reference such as &#27; comes out as one.
    return CONTROL.sub("", _CLEANER.clean(html))


class SanitizingHTMLExporter(HTMLExporter):
    """nbconvert's HTML exporter with every piece of the notebook's HTML (rendered markdown, raw
    cells, any output) through :func:`sanitize_html`, and no widget state (it would be a script
    element of the student's JSON in the page)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sanitize_html = True  # the templates then pass outputs through clean_html and drop scripts

    def from_notebook_node(self, nb, resources=None, **kw):
        nb.metadata.pop("widgets", None)
        return super().from_notebook_node(nb, resources, **kw)

    def default_filters(self):
        yield from super().default_filters()
        yield ("clean_html", sanitize_html)  # in place of nbconvert's bleach-based one

    @pass_context
    def markdown2html(self, context, source: str) -> str:
        return sanitize_html(super().markdown2html(context, source))
