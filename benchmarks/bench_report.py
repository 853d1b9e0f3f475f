"""The instructor's page for a large class: ``autograder report`` on N students of one assignment.

    python benchmarks/bench_report.py                    # 300 students of a02_broadcasting, 2 rounds
    python benchmarks/bench_report.py -n 60 --rounds 3

The class is made from the course's catalogue (tests/support/classes.py) and recorded as ``grade``
records it (not timed): for each student and exercise, the model answer (half of them in one of
the catalogue's other styles), a mutant (the real judge's message, judged once per mutant), or the
stub left unanswered; 5 % of the students hand in a disguised copy of another's notebook (names,
comments, spacing, statement order). Then ``report`` runs ``--rounds`` times in a row, whole
(gradebook, statistics, similarity, figures, pages, data); reported: each round's wall time, the
minimum, and the similarity's share of it (timed alone in a block of its own after the rounds).

Measured 2026-11-27 on the shared 2-core machine (load average 7-13 from other sessions), 300
students of a02_broadcasting, 16 exercises: recording the class 1,412 s (not timed below, at load
13-18); ``report`` 86.9 s cold, 42.9 s warm (min of 2 rounds); the similarity alone 17.9 s for
44,850 pairs, most of it Pygments lexing each of the 4,510 answers once (copydetect's tokenizer).
Those figures predate issue 37's similarity (Python tokens made canonical, passages weighed by
their share of the class), not re-run here (recording the class alone takes 25 minutes); the
similarity alone on a convergent class of 300 (tests/grader/test_similarity_class.py) took about
20-30 s on the same loaded machine. This measures time; detection is measured by
tests/grader/test_similarity_class.py and tests/grader/test_report_similarity.py.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from autograder import cli
from autograder.analytics import page, similarity
from autograder.commands.report import report
from autograder.course import notebook
from autograder.course.directory import Course
from autograder.mutants import load_mutants

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' helpers (tests/support/): not installed
from support.classes import (  # noqa: E402
    alternatives_by_exercise,
    disguise,
    judged,
    record_class,
    source_notebooks,
    unanswered,
    with_variant,
)


def make_class(assignment: str, n: int, seed: int) -> dict[str, dict]:
    rng = random.Random(seed)
    styles = alternatives_by_exercise(assignment)
    mutants: dict[str, list] = {}
    for m in load_mutants(assignment):
        mutants.setdefault(m.exercise, []).append(m)
    exercises = [notebook.grade_id(c) for nb in source_notebooks(assignment).values() for c in nb["cells"]
                 if c["cell_type"] == "code" and notebook.is_answer(c)]
    messages: dict[str, str] = {}
    students: dict[str, dict] = {}
    t = time.perf_counter()
    for i in range(n):
        nbs, verdicts = source_notebooks(assignment), {}
        for exercise in exercises:
            r = rng.random()
            if r < 0.25 and mutants.get(exercise):
                mutant = rng.choice(mutants[exercise])
                nbs = with_variant(assignment, mutant, nbs)
                if mutant.id not in messages:
                    messages[mutant.id] = judged(assignment, exercise, with_variant(assignment, mutant))
                verdicts[exercise] = (False, messages[mutant.id])
            elif r < 0.32:
                nbs = unanswered(assignment, exercise, nbs)
                key = f"stub:{exercise}"
                if key not in messages:
                    messages[key] = judged(assignment, exercise, unanswered(assignment, exercise))
                verdicts[exercise] = (False, messages[key])
            elif r < 0.66 and styles.get(exercise):
                nbs = with_variant(assignment, rng.choice(styles[exercise]), nbs)
        students[f"s{i:03d}"] = {"notebooks": nbs, "verdicts": verdicts}
    names = sorted(students)
    for copier in rng.sample(names, max(1, n // 20)):
        source = students[rng.choice([s for s in names if s != copier])]
        nbs = json.loads(json.dumps(source["notebooks"]))
        for nb in nbs.values():
            for cell in nb["cells"]:
                if cell["cell_type"] == "code" and notebook.is_answer(cell):
                    try:
                        cell["source"] = disguise(notebook.text(cell["source"]))
                    except SyntaxError:
                        pass
        students[copier] = {"notebooks": nbs, "verdicts": source["verdicts"]}
    print(f"class of {n}: {len(messages)} verdicts judged in {time.perf_counter() - t:.0f} s")
    return students


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--assignment", default="a02_broadcasting")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="build the course in this folder and keep it")
    args = parser.parse_args()

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    root = work / "course"
    if not (root / "gradebook.db").exists():
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
        shutil.copytree(REPO / "assignments" / "source" / args.assignment, root / "source" / args.assignment)
        assert cli.main(["--course", str(root), "release", args.assignment, "--due", "2026-11-20 10:00"]) == 0
        students = make_class(args.assignment, args.n, args.seed)
        t = time.perf_counter()
        record_class(Course.open(root), args.assignment, students, frozenset(list(students)[: args.n // 10]))
        print(f"recorded as grade records it in {time.perf_counter() - t:.0f} s")
    course = Course.open(root)
    times = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        paths = report(course, args.assignment)
        times.append(time.perf_counter() - t)
    data = json.loads((course.reports_dir(args.assignment) / "class_report.json").read_text())
    t = time.perf_counter()
    graded = [s["student"] for s in data["students"] if s["score"] is not None]
    answers, given, model = page.answers(course, args.assignment, graded)
    sim = similarity.compare_class(answers, given, model)
    similar = time.perf_counter() - t
    print(f"report of {len(graded)} students, {len(answers)} exercises: " + ", ".join(f"{x:.1f} s" for x in times)
          + f" (min {min(times):.1f} s); the similarity alone {similar:.1f} s ({sim.compared} pairs, "
          f"{len(sim.pairs)} listed, {len(sim.model)} answers close to the model); page {paths[0]}")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
