"""What leaves the judge quotes none of the course's code held in the sandbox, in any form.

The sandbox of an exercise of assignment A holds the reference of the assignments before A (the
engine a student of A has built already, see :func:`autograder.judge.judge._engine`) as code
objects. Their source is not there, but a student's code can read their code objects, and a
Python process cannot hide its own code from the code it runs (NumPy's array interface alone reads
any address). What the student's code can read, it can put in a message: an exception's text, a
value a check quotes, a class name. So every message that leaves the judge for a student, a
verdict's (:func:`scrub`, in :func:`autograder.judge.judge.judge`) and a sealed reference's error
(:func:`quotes`, in :mod:`autograder.judge.sealed`), is compared with every form those bodies take:

- their lines, normalised as the release scan compares lines (:mod:`autograder.course.codelines`);
- their names in a row, whatever stands between them: :data:`RUN` names of a body's source
  (a decompiled or reformatted body), of its instructions (a disassembly, which names what each
  instruction loads and stores), of ``co_names`` or of ``co_varnames``;
- their bytecode: :data:`OPS` instructions in a row of ``co_code`` (or of the adaptive code, its
  specialised instructions mapped back), written in hex, as a bytes literal, as numbers or in base64;
- a disassembly or a code object of any code: instruction names, ``<code object ...>``.

A message that quotes one of them is replaced by a notice. Only the names of code count, never the
words of its strings (a reference's error message is meant to be read), nor a run of names that
the students' kit's source shows anyway (given code). Other encodings of the
bytes (a cipher of the student's own) are not recognised: the sandbox holds the earlier
assignments' code by design, and this is a filter, not a wall.
"""
from __future__ import annotations

import base64
import binascii
import codecs
import dis
import functools
import io
import keyword
import re
import textwrap
import tokenize
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from autograder import kit
from autograder.course import catalogue, codelines
from autograder.course.codelines import quoting, signature

RUN = 6   # names in a row that count as a quote of a body
OPS = 4   # instructions in a row that count as a quote of its bytecode
NOTICE = ("your code's message is not shown: it quotes the course's own code of another exercise "
          "(write your own answer; the kit's reference is not yours to print)")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Instruction names, the specialised ones included, and the words a disassembly adds of its own.
_OPNAMES = frozenset(name for name in getattr(dis, "_all_opname", dis.opname) if not name.startswith("<"))
_NOISE = frozenset(keyword.kwlist) | _OPNAMES | {"NULL", "to", "ExceptionTable", "lasti"}
_DISASSEMBLY = frozenset(name for name in _OPNAMES if "_" in name)  # two of them: a disassembly
_OPMAP = getattr(dis, "_all_opmap", dis.opmap)
_BASE = {_OPMAP[special]: dis.opmap[base] for special, base in getattr(dis, "deoptmap", {}).items()}
_CACHES = getattr(dis, "_inline_cache_entries", [0] * 256)
_CACHE = dis.opmap.get("CACHE", 0)

_HEX = re.compile(r"(?:[0-9a-fA-F]{2}[\s:,]?){8,}")
_NUMBERS = re.compile(r"\b\d{1,3}(?:[\s,;]+\d{1,3}\b){7,}")
_BYTES_LITERAL = re.compile(r"""b(['"])((?:\\.|(?!\1).)*)""", re.S)
_BASE64 = re.compile(r"[A-Za-z0-9+/]{12,}={0,2}")


@dataclass(frozen=True)
class Forms:
    """The forms of some bodies a message must not quote."""

    lines: re.Pattern | None              # normalised meaningful lines, as runs of whole tokens
    runs: frozenset[tuple[str, ...]]      # RUN names in a row
    code: frozenset[bytes]                # OPS instructions in a row, (opcode, arg) byte pairs


def names(text: str) -> list[str]:
    """The words of ``text`` that can be names of code (keywords and instruction names left out)."""
    return [w for w in _WORD.findall(text) if w not in _NOISE]


def _runs(sequence: list[str]) -> Iterator[tuple[str, ...]]:
    for i in range(len(sequence) - RUN + 1):
        yield tuple(sequence[i:i + RUN])


