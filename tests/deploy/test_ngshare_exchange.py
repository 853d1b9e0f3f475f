"""The ngshare harness (support/ngshare.py) is the real thing: a JupyterHub with ngshare 0.6.0 as its
managed service, students playing their servers with nbgrader's ngshare plugin (ngshare_exchange,
what the Assignments tab runs on Kubernetes), and the grading service's own hub identity.

What the grading service will rely on is asserted here as ngshare answers it: who may list a
course's submissions, what its timestamps look like, which of them POST /feedback takes, and where
nbgrader's fetch_feedback then puts the page. No root, no grader: about 20 s on 2 cores.
"""
import base64
import json
import re
from datetime import datetime, timezone

import nbformat
import pytest
import requests

from support import ngshare as harness
from support.ngshare import COURSE, Ngshare

ASSIGNMENT = "a00_tiny"
# ngshare's timestamps: UTC, to the microsecond, without a zone (SQLite gives the stored time back naive)
NGSHARE_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}")


def auth(token: str) -> dict:
    return {"Authorization": f"token {token}"}


def released(course_root, assignment: str) -> None:
    """The instructor's ``release/<assignment>/``: one notebook, as `nbgrader generate_assignment` leaves it."""
    folder = course_root / "release" / assignment
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Set `answer`."), nbformat.v4.new_code_cell("answer = None")]
    nbformat.write(nb, folder / "tiny.ipynb")
    (course_root / "nbgrader_config.py").write_text(f'c = get_config()  # noqa: F821\n'
                                                    f'c.CourseDirectory.course_id = "{COURSE}"\n')


