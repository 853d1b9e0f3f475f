"""The course's book, served read-only to everyone on the hub at /services/book/ (a JupyterHub service).

`deploy/hub.py install` copies the book `make book` built (_build/html) under the hub's prefix; the hub
starts this server as an unprivileged account (jupyterhub_config.py). It serves the files of that one
folder and nothing else: no directory listing, no path outside the folder (a link inside it is not
followed out), GET and HEAD only. The book is public: no log-in. Standard library only.
"""
from __future__ import annotations

import http.server
import os
import posixpath
import sys
import urllib.parse
from pathlib import Path


class BookHandler(http.server.SimpleHTTPRequestHandler):
    prefix = "/services/book/"
    root = Path(".")
    server_version = "book"
    sys_version = ""

    def translate_path(self, path: str) -> str:
        """The file of the book the URL names, or a path that does not exist (then: 404)."""
        path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
        nowhere = str(self.root / ".not-in-the-book")
        if not (path + "/").startswith(self.prefix):
            return nowhere
        relative = posixpath.normpath(path[len(self.prefix):] or ".")
        if relative.startswith(("..", "/")):
            return nowhere
        target = (self.root / relative).resolve()
        # a link in the book (there should be none) is followed only if it stays inside
        if target != self.root and self.root not in target.parents:
            return nowhere
        return str(target)

    def list_directory(self, path):  # a folder without index.html: not a page of the book
        self.send_error(404, "No such page in the book")
        return None

    def end_headers(self) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def log_request(self, code="-", size="-") -> None:  # the hub's log: the server's faults, not each page read
        pass

    def log_error(self, format, *args) -> None:
        if args and isinstance(args[0], int) and args[0] >= 500:
            super().log_error(format, *args)

def main() -> int:
    if len(sys.argv) != 2 or not Path(sys.argv[1], "index.html").is_file():
        print("book.py: give the folder of the built book (with its index.html)", file=sys.stderr)
        return 2
    BookHandler.root = Path(sys.argv[1]).resolve()
    BookHandler.prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", BookHandler.prefix)
    url = urllib.parse.urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:8082"))
    with http.server.ThreadingHTTPServer((url.hostname, url.port), BookHandler) as server:
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
