"""The book builds without a warning, ships no solutions, and renders offline in a real browser.

The build is a session fixture and every test here is in one xdist group, so under `make test`
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
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
import yaml

from browser import Chromium, ChromiumMissing, Page, serve

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_build" / "screenshots"
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")

# nbgrader's markers: none of them, nor what they enclose, may reach a reader.
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "### BEGIN", "### END")

# TeX that MathJax should have replaced: a command (\frac, \partial), a \( \) \[ \] delimiter,
# $$, or $...$ around something TeX-like (a backslash, ^, _ or a brace).
RAW_TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$|\$[^$\n]*[\\^_{}][^$\n]*\$")

pytestmark = pytest.mark.xdist_group("book")


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

@pytest.fixture(scope="session")
def output() -> Path:
    """A fresh build folder of the test's own, beside (not inside) `make book`'s _build/html.
    Not pytest's tmp dir: a concurrent pytest session prunes old tmp dirs, and a cold build is slow."""
    # BOOK_TEST_OUT lets two contributors (or helpers) run this file at once without sharing a folder.
    out = Path(os.environ.get("BOOK_TEST_OUT", ROOT / "_build" / "test-book"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


@pytest.fixture(scope="session")
def build(output) -> subprocess.CompletedProcess:
    """Build the book as `make book` does, but with every warning (-W) and every unresolved
    reference (-n) an error. The cwd is the repository root, where the execution cache lives."""
    return subprocess.run([JUPYTER_BOOK, "build", ROOT, "--path-output", output, "-W", "-n", "--keep-going"],
                          cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="session")
def html(build, output) -> Path:
    """The built HTML. With --keep-going it is written even when a warning fails the build."""
    html = output / "_build" / "html"
    if not (html / "index.html").is_file():
        pytest.fail("the build wrote no index.html: see test_book_builds_without_warnings", pytrace=False)
    return html


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
    chapters = [name for name in PAGES if Path(name).name[:2].isdigit()]
    assert chapters
    for name in chapters:
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
    try:
        chromium = Chromium()
    except ChromiumMissing as missing:
        pytest.fail(str(missing), pytrace=False)  # fail, never skip: CI must not pass without it
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)  # no stale pictures of pages since removed
    with chromium, serve(html) as base:
        return {name: chromium.open(base + f"{name}.html", SCREENSHOTS / f"{name.replace('/', '-')}.png")
                for name in PAGES}


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
