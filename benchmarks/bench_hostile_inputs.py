"""What hostile inputs cost `collect` and `feedback` (issue 19, items 5 and 6).

    python benchmarks/bench_hostile_inputs.py

Each case is timed once, after a warm-up, with time.perf_counter:

* cutting hidden regions from a student's cell that quotes the BEGIN marker on every line and
  never ends it, with the regular expression `RedactHiddenTests` used before and with
  `cut_hidden_regions` (its replacement, one pass over the lines), at 1,000 to 4,000 lines;
* `sanitize_html` and `MathBudget.refuse` on a 1 MB markdown cell of hostile HTML and math;
* `collect` of a zip of 60 entries of 40 MiB of spaces each (2.3 GiB once unpacked: refused from
  the zip's directory), and of 24 such entries (0.9 GiB, under the 1 GiB limit: unpacked and
  each rejected as not JSON), in a scratch copy of the toy course.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from autograder.commands.collect import collect
from autograder.commands.feedback import MathBudget
from autograder.course import CourseError
from autograder.course.notebook import cut_hidden_regions
from autograder.course.safe_html import sanitize_html

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' helpers (tests/support/): not installed
from support.course import ASSIGNMENT, NOTEBOOK, make_course, source_notebook  # noqa: E402

OLD_CUT = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*\n?", re.S | re.M)


def timed(label: str, call) -> None:
    start = time.perf_counter()
    call()
    print(f"{label:<64} {time.perf_counter() - start:8.3f} s", flush=True)


def hidden_regions() -> None:
    for lines in (1000, 2000, 4000):
        cell = "### BEGIN HIDDEN TESTS\n" * lines
        timed(f"regex used before, {lines} marker lines", lambda cell=cell: OLD_CUT.sub("", cell))
        timed(f"cut_hidden_regions, {lines} marker lines", lambda cell=cell: cut_hidden_regions(cell))
    cell = "### BEGIN HIDDEN TESTS\n" * 400_000
    timed("cut_hidden_regions, 400,000 marker lines", lambda: cut_hidden_regions(cell))


def html_and_math() -> None:
    cell = ('<script>alert(1)</script><img src="https://evil.example/x.png" onerror="alert(2)">'
            r"$\frac{a}{b}$ $\def\a{\a}\a$ " + "{" * 20) * 6000
    timed(f"sanitize_html, {len(cell):,} characters", lambda: sanitize_html(cell))
    timed(f"MathBudget.refuse, {len(cell):,} characters", lambda: MathBudget().refuse(cell))


def zip_bombs(scratch: Path) -> None:
    blob = b" " * (40 * 2**20)
    for entries in (60, 24):
        course = make_course(scratch / f"course{entries}")
        archive = scratch / f"bombs{entries}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            zf.writestr(f"alice_{NOTEBOOK}.ipynb", json.dumps(source_notebook()))
            for i in range(entries):
                zf.writestr(f"s{i}_{NOTEBOOK}.ipynb", blob)

        def run(course=course, archive=archive) -> None:
            try:
                report = collect(course, ASSIGNMENT, archive)
                print(f"  imported {len(report.imported)}, skipped {len(report.skipped)}")
            except CourseError as error:
                print(f"  refused: {str(error)[-110:]}")
        timed(f"collect, zip of {entries} x 40 MiB entries ({archive.stat().st_size:,} bytes)", run)


def main() -> None:
    hidden_regions()
    html_and_math()
    scratch = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    try:
        zip_bombs(scratch)
    finally:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
