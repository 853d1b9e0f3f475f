"""The pages the grader writes, for every reader (issue 40: WCAG 2.1 AA): a student's feedback page,
and the instructor's class page with its similarity pages.

Each is audited by axe-core in Chromium, in light and dark mode, and fails on a critical or serious
violation; each is walked with the keyboard alone (a skip link first, the focus always in sight,
no formula a Tab stop) and read at 200 % zoom (a 1280 px window at 200 % lays out 640 px: nothing
scrolls sideways). The feedback page's formulas are read aloud offline once speech is on.
"""
from __future__ import annotations

import json

import pytest

from autograder.commands.feedback import SafeHTMLExporter, copy_mathjax, inline_mathjax, mathjax_dir

from support import REPO, axe
from support.browser import SPEECH_FROM_MENU, SPEECH_ON, SPEECH_UNSAVED, SPOKEN, Chromium, ChromiumMissing, serve
from support.classes import record_class, released_course, source_notebooks, with_variant
from support.course import autograder
from support.feedback import feedback_page

pytestmark = [pytest.mark.slow]  # a browser

A = "a02_broadcasting"
SCHEMES = ["light", "dark"]
ZOOMED = 640  # CSS px of a 1280 px window at 200 %


def chromium() -> Chromium:
    try:
        return Chromium()
    except ChromiumMissing as missing:
        pytest.fail(str(missing), pytrace=False)  # fail, never skip: CI must not pass without it


@pytest.fixture(scope="module")
def feedback_folder(tmp_path_factory):
    """a02's feedback page as `autograder feedback` writes it (the course's template and exporter, made-up
    scores), with MathJax beside it."""
    folder = tmp_path_factory.mktemp("feedback")
    nb = json.loads((REPO / "assignments" / "source" / A / f"{A}.ipynb").read_text())
    (folder / f"{A}.html").write_text(feedback_page(SafeHTMLExporter, nb, A))
    copy_mathjax(mathjax_dir(), folder / "mathjax")
    return folder


@pytest.fixture(scope="module")
def report_folder(tmp_path_factory):
    """The class page of a small class of a02 and its similarity pages: three students typed the model
    answer (a pair, and each close to the model answer), one carries a classic bug."""
    course = released_course(tmp_path_factory.mktemp("a11y-class") / "course", A)
    from autograder.mutants import load_mutants

    mutant = next(m for m in load_mutants(A) if m.id == "unbroadcast-axis0-only")
    students = {f"ok{i}": {"notebooks": source_notebooks(A), "verdicts": {}} for i in range(1, 4)}
    students["x1"] = {"notebooks": with_variant(A, mutant),
                      "verdicts": {mutant.exercise: (False, "you summed only axis 0")}}
    record_class(course, A, students)
    assert autograder(course, "report", A) == 0
    folder = course.reports_dir(A)
    assert sorted((folder / "similarity").glob("*.html")), "the class has no similarity page to check"
    return folder


def report_pages(folder) -> list[str]:
    return ["class_report.html", *sorted(f"similarity/{p.name}" for p in (folder / "similarity").glob("*.html"))]


def audit(folder, names: list[str], scheme: str) -> dict[str, list[dict]]:
    with chromium() as browser, serve(folder) as base:
        return {name: browser.open(base + name, color_scheme=scheme, probe=axe.probe()).probe for name in names}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_feedback_page_passes_axe(feedback_folder, scheme):
    found = audit(feedback_folder, [f"{A}.html"], scheme)[f"{A}.html"]
    assert not axe.serious(found), axe.describe(f"feedback page ({scheme})", axe.serious(found))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_class_page_and_its_similarity_pages_pass_axe(report_folder, scheme):
    found = audit(report_folder, report_pages(report_folder), scheme)
    failing = [axe.describe(f"{name} ({scheme})", axe.serious(v)) for name, v in found.items() if axe.serious(v)]
    assert not failing, "\n".join(failing)


def check_keyboard_walk(where: str, focus: list) -> None:
    """Tab from the top of a page: a skip link first, leading to the main content; then every stop
    in sight with its focus ring drawn, and none a formula."""
    stops = [stop for stop in focus if stop is not None]
    assert stops, f"{where}: Tab reaches nothing"
    first = stops[0]
    assert first["tag"] == "a" and "skip" in first["text"].lower() and first["target"], (
        f"{where}: the first Tab stop is not a skip link to the content: {first}")
    hidden = [stop for stop in stops if not (stop["visible"] and stop["inside"])]
    assert not hidden, f"{where}: Tab stops whose focus a sighted reader cannot see: {hidden[:5]}"
    math = [stop for stop in stops if stop["math"]]
    assert not math, f"{where}: formulas in the Tab order: {math[:5]}"
    assert len({(stop["tag"], stop["text"], stop["href"]) for stop in stops}) > 3, f"{where}: {stops}"