@pytest.mark.slow
def test_a_submission_travels_through_ngshare_and_its_feedback_comes_back(tmp_path):
    with Ngshare(tmp_path) as ngshare:
        instr = ngshare.instructor
        homes = {user: tmp_path / "home" / user for user in (instr, "alice", "bob")}
        course = homes[instr] / "course"
        released(course, ASSIGNMENT)
        done = ngshare.run(instr, homes[instr], "-m", "nbgrader", "release_assignment", ASSIGNMENT, cwd=course)
        assert done.returncode == 0 and "Successfully released" in done.stderr, done.stderr
        listed = requests.get(f"{ngshare.url}/assignments/{COURSE}", headers=auth(ngshare.token("alice")), timeout=30)
        assert listed.json() == {"success": True, "assignments": [ASSIGNMENT]}
        # no role is needed for it: ngshare asks the hub whose a token is, which any token may; one with
        # JupyterHub's default scopes of a server's token (its `server` role) lists the same
        server_token = ngshare.token("alice", scopes=["users:activity!user=alice", "access:servers!server=alice/"])
        listed = requests.get(f"{ngshare.url}/assignments/{COURSE}", headers=auth(server_token), timeout=30)
        assert listed.json() == {"success": True, "assignments": [ASSIGNMENT]}

        for step in ("fetch_assignment", "submit"):
            done = ngshare.run("alice", homes["alice"], "-m", "nbgrader", step, ASSIGNMENT)
            assert done.returncode == 0, f"{step}: {done.stderr}"
        said = re.search(rf"Submitted as: {COURSE} {ASSIGNMENT} (.+)", done.stderr)
        assert said, done.stderr

        # the grading service's token lists the course's submissions: alice's, at ngshare's own time
        r = requests.get(f"{ngshare.url}/submissions/{COURSE}/{ASSIGNMENT}", headers=auth(ngshare.grader_token),
                         timeout=30)
        assert r.status_code == 200, r.text
        [submission] = r.json()["submissions"]
        assert submission["student_id"] == "alice"
        stamp = submission["timestamp"]
        assert NGSHARE_TIME.fullmatch(stamp), stamp
        assert stamp == said.group(1)  # what submit printed, and the name of alice's cached copy
        cache = homes["alice"] / ".local" / "share" / "jupyter" / "nbgrader_cache" / COURSE
        assert (cache / f"alice+{ASSIGNMENT}+{stamp}").is_dir()
        age = datetime.now(timezone.utc).replace(tzinfo=None) - datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f")
        assert 0 <= age.total_seconds() < 120, f"{stamp} is not UTC now"
        # and downloads it, by that timestamp: the notebook alice submitted
        r = requests.get(f"{ngshare.url}/submission/{COURSE}/{ASSIGNMENT}/alice", headers=auth(ngshare.grader_token),
                         params={"timestamp": stamp}, timeout=30)
        [notebook] = r.json()["files"]
        assert notebook["path"] == "tiny.ipynb"
        assert base64.b64decode(notebook["content"]) == (homes["alice"] / ASSIGNMENT / "tiny.ipynb").read_bytes()
        # its hub token has no role: it is somebody to ngshare, nobody to the hub
        hub_users = requests.get(f"{ngshare.hub_api}/users", headers=auth(ngshare.grader_token), timeout=30)
        assert hub_users.status_code == 403

        # another student sees neither the list nor alice's feedback
        bob = auth(ngshare.token("bob"))
        r = requests.get(f"{ngshare.url}/submissions/{COURSE}/{ASSIGNMENT}", headers=bob, timeout=30)
        assert (r.status_code, r.json()["success"]) == (403, False)
        r = requests.get(f"{ngshare.url}/feedback/{COURSE}/{ASSIGNMENT}/alice", headers=bob, timeout=30,
                         params={"timestamp": stamp})
        assert r.status_code == 403
        # a token the hub does not know is no 401 or 403 here: the submissions' endpoints fail with an HTML
        # 500 (ngshare reads the missing user's id), the others redirect to the hub's OAuth log-in, which
        # followed on ngshare's own port is a 404
        unknown = auth("0" * 64)
        r = requests.get(f"{ngshare.url}/submissions/{COURSE}/{ASSIGNMENT}", headers=unknown, timeout=30)
        assert (r.status_code, r.headers["Content-Type"].split(";")[0]) == (500, "text/html")
        r = requests.get(f"{ngshare.url}/assignments/{COURSE}", headers=unknown, timeout=30, allow_redirects=False)
        assert (r.status_code, r.headers["Location"].split("?")[0]) == (302, "/hub/api/oauth2/authorize")

        # before any feedback, ngshare_exchange's fetch_feedback says it decoded some and leaves an empty
        # folder: the Assignments tab's "(view feedback)" then opens nothing (what issue 38's student met)
        done = ngshare.run("alice", homes["alice"], "-m", "nbgrader", "fetch_feedback", ASSIGNMENT)
        assert done.returncode == 0 and "Successfully decoded feedback" in done.stderr, done.stderr
        assert not any((homes["alice"] / ASSIGNMENT / "feedback" / stamp).iterdir())

        def feedback(timestamp: str, page: bytes) -> requests.Response:
            files = [{"path": "tiny.html", "content": base64.b64encode(page).decode()}]
            return requests.post(f"{ngshare.url}/feedback/{COURSE}/{ASSIGNMENT}/alice", timeout=30,
                                 headers=auth(ngshare.grader_token),
                                 data={"timestamp": timestamp, "files": json.dumps(files)})

        # the filesystem exchange's form (" UTC") is taken too, ISO's "T" is not; a POST replaces the last
        assert feedback(f"{stamp} UTC", b"<p>first</p>").json() == {"success": True}
        r = feedback(stamp.replace(" ", "T"), b"<p>iso</p>")
        assert (r.status_code, r.json()["message"]) == (400, "Time format incorrect")
        assert feedback(stamp, b"<p>graded</p>").json() == {"success": True}

        done = ngshare.run("alice", homes["alice"], "-m", "nbgrader", "fetch_feedback", ASSIGNMENT)
        assert done.returncode == 0, done.stderr
        page = homes["alice"] / ASSIGNMENT / "feedback" / stamp / "tiny.html"
        assert page.read_bytes() == b"<p>graded</p>", done.stderr


@pytest.mark.slow
def test_the_hub_and_ngshare_listen_on_loopback_only_and_leave_no_process(tmp_path):
    ngshare = Ngshare(tmp_path)
    try:
        ngshare.start()
        tree = ngshare.processes()
        assert len(tree) == 2, [p.cmdline() for p in tree]  # the hub and ngshare: no proxy, no server
        listening = {c.laddr for p in tree for c in p.net_connections("tcp") if c.status == "LISTEN"}
        assert {port for _, port in listening} == {ngshare.hub_port, ngshare.ngshare_port}
        assert {host for host, _ in listening} == {"127.0.0.1"}
    finally:
        ngshare.stop()
    assert not [p for p in tree if p.is_running()]


def test_without_its_environment_the_harness_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "VENV", tmp_path / "no-venv")
    with pytest.raises(RuntimeError, match=r"is missing: run `make ngshare`"):
        Ngshare(tmp_path)
