"""The book builds without a warning, ships no solutions, and renders offline in a real browser.

In the browser, nothing may be wider than its column, at a laptop's width and at a phone's. The
built pages are also held to the edition's shape: every chapter opens with "What you will build"
and closes with abilities, exercises with folded answers, its assignment and its references; the
general index lists the terms a reader looks up; search shows context when the book is served.

The build is a session fixture (conftest.py) and every test here is in one xdist group, so under `make test`
(`pytest -n 2 --dist loadgroup`) the book is built once, by one worker, and the browser opens each
page once. The build goes to a fresh temporary folder, not _build/html: every page is read again
and reports its warnings again (an incremental build is silent about the pages it skips), nothing
stale survives, and a test run never collides with `make book` or another run in the same tree.
It shares the notebook execution cache, _build/.jupyter_cache, with `make book`, so it takes
seconds unless a chapter's code changed. Screenshots go to _build/screenshots/.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, unquote, urljoin, urlsplit

import pytest
import yaml
from bs4 import BeautifulSoup  # pydata-sphinx-theme, which the book is built with, needs it too

from support import REPO
from support.browser import Chromium, ChromiumMissing, Page, serve

ROOT = REPO
SCREENSHOTS = ROOT / "_build" / "screenshots"

# nbgrader's markers: none of them, nor what they enclose, may reach a reader.
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "### BEGIN", "### END")

# TeX that MathJax should have replaced: a command (\frac, \partial), a \( \) \[ \] delimiter,
# $$, or $...$ around something TeX-like (a backslash, ^, _ or a brace).
RAW_TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$|\$[^$\n]*[\\^_{}][^$\n]*\$")

# The widths the layout is checked at: a laptop, and a phone held upright; and a small tablet,
# where every display formula of a chapter must already fit (split inside `aligned`).
WIDE, NARROW = 1280, 400
MEDIUM = 500

# Runs in every rendered page: what is wider than the article's column. An element "sticks out"
# when its right edge passes the column's, and "is clipped" when it passes the edge of an
# ancestor that hides its overflow (text cut off without a trace). Inside a scroll container
# (overflow-x auto or scroll) nothing is lost, the reader scrolls: those only go to `scrolls`, with
# their kind, for the test to judge (an error message must wrap; display math may scroll only
# on a narrow screen).
OVERFLOW = """(() => {
    const article = document.querySelector("article.bd-article");
    if (!article) return {wide: ["the page has no <article class=bd-article>"], scrolls: []};
    const column = article.getBoundingClientRect();
    const SLACK = 1;  // px of sub-pixel rounding
    const describe = (el, why) => {
        const r = el.getBoundingClientRect();
        const cls = (typeof el.className === "string" ? el.className : "").trim().split(/\\s+/).slice(0, 3).join(".");
        const text = (el.textContent || "").replace(/\\s+/g, " ").trim().slice(0, 60);
        return `<${el.tagName.toLowerCase()}${cls ? "." + cls : ""}> ${why}: ${Math.round(r.width)}px wide, `
             + `scrollWidth ${el.scrollWidth}px, right edge at ${Math.round(r.right)}px: "${text}"`;
    };
    const kind = el => el.closest(".output.traceback, .output.stderr, .output.error") ? "error"
        : el.closest(".math, mjx-container") ? "math" : "other";
    const wide = [], scrolls = [];
    const reported = new Set();  // scroll containers the walk has already judged
    const walk = (el, bound, owner) => {
        for (const child of el.children) {
            // MathJax's invisible copy of each formula, for screen readers
            if (child.tagName.toLowerCase() === "mjx-assistive-mml") continue;
            const style = getComputedStyle(child);
            if (style.display === "none" || style.visibility === "hidden" || style.position === "fixed") continue;
            const r = child.getBoundingClientRect();
            if (r.width > 0 && r.right > bound + SLACK) {
                wide.push(describe(child, owner ? `is clipped by ${owner}`
                    : `sticks out of the column (${Math.round(column.left)}-${Math.round(column.right)}px)`));
                continue;  // its descendants stick out with it: one report is enough
            }
            if (["auto", "scroll"].includes(style.overflowX)) {
                reported.add(child);
                if (child.scrollWidth > child.clientWidth + SLACK) {
                    scrolls.push([kind(child), describe(child, "scrolls sideways")]);
                }
                continue;
            }
            const clips = ["hidden", "clip"].includes(style.overflowX);
            walk(child, clips ? Math.min(bound, r.right) : bound,
                 clips ? describe(child, "").split(":")[0] + " (overflow-x " + style.overflowX + ")" : owner);
        }
    };
    walk(article, column.right, "");
    // The walk stops at the first scroll container (a cell's output area scrolls as a whole), so
    // it misses a <pre> that scrolls inside one; and it sees elements only, while a line of text
    // wider than its box is no element: in a box that hides its overflow it is cut off without a
    // trace, in one that shows it, it runs past the box. So every output, code cell and display
    // formula is also measured directly, whatever its ancestors do.
    const boxes = "div.cell_output .output, div.cell_output pre, div.cell_input pre, div.highlight pre, "
                + "div.math, mjx-container[display='true']";
    for (const el of article.querySelectorAll(boxes)) {
        if (reported.has(el) || el.getClientRects().length === 0) continue;  // judged, or not shown
        if (el.scrollWidth <= el.clientWidth + SLACK) continue;
        const overflowX = getComputedStyle(el).overflowX;
        if (["auto", "scroll"].includes(overflowX)) {
            scrolls.push([kind(el), describe(el, "scrolls sideways")]);
        } else {
            wide.push(describe(el, `cuts its content off (overflow-x ${overflowX})`));
        }
    }
    if (document.documentElement.scrollWidth > window.innerWidth + SLACK) {
        wide.push(`the whole page scrolls sideways: ${document.documentElement.scrollWidth}px `
                  + `in a ${window.innerWidth}px window`);
    }
    // The search controls a reader can see (a button or a field, on screen and not hidden).
    const onScreen = el => {
        const r = el.getBoundingClientRect(), style = getComputedStyle(el);
        return r.width > 0 && r.height > 0 && style.visibility !== "hidden"
            && r.right > 0 && r.left < window.innerWidth;
    };
    const searches = [...document.querySelectorAll(
        "button.search-button__button, form.bd-search, input[type=search]")].filter(onScreen).length;
    return {wide, scrolls, searches};
})()"""

pytestmark = [pytest.mark.xdist_group("book"), pytest.mark.slow]  # a book build and a browser


def toc_pages() -> list[str]:
    """Every document in _toc.yml, root first, without extension: ["book/intro", ...]."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())

    def files(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for value in node.values():
                yield from files(value)
        elif isinstance(node, list):
            for item in node:
                yield from files(item)

    return [re.sub(r"\.(md|ipynb)$", "", name) for name in [toc["root"], *files(toc)]]


PAGES = toc_pages()
CHAPTERS = [name for name in PAGES if Path(name).name[:2].isdigit()]
# The layout is also checked on the general index, which the Reference part leads to.
LAID_OUT = [*PAGES, "genindex"]


class Scan(HTMLParser):
    """What the tests need to know about one HTML document, as built or as rendered."""

    # Text a reader does not take for prose: the head, scripts, code, and math MathJax typeset.
    NOT_PROSE = {"head", "script", "style", "pre", "code", "mjx-container"}

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []  # prose, outside NOT_PROSE
        self.ids: set[str] = set()  # anchors a link can point to
        self.links: list[str] = []  # href of every <a>
        self.assets: list[str] = []  # every script, style sheet, image or frame the page loads
        self.math = 0  # elements Sphinx marked class="math" for MathJax
        self.typeset = 0  # ... of which MathJax replaced the content with an <mjx-container>
        self.math_errors: list[str] = []  # TeX that MathJax could not typeset
        self._skip: list = []  # [tag, depth] of the NOT_PROSE element we are in
        self._in_math: list = []  # [tag, depth] of the math element we are in
        self._math_typeset = False  # whether that element holds an <mjx-container>
        self._red_mtext = False  # inside MathJax's marker for an undefined macro
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in ("script", "img", "iframe", "source", "video", "audio") and attrs.get("src"):
            self.assets.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.assets.append(attrs["href"])
        if tag == "mjx-merror":  # a TeX syntax error
            self.math_errors.append(attrs.get("data-mjx-error") or "TeX error")
        # An undefined macro is no error to MathJax: it typesets the name in red, which shows
        # in the hidden MathML copy it keeps for screen readers as <mtext mathcolor="red">.
        self._red_mtext = tag == "mtext" and attrs.get("mathcolor") == "red"
        self._open(self._skip, tag, tag in self.NOT_PROSE)
        self._open(self._in_math, tag, "math" in (attrs.get("class") or "").split())
        if tag == "mjx-container" and self._in_math:
            self._math_typeset = True

    def handle_endtag(self, tag):
        self._close(self._skip, tag)
        if self._close(self._in_math, tag):
            self.math += 1
            self.typeset += self._math_typeset
            self._math_typeset = False

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
        if self._red_mtext and data.startswith("\\"):
            self.math_errors.append(f"undefined macro {data}")

    # Only the outermost element of interest is tracked, by counting nested tags of its name;
    # none of them is a void element, so every start tag has an end tag.
    @staticmethod
    def _open(state: list, tag: str, starts: bool) -> None:
        if state and state[0] == tag:
            state[1] += 1
        elif not state and starts:
            state[:] = [tag, 1]

    @staticmethod
    def _close(state: list, tag: str) -> bool:
        """Count an end tag; True when it closes the tracked element, which is then forgotten."""
        if state and state[0] == tag:
            state[1] -= 1
            if state[1] == 0:
                state.clear()
                return True
        return False

    @property
    def prose(self) -> str:
        return " ".join(self.text)


@functools.cache
def scan_file(path: Path) -> Scan:
    return Scan(path.read_text(encoding="utf-8"))


def is_remote(url: str) -> bool:
    return urlsplit(url).scheme in ("http", "https") or url.startswith("//")


# --- the build -------------------------------------------------------------------------------

def build_log(build: subprocess.CompletedProcess) -> str:
    stdout = "\n".join(build.stdout.splitlines()[-30:])
    log = f"--- warnings and errors ---\n{build.stderr}\n--- end of the build's output ---\n{stdout}"
    return re.sub(r"\x1b\[[0-9;]*m", "", log)  # Sphinx colours its output even into a pipe


def test_book_builds_without_warnings(build):
    assert build.returncode == 0, f"jupyter-book build -W -n failed\n{build_log(build)}"


def test_every_toc_page_is_built(html):
    missing = [name for name in PAGES if not (html / f"{name}.html").is_file()]
    assert not missing, f"pages listed in _toc.yml but not built: {missing}"
    assert f'url={PAGES[0]}.html' in (html / "index.html").read_text(), "index.html must lead to the preface"


def test_every_chapter_offers_its_notebook(html):
    assert CHAPTERS
    for name in CHAPTERS:
        page = (html / f"{name}.html").read_text()
        link = re.search(r'href="([^"]*_downloads/chapters/[^"]+\.ipynb)"', page)
        assert link, f"{name}: no 'download it as a notebook' link"
        notebook = (html / name).parent / link.group(1)
        nb = json.loads(notebook.resolve().read_text())
        code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert "coursekit" in code and "solutions" not in code, f"{name}: the notebook must run on the kit"


def test_no_solutions_or_hidden_tests_in_the_book(html):
    # Everything a reader can fetch: pages, page sources (the download button serves them), the
    # search index. _static only holds third-party assets (theme, MathJax).
    files = [path for path in html.rglob("*")
             if path.is_file() and "_static" not in path.relative_to(html).parts]
    assert any(path.suffix == ".html" for path in files)
    leaks = [f"{path.relative_to(html)}: {marker!r}"
             for path in files for marker in MARKERS if marker in path.read_text(errors="replace")]
    assert not leaks, "nbgrader markers in the built book:\n" + "\n".join(leaks)


def test_no_page_loads_anything_from_another_host(html):
    # The static half of the offline check; the browser test below watches the actual requests.
    remote = [f"{path.relative_to(html)}: {url}"
              for path in html.rglob("*.html") for url in scan_file(path).assets if is_remote(url)]
    assert not remote, "pages load remote resources (a CDN?):\n" + "\n".join(remote)


# --- the browser -----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def rendered(html) -> dict[str, Page]:
    """Every TOC page as headless Chromium shows it, served over HTTP as a web host would."""
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)  # no stale pictures of pages since removed
    return render(html, LAID_OUT, WIDE)


