"""autograder demo on the toy course, then what it produced: feedback pages and the report."""

import csv
import json
import re
from html import unescape

import pytest

from autograder import cli
from autograder.course.directory import Course

from support.course import ASSIGNMENT, NOTEBOOK, make_course, source_notebook, use_toy_catalogue

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]


def test_demo_runs_the_whole_loop_with_clean_feedback_and_a_report(tmp_path, monkeypatch, capsys):
    # One test rather than a module fixture shared by several: under pytest-xdist a module fixture
    # can be set up more than once, and the demo is the slowest thing to repeat.
    use_toy_catalogue(monkeypatch)
    toy = make_course(tmp_path / "toy")
    assert cli.main(["--course", str(toy.root), "demo", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "$ autograder --course" in out and "dave_a00_toy.ipynb" in out and "eve_homework.ipynb" in out
    course = Course.open(tmp_path / "out" / "course")
    assert (course.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").exists()
    assert sorted(course.submitted_students(ASSIGNMENT)) == ["alice", "bob", "carol", "frank", "grace"]
    with course.gradebook() as gb:  # dave, eve rejected
        scores = {s.student.id: s.score for s in gb.find_assignment(ASSIGNMENT).submissions}
    assert scores == {"alice": 6, "bob": 3, "carol": 0, "frank": 3, "grace": 3}
    # the demo ends with the instructor's page: bob's mistake is a group of three
    page = course.reports_dir(ASSIGNMENT) / "class_report.html"
    assert out.rstrip().endswith(page.as_uri())
    report = json.loads((course.reports_dir(ASSIGNMENT) / "class_report.json").read_text())
    add = next(e for e in report["exercises"] if e["exercise"] == "a00-add")
    assert [(g["kind"], g["students"]) for g in add["groups"]] == [("bug", ["bob", "frank", "grace"]),
                                                                  ("not answered", ["carol"])]
    check_feedback(course)
    check_report(course)
    check_report_lists_failures(course)


def _hidden_code() -> list[str]:
    """The lines between BEGIN and END HIDDEN TESTS in the source notebook."""
    lines = []
    for cell in source_notebook()["cells"]:
        text = "".join(cell["source"])
        lines += [line.strip() for block in re.findall(r"BEGIN HIDDEN TESTS\n(.*?)### END", text, re.S)
                  for line in block.splitlines() if line.strip()]
    assert lines
    return lines


def check_feedback(course):
    """No hidden test code and nothing loaded from the network; math from the local MathJax."""
    pages = {s: course.feedback_dir(s, ASSIGNMENT) / f"{NOTEBOOK}.html" for s in ("alice", "bob", "carol")}
    for student, page in pages.items():
        html = page.read_text()
        text = unescape(re.sub(r"<[^>]+>", "", html))  # code is split into highlighting spans
        for line in _hidden_code():
            assert line not in text, (student, line)
        assert "HIDDEN TESTS" not in text and "autograder.judge" not in text
        assert not re.search(r"cdn|cloudflare|jsdelivr|unpkg|googleapis", html, re.I)
        assert not re.search(r"""<(script|link)\b[^>]*(src|href)=["']?(https?:)?//""", html, re.I)
        assert 'src="mathjax/tex-chtml.js"' in html
        assert (page.parent / "mathjax" / "tex-chtml.js").stat().st_size > 100_000
        assert list((page.parent / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    # what a hidden check says is still there: the student's feedback, first as one line per exercise
    assert "Incorrect: not done yet: its cell still raises NotImplementedError()" in pages["carol"].read_text()
    alice = pages["alice"].read_text()
    assert ("a00 · Toy assignment: 6.0 / 6.0 auto-graded points; 1.0 points of written answers to be graded by "
            "hand") in alice
    assert alice.count('class="exercise"') == 3 and "Test cell</a> (Score" not in alice
    assert "to be graded by hand (1.0 points)" in alice
    check_feedback_in_a_browser(pages["carol"])


# In the page: the summary's lines, and every element wider than the page (the judge's messages
# must wrap, never hide past the right edge).
LAYOUT = """(() => {
    const width = document.documentElement.clientWidth;
    const summary = [...document.querySelectorAll('#summary li.exercise')].map(li => li.innerText);
    const wide = [...document.querySelectorAll('.exercise-message, div.output_subarea pre')]
        .filter(el => el.getBoundingClientRect().right > width + 1 || el.scrollWidth > el.clientWidth + 1)
        .map(el => el.innerText.slice(0, 80));
    return {summary, wide, text: document.body.innerText};
})()"""


def check_feedback_in_a_browser(page):
    from support.browser import Chromium

    with Chromium() as chromium:
        for width in (1280, 400):
            seen = chromium.open(page.as_uri(), width=width, probe=LAYOUT)
            assert seen.errors == [], seen.errors
            layout = seen.probe
            assert len(layout["summary"]) == 3, layout["summary"]
            assert any("not done yet" in line for line in layout["summary"]), layout["summary"]
            assert layout["wide"] == [], (width, layout["wide"])
            # no path of the grader's temporary folders, in what the student reads
            assert "autograder-grade-" not in seen.dom and "/tmp/" not in layout["text"]


def check_report(course):
    folder = course.reports_dir(ASSIGNMENT)
    with open(folder / "grades.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert list(rows) == ["alice", "bob", "carol", "frank", "grace"]
    assert rows["alice"]["score"] == "6" and rows["alice"]["max_score"] == "7"
    assert rows["alice"]["status"] == "graded; written answers to grade by hand"
    assert (rows["bob"]["exercise:a00-add"], rows["bob"]["exercise:a00-square-backward"]) == ("0", "3")
    # the written answer of the same exercise has a column of its own, empty until graded by hand
    assert rows["bob"]["written:a00-square-backward"] == ""
    assert rows["carol"]["notebook:a00_toy"] == "0"
    for name in ("score_histogram.png", "exercises.png", "mistakes.png", "course.png"):
        data = (folder / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000


def check_report_lists_failures(course):
    failures = course.state_dir / "failed" / ASSIGNMENT
    failures.mkdir(parents=True, exist_ok=True)
    (failures / "zed.json").write_text(json.dumps({"reason": "timeout: grading ran over 9 s", "log": ""}))
    try:
        assert cli.main(["--course", str(course.root), "report", ASSIGNMENT]) == 0
        with open(course.reports_dir(ASSIGNMENT) / "grades.csv", newline="") as handle:
            rows = {row["student"]: row for row in csv.DictReader(handle)}
        assert rows["zed"]["status"] == "failed: timeout: grading ran over 9 s" and rows["zed"]["score"] == ""
    finally:
        (failures / "zed.json").unlink()
