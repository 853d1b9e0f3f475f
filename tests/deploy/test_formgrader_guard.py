"""The instructors' formgrader runs no student's script (deploy/hub/instructor/python/autograd_formgrader_guard.py).

A student's written answer and outputs carry the attacks a student would write: an image whose
error handler would act as the instructor through their own server's API, a script element, a
script output, a javascript: link. The submission is collected and graded as any other, then
opened in the formgrader of a real Jupyter server with the guard enabled, in headless Chromium:
nothing of the student's runs, the formgrader's own scripts do (its score boxes work), and every
page carries the Content-Security-Policy. The same notebook rendered by stock nbconvert, without
the guard, runs the attack: the test would fail if the guard did nothing. JupyterLab itself still
starts under the policy. The hub test (tests/deploy/test_semester.py) does the same on the class's hub.
"""
from __future__ import annotations

import json
import runpy
import shutil
import urllib.request
from pathlib import Path

import pytest
from nbconvert.exporters import HTMLExporter

from autograder.course import notebook

from support import ARTEFACTS, axe
from support.browser import Chromium, serve
from support.course import (
    ASSIGNMENT,
    NOTEBOOK,
    REPO,
    SOLUTIONS,
    autograder,
    make_course,
    source_notebook,
    use_toy_catalogue,
)
from support.hub import FORMGRADER_TABLE
from support.jupyter import jupyter_server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("autograder")]
GUARD = REPO / "deploy" / "hub" / "instructor" / "python"
hub = runpy.run_path(str(REPO / "deploy" / "hub.py"))  # deploy/hub.py, standard library only
# What a hostile written answer and output hold: each sets a flag (and the first would rewrite
# the course's configuration through the instructor's contents API) if it ever runs.
ATTACK = ('<img src=x onerror="window.pwned=(window.pwned||[]).concat(\'img\');'
          "fetch('api/contents/course/nbgrader_config.py',{method:'PUT'})\">\n\n"
          "<script>window.pwned=(window.pwned||[]).concat('script')</script>\n\n"
          "<a id=go href=\"javascript:window.pwned=['link']\">details</a>")
OUTPUTS = [
    {"output_type": "display_data", "metadata": {},
     "data": {"text/html": "<script>window.pwned=(window.pwned||[]).concat('html output')</script>",
              "text/plain": "x"}},
    {"output_type": "display_data", "metadata": {},
     "data": {"application/javascript": "window.pwned=(window.pwned||[]).concat('js output')", "text/plain": "y"}},
]


# JupyterLab's shell in the page within a minute (true), or not (false).
LAB_SHELL = """new Promise(done => { const started = Date.now(); (function wait() {
    if (document.querySelector('#jp-main-dock-panel')) done(true);
    else if (Date.now() - started > 60000) done(false);
    else setTimeout(wait, 200); })(); })"""


def hostile_notebook() -> dict:
    nb = source_notebook()
    for cell in nb["cells"]:
        grade_id = notebook.grade_id(cell)
        if grade_id == "a00-square-backward-written":
            cell["source"] = ATTACK
        if grade_id == "a00-add":
            cell["outputs"] = OUTPUTS
            cell["execution_count"] = 1
    return nb


def instructor_server(root: Path, course: Path, guard: Path):
    """The instructor's Jupyter server as the hub configures it: the formgrader, the guard."""
    config = root / "instructor-config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"autograd_formgrader_guard": True}}}))
    (config / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n")
    return jupyter_server(root, config, guard)


def graded_course(tmp_path: Path, monkeypatch, student: str, nb: dict):
    """The toy course, released, with ``student``'s notebook ``nb`` collected and graded."""
    use_toy_catalogue(monkeypatch)
    course = make_course(tmp_path / "course")
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS)) == 0
    export = tmp_path / "export" / student
    export.mkdir(parents=True)
    (export / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb))
    assert autograder(course, "collect", ASSIGNMENT, str(export.parent)) == 0
    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "1") == 0
    return course


