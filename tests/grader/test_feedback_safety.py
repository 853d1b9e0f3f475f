"""Feedback pages show what a student wrote and run none of it (issue 19, item 5).

The page is opened by the student and by the instructor: a student's markdown, written answer or
raw cell must not run script, load anything from elsewhere, or hang the browser with TeX; control
bytes must not reach it; and one student's page that cannot be made must not cost the others theirs.
"""

import json
import re

import pytest
from bs4 import BeautifulSoup
from hypothesis import given
from hypothesis import strategies as st

from autograder.commands.feedback import MathBudget, SafeHTMLExporter
from autograder.course.notebook import cut_hidden_regions
from autograder.course.safe_html import sanitize_html

from support.course import (
    ASSIGNMENT,
    NOTEBOOK,
    REPO,
    autograder,
    make_course,
    release,
    released_notebook,
    source_notebook,
    submit,
    table,
    use_toy_catalogue,
)
from support.feedback import NbconvertPage, feedback_page

pytestmark = pytest.mark.xdist_group("autograder")

HOSTILE_HTML = {
    "script": "<script>alert(1)</script>",
    "javascript link": '<a href="javascript:alert(2)">x</a>',
    "javascript link, hidden by entities": '<a href="jav&#x09;ascript&colon;alert(2)">x</a>',
    "iframe srcdoc": '<iframe srcdoc="<script>alert(3)</script>"></iframe>',
    "event handler": '<img src=x onerror="alert(4)"><p onmouseover="alert(4)">p</p>',
    "svg": '<svg onload="alert(5)"><script>alert(6)</script></svg>',
    "remote image": '<img src="https://evil.example/x.png" alt="tracker">',
    "protocol-relative image": '<img src="//evil.example/x.png">',
    "srcset": '<img srcset="https://evil.example/x.png 2x">',
    "style": '<style>body{background:url(https://evil.example/)}</style>'
             '<p style="background:url(https://evil.example/)">s</p>',
    "object and embed": '<object data="https://evil.example/x"></object><embed src="https://evil.example/x">',
    "meta refresh": '<meta http-equiv="refresh" content="0;url=https://evil.example/">',
    "base": '<base href="https://evil.example/">',
    "stylesheet": '<link rel="stylesheet" href="https://evil.example/x.css">',
    "form": '<form action="https://evil.example/"><button formaction="https://evil.example/">go</button></form>',
    "data: link": '<a href="data:text/html,<script>alert(7)</script>">d</a>',
    "control bytes": "bell \x07 esc \x1b[31m red &#27;[2J nul \x00",
    "stray end tags": "</div></div></div></div><script>alert(8)</script>",
    "mathml": '<math><mi xlink:href="javascript:alert(9)">x</mi></math>',
}


def assert_inert(html: str, where: str = "") -> None:
    """Nothing in ``html`` runs, loads from elsewhere or writes control bytes to a terminal."""
    assert not re.search(r"<\s*(script|iframe|object|embed|svg|style|meta|base|link|form|math)\b", html, re.I), where
    assert not re.search(r"javascript\s*:|srcdoc|\son[a-z]+\s*=|formaction|srcset", html, re.I), where
    # an address anywhere in an attribute: only #anchors and data:image may be used by the page
    for attribute, value in re.findall(r"""\s([a-z:-]+)\s*=\s*["']([^"']*)""", html, re.I):
        if attribute.lower() in ("src", "href", "action", "data", "poster", "background", "style", "xlink:href"):
            assert value.startswith(("#", "data:image/")) or value == "", (where, attribute, value)
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", html), where


@pytest.mark.parametrize("name", HOSTILE_HTML)
def test_hostile_html_is_made_inert(name):
    assert_inert(sanitize_html(HOSTILE_HTML[name]), name)


def test_what_a_feedback_page_needs_is_kept():
    png = "data:image/png;base64,iVBORw0KGgo="
    html = ('<h2 id="Exercise-1">Exercise 1<a class="anchor-link" href="#Exercise-1">¶</a></h2>'
            '<p>Math $\\frac{a}{b} &lt; c$ and $$x^2$$ stay text for MathJax.</p>'
            '<table><thead><tr><th style="text-align: right">n</th></tr></thead>'
            '<tbody><tr><td style="text-align: right">1</td></tr></tbody></table>'
            '<pre><code class="language-python">print(1 &lt; 2)</code></pre>'
            f'<img src="{png}" alt="a plot"><ul><li><em>a</em> <strong>b</strong> <code>c</code></li></ul>'
            '<p>See <a href="https://numpy.org/doc/">the NumPy docs</a>.</p>')
    clean = sanitize_html(html)
    for kept in ('<h2 id="Exercise-1">', 'href="#Exercise-1"', "$\\frac{a}{b} &lt; c$", "$$x^2$$",
                 '<th style="text-align:right">', '<code class="language-python">print(1 &lt; 2)</code>',
                 f'src="{png}"', 'alt="a plot"', "<em>a</em>", "<strong>b</strong>",
                 # a link the reader chooses to follow stays, without passing on where it came from
                 'href="https://numpy.org/doc/"'):
        assert kept in clean, kept
    assert 'rel="noopener noreferrer nofollow"' in clean


