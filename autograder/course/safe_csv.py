"""Every CSV the grader writes goes through here: safe to open in a spreadsheet, never written through a link.

**Formula cells.** Excel, LibreOffice Calc and Google Sheets read a cell that begins with ``=``,
``+``, ``-`` or ``@`` (or a tab, a carriage return) as a formula: ``=HYPERLINK(...)`` or
``=cmd|' /c calc'!A1`` in a student's name runs when the instructor opens ``canvas_grades.csv``.
OWASP's CSV-injection guidance (and ASVS 1.2.10, which adds the NUL character) is to prepend a
single quote to such a cell, which spreadsheets read as "this is text". :func:`neutralise` does
that for a cell whose first character is one of those, also after leading blanks or control
characters (``" =1+1"``, ``"\\t@SUM(A1)"``) and for their full-width forms (``＝``). A plain number
(``-3``, ``1.5e-2``) is left as it is: it is no formula, and an LMS must read it as a number.
A cell that already begins with quotes followed by one of those characters gets one more quote,
so that :func:`restore` gives back exactly what was written (the grader reads its own roster copy).

**Files.** :func:`write` writes through :func:`autograder.course.files.replacing`: a new file
beside ``path`` (``O_EXCL|O_NOFOLLOW``) renamed over it, so a symbolic link planted at ``path``
is replaced, never followed, and a reader never sees half a file.

``tests/grader/test_safe_csv.py`` checks that no module of the grader makes a ``csv.writer`` or
``csv.DictWriter`` anywhere else.
"""
from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from autograder.course.files import replacing

TRIGGERS = "=+-@\uff1d\uff0b\uff0d\uff20"   # and their full-width forms
_BLANKS = re.compile(r"^[\s\0]+")   # spaces of any kind (a no-break space too) and NUL
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _dangerous(value: str) -> bool:
    rest = value.lstrip("'")  # quotes first: a cell that is dangerous stays so behind quotes (restore)
    if not rest:
        return False
    if rest[0] in "\t\r\0":
        return True
    stripped = _BLANKS.sub("", rest, count=1)
    return bool(stripped) and stripped[0] in TRIGGERS and not _NUMBER.fullmatch(value)


def neutralise(value: object) -> str:
    """``value`` as a cell no spreadsheet evaluates (see the module's docstring)."""
    text = "" if value is None else str(value)
    return "'" + text if _dangerous(text) else text


def restore(value: str) -> str:
    """The inverse of :func:`neutralise`: the value as it was before it was written."""
    return value[1:] if value.startswith("'") and _dangerous(value[1:]) else value


def write(path: Path, rows: Iterable[Sequence[object]]) -> None:
    """Write ``rows`` (the header first) to ``path`` as UTF-8 CSV, every cell neutralised, through
    :func:`replacing`."""
    with replacing(path) as handle:
        out = csv.writer(handle)
        for row in rows:
            out.writerow([neutralise(cell) for cell in row])


def write_dicts(path: Path, columns: Sequence[str], rows: Iterable[dict]) -> None:
    """:func:`write` for rows given as dicts: one column per name of ``columns``, missing keys empty."""
    write(path, [list(columns), *([row.get(c, "") for c in columns] for row in rows)])
