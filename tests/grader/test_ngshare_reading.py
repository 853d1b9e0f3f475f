"""What the grader takes from ngshare (autograder.course.ngshare), students hostile.

ngshare's answers here come from a small HTTP server speaking its API's JSON (the real ngshare,
behind a real JupyterHub, is tests/deploy/test_ngshare_service.py's): what a student can put in a
submission (any path ngshare accepts, any size, any timestamp.txt) and what an exchange that fails
says, each read as the module promises.
"""
from __future__ import annotations

import base64
import json
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from autograder.course import MAX_NOTEBOOK_BYTES, CourseError
from autograder.course.ngshare import Ngshare, Unreachable, download_limit, parse_stamp, read_ngshare

NOTEBOOK = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


class Fake:
    """ngshare's answers: ``submissions`` [(student, stamp)], ``files`` {(student, stamp): [(path, bytes)]}."""

    def __init__(self):
        self.submissions: list[tuple[str, str]] = []
        self.files: dict[tuple[str, str], list[tuple[str, bytes]]] = {}
        self.status = 200
        self.posted: list[dict] = []
        self.tokens: list[str] = []
        self.assignments: list[str] = []
        self.failing_posts = 0   # the next POSTs answered 502, as an ngshare that is restarting


@pytest.fixture
def ngshare():
    fake = Fake()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status: int, answer: dict | bytes) -> None:
            body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            fake.tokens.append(self.headers.get("Authorization", ""))
            url = urlparse(self.path)
            parts = url.path.split("/")[3:]  # /services/ngshare/<what>/<course>/...
            if fake.status != 200:
                return self.reply(fake.status, {"success": False, "message": "Permission denied"})
            if parts[0] == "assignments":
                return self.reply(200, {"success": True, "assignments": fake.assignments})
            if parts[0] == "submissions":
                return self.reply(200, {"success": True, "submissions": [
                    {"student_id": s, "timestamp": t} for s, t in fake.submissions]})
            if parts[0] == "submission":
                stamp = parse_qs(url.query)["timestamp"][0]
                files = fake.files[(parts[3], stamp)]
                return self.reply(200, {"success": True, "timestamp": stamp, "files": [
                    {"path": p, "checksum": "", "content": base64.encodebytes(d).decode()} for p, d in files]})
            return self.reply(404, {"success": False, "message": "not here"})

        def do_POST(self):
            length = int(self.headers["Content-Length"])
            body = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if fake.failing_posts:
                fake.failing_posts -= 1
                return self.reply(502, b"<html>Bad Gateway</html>")
            fake.posted.append(body)
            self.reply(200, {"success": True})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.handle_error = lambda *_: None  # the grader hangs up on a download past its limit: as it should
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_port}/services/ngshare"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def client(fake) -> Ngshare:
    return Ngshare(fake.url, "course101", token="grader-token")


def test_each_student_s_latest_by_ngshare_s_time_with_only_the_assignment_s_top_level_notebooks(ngshare):
    early, late = "2026-11-29 10:00:00.000001", "2026-11-29 10:05:00.500000"
    ngshare.submissions = [("alice", late), ("alice", early), ("bob", early)]
    ngshare.files = {
        # alice's latest says it was early in her own timestamp.txt: ngshare's time decides
        ("alice", late): [("a00.ipynb", NOTEBOOK), ("timestamp.txt", b"2020-01-01 00:00:00.000000 UTC"),
                          ("kit/engine.py", b"x"), ("kit/more.py", b"y"), ("notes/a00.ipynb", NOTEBOOK),
                          ("other.ipynb", NOTEBOOK), ("run.sh", b"rm -rf /")],
        ("alice", early): [("a00.ipynb", b"{}")],
        ("bob", early): [("a00.ipynb", NOTEBOOK)],
    }
    found = read_ngshare(client(ngshare), "a00", ["a00"], released=["kit"])
    alice, bob = found.records["alice"], found.records["bob"]
    assert alice.stamp == late and alice.time == datetime(2026, 11, 29, 10, 5, 0, 500000, tzinfo=timezone.utc)
    assert alice.notebooks == {"a00": NOTEBOOK} and alice.released == 1
    assert dict(alice.skipped) == {
        "notes": "a folder the release did not ship (only the submission's top-level notebooks are read)",
        "other.ipynb": "not one of the assignment's notebooks (a00.ipynb)",
        "run.sh": "not a notebook file (.ipynb)"}
    assert bob.stamp == early and bob.notebooks == {"a00": NOTEBOOK}
    assert ngshare.tokens and all(t == "token grader-token" for t in ngshare.tokens)