@pytest.fixture(scope="session")
def rendered_narrow(html) -> dict[str, Page]:
    """Every TOC page at a phone's width, with what is wider than its column."""
    return render(html, LAID_OUT, NARROW, f"-{NARROW}px")


@pytest.fixture(scope="session")
def rendered_medium(html) -> dict[str, Page]:
    """Every chapter at a small tablet's width, with what is wider than its column."""
    return render(html, CHAPTERS, MEDIUM, f"-{MEDIUM}px")


def render(html: Path, names: list[str], width: int, suffix: str = "") -> dict[str, Page]:
    """The pages `names` in headless Chromium at `width` px, each probed with OVERFLOW and
    photographed into SCREENSHOTS (the name, then `suffix`)."""
    try:
        chromium = Chromium()
    except ChromiumMissing as missing:
        pytest.fail(str(missing), pytrace=False)  # fail, never skip: CI must not pass without it
    with chromium, serve(html) as base:
        return {name: chromium.open(base + f"{name}.html", SCREENSHOTS / f"{name.replace('/', '-')}{suffix}.png",
                                    width=width, probe=OVERFLOW)
                for name in names}


@pytest.mark.parametrize("name", CHAPTERS)
def test_display_math_fits_a_small_tablet(rendered_medium, name):
    math = [element for kind, element in rendered_medium[name].probe["scrolls"] if kind == "math"]
    assert not math, (f"{name} at {MEDIUM} px: display math scrolls sideways (split it inside aligned):\n"
                      + "\n".join(math))