def test_the_math_budget_keeps_the_courses_notebooks_and_refuses_bombs():
    for notebook in sorted((REPO / "assignments" / "source").glob("*/*.ipynb")):
        budget = MathBudget()
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                assert budget.refuse("".join(cell["source"])) is None, notebook.name

    bombs = {"many formulas": " ".join([r"$\frac{a}{b}$"] * 5000),
             "deep braces": "$" + "{" * 5000 + "x" + "}" * 5000 + "$",
             "deep square roots": "$" + r"\sqrt{" * 2000 + "x" + "}" * 2000 + "$"}
    for name, bomb in bombs.items():
        assert MathBudget().refuse(bomb) is not None, name
    # cells each within the budget of a cell, until the page's is spent
    budget, cell = MathBudget(), " ".join([r"$\def\a{\a}\a$"] * 100)
    refusals = [budget.refuse(cell) for _ in range(5)]
    assert refusals == [None] * 4 + ["the page has more math than a feedback page typesets"]
    assert MathBudget().refuse("prices: $5 and $10. " * 200) is not None  # 200 "formulas" in one cell
    assert MathBudget().refuse("prose without any math " * 5000) is None


# The regular expression cut_hidden_regions replaced (quadratic in a cell quoting the marker on
# many lines): the oracle of what is cut.
OLD_CUT = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*\n?", re.S | re.M)
PIECES = ["### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS", "x = 1", "", "a BEGIN HIDDEN TESTS b END HIDDEN TESTS c",
          "END HIDDEN TESTS then BEGIN HIDDEN TESTS", "BEGIN HIDDEN TESTS BEGIN HIDDEN TESTS"]


@given(st.lists(st.sampled_from(PIECES), max_size=10), st.sampled_from(["", "\n"]))
def test_hidden_regions_are_cut_as_before(lines, tail):
    text = "\n".join(lines) + tail
    assert cut_hidden_regions(text) == OLD_CUT.sub("", text)


def test_a_cell_quoting_the_marker_on_every_line_is_kept_whole():
    text = "### BEGIN HIDDEN TESTS\n" * 50_000  # no END: the student's own text, every line of it
    assert cut_hidden_regions(text) == text
    assert cut_hidden_regions(text + "### END HIDDEN TESTS\nafter\n") == "after\n"


# -- the page is nbconvert's, made faster -------------------------------------------------------------

@pytest.mark.parametrize("name", ["plain", "hostile"])
def test_the_feedback_page_is_the_one_nbconverts_exporter_makes(name):
    """SafeHTMLExporter skips nbconvert's BeautifulSoup pass over a page without an image and shares
    compiled templates, highlighted code and rendered markdown between pages: the page is the one
    nbconvert's path makes (element for element; the pass writes the page out again), on a first
    page and on one made from the caches, with the math budget still counted per page."""
    nb = source_notebook() if name == "plain" else hostile_notebook()
    theirs = feedback_page(NbconvertPage, nb, NOTEBOOK)
    for _ in range(2):  # the second from the caches
        ours = feedback_page(SafeHTMLExporter, nb, NOTEBOOK)
        assert str(BeautifulSoup(ours, features="html.parser")) == theirs
    assert ("<img" in ours) == (name == "hostile")
    if name == "hostile":  # an image the student left without alt text gets nbconvert's
        assert 'alt="No description has been provided for this image"' in ours
        assert ours.count("Math shown as TeX") == theirs.count("Math shown as TeX") == 2


def test_the_headings_the_page_is_titled_by_are_escaped():
    """The page's title and a written answer's title are headings of the student's own markdown."""
    heading = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    page = feedback_page(SafeHTMLExporter, source_notebook(), NOTEBOOK, heading=heading)
    soup = BeautifulSoup(page, features="html.parser")
    assert soup.title.get_text() == heading and soup.h1.get_text().startswith(heading + ":")
    assert soup.select("#summary a")[0].get_text() == heading
    assert "<script>alert(1)" not in page and not soup.find_all("img", src="x")


# -- end to end: graded students, their pages, a browser --------------------------------------------

