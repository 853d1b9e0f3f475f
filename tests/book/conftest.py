"""The book, built once per test session for every test file of this folder (test_book.py, which
says how and why, and test_book_a11y.py): the fixtures `output`, `build` and `html`. Their tests
share the xdist group "book", so under `make test` one worker builds it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO as ROOT

JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")


@pytest.fixture(scope="session")
def output() -> Path:
    """A fresh build folder of the test's own, beside (not inside) `make book`'s _build/html.
    Not pytest's tmp dir: a concurrent pytest session prunes old tmp dirs, and a cold build is slow."""
    # BOOK_TEST_OUT lets two contributors (or helpers) run this file at once without sharing a folder.
    out = Path(os.environ.get("BOOK_TEST_OUT", ROOT / "_build" / "test-book"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


@pytest.fixture(scope="session")
def build(output) -> subprocess.CompletedProcess:
    """Build the book as `make book` does, but with every warning (-W) and every unresolved
    reference (-n) an error. The cwd is the repository root, where the execution cache lives."""
    return subprocess.run([JUPYTER_BOOK, "build", ROOT, "--path-output", output, "-W", "-n", "--keep-going"],
                          cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="session")
def html(build, output) -> Path:
    """The built HTML. With --keep-going it is written even when a warning fails the build."""
    html = output / "_build" / "html"
    if not (html / "index.html").is_file():
        pytest.fail("the build wrote no index.html: see test_book_builds_without_warnings", pytrace=False)
    return html