@pytest.mark.parametrize("name", PAGES)
def test_math_is_typeset(html, rendered, name):
    built, shown = scan_file(html / f"{name}.html"), Scan(rendered[name].dom)
    if built.math:
        # The built page, before MathJax, shows its TeX: proof that RAW_TEX can see it.
        assert RAW_TEX.search(built.prose), f"{name}: RAW_TEX misses the TeX of the built page"
    assert shown.typeset == built.math, (
        f"{name}: MathJax typeset {shown.typeset} of the {built.math} math elements")
    assert not shown.math_errors, f"{name}: MathJax could not typeset: {shown.math_errors}"
    raw = RAW_TEX.findall(shown.prose)
    assert not raw, f"{name}: raw TeX left on the rendered page: {raw[:10]}"


def test_the_math_check_has_math_to_check(html):
    # The preface always has math (the chain rule), so test_math_is_typeset cannot pass merely
    # because no page has anything to typeset.
    assert scan_file(html / f"{PAGES[0]}.html").math > 0


@pytest.mark.parametrize("name", PAGES)
def test_images_load(html, rendered, name):
    broken = [src for src, width in rendered[name].images if width == 0]
    on_disk = {src: (html / unquote(urlsplit(src).path).lstrip("/")).is_file() for src in broken}
    assert not broken, f"{name}: images that did not load (and whether the file exists now): {on_disk}"


