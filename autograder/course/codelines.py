"""Lines of code as the course compares them: the release scan and the judge's scrub alike.

A line is compared by its tokens (comments and spacing ignored), and only when it is meaningful:
at least :data:`MIN_TOKENS` tokens and :data:`MIN_CHARS` characters, and not blank, a comment, an
import, a ``def`` / ``class`` / decorator line (signatures are given to students on purpose) or a
string. A secret line also counts when quoted inside a longer text ("A hint: `...`"): it is found
as a run of whole tokens anywhere in the text's tokens (:func:`quoting`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable

MIN_TOKENS = 6
MIN_CHARS = 20
_TOKEN = re.compile(r"\w+|[^\w\s]")
_NOT_CODE = ("#", "import ", "from ", "@", "def ", "class ", "async def ", '"', "'")


def _strip_comment(line: str) -> str:
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote and line[i - 1] != "\\":
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:i]
    return line


def tokens(text: str) -> str:
    """``text``'s tokens, one space apart, a trailing comment left out."""
    return " ".join(_TOKEN.findall(_strip_comment(text)))


def signature(line: str) -> str | None:
    """The normalised form of a meaningful code line, or None for a line too trivial to compare."""
    stripped = line.strip()
    if not stripped or stripped.startswith(_NOT_CODE):
        return None
    found = _TOKEN.findall(_strip_comment(stripped))
    if len(found) < MIN_TOKENS or len("".join(found)) < MIN_CHARS:
        return None
    return " ".join(found)


def quoting(keys: Iterable[str]) -> re.Pattern | None:
    """A pattern that finds any of ``keys`` (signatures) in ``f" {tokens(text)} "``; None for no key."""
    keys = sorted(set(keys), key=len, reverse=True)
    return re.compile("|".join(f" {re.escape(key)} " for key in keys)) if keys else None


def quotes(pattern: re.Pattern | None, text: str) -> re.Match | None:
    """Where ``text`` quotes a line of ``pattern`` (:func:`quoting`), if it does."""
    return pattern.search(f" {tokens(text)} ") if pattern is not None else None
