"""The book as the hub serves it (deploy/hub/book.py, the JupyterHub service at /services/book/): the
book's files and nothing else. No hub needed: the server runs alone on loopback, as the hub starts it."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
import requests

from support import REPO

BOOK_SERVER = REPO / "deploy" / "hub" / "book.py"


@pytest.fixture
def book(tmp_path):
    """A small built book beside a secret, served as the hub serves it; yields its base URL."""
    folder = tmp_path / "html"
    (folder / "book").mkdir(parents=True)
    (folder / "_static" / "empty").mkdir(parents=True)
    (folder / "index.html").write_text("<title>the book</title>")
    (folder / "book" / "02_broadcasting.html").write_text("<h1>Tensors and broadcasting-aware gradients</h1>")
    (tmp_path / "secret.txt").write_text("not the book's")
    (folder / "leak.html").symlink_to(tmp_path / "secret.txt")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}",
           "JUPYTERHUB_SERVICE_PREFIX": "/services/book/"}
    server = subprocess.Popen([sys.executable, str(BOOK_SERVER), str(folder)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                requests.get(base, timeout=1)
                break
            except requests.ConnectionError:
                assert server.poll() is None, server.stdout.read().decode()
                time.sleep(0.05)
        yield base
    finally:
        server.terminate()
        server.wait(10)
        server.stdout.close()


def test_the_book_is_served_read_only_and_nothing_else(book):
    page = requests.get(f"{book}/services/book/", timeout=5)
    assert page.status_code == 200 and "<title>the book</title>" in page.text
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    chapter = requests.get(f"{book}/services/book/book/02_broadcasting.html", timeout=5)
    assert chapter.status_code == 200 and "broadcasting-aware" in chapter.text
    folder = requests.get(f"{book}/services/book/book", timeout=5, allow_redirects=False)
    assert folder.status_code == 301 and folder.headers["Location"].endswith("/services/book/book/")
    for path in ("/services/book/book/",  # a folder without index.html: no listing
                 "/services/book/_static/empty/",
                 "/services/book/leak.html",  # a link out of the book is not followed
                 "/services/book/../secret.txt", "/services/book/%2e%2e/secret.txt", "/services/book/..%2fsecret.txt",
                 "/secret.txt", "/services/bookx/index.html", "/services/other/"):
        r = requests.Session().send(requests.Request("GET", book + path).prepare(), timeout=5)
        assert r.status_code == 404, (path, r.status_code)
        assert "not the book's" not in r.text and "Directory listing" not in r.text
    for method in ("POST", "PUT", "DELETE"):
        assert requests.request(method, f"{book}/services/book/index.html", timeout=5).status_code == 501


def test_the_book_server_refuses_a_folder_that_is_not_a_book(tmp_path):
    done = subprocess.run([sys.executable, str(BOOK_SERVER), str(tmp_path)], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == "book.py: give the folder of the built book (with its index.html)"
