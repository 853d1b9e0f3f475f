"""What the class got wrong (issue 32): a synthetic class of a02, made from the course's own catalogue.

60 students of a02_broadcasting: 15 carry the mutant ``unbroadcast-axis0-only`` (X), 8
``unbroadcast-leading-axes-only`` (Y), 4 left ``unbroadcast`` unanswered, 3 crash in ``Sum.backward``
(one of them with a comment that moves the line the judge quotes), and 30 are correct, each
exercise in a style drawn from the catalogue's alternatives. The real judge judges each variant
once; the class is then recorded as ``grade`` records it (ledger, gradebook, autograded notebooks).
The report must rank X above Y with exactly those students, put the answers that raise in one bug group
whatever their line numbers, count answered and late submissions, and show it all on one page that opens
offline in Chromium without clipping or a request leaving it.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import random

import pytest

from autograder.mutants import load_mutants

from support.classes import (
    alternatives_by_exercise,
    judged,
    record_class,
    released_course,
    source_notebooks,
    unanswered,
    with_variant,
)
from support.course import autograder

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]

A = "a02_broadcasting"
X, Y, CRASH = "unbroadcast-axis0-only", "unbroadcast-leading-axes-only", "sum-no-reshape"
EXERCISE = "a02-unbroadcast"


def _mutant(mutant_id: str):
    return next(m for m in load_mutants(A) if m.id == mutant_id)


def synthetic_class(seed: int = 0) -> tuple[dict[str, dict], frozenset[str]]:
    """student -> {"notebooks", "verdicts"}, and the late students."""
    rng = random.Random(seed)
    styles = alternatives_by_exercise(A)

    def styled(notebooks: dict[str, dict], skip: str = "") -> dict[str, dict]:
        for exercise, alternatives in sorted(styles.items()):
            if exercise != skip and rng.random() < 0.6:
                notebooks = with_variant(A, rng.choice(alternatives), notebooks)
        return notebooks

    students: dict[str, dict] = {}

    def add(name: str, notebooks: dict[str, dict], exercise: str = "", verdict=None) -> None:
        students[name] = {"notebooks": notebooks, "verdicts": {exercise: verdict} if exercise else {}}

    for name, mutant, count in (("x", X, 15), ("y", Y, 8)):
        nbs = with_variant(A, _mutant(mutant))
        verdict = judged(A, EXERCISE, nbs)
        for i in range(1, count + 1):
            add(f"{name}{i:02d}", styled(nbs, EXERCISE), EXERCISE, verdict)
    stub = unanswered(A, EXERCISE)
    stub_verdict = judged(A, EXERCISE, stub)
    for i in range(1, 5):
        add(f"n{i:02d}", styled(stub, EXERCISE), EXERCISE, stub_verdict)
    crash = _mutant(CRASH)
    moved = dataclasses.replace(crash, replace="# back to x's shape\n        " + crash.replace)
    for i, mutant in enumerate((crash, crash, moved), 1):
        nbs = with_variant(A, mutant)
        add(f"c{i:02d}", nbs, crash.exercise, judged(A, crash.exercise, nbs))
    for i in range(1, 31):
        add(f"ok{i:02d}", styled(source_notebooks(A)))
    return students, frozenset({"x01", "x02", "y01", "ok01"})


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    course = released_course(tmp_path_factory.mktemp("class") / "course", A)
    students, late = synthetic_class()
    record_class(course, A, students, late)
    return course, students, late


def test_the_page_ranks_each_mistake_with_its_students(graded_class, tmp_path, capsys):
    course, students, late = graded_class
    folder = course.reports_dir(A)
    # links planted where the report writes (the course's owner may plant them; root may run report)
    folder.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    for name in ("class_report.html", "misconceptions.csv", "mistakes.png", "class_report.json"):
        (tmp_path / name).write_text("not the report's\n")
        (folder / name).symlink_to(tmp_path / name)
    (folder / "similarity").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    capsys.readouterr()
    assert autograder(course, "report", A) == 0
    out = capsys.readouterr().out
    assert all((tmp_path / n).read_text() == "not the report's\n" for n in ("class_report.html", "mistakes.png"))
    assert list((tmp_path / "elsewhere").iterdir()) == [] and not (folder / "similarity").is_symlink()
    assert f"the instructor's page (statistics, what went wrong, code similarity; opens offline): " \
           f"{(folder / 'class_report.html').as_uri()}" in out
    data = json.loads((folder / "class_report.json").read_text())
    by_exercise = {e["exercise"]: e for e in data["exercises"]}

    unbroadcast = by_exercise[EXERCISE]
    groups = [(g["kind"], len(g["students"]), g["students"]) for g in unbroadcast["groups"]]
    assert groups == [("bug", 15, [f"x{i:02d}" for i in range(1, 16)]),
                      ("bug", 8, [f"y{i:02d}" for i in range(1, 9)]),
                      ("not answered", 4, [f"n{i:02d}" for i in range(1, 5)])]
    assert "you summed only axis 0" in unbroadcast["groups"][0]["what"]
    assert "stretched size-1 axes were not summed" in unbroadcast["groups"][1]["what"]
    counts = [unbroadcast[k] for k in ("graded", "full", "zero", "answered")]
    assert counts == [60, 33, 27, 56]
    assert unbroadcast["answered_late"] == 4   # x01, x02, y01 and ok01 (full marks) handed in late

    # three wrong answers that raise, the judge quoting two different lines, are one bug group
    records = {s: json.loads((course.state_dir / "graded" / A / f"{s}.json").read_text())["verdicts"]["a02-sum"]
               for s in ("c01", "c02", "c03")}
    assert records["c01"]["message"] == records["c02"]["message"] != records["c03"]["message"]
    assert {r["kind"] for r in records.values()} == {"wrong"}   # the judge's kind, recorded with the verdict
    assert [(g["kind"], g["students"]) for g in by_exercise["a02-sum"]["groups"]] == [("bug", ["c01", "c02", "c03"])]
    assert all(not e["groups"] for name, e in by_exercise.items() if name not in (EXERCISE, "a02-sum"))

    # the same, as CSV for the instructor's own analysis, and on the page
    with open(folder / "misconceptions.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["exercise"] == EXERCISE]
    assert [(r["rank"], r["students"], r["kind"]) for r in rows] == [("1", "15", "bug"), ("2", "8", "bug"),
                                                                    ("3", "4", "not answered")]
    assert rows[0]["who"].split() == [f"x{i:02d}" for i in range(1, 16)]
    page = (folder / "class_report.html").read_text()
    assert page.index("you summed only axis 0") < page.index("stretched size-1 axes were not summed")
    # a02's written answer (3 points) waits for a human: the scores say they are not final
    assert "Not final yet: 60 of 60 students have written answers still to grade by hand (up to 3 points" in page
    # the similarity says how many pairs it compared, the listed ones first, the closest of the rest apart
    compared = page.index(f"{60 * 59 // 2} pairs of students compared; ")
    assert compared < page.index("most similar pairs not listed</summary>")
    assert "<script" not in page.lower() and "http://" not in page and "https://" not in page
    with open(folder / "exercise_stats.csv", newline="") as handle:
        stats = {r["exercise"]: r for r in csv.DictReader(handle)}
    assert stats[EXERCISE]["full"] == "33" and stats["a02-sum"]["zero"] == "3"
    assert "a02-unbroadcast-visible" not in stats and len(stats) == len(by_exercise)
    check_in_a_browser(folder)


# Elements wider than the page or cut inside themselves, and what the page asked for.
LAYOUT = """(() => {
    const width = document.documentElement.clientWidth;
    const wide = [...document.querySelectorAll('body *')]
        .filter(el => el.getBoundingClientRect().right > width + 1
                      || (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible'))
        .map(el => el.tagName + ': ' + (el.innerText || '').slice(0, 60));
    const images = [...document.images].map(img => [img.naturalWidth, img.getBoundingClientRect().right]);
    return {wide, images, pageWidth: document.documentElement.scrollWidth, width};
})()"""


def check_in_a_browser(folder):
    from support.browser import Chromium

    pair_pages = sorted((folder / "similarity").glob("*.html"))
    with Chromium() as chromium:
        for page in [folder / "class_report.html", *pair_pages[:2]]:
            seen = chromium.open(page.as_uri(), width=1280, probe=LAYOUT)
            assert seen.errors == [], (page.name, seen.errors)
            asked = [url for url in seen.requests if not url.startswith("data:image/png;base64,")]
            assert asked == [page.as_uri()], (page.name, asked)   # nothing but the page and its own figures
            layout = seen.probe
            assert layout["wide"] == [] and layout["pageWidth"] <= layout["width"], (page.name, layout["wide"])
            assert all(w > 0 and right <= layout["width"] for w, right in layout["images"]), layout["images"]