@pytest.mark.parametrize("name", PAGES)
def test_internal_links_resolve(html, rendered, name):
    page = rendered[name]
    base = urljoin(page.url, "/")
    broken = []
    for href in Scan(page.dom).links:
        url = urlsplit(urljoin(page.url, href))
        if not url.geturl().startswith(base):
            continue  # another site, mailto:, javascript:
        target = html / unquote(url.path).lstrip("/")
        if target.is_dir():
            target /= "index.html"
        if not target.is_file():
            broken.append(f"{href} (no file {target.relative_to(html)})")
        elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in scan_file(target).ids:
            broken.append(f"{href} (no anchor #{url.fragment} in {target.relative_to(html)})")
    assert not broken, f"{name}: broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("name", PAGES)
def test_no_console_errors(rendered, name):
    assert not rendered[name].errors, f"{name}: console errors:\n" + "\n".join(rendered[name].errors)


@pytest.mark.parametrize("name", PAGES)
def test_no_request_leaves_the_machine(rendered, name):
    page = rendered[name]
    base = urljoin(page.url, "/")
    remote = [url for url in page.requests if not url.startswith((base, "data:", "blob:", "about:"))]
    assert not remote, f"{name}: requests to other hosts: {remote}"


@pytest.mark.parametrize("width", [WIDE, NARROW])
@pytest.mark.parametrize("name", LAID_OUT)
def test_nothing_is_wider_than_its_column(request, name, width):
    pages = request.getfixturevalue("rendered" if width == WIDE else "rendered_narrow")
    found = pages[name].probe
    problems = list(found["wide"])
    for kind, element in found["scrolls"]:
        if kind == "error":
            problems.append(f"{element} (an error message must wrap: the reader needs all of it)")
        elif kind == "math" and width == WIDE:
            problems.append(f"{element} (display math must fit the column at {WIDE} px: split it with "
                            "aligned and line breaks; scrolling is only the narrow screen's last resort)")
        elif width == WIDE:
            # At a laptop's width a code cell or an output that scrolls hides its right end until
            # the reader thinks of scrolling (a `True` at the end of a line, the end of a message):
            # it is clipped. Shorten the line (wrap the print, break the code) so that it fits.
            problems.append(f"{element} (code and outputs must fit the column at {WIDE} px: shorten "
                            "or wrap the line; scrolling is only the narrow screen's last resort)")
    assert not problems, f"{name} at {width} px: wider than its column:\n" + "\n".join(problems)


