"""A small class at once on the real hub (issue 33): five students, half a minute per shape
(benchmarks/bench_class.py's harness; `make bench-class` is the full sweep, never a timed test).

What it asserts: no request, cell or instructor command failed (the hub starts two servers at once,
and the students past that wait on its 429 page, which tries again by itself); every submission the students made is
in the exchange and each student's latest is collected, once; the idle culler stops the idle servers
and the students' files stay (a student who comes back finds their notebook through their new
server); the run's users are gone, and no file of theirs is left anywhere it looks (the repository
included). Times are printed, never asserted.
"""
from __future__ import annotations

import asyncio
import pwd
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder.course.directory import Course

from support import REPO
from support.hub import Hub, remove_owned_by

sys.path.insert(0, str(REPO / "benchmarks"))
import bench_class  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

CULL_TIMEOUT, CULL_EVERY, ACTIVITY = 90, 15, 15  # seconds: short enough to see, long enough for a shape's gaps


async def culled_and_kept(site: Hub, students: list[bench_class.Student]) -> dict:
    """After the deadline: the class goes quiet and the instructor grades; the culler stops every server;
    each student's last submitted notebook is still in their home; one comes back and opens it."""
    grading = asyncio.create_task(asyncio.to_thread(site.instructor_command, "grade", bench_class.ASSIGNMENT,
                                                    "--jobs", "1", timeout=1800))
    for s in students:
        if s.ws is not None:
            await s.ws.close()  # the tab closed; the server and kernel stay until culled
            s.ws = None
    began, running = time.monotonic(), {s.user for s in students}
    while running and time.monotonic() - began < CULL_TIMEOUT + CULL_EVERY + ACTIVITY + 240:
        for s in students:
            if s.user in running and not (await s.request("GET", f"/hub/api/users/{s.user}")).get("servers"):
                running.discard(s.user)
        await asyncio.sleep(1)  # a poll, not a wait: the culler's own period sets when they go
    culled_after = time.monotonic() - began
    kept = {}
    for s in students:
        path = site.home(s.user) / bench_class.ASSIGNMENT / f"{bench_class.ASSIGNMENT}.ipynb"
        kept[s.user] = path.is_file() and bool(s.submitted) and s.submitted[-1] in path.read_text()
    back = students[0]
    await back.spawn()
    reopened = await back.request("GET", f"/user/{back.user}/api/contents/{bench_class.ASSIGNMENT}/"
                                         f"{bench_class.ASSIGNMENT}.ipynb")
    graded = await grading
    with Course.open(site.course).gradebook() as gb:
        recorded = sorted(sub.student.id for sub in gb.find_assignment(bench_class.ASSIGNMENT).submissions)
    return {"still running": sorted(running), "culled within s": culled_after, "kept": kept,
            "reopened": back.submitted[-1] in str(reopened["content"]), "grade": graded.returncode,
            "grade log": graded.stdout[-2000:] + graded.stderr[-2000:], "recorded": recorded}


def test_five_students_through_the_lecture_the_lab_and_the_deadline(hub_install, capsys):
    root = Path(tempfile.mkdtemp(prefix="class-load-"))
    root.chmod(0o755)  # every user's server reads the hub's configuration under it
    try:
        # Two servers start at once, and the five arrive within 1.2 s, less than a server takes to start
        # (seconds: it imports Jupyter's server), so the third meets the hub's 429 page while two are
        # pending; every browser must get in without a reload by hand.
        minutes = {**dict.fromkeys(bench_class.SHAPES, 0.5), "lecture": 0.02}
        result = bench_class.run_class(5, minutes, root, cull_timeout=CULL_TIMEOUT,
                                       cull_every=CULL_EVERY, activity_interval=ACTIVITY, spawn_limit=2,
                                       after=culled_and_kept, install=False)  # hub_install did, once for the run
    finally:
        shutil.rmtree(root, ignore_errors=True)
    with capsys.disabled():
        print("\n" + bench_class.table([result]))
        print(f"files of the run's users removed after userdel: {result['files removed by hand'][:10]}")
        print(f"the hub's 429 page waited out by the students' browsers: {result['429 pages waited out']} times")

    assert result["errors"] == []
    assert result["429 pages waited out"] >= 1, "no student met the spawn limit: the page's own retry went untried"
    submissions = result["submissions"]
    assert submissions["students who submitted"] == submissions["collected"] == 5, submissions
    assert submissions["made"] == submissions["in exchange"] >= 6, submissions  # a third submit twice
    assert submissions["exchange matches students"], submissions
    assert submissions["missing"] == submissions["duplicated"] == submissions["stale"] == [], submissions
    assert submissions["strangers"] == [], submissions
    for shape in bench_class.SHAPES:
        assert result["steps"][shape]["cell" if shape != "deadline" else "submit"]["n"] >= 5, result["steps"]

    after = result["after"]
    assert after["still running"] == [], after
    assert all(after["kept"].values()) and after["reopened"], after
    assert after["grade"] == 0, after["grade log"]
    assert len(after["recorded"]) == 5, after  # one gradebook submission per student

    for user in result["users"]:
        with pytest.raises(KeyError):
            pwd.getpwnam(user)
    assert remove_owned_by(set(result["uids"]), [REPO, Path("/tmp"), Path("/var/tmp"),
                                                                Path("/dev/shm")]) == []
