"""Shared test configuration: Hypothesis profiles, a guard that xdist groups hold, a marker per
assignment, the suite's time per area, and the check that no file is left to another uid.

The tests are laid out by what they test: ``engine/`` (the reference engine, ``solutions/``),
``grader/`` (``autograder/``: the judge, the commands, the sandbox), ``book/`` (the chapters, built
and run as a student runs them) and ``deploy/`` (the class's hub, Kubernetes); ``support/`` is
what they share (test modules never import one another). ``pytest -m a02`` runs what concerns a02.

The engine's property tests draw shapes and values with Hypothesis. Each example runs a
numerical gradient check, so examples are kept few and small, and the per-example deadline is
off (a loaded 2-core machine would otherwise fail tests for being slow, not wrong).

    HYPOTHESIS_PROFILE=ci pytest ...     # fewer examples, for the grading machines
    HYPOTHESIS_PROFILE=thorough pytest   # many more, before a release
"""
import os
import re
import time

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
    """Under `-n auto --dist loadgroup` (make test), fail a grouped test whose group was not honoured.

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


# -- a marker per assignment (`pytest -m a02`) and the suite's time per area -----------------------------

ASSIGNMENT_OF_MODULE = {
    "test_graphs": "a01", "test_scalar": "a01", "test_viz": "a01",
    "test_broadcasting": "a02", "test_ops": "a02", "test_ops_more": "a02", "test_grading_attacks": "a02",
    "test_dask": "a02", "test_report_class": "a02",
    "test_im2col": "a03", "test_pool": "a03",
    "test_conv_backward": "a04", "test_conv_golden": "a04",
    "test_layers": "a05", "test_optim": "a05", "test_data": "a05", "test_clip_grad": "a05", "test_nn_golden": "a05",
    "test_training": "a06", "test_capstone_trust": "a06",
    "test_attention": "a07", "test_book_model": "a07",
}
ASSIGNMENTS = ("a01", "a02", "a03", "a04", "a05", "a06", "a07")
_IN_ID = re.compile(r"(?<![a-z0-9])(a0[1-7])(?:[_-]|$)")
AREAS = ("engine", "grader", "book", "deploy")
_area_seconds: dict[str, float] = {}


def pytest_configure(config):
    for assignment in ASSIGNMENTS:
        config.addinivalue_line("markers", f"{assignment}: tests of {assignment} (its engine, checks or chapter)")


def pytest_collection_modifyitems(config, items):
    """Mark each test with the assignments it is about: its module's (ASSIGNMENT_OF_MODULE), and any
    assignment its parameters name (``a02_broadcasting``, ``a02-mul``)."""
    for item in items:
        found = {ASSIGNMENT_OF_MODULE.get(item.module.__name__.rsplit(".", 1)[-1])} - {None}
        found |= set(_IN_ID.findall(item.nodeid.split("::", 1)[-1]))
        for assignment in sorted(found):
            item.add_marker(getattr(pytest.mark, assignment))


def pytest_runtest_logreport(report):
    """Each test's setup, call and teardown, summed by area (the folder under tests/ it lives in)."""
    parts = report.nodeid.split("/")
    area = parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in AREAS else "other"
    _area_seconds[area] = _area_seconds.get(area, 0.0) + report.duration
    if os.environ.get("PYTEST_TIMELINE") and not os.environ.get("PYTEST_XDIST_WORKER"):
        # which worker ran what, when: `PYTEST_TIMELINE=file make test` shows where the wall time goes
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
        with open(os.environ["PYTEST_TIMELINE"], "a") as log:
            log.write(f"{time.time():.1f}\t{worker}\t{report.when}\t{report.duration:.1f}\t{report.nodeid}\n")


def pytest_terminal_summary(terminalreporter):
    if not _area_seconds:
        return
    total = sum(_area_seconds.values())
    terminalreporter.write_line(
        "time per area (the tests' own durations, summed over the workers): "
        + ", ".join(f"{area} {_area_seconds[area]:.0f} s ({100 * _area_seconds[area] / total:.0f} %)"
                    for area in (*AREAS, "other") if area in _area_seconds))