@pytest.mark.parametrize("width", [WIDE, NARROW])
@pytest.mark.parametrize("name", PAGES)
def test_one_search_box_per_page(request, name, width):
    pages = request.getfixturevalue("rendered" if width == WIDE else "rendered_narrow")
    assert pages[name].probe["searches"] == 1, (
        f"{name} at {width} px: {pages[name].probe['searches']} search boxes in sight, not one")


def test_the_overflow_check_sees_overflow():
    # The probe must catch what it is for: content sticking out of the column, content clipped by
    # an overflow: hidden box, an error message that scrolls, and display math that scrolls.
    page = """<html><body style="margin:0"><article class="bd-article" style="width:300px">
      <p id="ok">fits</p>
      <div style="width:500px">sticks out</div>
      <div style="overflow:hidden;width:200px"><span style="display:inline-block;width:260px">cut</span></div>
      <div class="output traceback"><pre style="overflow-x:auto">""" + "x" * 200 + """</pre></div>
      <div class="math"><div style="overflow-x:auto"><div style="width:400px">math</div></div></div>
      <pre style="overflow-x:auto">""" + "y" * 200 + """</pre>
      <div class="cell_output"><pre style="overflow:hidden">""" + "z" * 200 + """</pre></div>
      <div class="cell_output" style="overflow-x:auto"><pre style="overflow-x:auto">""" + "w" * 200 + """</pre></div>
    </article></body></html>"""
    try:
        chromium = Chromium()
    except ChromiumMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    with chromium:
        found = chromium.open("data:text/html," + quote(page), width=WIDE, probe=OVERFLOW).probe
    assert len(found["wide"]) == 3, found["wide"]
    assert "sticks out" in found["wide"][0] and "is clipped by" in found["wide"][1], found["wide"]
    assert "cuts its content off" in found["wide"][2] and "zzz" in found["wide"][2], found["wide"]
    assert sorted(kind for kind, _ in found["scrolls"]) == ["error", "math", "other", "other"], found["scrolls"]
    assert "www" in found["scrolls"][-1][1], found["scrolls"]  # the <pre> inside a scrolling output area


# --- the book's structure: every chapter alike, and the back matter --------------------------

def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def heading(section) -> str:
    """A section's title without its number and its "#" anchor link."""
    title = section.find(["h1", "h2", "h3"])
    for extra in title.select(".section-number, .headerlink"):
        extra.extract()
    return " ".join(title.get_text().split())