def test_names_ids_sizes_and_the_due_date_are_refused_with_their_reason(ngshare):
    stamp, after = "2026-11-29 10:00:00.000001", "2026-11-29 12:00:00.000000"
    ngshare.submissions = [("../bob", stamp), ("carol", stamp), ("carol", after), ("dave", stamp), ("erin", stamp)]
    ngshare.files = {("carol", stamp): [("a00.ipynb", NOTEBOOK)], ("carol", after): [("a00.ipynb", NOTEBOOK)],
                     ("dave", stamp): [("a00.ipynb", b" " * (MAX_NOTEBOOK_BYTES + 1))],
                     ("erin", stamp): [("data.bin", b"\0" * download_limit(1))]}
    due = datetime(2026, 11, 29, 11, 0, tzinfo=timezone.utc)
    found = read_ngshare(client(ngshare), "a00", ["a00"], before=due)
    reasons = dict(found.skipped)
    assert reasons["../bob+a00+" + stamp].startswith("not a student id")
    assert reasons["carol+a00+" + after].startswith("after the due date")
    assert found.records["carol"].stamp == stamp  # the one before the due date
    assert dict(found.records["dave"].skipped) == {"a00.ipynb": "larger than the size limit (24 MiB)"}
    assert not found.records["dave"].notebooks
    assert "erin" not in found.records and reasons["erin+a00+" + stamp].startswith("larger than")


def test_only_the_students_asked_for_are_downloaded(ngshare):
    stamp = "2026-11-29 10:00:00.000001"
    ngshare.submissions = [("alice", stamp), ("bob", stamp)]
    ngshare.files = {("alice", stamp): [("a00.ipynb", NOTEBOOK)]}  # bob's download would fail the test
    assert list(read_ngshare(client(ngshare), "a00", ["a00"], students={"alice"}).records) == ["alice"]


def test_feedback_goes_to_the_submission_it_is_about(ngshare):
    client(ngshare).release_feedback("a00", "alice", "2026-11-29 10:00:00.000001", {"a00": b"<html>page</html>"})
    (posted,) = ngshare.posted
    assert posted["timestamp"] == "2026-11-29 10:00:00.000001"
    assert json.loads(posted["files"]) == [{"path": "a00.html", "content": base64.encodebytes(b"<html>page</html>")
                                            .decode()}]


def test_a_refusal_and_an_absent_server_say_which(ngshare):
    ngshare.status = 403
    with pytest.raises(CourseError, match=r"refused to list the submissions of a00: HTTP 403, Permission denied "
                                          r"\(the token's account must be an instructor of course course101"):
        client(ngshare).submissions("a00")
    ngshare.status = 502
    with pytest.raises(Unreachable, match="failed to list the submissions of a00: HTTP 502"):
        client(ngshare).submissions("a00")
    with pytest.raises(Unreachable, match="cannot be reached to list the submissions"):
        Ngshare("http://127.0.0.1:9/services/ngshare", "course101", token="t").submissions("a00")


def test_no_token_is_a_sentence_not_a_call(monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    with pytest.raises(CourseError, match="set JUPYTERHUB_API_TOKEN to the grading service's token"):
        Ngshare("http://127.0.0.1:9/services/ngshare", "course101")


def test_ngshare_s_timestamps_with_or_without_utc():
    assert parse_stamp("2026-11-29 10:00:00.000001") == parse_stamp("2026-11-29 10:00:00.000001 UTC")
    assert parse_stamp("yesterday") is None


@pytest.mark.slow
def test_a_page_ngshare_could_not_take_goes_out_on_the_next_look_with_no_second_grading(ngshare, tmp_path,
                                                                                        monkeypatch):
    from autograder.commands.serve import Service, State

    from support.course import ASSIGNMENT, make_course, release, source_notebook, use_toy_catalogue

    use_toy_catalogue(monkeypatch)
    course = make_course(tmp_path / "course")
    release(course)
    stamp = "2026-11-29 10:00:00.000001"
    ngshare.assignments = [ASSIGNMENT]
    ngshare.submissions = [("alice", stamp)]
    ngshare.files = {("alice", stamp): [(f"{ASSIGNMENT}.ipynb", json.dumps(source_notebook()).encode())]}
    ngshare.failing_posts = 1
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-service-token")
    service = Service(course, ngshare.url)
    assert service.step()
    entry = State(course).students[f"{ASSIGNMENT}/alice"]
    assert entry["status"] == "waiting", entry
    assert entry["detail"].startswith("graded (6/7); its feedback waits: ngshare at"), entry
    assert not ngshare.posted
    assert service.step()
    entry = State(course).students[f"{ASSIGNMENT}/alice"]
    assert entry["status"] == "done" and "feedback released (full)" in entry["detail"], entry
    (posted,) = ngshare.posted
    assert posted["timestamp"] == stamp and ASSIGNMENT in json.loads(posted["files"])[0]["path"]
    assert [student for _, student, _, _ in State(course).history] == ["alice"]  # graded once
