"""``--db postgresql://...``: the whole instructor loop on a PostgreSQL gradebook, as a large course runs it.

A throwaway PostgreSQL server is started for the test from Debian's packages (``make test``
installs them when missing): its own data folder, a Unix socket only (no TCP port), trust
authentication, stopped at the end. The server refuses to run as root, so under root it runs as
the ``postgres`` user the package creates.
"""

import glob
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from autograder.course.directory import Course

from support.course import (
    ASSIGNMENT,
    SOLUTIONS,
    autograder,
    make_course,
    scores,
    source_notebook,
    submit,
    table,
    use_toy_catalogue,
    with_solution,
)

pytestmark = [pytest.mark.xdist_group("autograder"), pytest.mark.slow]


def _server_binary(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    assert found[-1], f"PostgreSQL's {name} is not installed: `make test` installs Debian's postgresql package"
    return found[-1]


@pytest.fixture(scope="module")
def postgres_url():
    as_server = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data = Path(tempfile.mkdtemp(prefix="autograder-pg-"))  # in /tmp: the postgres user must reach it
    if as_server:
        shutil.chown(data, "postgres", "postgres")
    run = lambda *cmd: subprocess.run([*as_server, *cmd], check=True, capture_output=True, text=True)  # noqa: E731
    run(_server_binary("initdb"), "-D", str(data / "db"), "-U", "postgres", "--auth=trust", "--no-sync")
    run(_server_binary("pg_ctl"), "-D", str(data / "db"), "-l", str(data / "server.log"), "-w", "-t", "60",
        "-o", f"-c listen_addresses='' -c unix_socket_directories='{data}' -c fsync=off", "start")
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={data}"
    finally:
        run(_server_binary("pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)


def test_release_grade_report_feedback_on_postgresql(postgres_url, tmp_path, monkeypatch, capsys):
    use_toy_catalogue(monkeypatch)
    course = make_course(tmp_path / "course")
    db = ["--db", postgres_url]
    assert autograder(course, *db, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS)) == 0
    assert not (course.root / "gradebook.db").exists()  # nothing went to the default SQLite file

    submit(course, "alice", source_notebook())
    submit(course, "bob", with_solution("a00-add", "def add(x, y):\n    return x - y\n"))
    submit(course, "carol", "{ not json")
    assert autograder(course, *db, "grade", ASSIGNMENT, "--jobs", "2") == 0
    rows = table(capsys.readouterr().out)
    assert rows["alice"][:2] == ["6/7", "graded"] and rows["bob"][:2] == ["3/7", "graded"]
    assert rows["carol"][:2] == ["0/7", "graded"] and "could not be read as a notebook" in rows["carol"][2]
    assert scores(Course.open(course.root, postgres_url), "alice") == {"a00-add-visible": 1, "a00-add-hidden": 2,
                                       "a00-square-backward-visible": 1, "a00-square-backward-hidden": 2,
                                       "a00-square-backward-written": None}

    # a rerun regrades only what is not done (nothing), then the rest of the loop reads PostgreSQL too
    assert autograder(course, *db, "grade", ASSIGNMENT) == 0
    rows = table(capsys.readouterr().out)
    assert rows["alice"][1] == rows["bob"][1] == rows["carol"][1] == "already graded"
    assert autograder(course, *db, "feedback", ASSIGNMENT) == 0
    assert (course.feedback_dir("bob", ASSIGNMENT) / "a00_toy.html").is_file()
    assert autograder(course, *db, "report", ASSIGNMENT) == 0
    grades = (course.reports_dir(ASSIGNMENT) / "grades.csv").read_text()
    assert "alice" in grades and "bob" in grades
    # the instructor's page reads the same gradebook: bob's bug and carol's unreadable notebook
    report = json.loads((course.reports_dir(ASSIGNMENT) / "class_report.json").read_text())
    groups = {e["exercise"]: [(g["kind"], g["students"]) for g in e["groups"]] for e in report["exercises"]}
    assert groups["a00-add"] == [("bug", ["bob"]), ("unreadable notebook", ["carol"])]
    assert groups["a00-square-backward"] == [("unreadable notebook", ["carol"])]
    assert report["course"]["scores"]["alice"] == {ASSIGNMENT: [6, 7]}