def source_names(source: str) -> list[str]:
    """The names of some code, in order, its strings and comments left out."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(textwrap.dedent(source)).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return names(source)
    return [t.string for t in tokens if t.type == tokenize.NAME and t.string not in _NOISE]


def code_names(code: types.CodeType) -> Iterator[list[str]]:
    """The name sequences a code object shows: co_names, co_varnames, and what its instructions
    load, store and call, in order (a disassembly's names; a string constant counts when it is a
    name, as the keys of ``state["exp_avg"]``)."""
    yield [n for n in code.co_names if n not in _NOISE]
    yield [n for n in code.co_varnames + code.co_cellvars + code.co_freevars if n not in _NOISE]
    loaded: list[str] = []
    for instruction in dis.get_instructions(code):
        values = instruction.argval if isinstance(instruction.argval, tuple) else (instruction.argval,)
        loaded += [v for v in values if isinstance(v, str) and v.isidentifier() and v not in _NOISE]
    yield loaded


def instructions(raw: bytes) -> bytes:
    """The (opcode, arg) pairs of some bytecode, specialised instructions as their base and inline
    caches left out: the same for ``co_code`` and for the adaptive code a process has run."""
    out = bytearray()
    i = 0
    while i + 1 < len(raw):
        op = _BASE.get(raw[i], raw[i])
        if op != _CACHE:
            out += bytes((op, raw[i + 1]))
        i += 2 * (1 + (_CACHES[op] if op < len(_CACHES) else 0))
    return bytes(out)


def _windows(pairs: bytes) -> Iterator[bytes]:
    for i in range(0, len(pairs) - 2 * OPS + 2, 2):
        yield pairs[i:i + 2 * OPS]


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _body_codes(path, qualnames: set[str]) -> Iterator[types.CodeType]:
    """The code objects of the defs ``qualnames`` of a reference file and of the functions nested in them."""
    for code in _codes(compile(path.read_text(), str(path), "exec")):
        qualname = code.co_qualname
        if qualname in qualnames or any(qualname.startswith(q + ".<locals>.") for q in qualnames):
            yield code


@functools.cache
def _public_runs() -> frozenset[tuple[str, ...]]:
    """Runs of words of the students' kit's files (its given code, docstrings included): quoting
    them reveals nothing."""
    return frozenset(run for text in kit.kit_files().values() for run in _runs(names(text)))


@functools.cache
def _body_lines() -> tuple[tuple[str, str], ...]:
    """(where, line) of every exercise body's meaningful lines, those of the kit's given code left out."""
    return tuple(kit.body_lines())


@functools.cache
def forms(before: str) -> Forms:
    """The forms of the exercise bodies of the assignments before the prefix ``before`` ("a03"; "~"
    for every assignment's), computed once per process."""
    held = [s for s in catalogue.in_engine() if s.prefix < before]
    lines = quoting(key for where, line in _body_lines() if where.split("-", 1)[0] < before
                    and (key := signature(line)))
    runs: set[tuple[str, ...]] = set()
    code: set[bytes] = set()
    for path, items in kit.exercise_bodies(held).items() if held else ():
        for _, body in items:
            runs.update(_runs(source_names("\n".join(body.lines))))
        for found in _body_codes(path, {body.qualname for _, body in items}):
            for sequence in code_names(found):
                runs.update(_runs(sequence))
            code.update(_windows(instructions(found.co_code)))
    return Forms(lines, frozenset(runs - _public_runs()), frozenset(code))


def _byte_strings(message: str) -> Iterator[bytes]:
    """Every run of bytes ``message`` may spell: hex, a bytes literal, numbers, base64."""
    for found in _HEX.finditer(message):
        digits = re.sub(r"[\s:,]", "", found.group(0))
        yield bytes.fromhex(digits[: len(digits) // 2 * 2])
    for found in _BYTES_LITERAL.finditer(message):
        text = re.sub(r"\\(x[0-9a-fA-F]?)?$", "", found.group(2))  # an escape cut off with the message
        try:
            yield cast(bytes, codecs.escape_decode(text.encode("utf-8", "backslashreplace"))[0])  # typeshed says str
        except ValueError:
            continue
    for found in _NUMBERS.finditer(message):
        values = [int(v) for v in re.findall(r"\d+", found.group(0))]
        if all(v < 256 for v in values):
            yield bytes(values)
    for found in _BASE64.finditer(message):
        text = found.group(0)
        try:
            yield base64.b64decode(text[: len(text) // 4 * 4] if "=" not in text else text, validate=True)
        except (binascii.Error, ValueError):
            continue


def _quotes_code(message: str, held: frozenset[bytes]) -> bool:
    for raw in _byte_strings(message):
        for start in (0, 1):  # a dump need not start at an instruction
            if any(window in held for window in _windows(instructions(raw[start:]))):
                return True
    return False


def quotes(message: str, before: str) -> bool:
    """Whether ``message`` quotes, in any form, an exercise body of the assignments before ``before``,
    or shows a disassembly or a code object at all."""
    if "<code object" in message or len(_DISASSEMBLY.intersection(_WORD.findall(message))) >= 2:
        return True
    held = forms(before)
    if codelines.quotes(held.lines, message):
        return True
    if any(run in held.runs for run in _runs(names(message))):
        return True
    return bool(held.code) and _quotes_code(message, held.code)


def scrub(message: str, exercise_id: str) -> str:
    """``message``, or :data:`NOTICE` in its place when it quotes code the sandbox of
    ``exercise_id`` holds (the reference of the assignments before it), in any form."""
    if not message or not quotes(message, exercise_id.split("-", 1)[0]):
        return message
    return NOTICE
