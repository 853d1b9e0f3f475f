"""autograder grade --scheduler: grading on a Dask cluster gives what local grading gives.

A scheduler and two workers on 127.0.0.1, started and stopped by the test (by PID): one worker
under a nanny (non-daemonic, as the docs say), one without. A few a02 submissions, one of them
hostile, are graded locally in one course and on the cluster in a copy of it, with one worker
killed (kill -9) while it grades; then the per-cell grades must be identical, every student
recorded once, and a local rerun must find nothing left to grade.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from autograder.course import CourseError
from autograder.course.directory import Course
from autograder.grading import executors
from autograder.grading.record import Ledger

from support.course import autograder, table

distributed = pytest.importorskip("distributed")

from support.attacks import ASSIGNMENT, NOTEBOOK, REPO, submissions  # noqa: E402

pytestmark = [pytest.mark.xdist_group("dask"), pytest.mark.slow]

STUDENTS = ["alice", "frank", "pat", "atk-forged-result", "atk-gradebook"]  # controls, a broken op, attacks


def _start(command: list[str], log: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), **executors.QUIET_DASK, **env})


def _stop(processes: list[subprocess.Popen]) -> None:
    """SIGKILL each process started here and everything below it (found before anything is killed)."""
    found: list[psutil.Process] = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(process.pid)
            found += [root, *root.children(recursive=True)]
    for p in found:
        with contextlib.suppress(psutil.Error):
            p.kill()
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)


def _certificates(folder: Path) -> dict[str, str]:
    """The cluster's CA and certificates, as deploy/dask.md makes them (deploy/dask_certs.py)."""
    assert subprocess.run([sys.executable, str(REPO / "deploy" / "dask_certs.py"), str(folder)],
                          capture_output=True).returncode == 0
    return {name: str(folder / name) for name in ("ca.pem", "cluster.pem", "cluster.key", "client.pem", "client.key")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(scheduler address, the nanny's process, the nanny-less worker's process, the grader's TLS
    flags): a cluster that takes only connections with a certificate of its CA."""
    logs = tmp_path_factory.mktemp("dask")
    certs = _certificates(logs / "certs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tls://127.0.0.1:{port}"
    tls = ["--tls-ca-file", certs["ca.pem"], "--tls-cert", certs["cluster.pem"], "--tls-key", certs["cluster.key"]]
    dask = [sys.executable, "-m"]
    started: list[subprocess.Popen] = []
    try:
        started.append(_start([*dask, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--protocol", "tls", *tls, "--no-dashboard"], logs / "scheduler.log"))
        worker = [*dask, "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard",
                  "--host", "127.0.0.1", *tls]
        started.append(_start([*worker, "--nanny"], logs / "nanny.log"))  # QUIET_DASK: a non-daemonic worker
        started.append(_start([*worker, "--no-nanny"], logs / "worker.log"))
        grader = ["--tls-ca-file", certs["ca.pem"], "--tls-cert", certs["client.pem"], "--tls-key", certs["client.key"]]
        with distributed.Client(address, timeout=120, security=_security(certs["client.pem"], certs)) as client:
            client.wait_for_workers(2, timeout=180)
        yield address, started[1], started[2], grader
    finally:
        _stop(started)


def _security(cert: str, certs: dict[str, str]):
    from distributed.security import Security
    return Security(tls_ca_file=certs["ca.pem"], tls_client_cert=cert, tls_client_key=cert.replace(".pem", ".key"),
                    require_encryption=True)


def _course(root: Path) -> Course:
    root.mkdir(parents=True)
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(REPO / "assignments" / "source" / ASSIGNMENT, root / "source" / ASSIGNMENT)
    course = Course.open(root)
    # the release's leak scan is tests/grader/test_autograder_release.py's concern: here only the gradebook
    # entry and the released notebook are needed
    autograder(course, "release", ASSIGNMENT)
    assert (course.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").exists()
    return course


def _submit(course: Course, student: str, nb: dict | str) -> None:
    folder = course.submitted_dir(student, ASSIGNMENT)
    folder.mkdir(parents=True)
    (folder / f"{NOTEBOOK}.ipynb").write_text(nb if isinstance(nb, str) else json.dumps(nb))
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")


def _per_cell(course: Course) -> dict[str, dict[str, float | None]]:
    with course.gradebook() as gb:
        return {s.student.id: {g.name: g.auto_score for nb in s.notebooks for g in nb.grades}
                for s in gb.find_assignment(ASSIGNMENT).submissions}


def _rows(course: Course) -> dict[str, int]:
    with sqlite3.connect(course.db_url.removeprefix("sqlite:///")) as con:
        return {t: con.execute(f"select count(*) from {t}").fetchone()[0]
                for t in ("student", "submitted_assignment", "submitted_notebook", "grade")}


def _kill_a_worker_mid_task(nanny: subprocess.Popen, plain: subprocess.Popen, killed: list[int]) -> threading.Thread:
    """kill -9 the first worker process seen grading (its scratch folder exists)."""
    def workers() -> set[int]:
        with contextlib.suppress(psutil.Error):
            return {plain.pid, *(p.pid for p in psutil.Process(nanny.pid).children())}
        return {plain.pid}

    def watch() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            for folder in Path(tempfile.gettempdir()).glob(f"{executors.REMOTE_PREFIX}*"):
                with contextlib.suppress(OSError, ValueError):
                    pid = int((folder / "owner.pid").read_text())
                    if pid in workers() and (folder / "job" / "spec.json").exists():
                        time.sleep(1.0)  # well inside the task: its worker is judging exercises
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_cluster_grades_as_this_machine_does_even_when_a_worker_is_killed(cluster, tmp_path, capsys):
    address, nanny, plain, grader = cluster
    local, remote = _course(tmp_path / "local"), _course(tmp_path / "remote")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        released = json.loads((local.release_dir(ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text())
        cases = submissions(local, released, listener.getsockname()[1])
    for course in (local, remote):
        for student in STUDENTS:
            _submit(course, student, cases[student][0])

    assert autograder(local, "grade", ASSIGNMENT, "--jobs", "2") == 0
    capsys.readouterr()

    killed: list[int] = []
    watcher = _kill_a_worker_mid_task(nanny, plain, killed)
    assert autograder(remote, "grade", ASSIGNMENT, "--scheduler", address, *grader) == 0
    rows = table(capsys.readouterr().out)
    watcher.join(timeout=1)
    assert killed, "no worker was seen grading"
    assert {s: rows[s][1] for s in STUDENTS} == {s: "graded" for s in STUDENTS}

    # the same per-cell grades as on this machine, the expected totals, each student once
    assert _per_cell(remote) == _per_cell(local)
    totals = {s: sum(v or 0 for k, v in cells.items() if not k.endswith("-written"))
              for s, cells in _per_cell(remote).items()}
    assert totals == {s: cases[s][1] for s in STUDENTS}
    n = len(STUDENTS)
    assert _rows(remote) == _rows(local) and _rows(remote)["submitted_assignment"] == n
    assert Ledger(remote, ASSIGNMENT).failures() == {}
    for student in STUDENTS:
        autograded = json.loads((remote.autograded_dir(student, ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text())
        expected = json.loads((local.autograded_dir(student, ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_text())
        assert [c.get("outputs") for c in autograded["cells"]] == [c.get("outputs") for c in expected["cells"]]

    # the killed worker's scratch folder is reaped by the next task or, when it was killed during
    # the last tasks, by the next connect: a later run on the cluster (one student regraded)
    assert autograder(remote, "grade", ASSIGNMENT, "--scheduler", address, *grader, "--force",
                      "--students", STUDENTS[0]) == 0
    capsys.readouterr()
    assert not [f for f in Path(tempfile.gettempdir()).glob(f"{executors.REMOTE_PREFIX}*")
                if f.joinpath("owner.pid").exists() and f.joinpath("owner.pid").read_text() == str(killed[0])]

    # a later local run grades nothing again
    assert autograder(remote, "grade", ASSIGNMENT, "--jobs", "2") == 0
    rows = table(capsys.readouterr().out)
    assert {s: rows[s][1] for s in STUDENTS} == {s: "already graded" for s in STUDENTS}
    assert _rows(remote)["submitted_assignment"] == n


def test_the_class_report_of_an_assignment_graded_on_the_cluster(cluster, tmp_path, capsys):
    """What the class got wrong (issue 32), from verdicts a Dask worker's judge gave: two students
    with one mutant of unbroadcast, one with another, one correct; ranked with their students."""
    from autograder.mutants import load_mutants

    from support.classes import source_notebooks, with_variant

    address, _, _, grader = cluster
    course = _course(tmp_path / "course")
    mutants = {m.id: m for m in load_mutants(ASSIGNMENT)}
    x = with_variant(ASSIGNMENT, mutants["unbroadcast-axis0-only"])[NOTEBOOK]
    y = with_variant(ASSIGNMENT, mutants["unbroadcast-leading-axes-only"])[NOTEBOOK]
    for student, nb in (("xena", x), ("xavier", x), ("yuri", y), ("zoe", source_notebooks(ASSIGNMENT)[NOTEBOOK])):
        _submit(course, student, nb)
    assert autograder(course, "grade", ASSIGNMENT, "--scheduler", address, *grader) == 0
    assert autograder(course, "report", ASSIGNMENT) == 0
    capsys.readouterr()
    report = json.loads((course.reports_dir(ASSIGNMENT) / "class_report.json").read_text())
    groups = {e["exercise"]: [(g["kind"], g["students"]) for g in e["groups"]] for e in report["exercises"]}
    assert groups["a02-unbroadcast"] == [("bug", ["xavier", "xena"]), ("bug", ["yuri"])]
    assert all(not found for exercise, found in groups.items() if exercise != "a02-unbroadcast")
    unbroadcast = next(e for e in report["exercises"] if e["exercise"] == "a02-unbroadcast")
    assert "you summed only axis 0" in unbroadcast["groups"][0]["what"]


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path, capsys):
    course = _course(tmp_path / "course")
    _submit(course, "alice", "{}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    assert autograder(course, "grade", ASSIGNMENT, "--scheduler", f"tcp://127.0.0.1:{port}",
                      "--single-user-machine") == 2
    assert f"cannot reach the Dask scheduler tcp://127.0.0.1:{port}" in capsys.readouterr().err


def test_no_one_without_a_certificate_of_the_cluster_reaches_it(cluster, tmp_path, capsys):
    """A scheduler without TLS is refused unless the instructor says the machine is theirs alone;
    the cluster refuses a client without a certificate, or with one of another CA: no code of
    theirs runs on its workers."""
    address, _, _, grader = cluster
    course = _course(tmp_path / "course")
    _submit(course, "alice", "{}")
    assert autograder(course, "grade", ASSIGNMENT, "--scheduler", address.replace("tls://", "tcp://")) == 2
    assert "refusing the unauthenticated Dask scheduler" in capsys.readouterr().err
    assert autograder(course, "grade", ASSIGNMENT, "--scheduler", address) == 2
    assert "pass --tls-ca-file, --tls-cert, --tls-key" in capsys.readouterr().err

    stranger = _certificates(tmp_path / "another-ca")
    for attempt in (lambda: distributed.Client(address.replace("tls://", "tcp://"), timeout=5),
                    lambda: distributed.Client(address, timeout=5, security=_security(stranger["client.pem"], {
                        **stranger, "ca.pem": grader[1]}))):
        with pytest.raises((OSError, TimeoutError)):
            client = attempt()
            client.run(os.getpid)  # not reached: were it, this would run on every worker
    # TLS that trusts the cluster but shows no certificate of its own: the scheduler ends it
    host, port = address.removeprefix("tls://").split(":")
    context = ssl.create_default_context(cafile=grader[1])
    context.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw) as tls, pytest.raises(ssl.SSLError):  # certificate required, or EOF
        tls.sendall(b"\0" * 64)
        tls.recv(1)


# -- the worker's side and the client's checks, without a cluster -----------------------------------

def test_a_worker_without_a_sandbox_refuses_unless_unsafe(monkeypatch):
    import autograder.judge.session as sessions

    monkeypatch.setattr(sessions, "probe", lambda unsafe=False: "bubblewrap (bwrap) is not installed")
    with pytest.raises(CourseError, match="cannot make a sandbox for student code on worker .*bwrap.*--unsafe"):
        executors.grade_remote({"unsafe": False}, {})

    reasons = {"tcp://10.0.0.1:1": None, "tcp://10.0.0.2:1": "bubblewrap (bwrap) is not installed"}
    with pytest.raises(CourseError, match=r"on 1 of 2 Dask workers \(tcp://10.0.0.2:1: bubblewrap"):
        executors.refuse_without_sandbox("tcp://s:1", reasons, unsafe=False)
    executors.refuse_without_sandbox("tcp://s:1", reasons, unsafe=True)
    with pytest.raises(CourseError, match="has no workers"):
        executors.refuse_without_sandbox("tcp://s:1", {}, unsafe=True)


def _reply(**change) -> dict:
    notebook = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()
    reply = {"result": {"success": True, "notebooks": {"a": {}}, "repairs": [], "unreadable": {}},
             "notebooks": {"a.ipynb": notebook}, "failure": "", "log": "", "seconds": 1.5, "host": "w"}
    reply.update(change)
    return reply


@pytest.mark.parametrize("change, says", [
    ({"notebooks": {"../../etc/passwd": b"{}"}}, "a notebook the assignment does not have"),
    ({"notebooks": {"a.ipynb": b"{ not json"}}, "a.ipynb is not a valid notebook"),
    ({"notebooks": {"a.ipynb": "text"}}, "a.ipynb is not bytes"),
    ({"notebooks": {"a.ipynb": b" " * (executors.MAX_GRADED_NOTEBOOK_BYTES + 1)}}, "a.ipynb is not bytes of at most"),
    ({"result": {"success": "yes", "notebooks": {}}}, "does not say success"),
    ({"result": {"success": True, "notebooks": {}, "unreadable": {"a": 3}}}, "unreadable"),
    ({"seconds": "soon"}, "seconds"),
    ({"log": None}, "log"),
])
def test_a_malformed_reply_is_refused_with_what_is_wrong(change, says):
    assert executors.accept(_reply(), {"a.ipynb"})[0] is not None
    with pytest.raises(executors.MalformedReply, match=says):
        executors.accept(_reply(**change), {"a.ipynb"})
    with pytest.raises(executors.MalformedReply, match="not a dict"):
        executors.accept(["a"], {"a.ipynb"})


def test_files_are_unpacked_inside_the_course_only(tmp_path):
    executors.unpack({"a/b.txt": b"x"}, tmp_path)
    assert (tmp_path / "a" / "b.txt").read_bytes() == b"x"
    for rel in ("../escape.txt", "/etc/escape.txt", "a/../../escape.txt"):
        with pytest.raises(ValueError, match="outside the course"):
            executors.unpack({rel: b"x"}, tmp_path / "a")
    assert not (tmp_path / "escape.txt").exists()


def test_the_deployment_guide_gives_every_worker_setting_the_tests_and_benchmark_use():
    guide = (REPO / "deploy" / "dask.md").read_text()
    assert all(f"{name}={value}" in guide for name, value in executors.QUIET_DASK.items()), \
        [name for name, value in executors.QUIET_DASK.items() if f"{name}={value}" not in guide]
