"""Feedback on submit: the time from a submission to its page in the exchange, with the grading service.

    python benchmarks/bench_serve.py                               # 10 students submit a02 within 60 s, --jobs 2
    python benchmarks/bench_serve.py -n 20 --over 60 --jobs 2 --looper

A scratch copy of the course (its ``nbgrader_config.py`` and the assignment's source), released
to a scratch exchange folder with ``autograder release --exchange`` (not timed); then ``-n``
students submit the assignment's source notebooks (every test cell runs) at even intervals over
``--over`` seconds, as records in the exchange's inbound/ made as nbgrader's Submit makes them, and
the service (:class:`autograder.commands.serve.Service`, the code of ``autograder serve``) runs in
this process. ``--looper``: one more student resubmits every second the whole time. Reported:
for each of the n students, seconds from their record to their page in the exchange's feedback/
(p50, p95, max); the CPU seconds of this process and its children (the grading workers and their
sandboxes) per graded submission, from a cgroup of the run's own when it can make one (root; else
from rusage, which misses the Python of every killed sandbox: "cpu_counted_from"); how many
gradings there were, and that each of the n students' final submission was graded exactly once.
No hub (tests/deploy and bench_class.py have it): the service's own latency, which the hub adds its
Fetch Feedback to.

Measured 2026-11-29, a02_broadcasting, --jobs 2, n = 10, 20, 40, on a 2-core machine shared with
other work (the load average printed with each run, 3-7): deploy/README.md, "The grading service"."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil

from autograder.commands.serve import Service, State
from autograder.course.directory import Course
from autograder.course.exchange import feedback_name

REPO = Path(__file__).resolve().parents[1]


def scratch(root: Path, assignment: str) -> Course:
    (root / "course" / "source").mkdir(parents=True)
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root / "course")
    shutil.copytree(REPO / "assignments" / "source" / assignment, root / "course" / "source" / assignment)
    (root / "exchange").mkdir()
    with open(root / "course" / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Exchange.root = {str(root / 'exchange')!r}\n")
    subprocess.run([sys.executable, "-m", "autograder", "--course", str(root / "course"), "release", assignment,
                    "--exchange"], check=True, stdout=subprocess.DEVNULL)
    return Course.open(root / "course")


def submit(course: Course, assignment: str, student: str) -> tuple[Path, str]:
    """A record as nbgrader's Submit makes it; returns it and its secret."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    inbound = Path(course.exchange_config().Exchange.root) / course.course_id / "inbound"
    staging = inbound / f".{student}.{secrets.token_hex(4)}"
    staging.mkdir()
    for nb in course.source_dir(assignment).glob("*.ipynb"):
        shutil.copy(nb, staging / nb.name)
    (staging / "timestamp.txt").write_text(stamp)
    secret = secrets.token_hex(64)
    (staging / "submission_secret.txt").write_text(secret)
    folder = inbound / f"{student}+{assignment}+{stamp}+{secrets.token_urlsafe(6)}"
    staging.rename(folder)  # whole, as one submission appears
    return folder, secret


def cpu_seconds() -> float:
    """CPU time of this process, of its children it has reaped, and of its live children (the workers'
    forkserver) with theirs: the grading workers and bubblewrap, reaped by the forkserver. Not the
    Python of a killed sandbox, which no process of ours reaps: about half of a grading's CPU (see
    benchmarks/bench_grading_cost.py). Only without a cgroup (:func:`counter`)."""
    own = os.times()
    total = own.user + own.system + own.children_user + own.children_system
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def counter():
    """A cgroup of this process tree's own if one can be made (root), else None (then
    :func:`cpu_seconds` counts, without the killed sandboxes' Python)."""
    from bench_grading_cost import Cgroup, CgroupUnavailable
    try:
        return Cgroup()
    except CgroupUnavailable:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", default="a02_broadcasting")
    parser.add_argument("-n", type=int, default=10, help="students (default: %(default)s)")
    parser.add_argument("--over", type=float, default=60, help="seconds over which they submit")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--looper", action="store_true", help="one more student resubmits every second")
    args = parser.parse_args()
    group = counter()
    root = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    try:
        course = scratch(root, args.assignment)
        notebook = course.notebooks(args.assignment)[0]
        outbound = Path(course.exchange_config().Exchange.root) / course.course_id / "feedback"
        service = Service(course, jobs=args.jobs)
        stop = threading.Event()
        sent: dict[str, tuple[float, str]] = {}
        answered: dict[str, float] = {}

        def students() -> None:
            for k in range(args.n):
                _, secret = submit(course, args.assignment, f"s{k:03d}")
                sent[f"s{k:03d}"] = (time.monotonic(), secret)
                stop.wait(args.over / max(1, args.n))

        def looper() -> None:
            while args.looper and not stop.is_set():
                submit(course, args.assignment, "looper")
                stop.wait(1)

        def watch() -> None:
            deadline = time.monotonic() + args.over + 900  # a submission never answered ends the run
            while len(answered) < args.n and not stop.is_set() and time.monotonic() < deadline:
                for student, (when, secret) in list(sent.items()):
                    if student not in answered and (outbound / feedback_name(secret, notebook)).exists():
                        answered[student] = time.monotonic() - when
                stop.wait(0.2)
            stop.set()

        threads = [threading.Thread(target=f) for f in (students, looper, watch)]
        cpu_seconds_now = group.cpu if group else cpu_seconds
        cpu = cpu_seconds_now()
        started = time.monotonic()
        for thread in threads:
            thread.start()
        service.run(0.5, stop=stop)
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        used = cpu_seconds_now() - cpu
        history = State(course).history
        counted = {s: sum(1 for _, who, _, _ in history if who == s) for s in sent}
        latencies = sorted(answered.values()) or [float("nan")]
        p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
        print(json.dumps({
            "assignment": args.assignment, "students": args.n, "over_s": args.over, "jobs": args.jobs,
            "looper": args.looper, "load_average": os.getloadavg()[0],
            "latency_s": {"p50": round(statistics.median(latencies), 1), "p95": round(p95, 1),
                          "max": round(latencies[-1], 1)},
            "answered": len(answered), "wall_s": round(wall, 1), "gradings": len(history),
            "looper_gradings": sum(1 for _, who, _, _ in history if who == "looper"),
            "cpu_s_per_grading": round(used / max(1, len(history)), 2),
            "cpu_counted_from": "cgroup" if group else "rusage",
            "each_graded_once": all(n == 1 for n in counted.values()),
        }, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if group:
            group.close()


if __name__ == "__main__":
    main()