def test_the_formgrader_runs_no_student_script(tmp_path, monkeypatch):
    course = graded_course(tmp_path, monkeypatch, "mallory", hostile_notebook())
    with course.gradebook() as gb:
        submission = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "mallory").id
    config_before = (course.root / "nbgrader_config.py").read_text()
    state = ("({pwned: window.pwned || [], formgrader: typeof submission_id === 'string' && !!window.jQuery,"
             " boxes: document.querySelectorAll('input.score').length,"
             " handlers: document.querySelectorAll('[onerror],[onload]').length,"
             " typeset: document.querySelectorAll('mjx-container').length})")

    with Chromium() as chromium:
        # the control: the same notebook as stock nbconvert renders it runs every attack
        stock = tmp_path / "stock"
        stock.mkdir()
        (stock / "page.html").write_text(HTMLExporter(template_name="classic").from_filename(
            str(course.autograded_dir("mallory", ASSIGNMENT) / f"{NOTEBOOK}.ipynb"))[0])
        with serve(stock) as url:
            page = chromium.open(f"{url}/page.html", probe="window.pwned || []")
        assert {"img", "script"} <= set(page.probe), page.probe  # (grading clears the outputs)

        guard = tmp_path / "guard"  # laid out as deploy/hub.py install lays it out on the hub
        shutil.copytree(GUARD, guard)
        hub["instructor_python"](guard)
        with instructor_server(tmp_path, course.root, guard) as (base, token):
            url = f"{base}/formgrader/submissions/{submission}/?token={token}"
            headers = urllib.request.urlopen(url, timeout=60).headers
            policy = headers["Content-Security-Policy"]
            assert "script-src 'self' 'nonce-" in policy and "'unsafe-inline'" not in policy.split("style-src")[0]
            page = chromium.open(url, probe=state)
            assert page.probe["pwned"] == [], page.probe
            assert page.probe["formgrader"] and page.probe["boxes"] >= 1 and page.probe["handlers"] == 0, page.probe
            assert page.probe["typeset"] > 0, page.probe  # MathJax 3 from the server itself
            assert "javascript:" not in page.dom
            assert not [r for r in page.requests if not r.startswith((base, "data:", "about:"))], page.requests
            # and every reader can use it (issue 40): axe-core, light and dark
            for scheme in ("light", "dark"):
                found = chromium.open(url, color_scheme=scheme, probe=axe.probe()).probe
                assert not axe.serious(found), axe.describe(f"the formgrader's submission page ({scheme})",
                                                            axe.serious(found))
            # JupyterLab itself, under the same policy: its shell comes up
            lab = chromium.open(f"{base}/lab?token={token}", probe=LAB_SHELL)
            assert lab.probe is True, lab.errors[:5]
    assert (course.root / "nbgrader_config.py").read_text() == config_before


def test_the_formgrader_shows_only_what_the_course_supports(tmp_path, monkeypatch):
    """Its other buttons hidden and their API refused in one sentence; Release Feedback says how many
    written answers still wait to be graded by hand (issue 39)."""
    course = graded_course(tmp_path, monkeypatch, "ann", source_notebook())  # its written answer: not graded yet
    guard = tmp_path / "guard"
    shutil.copytree(GUARD, guard)
    hub["instructor_python"](guard)
    artefacts = ARTEFACTS / "formgrader"
    with instructor_server(tmp_path, course.root, guard) as (base, token), Chromium() as chromium:
        for page, shown in (("manage_assignments", ["Name", "Due Date", "Status", "Preview", "# Submissions",
                                                      "Release Feedback"]),
                            (f"manage_submissions/{ASSIGNMENT}", ["Student Name", "Student ID", "Timestamp", "Status",
                                                                  "Score", "Release Feedback"])):
            found = chromium.open(f"{base}/formgrader/{page}?token={token}", probe=FORMGRADER_TABLE,
                                  screenshot=artefacts / f"{page.split('/')[0]}.png").probe
            assert found["headers"] == shown and found["cells"] == len(shown), found
            assert not found["add"] and "typed in your JupyterLab terminal" in found["note"], found
        xsrf = {"X-XSRFToken": "t", "Cookie": "_xsrf=t"}

        def post(path: str) -> tuple[int, dict]:
            request = urllib.request.Request(f"{base}/formgrader/api/{path}?token={token}", data=b"{}",
                                             method="PUT" if path.count("/") == 1 else "POST", headers=xsrf)
            try:
                with urllib.request.urlopen(request, timeout=120) as reply:
                    return reply.status, json.loads(reply.read())
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read())

        for action in ("assign", "release", "unrelease", "collect", "generate_feedback", "ann/generate_feedback"):
            status, reply = post(f"assignment/{ASSIGNMENT}/{action}")
            assert status == 403 and not reply["success"] and not reply["error"], (action, reply)
            assert reply["log"].startswith("On this course ") and reply["log"].count(". ") == 0, (action, reply)
            assert "Traceback" not in reply["log"] and str(tmp_path) not in reply["log"]
        status, reply = post(f"submission/{ASSIGNMENT}/ann/autograde")
        assert status == 403 and "grade ASSIGNMENT" in reply["log"], reply
        status, reply = post(f"assignment/{ASSIGNMENT}")  # "Add new assignment..." and the edit button
        assert status == 403 and "release ASSIGNMENT" in reply["log"], reply
        status, reply = post(f"assignment/{ASSIGNMENT}/release_feedback")
        assert status == 200, reply
        assert reply["log"].startswith(f"1 written answer waits to be graded by hand in {ASSIGNMENT}"), reply