def top_sections(page: BeautifulSoup) -> dict[str, object]:
    """The chapter's `##` sections, by title, in order."""
    chapter = page.select_one("article.bd-article section")
    return {heading(section): section for section in chapter.find_all("section", recursive=False)}


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_opens_with_what_you_will_build(html, name):
    page = soup(html / f"{name}.html")
    chapter = page.select_one("article.bd-article section")
    boxes = [box for box in chapter.find_all("div", class_="admonition", recursive=False)
             if box.select_one(".admonition-title")
             and " ".join(box.select_one(".admonition-title").get_text().split()) == "What you will build"]
    assert boxes, f"{name}: no 'What you will build' box (a tip admonition) before the first section"
    box = boxes[0]
    assert "tip" in box["class"], f"{name}: the 'What you will build' box must have :class: tip"
    assert len(box.find_all("li")) >= 1, f"{name}: the 'What you will build' box has no bullets"
    assert re.search(r"\ba\d\d_\w+", box.get_text()), f"{name}: the box must name the assignment (aNN_name)"


# A glued value's text as MyST-NB shows it: it reads the text back with `ast.literal_eval`, so a
# glued string such as "30,203" (a number formatted before glueing) shows as the tuple (30, 203).
TUPLE = re.compile(r"\(\s*[^()]*,[^()]*\)")


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_glued_value_reads_as_a_tuple(html, name):
    source = (ROOT / f"{name}.md").read_text(encoding="utf-8")
    pasted = [" ".join(span.get_text().split()) for span in soup(html / f"{name}.html").select(".pasted-text")]
    assert len(pasted) >= source.count("{glue:text}"), f"{name}: fewer glued values shown than the page glues"
    tuples = [text for text in pasted if TUPLE.fullmatch(text)]
    assert not tuples, f"{name}: glued values that read as tuples (glue the number, format it in the role): {tuples}"


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_closes_with_abilities_exercises_assignment_references(html, name):
    sections = top_sections(soup(html / f"{name}.html"))
    titles = list(sections)
    wanted = ["What you should now be able to do", "Exercises", "Assignment", "References and further reading"]
    missing = [title for title in wanted if title not in sections]
    assert not missing, f"{name}: missing sections {missing}; it has {titles}"
    order = [titles.index(title) for title in wanted]
    assert order == sorted(order) and order[-1] == len(titles) - 1, (
        f"{name}: the closing sections must come in the order {wanted}, References last; they are {titles}")

    abilities = sections["What you should now be able to do"].find_all("li")
    assert 4 <= len(abilities) <= 7, (
        f"{name}: 'What you should now be able to do' has {len(abilities)} bullets, not 4 to 7")

    dropdowns = sections["Exercises"].select("details.sd-dropdown")
    assert 3 <= len(dropdowns) <= 6, f"{name}: 'Exercises' has {len(dropdowns)} answer dropdowns, not 3 to 6"
    for number, dropdown in enumerate(dropdowns, 1):
        assert not dropdown.has_attr("open"), f"{name}: exercise {number}'s answer is shown open; fold it"
        summary = dropdown.find("summary").get_text(" ", strip=True)
        answer = dropdown.get_text(" ", strip=True)[len(summary):].strip()
        assert len(answer) >= 20, f"{name}: exercise {number}'s dropdown holds no answer: {answer!r}"

    references = sections["References and further reading"]
    citations = [a["href"] for a in references.find_all("a", href=True) if "bibliography.html#" in a["href"]]
    assert citations, f"{name}: 'References and further reading' cites nothing from the bibliography"


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_bibliography_lists_what_the_chapter_cites(html, name):
    bibliography = next(page for page in PAGES if Path(page).name == "bibliography")
    entries = scan_file(html / f"{bibliography}.html").ids
    cited = {urlsplit(a["href"]).fragment for a in soup(html / f"{name}.html").find_all("a", href=True)
             if urlsplit(a["href"]).path.endswith("bibliography.html") and urlsplit(a["href"]).fragment}
    assert cited, f"{name}: cites no work of the bibliography"
    unlisted = sorted(cited - entries)
    assert not unlisted, f"{name}: cites works that {bibliography}.html does not list: {unlisted}"


