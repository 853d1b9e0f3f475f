"""Shared test configuration: Hypothesis profiles, and a guard that xdist groups hold.

The engine's property tests draw shapes and values with Hypothesis. Each example runs a
numerical gradient check, so examples are kept few and small, and the per-example deadline is
off (a loaded 2-core machine would otherwise fail tests for being slow, not wrong).

    HYPOTHESIS_PROFILE=ci pytest ...     # fewer examples, for the grading machines
    HYPOTHESIS_PROFILE=thorough pytest   # many more, before a release
"""
import os

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the non-engine tests do not need Hypothesis
    settings = None

if settings is not None:
    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
    settings.register_profile("default", max_examples=25, **common)
    settings.register_profile("ci", max_examples=10, derandomize=True, **common)
    settings.register_profile("thorough", max_examples=300, **common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _grouped_tests_share_a_worker(request):
    """Under `-n 2 --dist loadgroup` (make test), fail a grouped test whose group was not honoured.

    The book tests build into one folder and the nbgrader tests share gradebooks, so each group
    must run on one worker. pytest-xdist passes the group in the node id; pytest 9.2 dropped that
    silently (pytest-dev/pytest-xdist#1386) and the book was built twice into one folder.
    """
    mark = request.node.get_closest_marker("xdist_group")
    if mark and os.environ.get("PYTEST_XDIST_WORKER") and request.config.getoption("loadgroup", False):
        assert request.node.nodeid.endswith(f"@{mark.args[0]}"), (
            f"pytest-xdist did not group {request.node.nodeid} (xdist_group {mark.args[0]!r}): "
            "a pytest / pytest-xdist version mismatch? see requirements.txt")


def pytest_sessionfinish(session, exitstatus):
    """After the whole run (once, in the controlling process): no file of the repository may belong
    to another uid. A test that hands a file to a temporary user and deletes the user leaves it to
    whoever the next `useradd` gives that uid (the .venv's MathJax once was)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    owner = os.lstat(repo).st_uid
    foreign = []
    for folder, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if not (folder == repo and d == ".git")]
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                if os.lstat(path).st_uid != owner:
                    foreign.append(path)
            except FileNotFoundError:
                continue
        if len(foreign) >= 5:
            break
    if foreign:
        session.config.get_terminal_writer().line(
            f"FAILED: files of the repository owned by another uid than its own ({owner}): {foreign[:5]}", red=True)
        session.exitstatus = 1
