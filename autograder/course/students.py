"""Student ids as the course accepts them, and names as it shows them.

An id becomes folder and file names (``submitted/<id>/``; ``grade`` writes ``.<id>.json.tmp``, and
255 bytes is the usual limit of a file name): no separators, no leading dot, nothing a shell or
glob expands, at most :data:`MAX_ID_LENGTH` characters. ``collect`` and the roster refuse any other
id (:func:`check_student_id`); a folder placed by hand under another name is not graded. Mutant
ids follow the same rule (they are graded as students by ``autograder check``).
"""
from __future__ import annotations

import re

MAX_ID_LENGTH = 64
_ID = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ID_LENGTH - 1}}}"
STUDENT_ID = SAFE_ID = re.compile(_ID)  # always with fullmatch: "$" would let a trailing newline through
STUDENT_ID_RULE = (f"1 to {MAX_ID_LENGTH} characters: letters, digits, '.', '_', '-', "
                   "starting with a letter or a digit")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control and format characters, and the bytes of a file
    name that were not valid UTF-8, written as Python escapes (``\\x1b``, ``\\udcff``)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def check_student_id(student: str) -> str:
    """``student`` if it is a valid id, else ValueError quoting it (escaped) and the rule."""
    if not STUDENT_ID.fullmatch(student):
        shown = student if len(student) <= 80 else f"{student[:40]}...{student[-20:]} ({len(student)} characters)"
        raise ValueError(f"bad student id {printable(repr(shown))}: ids are {STUDENT_ID_RULE}")
    return student