def test_the_bibliography_labels_its_entries_as_the_text_cites_them(html):
    # The chapters cite author-year ("Chellapilla et al. (2006)"); an alpha-style label such as
    # "[CPS06]" on the bibliography page is one the reader finds nowhere in the text.
    bibliography = next(page for page in PAGES if Path(page).name == "bibliography")
    labels = [" ".join(label.get_text().split()).strip("[]")
              for label in soup(html / f"{bibliography}.html").select(".citation .label")]
    assert len(labels) > 40, f"{bibliography}.html: too few entries found ({len(labels)})"
    author_year = re.compile(r"^\D+, \d{4}[a-z]?$")  # "Surname, 2006", "A and B, 2006", "A et al., 2006"
    wrong = [label for label in labels if not author_year.match(label)]
    assert not wrong, f"{bibliography}.html: labels that are not author-year: {wrong[:10]}"
    assert len(set(labels)) == len(labels), f"{bibliography}.html: two entries share a label"


def test_a_chapters_second_page_has_a_number_of_its_own(html):
    # book/05b_optimizers continues chapter 5 on a page of its own: it is 5b (sections 5b.1, ...),
    # not 5.12, a section of chapter 5 after that chapter's References, 5.11.
    second = [name for name in PAGES if re.match(r"book/\d\db_", name)]
    assert second, "no chapter has a second page: the test has nothing to check"
    for name in second:
        number = f"{int(Path(name).name[:2])}b"
        page = soup(html / f"{name}.html")
        numbers = [" ".join(span.get_text().split()) for span in page.select("article.bd-article .section-number")]
        assert numbers and numbers[0] == f"{number}.", f"{name}: its title is numbered {numbers[:1]}"
        assert all(n.startswith(f"{number}.") for n in numbers), f"{name}: section numbers {numbers}"
        links = [" ".join(a.get_text().split()) for a in soup(html / f"{PAGES[1]}.html").select(
            "nav.bd-docs-nav a") if a.get("href", "").endswith(f"{Path(name).name}.html")]
        assert links and all(link.startswith(f"{number}. ") for link in links), f"navigation shows {links}"


# Terms a reader looks up; each must be in the general index (genindex.html).
INDEXED = ["unbroadcast", "im2col", "col2im", "dilation", "transposed convolution", "VJP",
           "vector-Jacobian product", "topological order", "chain rule", "backpropagation", "Jacobian",
           "cross-correlation", "erode", "groups", "depthwise convolution", "Nesterov momentum",
           "bias correction", "early stopping", "state_dict", "fan-in", "fan-out", "leaf",
           "extended graph", "logsumexp", "scatter-add", "dampening", "Function contract", "forward mode",
           "JVP", "Jacobian-vector product", "dual number", "confusion matrix", "cosine schedule",
           "global average pooling", "attention", "query, key, value", "causal mask", "multi-head attention",
           "positional encoding", "embedding", "pre-norm block", "GELU", "teacher forcing",
           "scaled dot-product attention", "permutation equivariance", "decoder-only transformer",
           "greedy decoding"]
# Entries that only duplicate others: one term, one entry.
NOT_INDEXED = ["fan-in and fan-out", "leaf (of a graph)", "dilate (zero insertion)", "xavier/glorot initialisation"]
# A term that is an entry of its own, and a sub-entry of no other entry (once is enough).
ONCE = ["VJP", "vector-Jacobian product", "JVP", "Jacobian-vector product", "dilate", "zero insertion"]


def index_entries(html: Path) -> dict[str, list[str]]:
    """genindex.html as {entry (lower case): [the links of the entry and its sub-entries]}."""
    entries: dict[str, list[str]] = {}
    for item in soup(html / "genindex.html").select("table.genindextable td > ul > li"):
        # The term is the item's first child: a link (<a><strong>term</strong></a>) or plain text
        # (a term with sub-entries only); links [1], [2] ... and sub-entries follow.
        first = next(child for child in item.children if not (isinstance(child, str) and not child.strip()))
        text = first.get_text() if hasattr(first, "get_text") else str(first)
        term = " ".join(text.split()).rstrip(",").strip().lower()
        if term:
            entries.setdefault(term, []).extend(a["href"] for a in item.find_all("a", href=True))
    return entries


