"""Grading throughput: N copies of one submission, graded with --jobs 1 and then --jobs 2.

    python benchmarks/bench_grading.py                          # 100 copies, first assignment of assignments/
    python benchmarks/bench_grading.py -n 20 --course tests/fixtures/toy_course
    python benchmarks/bench_grading.py --assignment a02_broadcasting --jobs 1,2,4
    python benchmarks/bench_grading.py --assignment a02_broadcasting --jobs 2 --baseline fe1c006

Paths compared, each in its own block (all its job counts, then the next path's), same run:
``sandbox`` (the real one: every exercise in a bubblewrap sandbox), ``unsafe`` (the same judge
with the sandboxes as plain subprocesses: what the sandbox itself costs) and, with
``--baseline REV``, the grading path of an earlier commit, run from a git worktree of it (its
own copy of this script, in a subprocess): what the whole change costs.

The submission is the assignment's source notebooks (solutions in), so every test cell runs. For
each job count the N copies are graded from scratch in a fresh copy of the course (its own
gradebook; released first, as `autograder release` does, not timed), through :func:`autograder.grade.grade`, the
same code as ``autograder grade``. A warm-up grading of two copies first starts the worker
forkserver and fills the OS caches, so neither timed run pays for that. Reported: wall time,
seconds per submission, and the speed-up of each job count over the first.

A course folder without ``nbgrader_config.py`` (the toy fixture) borrows the course's
``assignments/nbgrader_config.py``; the toy fixture's hidden checks are found through
``--exercises`` (default: the ``exercises/`` folder next to the course's ``source/``, if any).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.course import Course  # noqa: E402
from autograder.grade import Limits, grade  # noqa: E402
from autograder.release import add_release_files  # noqa: E402

TIMESTAMP = "2026-01-01 00:00:00.000000 UTC"


def scratch_course(source_course: Path, assignment: str, root: Path, copies: int) -> Course:
    """A fresh course in ``root`` with ``copies`` students who all handed in the source notebooks."""
    root.mkdir(parents=True)
    config = source_course / "nbgrader_config.py"
    shutil.copy(config if config.exists() else REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(source_course / "source" / assignment, root / "source" / assignment)
    course = Course.open(root)
    result = course.api().generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        sys.exit(f"generate_assignment failed:\n{result.get('log')}")
    add_release_files(course, assignment)  # the course kit, if the notebooks use it, as `release` does
    notebooks = sorted(course.source_dir(assignment).glob("*.ipynb"))
    for i in range(copies):
        folder = course.submitted_dir(f"student{i:03d}", assignment)
        folder.mkdir(parents=True)
        for notebook in notebooks:
            shutil.copy(notebook, folder)
        (folder / "timestamp.txt").write_text(TIMESTAMP)
    return course


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--course", default=str(REPO / "assignments"), help="course folder holding source/")
    parser.add_argument("--assignment", help="default: the first one in source/")
    parser.add_argument("-n", type=int, default=100, help="number of submissions (default: %(default)s)")
    parser.add_argument("--jobs", default="1,2", help="job counts to compare (default: %(default)s)")
    parser.add_argument("--exercises", help="folder of hidden-check modules ($AUTOGRADER_EXERCISES)")
    parser.add_argument("--paths", default="sandbox,unsafe", help="grading paths to time (default: %(default)s)")
    parser.add_argument("--baseline", help="also time the grading path of this git revision (a worktree of it)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one JSON line: for --baseline
    args = parser.parse_args()

    source_course = Path(args.course).resolve()
    assignments = sorted(p.name for p in (source_course / "source").glob("*") if any(p.glob("*.ipynb")))
    if not assignments:
        sys.exit(f"no assignments in {source_course / 'source'}; try --course tests/fixtures/toy_course")
    assignment = args.assignment or assignments[0]
    exercises = args.exercises or (source_course / "exercises")
    if Path(exercises).is_dir():
        os.environ["AUTOGRADER_EXERCISES"] = str(Path(exercises).resolve())
    job_counts = [int(j) for j in args.jobs.split(",")]

    print(f"grading {args.n} copies of {assignment} (source notebooks) from {source_course}")
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    results: dict[str, dict[int, float]] = {}
    if args.baseline:
        results[f"baseline {args.baseline}"] = baseline(args, assignment)
    for path in args.paths.split(","):
        results[path] = time_path(source_course, assignment, args.n, job_counts, unsafe=(path == "unsafe"))

    print(f"\n{'path':<22}" + "".join(f"{'--jobs ' + str(j):>16}" for j in job_counts)
          + "   (wall s, s per submission)")
    for path, times in results.items():
        print(f"{path:<22}" + "".join(f"{times[j]:8.1f} {times[j] / args.n:6.2f}s" for j in job_counts))
    first = next(iter(results))
    for path in list(results)[1:]:
        print(f"{path} / {first}: " + ", ".join(f"--jobs {j}: {results[path][j] / results[first][j]:.2f}x"
                                                for j in job_counts))
    print(json.dumps({"assignment": assignment, "n": args.n, "seconds": results}))


def time_path(source_course: Path, assignment: str, n: int, job_counts: list[int], unsafe: bool) -> dict[int, float]:
    """Wall seconds to grade n copies with each job count, after a warm-up of two copies."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        warm = scratch_course(source_course, assignment, Path(tmp) / "warm-up", 2)
        grade(warm, assignment, jobs=1, progress=False, unsafe=unsafe)
        for jobs in job_counts:
            course = scratch_course(source_course, assignment, Path(tmp) / f"jobs{jobs}", n)
            started = time.perf_counter()
            outcomes = grade(course, assignment, jobs=jobs, limits=Limits(), progress=True, unsafe=unsafe)
            elapsed = time.perf_counter() - started
            failed = [o.student for o in outcomes if o.status != "graded"]
            scores = sorted({o.score for o in outcomes if o.score is not None})
            results[jobs] = elapsed
            print(f"{'unsafe' if unsafe else 'sandbox'} --jobs {jobs}: {elapsed:7.1f} s for {len(outcomes)} "
                  f"submissions, {elapsed / len(outcomes):5.2f} s each; scores {scores}; failed: {len(failed)}",
                  flush=True)
    return results


def baseline(args, assignment: str) -> dict[int, float]:
    """Time an earlier commit's grading path: its own bench script, in a worktree, in a subprocess."""
    import subprocess
    tree = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), args.baseline],
                   check=True, capture_output=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        command = [sys.executable, str(tree / "benchmarks" / "bench_grading.py"), "--assignment", assignment,
                   "-n", str(args.n), "--jobs", args.jobs, "--course", str(tree / "assignments")]
        out = subprocess.run(command, env=env, cwd=tree, check=True, capture_output=True, text=True).stdout
        print("\n".join(f"baseline | {line}" for line in out.splitlines()[:-1]), flush=True)
        seconds = json.loads(out.splitlines()[-1])["seconds"]
        return {int(j): float(t) for j, t in seconds.items()}
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)


if __name__ == "__main__":  # required: grading workers come from a multiprocessing forkserver
    main()
