"""The class's hub runs the grader with the students' environment plus what only the grader needs
(deploy/hub.py install_grader): every dependency of the course package must be in one of them, or
an instructor's command fails on the hub with an ImportError that no test on this machine shows."""
from __future__ import annotations

import re
import runpy

import tomllib

from support import REPO


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)).lower()


def test_every_dependency_of_the_grader_is_on_the_hub():
    needed = {_name(r) for r in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    hub = {_name(line) for line in (REPO / "deploy" / "requirements-hub.txt").read_text().splitlines()
           if line.strip() and not line.lstrip().startswith("#")}
    grader_only = {_name(r) for r in runpy.run_path(str(REPO / "deploy" / "hub.py"))["GRADER_ONLY"]}
    assert not needed - hub - grader_only, needed - hub - grader_only
    assert not grader_only & hub  # what only the grader needs stays out of the students' environment
