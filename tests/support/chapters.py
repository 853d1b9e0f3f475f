"""A chapter of the book as a student runs it: its notebook (book/_ext/coursekit_book.py makes the
download), with the cells that raise an error on purpose (tag ``raises-exception``) printing it
instead, so that a run without ``allow_errors`` stops only on a real failure."""
from __future__ import annotations

import sys

import nbformat

from support import REPO

sys.path.insert(0, str(REPO / "book" / "_ext"))
import coursekit_book  # noqa: E402


def runnable_chapter(chapter: str) -> nbformat.NotebookNode:
    """The download of ``<chapter>.md`` (a file of the table of contents: ``book/01_graphs``), its
    deliberate errors printed."""
    nb = coursekit_book.chapter_notebook(REPO / f"{chapter}.md")
    for cell in nb.cells:
        if "raises-exception" in cell.get("metadata", {}).get("tags", []):
            indented = "\n".join("    " + line for line in cell.source.split("\n"))
            cell.source = f"try:\n{indented}\nexcept Exception as error:\n    print(error)"
    return nb