ONE_PIXEL_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
HOSTILE_CELLS = [
    "# Notes\n" + "\n\n".join(HOSTILE_HTML.values()),
    "![a remote image](https://evil.example/tracker.png) and ![a local one](../../../gradebook.db)\n\n"
    f"![an inline plot](data:image/png;base64,{ONE_PIXEL_PNG})",
    "The chain rule: $\\frac{\\partial L}{\\partial x} = 2x \\cdot g$.",   # math that must be typeset
    " ".join([r"$\frac{a}{b}$"] * 5000),                                      # too many formulas
    "$" + "{" * 3000 + "x" + "}" * 3000 + "$",                               # nested too deep
    r"A loop: $\def\a{\a}\a$ and growth: $\def\x{{\x}}\x$",                 # stopped by maxMacros/maxBuffer
    "quoting BEGIN HIDDEN TESTS\n" * 4000,                                   # BEGIN on every line, no END
]


def hostile_notebook() -> dict:
    nb = source_notebook()
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text} for text in HOSTILE_CELLS]
    cells.append({"cell_type": "raw", "metadata": {"raw_mimetype": "text/html"},
                  "source": "<script>alert('raw')</script><iframe src='https://evil.example/'></iframe>"})
    nb["cells"][1:1] = cells
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "a00-square-backward-written":
            cell["source"] = ("By the chain rule. <script>alert('written')</script>"
                              '<a href="javascript:alert(1)">more</a> <img src="https://evil.example/w.png">\x1b[2J')
    return nb


# In the page, once MathJax is done: how much math was typeset, and what is shown as TeX text.
PROBE = """(() => ({
    typeset: document.querySelectorAll('mjx-container').length,
    asText: [...document.querySelectorAll('.tex2jax_ignore')].map(el => el.innerText.slice(0, 60)),
    scripts: [...document.scripts].map(s => s.src || 'inline'),
}))()"""


@pytest.mark.slow
def test_feedback_over_three_students_one_hostile_writes_all_three_and_runs_nothing(tmp_path, monkeypatch,
                                                                                    capsys):
    """One grading run for the slow part: the pages of three students, one of them hostile, then
    the same with one student whose page cannot be made."""
    use_toy_catalogue(monkeypatch)
    course = make_course(tmp_path / "course")
    release(course)
    submit(course, "alice", source_notebook())
    submit(course, "bob", released_notebook(course))
    submit(course, "mallory", hostile_notebook())
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "2") == 0
    capsys.readouterr()

    assert autograder(course, "feedback", ASSIGNMENT) == 0
    out = capsys.readouterr().out
    pages = {s: course.feedback_dir(s, ASSIGNMENT) / f"{NOTEBOOK}.html" for s in ("alice", "bob", "mallory")}
    assert all(page.exists() for page in pages.values()) and "3 feedback file(s)" in out

    html = pages["mallory"].read_text()
    ours = ['<script>\n    window.MathJax = {', '<script async="" id="MathJax-script" src="mathjax/tex-chtml.js">']
    assert html.count("<script") == 2 and all(script in html for script in ours)
    body = html[html.index("<body"):]
    body = body.replace(ours[1], "")  # the page's own MathJax is in the head; nothing else may load
    assert_inert(body, "mallory's page")
    assert f"data:image/png;base64,{ONE_PIXEL_PNG}" in body and "By the chain rule." in body
    assert body.count("quoting BEGIN HIDDEN TESTS") == 4000  # a lone marker is the student's text, kept
    assert_inert(pages["alice"].read_text()[pages["alice"].read_text().index("<body"):], "alice's page")

    from support.browser import Chromium

    with Chromium() as chromium:
        seen = chromium.open(pages["mallory"].as_uri(), probe=PROBE)
    assert [url for url in seen.requests if not url.startswith(("file:", "data:"))] == []
    assert seen.probe["scripts"] == ["inline", pages["mallory"].parent.joinpath("mathjax/tex-chtml.js").as_uri()]
    assert seen.probe["typeset"] >= 4  # the chain rule, the loop and growth (as MathJax errors), the exercises
    shown_as_text = seen.probe["asText"]
    assert len(shown_as_text) == 2 and all(text.startswith("Math shown as TeX") for text in shown_as_text)
    assert "alert" not in " ".join(seen.errors)

    # one student's page cannot be made (bob's graded notebook is damaged after grading): that
    # student is reported with the reason, the others' pages are written
    (course.autograded_dir("bob", ASSIGNMENT) / f"{NOTEBOOK}.ipynb").write_text('{"cells": [')
    for page in pages.values():
        page.unlink()
    assert autograder(course, "feedback", ASSIGNMENT) == 1
    out = capsys.readouterr().out
    assert "2 feedback file(s)" in out and "no feedback for 1 student(s)" in out
    assert table(out)["bob"][0].startswith("nbgrader generate_feedback failed")
    assert pages["alice"].exists() and pages["mallory"].exists() and not pages["bob"].exists()
