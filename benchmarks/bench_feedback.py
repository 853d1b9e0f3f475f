"""What one feedback page costs: nbconvert's own HTMLExporter path against the feedback's exporter.

    python benchmarks/bench_feedback.py                     # a02's reference notebook, 30 pages, 3 rounds
    python benchmarks/bench_feedback.py -n 50 --rounds 5 --assignment a05_layers

Each page is made as ``autograder feedback`` makes it, by a new exporter per student (nbgrader's
GenerateFeedback makes one each): from the assignment's source notebook with made-up scores
(tests/support/feedback.py), the students differing in one answer cell so that a page shares what
a class's pages share (the given code, the test cells, the assignment's text) and no more.
Paths, each in a block of ``-n`` pages: ``nbconvert`` (tests/support/feedback.NbconvertPage: its
BeautifulSoup pass over the whole page, a fresh Jinja environment per page, every cell
highlighted and rendered anew: the path before issue 30) and ``feedback``
(autograder.commands.feedback.SafeHTMLExporter). One warm-up page of each path first (imports,
and the caches the feedback's path keeps for the process: a real run makes its first page cold,
every other warm). Rounds alternate the order of the blocks. Reported: this process's CPU time
per page, min and median over rounds, and the ratio of the mins.

The gradebook part of a page (nbgrader's GetGrades, one query per notebook here against three per
cell) is not in it: it needs a graded course (see the report of issue 30 for the measure of the
whole `feedback` command).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

from autograder.commands.feedback import SafeHTMLExporter
from autograder.course import notebook

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' helpers (tests/support/): not installed
from support.feedback import NbconvertPage, feedback_page  # noqa: E402


def students(source: dict, n: int) -> list[dict]:
    """n copies of ``source``, each with one answer cell of its own (a comment naming the student)."""
    answers = [i for i, c in enumerate(source["cells"]) if notebook.nbgrader(c).get("solution")
               and c["cell_type"] == "code"]
    out = []
    for k in range(n):
        nb = copy.deepcopy(source)
        cell = nb["cells"][answers[k % len(answers)]]
        cell["source"] = "".join(cell["source"]) + f"\n# student {k}\n"
        out.append(nb)
    return out


def block(exporter_class, pages: list[dict], name: str) -> float:
    started = time.process_time()
    for nb in pages:
        feedback_page(exporter_class, nb, name)
    return (time.process_time() - started) / len(pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="a02_broadcasting")
    parser.add_argument("-n", type=int, default=30, help="pages per block")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    source = json.loads((REPO / "assignments" / "source" / args.assignment / f"{args.assignment}.ipynb").read_text())
    pages = students(source, args.n)
    paths = {"nbconvert": NbconvertPage, "feedback": SafeHTMLExporter}
    for exporter_class in paths.values():
        block(exporter_class, pages[:1], args.assignment)  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    for r in range(args.rounds):
        order = list(paths) if r % 2 == 0 else list(reversed(paths))
        for name in order:
            seconds[name].append(block(paths[name], pages, args.assignment))
    print(f"{args.assignment}: {args.n} pages per block, {args.rounds} rounds (CPU seconds per page)")
    for name, values in seconds.items():
        print(f"  {name:10s} min {min(values):.3f}  median {statistics.median(values):.3f}")
    print(f"  nbconvert / feedback (min): {min(seconds['nbconvert']) / min(seconds['feedback']):.1f}x")


if __name__ == "__main__":
    main()
