"""What the grading service's calls to ngshare cost (Kubernetes' exchange; issue 38).

A real JupyterHub 6.1.1 with ngshare 0.6.0 as its managed service on this machine (the tests'
harness, tests/support/ngshare.py; `make ngshare`), a class of ``--students`` each with
``--submissions`` submissions of a02 (its released notebook, posted through ngshare's API with the
student's own token, as the Assignments tab's plugin posts it). Then, with the grading service's
token and its own client (autograder.course.ngshare), in blocks after a warm-up:

* a look at the exchange: the listing of every submission of the assignment (the service does
  one per released assignment every ``--interval``, 2 s);
* a collect: one student's latest submission downloaded;
* a release: one feedback page of a02's size uploaded (the page carries MathJax: 3.74 MB).

Each is timed ``--rounds`` times; p50, p95 and max are printed with the machine's load, and what
ngshare's storage grows by per page. Usage: `python benchmarks/bench_ngshare.py [--students 40]`.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from autograder.course.ngshare import Ngshare as Client  # noqa: E402

from support.ngshare import COURSE, Ngshare  # noqa: E402

ASSIGNMENT = "a02_broadcasting"
PAGE_BYTES = int(3.74 * 2**20)  # a02's released feedback page, MathJax inside (deploy/README.md)


def percentiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (f"p50 {statistics.median(ordered) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   "
            f"max {ordered[-1] * 1000:7.1f} ms   (n={len(ordered)})")


def timed(call, rounds: int) -> list[float]:
    call()  # warm-up
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--submissions", type=int, default=3, help="per student")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    released = REPO / "assignments" / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    source = released if released.exists() else REPO / "assignments" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook = source.read_bytes()
    students = tuple(f"s{k:03d}" for k in range(args.students))
    with tempfile.TemporaryDirectory(prefix="bench-ngshare-") as root, \
            Ngshare(Path(root), students=students) as ngshare:
        files = json.dumps([{"path": f"{ASSIGNMENT}.ipynb", "content": base64.encodebytes(notebook).decode()}])
        release = requests.post(f"{ngshare.url}/assignment/{COURSE}/{ASSIGNMENT}", data={"files": files},
                                headers={"Authorization": f"token {ngshare.token(ngshare.instructor)}"}, timeout=60)
        assert release.ok, release.text
        for student in students:
            auth = {"Authorization": f"token {ngshare.token(student)}"}
            for _ in range(args.submissions):
                posted = requests.post(f"{ngshare.url}/submission/{COURSE}/{ASSIGNMENT}", data={"files": files},
                                       headers=auth, timeout=60)
                assert posted.ok, posted.text
        client = Client(ngshare.url, COURSE, token=ngshare.grader_token)
        listing = client.submissions(ASSIGNMENT)
        assert len(listing) == args.students * args.submissions
        latest = {student: stamp for student, stamp in sorted(listing)}
        one, stamp = students[0], latest[students[0]]
        storage = Path(root) / "ngshare-files"
        page = {ASSIGNMENT: os.urandom(PAGE_BYTES // 2).hex().encode()[:PAGE_BYTES]}
        before = sum(p.stat().st_size for p in storage.iterdir())
        looks = timed(lambda: client.submissions(ASSIGNMENT), args.rounds)
        downloads = timed(lambda: client.download(ASSIGNMENT, one, stamp, 2**30), args.rounds)
        uploads = timed(lambda: client.release_feedback(ASSIGNMENT, one, stamp, page), args.rounds)
        grown = sum(p.stat().st_size for p in storage.iterdir()) - before
    load = os.getloadavg()
    print(f"ngshare 0.6.0 behind JupyterHub 6.1.1 on this machine ({os.cpu_count()} CPUs, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end); {args.students} students x {args.submissions} "
          f"submissions of {ASSIGNMENT} ({len(notebook) / 1024:.0f} KiB each); blocks of {args.rounds} after a warm-up")
    print(f"  a look (every submission listed, {len(listing)} rows):  {percentiles(looks)}")
    print(f"  a collect (one submission downloaded):         {percentiles(downloads)}")
    print(f"  a release (a {PAGE_BYTES / 2**20:.2f} MB page uploaded):       {percentiles(uploads)}")
    print(f"  ngshare's storage after {args.rounds + 1} uploads of the same submission's page: +{grown / 2**20:.1f} MB "
          "(a page replaced is not removed from its disk)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