def test_the_feedback_page_and_the_class_page_work_with_a_keyboard(feedback_folder, report_folder):
    with chromium() as browser, serve(feedback_folder) as feedback, serve(report_folder) as report:
        walks = {"feedback page": browser.open(feedback + f"{A}.html", tabs=25).focus,
                 "class page": browser.open(report + "class_report.html", tabs=15).focus}
    for where, focus in walks.items():
        check_keyboard_walk(where, focus)
    exercises = [stop for stop in walks["feedback page"] if stop and (stop["href"] or "").startswith("#a02-")]
    assert exercises, "feedback page: the exercises' links are not reached by Tab"


# At 200 % zoom: what scrolls the whole page sideways, and the landmarks and headings a screen
# reader navigates by.
SHAPE = """(() => ({
    sideways: document.documentElement.scrollWidth > window.innerWidth + 1,
    lang: document.documentElement.lang,
    main: document.querySelectorAll("main").length,
    h1: [...document.querySelectorAll("h1")].map(h => h.textContent.trim().slice(0, 60)),
    headings: document.querySelectorAll("h2, h3").length,
}))()"""


def test_the_pages_reflow_at_200_percent_with_landmarks_and_headings(feedback_folder, report_folder):
    with chromium() as browser, serve(feedback_folder) as feedback, serve(report_folder) as report:
        shapes = {name: browser.open(base + name, width=ZOOMED, probe=SHAPE).probe
                  for base, name in [(feedback, f"{A}.html"), (report, "class_report.html"),
                                     *((report, page) for page in report_pages(report_folder)[1:2])]}
    for name, shape in shapes.items():
        assert not shape["sideways"], f"{name} at 200 %: the page scrolls sideways"
        assert shape["lang"] == "en" and shape["main"] == 1, f"{name}: {shape}"
        assert len(shape["h1"]) >= 1 and shape["headings"] >= 1, f"{name}: headings {shape}"


TYPESET = """({formulas: document.querySelectorAll("mjx-container").length,
               mathml: document.querySelectorAll("mjx-container mjx-assistive-mml").length})"""


def read_aloud(folder) -> tuple[str, list]:
    """The page ``A`` in ``folder`` opened three ways: as is, with speech a saved setting, and with
    speech turned on from MathJax's menu while reading; each time every formula typeset, with its
    assistive MathML, and once speech is on, spoken. Returns the page's address and its opens."""
    with chromium() as browser, serve(folder) as base:
        quiet = browser.open(base + f"{A}.html", probe=TYPESET)
        spoken = browser.open(base + f"{A}.html", probe=SPOKEN, before=SPEECH_ON)
        turned_on = browser.open(base + f"{A}.html", probe=SPEECH_FROM_MENU, before=SPEECH_UNSAVED)
    assert quiet.probe["formulas"] > 20 and quiet.probe["mathml"] == quiet.probe["formulas"], quiet.probe
    found = spoken.probe
    assert found["formulas"] == quiet.probe["formulas"] and found["spoken"] == found["formulas"], found
    assert not found["errors"] and not spoken.errors, (found, spoken.errors)
    assert turned_on.probe == {"formulas": found["formulas"], "spoken": found["formulas"]}, turned_on.probe
    return base + f"{A}.html", [quiet, spoken, turned_on]


def test_the_feedback_pages_formulas_are_read_aloud_offline(feedback_folder):
    _, opens = read_aloud(feedback_folder)
    assert any("/mathjax/sre/" in url for page in opens for url in page.requests), "speech loaded no speech rules"


def test_a_page_that_travels_alone_is_read_aloud_with_nothing_beside_it(feedback_folder, tmp_path):
    """The page released through the exchange (nbgrader hands the student the page alone): its formulas
    typeset and, once speech is on (a saved setting, or the menu while reading), every one is
    spoken, from what the page carries: it asks for nothing but itself."""
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / f"{A}.html").write_text(inline_mathjax((feedback_folder / f"{A}.html").read_text()))
    page, opens = read_aloud(alone)
    asked = {url for opened in opens for url in opened.requests
             if not url.startswith("data:") and not url.endswith("/favicon.ico")}  # the browser's own ask
    assert asked == {page}, asked