def index_terms(html: Path) -> list[str]:
    """Every entry and sub-entry of genindex.html (lower case), as often as the index lists it."""
    terms = []
    for item in soup(html / "genindex.html").select("table.genindextable td ul > li"):
        first = next(child for child in item.children if not (isinstance(child, str) and not child.strip()))
        text = first.get_text() if hasattr(first, "get_text") else str(first)
        terms.append(" ".join(text.split()).rstrip(",").strip().lower())
    return terms


def test_a_term_is_listed_once(html):
    terms = index_terms(html)
    twice = {term: terms.count(term.lower()) for term in ONCE if terms.count(term.lower()) != 1}
    assert not twice, f"genindex.html lists these terms other than once (entry or sub-entry): {twice}"


def test_the_index_lists_the_terms_and_is_in_the_navigation(html, rendered):
    entries = index_entries(html)
    missing = [term for term in INDEXED if term.lower() not in entries]
    assert not missing, f"genindex.html lacks {missing}; it has {sorted(entries)[:80]}"
    duplicates = [term for term in NOT_INDEXED if term.lower() in entries]
    assert not duplicates, f"genindex.html has entries that duplicate others: {duplicates}"
    for term in INDEXED:
        links = entries[term.lower()]
        assert links, f"index entry {term!r} links nowhere"
        for href in links:
            url = urlsplit(href)
            assert (html / unquote(url.path)).is_file(), f"index entry {term!r}: no page {url.path}"
            ids = scan_file(html / unquote(url.path)).ids
            assert not url.fragment or unquote(url.fragment) in ids, f"index entry {term!r}: no anchor {href}"
    # A reader gets there from the navigation: some page of the TOC links to it, and every page's
    # sidebar reaches that page.
    linking = [name for name in PAGES
               if any(urlsplit(href).path.endswith("genindex.html") for href in Scan(rendered[name].dom).links)]
    assert linking, "no page of the book links to genindex.html"
    lost = [name for name in PAGES if name != linking[0] and not any(
        urlsplit(href).path.endswith(f"{Path(linking[0]).name}.html") for href in Scan(rendered[name].dom).links)]
    assert not lost, f"these pages do not link to {linking[0]}, the page that leads to the index: {lost}"


# Runs in the search page: waits for the theme's search to finish (it starts after the load
# event) and for the context snippets, which it fetches page by page; returns [href, snippet].
SEARCH = """(async () => {
    const pause = ms => new Promise(resolve => setTimeout(resolve, ms));
    const results = () => [...document.querySelectorAll("#search-results li")];
    for (let i = 0; i < 100; i++) {
        const summary = document.querySelector("#search-results .search-summary");
        if (summary && /found/.test(summary.textContent)) break;
        await pause(200);
    }
    for (let i = 0; i < 25 && !results().every(li => li.querySelector("p.context")); i++) await pause(200);
    return results().map(li => [li.querySelector("a").getAttribute("href"),
                                (li.querySelector("p.context") || {textContent: ""}).textContent]);
})()"""


def test_search_shows_where_a_term_occurs(html):
    # Served over HTTP, as the preface and `make book` advise, the search page shows each hit
    # with the sentence around it. Opened from disk, the browser lets it fetch no page (CORS), so
    # it finds the pages but shows only their titles: what the preface tells the reader.
    try:
        chromium = Chromium()
    except ChromiumMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    with chromium, serve(html) as base:
        served = chromium.open(base + "search.html?q=im2col", probe=SEARCH)
        from_disk = chromium.open((html / "search.html").resolve().as_uri() + "?q=im2col", probe=SEARCH)
    hits = dict(served.probe)
    chapter = [href for href in hits if "03_im2col" in href]
    assert chapter, f"served: searching for im2col does not find chapter 3: {served.probe}"
    assert "im2col" in hits[chapter[0]].lower(), f"served: no context for the im2col chapter: {served.probe}"
    assert not served.errors, "served search page: console errors:\n" + "\n".join(served.errors)
    assert any("03_im2col" in href for href, _ in from_disk.probe), f"from disk: no hit {from_disk.probe}"
    assert not any(snippet for _, snippet in from_disk.probe), (
        "from disk the search page now shows context: the preface's advice to serve the book is out of date")
