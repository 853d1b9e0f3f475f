"""Where the exercise bodies are: located with `ast` in solutions/ and in notebook cells.

An exercise body is what a notebook's `### BEGIN SOLUTION` / `### END SOLUTION` region holds:
the statements of a function or method after its signature and docstring (comments in between
included). `autograder.authoring.sync` copies bodies from solutions/ into the notebooks, and
`autograder.kit` replaces them with `raise NotImplementedError(...)` in the students' kit.
"""
from __future__ import annotations

import ast
import functools
import io
import tokenize
from dataclasses import dataclass

from autograder.course import notebook

BEGIN, END = f"### {notebook.BEGIN_SOLUTION}", f"### {notebook.END_SOLUTION}"  # whole lines, in an authored cell


class RegionError(Exception):
    """A body or a solution region cannot be located exactly."""


@dataclass(frozen=True)
class Body:
    """The body of one def: lines `start`..`end` (1-based, inclusive) of `source`."""

    qualname: str  # "Mul.backward", "unbroadcast"
    start: int
    end: int
    indent: str  # the body's indentation in the source
    lines: tuple[str, ...]  # the body's lines, as in the source (without newlines)

    def text(self, indent: str = "") -> list[str]:
        """The body re-indented from its own indentation to `indent`. Blank lines stay empty; a line
        indented less than the body (inside a multi-line string) is left exactly as it is."""
        return ["" if not line.strip() else indent + line[len(self.indent):] if line.startswith(self.indent)
                else line for line in self.lines]


def _find_def(tree: ast.AST, qualname: str) -> ast.FunctionDef:
    node: ast.AST = tree
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        want = (ast.FunctionDef, ast.AsyncFunctionDef) if i == len(parts) - 1 else (ast.ClassDef,)
        found = [n for n in getattr(node, "body", []) if isinstance(n, want) and n.name == part]
        if len(found) != 1:
            raise RegionError(f"{qualname}: expected exactly one {'def' if i == len(parts) - 1 else 'class'} "
                              f"named {part!r}, found {len(found)}")
        node = found[0]
    return node  # type: ignore[return-value]


def _header_end(lines: list[str], fn: ast.FunctionDef) -> int:
    """The line of the colon that ends `def ...(...) -> ...:` (1-based)."""
    text = "\n".join(lines[fn.lineno - 1:]) + "\n"
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.OP:
            if tok.string in "([{":
                depth += 1
            elif tok.string in ")]}":
                depth -= 1
            elif tok.string == ":" and depth == 0:
                return fn.lineno + tok.start[0] - 1
    raise RegionError(f"{fn.name}: cannot find the end of its signature")


def _has_docstring(fn: ast.FunctionDef) -> bool:
    first = fn.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


@functools.lru_cache(maxsize=64)
def _parsed(source: str) -> ast.Module:
    return ast.parse(source)


@functools.lru_cache(maxsize=1024)
def locate(source: str, qualname: str) -> Body:
    """The body of `qualname` (after its docstring) in Python `source` (the kit is built per exercise
    judged, from the same few files: each is parsed once per process)."""
    lines = source.split("\n")
    fn = _find_def(_parsed(source), qualname)
    statements = fn.body[1:] if _has_docstring(fn) else fn.body
    if not statements:
        raise RegionError(f"{qualname}: has no statements after its docstring")
    after = (fn.body[0].end_lineno or fn.body[0].lineno) if _has_docstring(fn) else _header_end(lines, fn)
    if statements[0].lineno <= _header_end(lines, fn):
        raise RegionError(f"{qualname}: its body starts on the line of its signature; put it on its own lines")
    start, end = after + 1, statements[-1].end_lineno or statements[-1].lineno
    while start < end and not lines[start - 1].strip():
        start += 1
    indent = lines[statements[0].lineno - 1][: statements[0].col_offset]
    return Body(qualname, start, end, indent, tuple(lines[start - 1:end]))


# --------------------------------------------------------------------------------------------
# Solution regions in notebook cells
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellRegion:
    """One `### BEGIN SOLUTION` ... `### END SOLUTION` pair of a code cell (0-based line numbers)."""

    qualname: str  # the def that encloses it, as in solutions/ ("Mul.backward")
    begin: int  # line of the BEGIN marker
    end: int  # line of the END marker
    indent: str  # the markers' indentation
    lines: tuple[str, ...]  # what is between the markers


def _enclosing_def(tree: ast.AST, line: int, column: int) -> str | None:
    """Qualified name of the innermost def whose body holds a comment at `line` (1-based) indented
    by `column`. AST spans end at the last statement, so a trailing comment (the END marker) is
    placed by indentation: the def starts before it, is indented less, and no statement indented
    like the def or less comes in between."""
    defs: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    statements: list[ast.stmt] = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if not isinstance(child, ast.ClassDef):
                    defs.append((prefix + child.name, child))
                walk(child, prefix + child.name + ".")
    walk(tree, "")
    for name, node in sorted(defs, key=lambda d: d[1].lineno, reverse=True):
        if node.lineno >= line or node.col_offset >= column:
            continue
        if any(node.lineno < st.lineno < line and st.col_offset <= node.col_offset for st in statements):
            continue
        return name
    return None


def cell_regions(source: str) -> list[CellRegion]:
    """Every solution region of a code cell, each with the def it belongs to."""
    lines = source.split("\n")
    markers = [(i, line) for i, line in enumerate(lines) if line.strip() in (BEGIN, END)]
    regions: list[CellRegion] = []
    if not markers:
        return regions
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise RegionError(f"the cell does not parse: {error}") from None
    for k in range(0, len(markers), 2):
        if k + 1 >= len(markers) or markers[k][1].strip() != BEGIN or markers[k + 1][1].strip() != END:
            raise RegionError("solution markers are not in BEGIN/END pairs")
        (b, begin_line), (e, end_line) = markers[k], markers[k + 1]
        indent = begin_line[: len(begin_line) - len(begin_line.lstrip())]
        if end_line[: len(end_line) - len(end_line.lstrip())] != indent:
            raise RegionError(f"line {b + 1}: BEGIN and END SOLUTION markers are indented differently")
        qualname = _enclosing_def(tree, b + 1, len(indent))
        if qualname is None or _enclosing_def(tree, e + 1, len(indent)) != qualname:
            raise RegionError(f"line {b + 1}: the solution region is not inside one def")
        regions.append(CellRegion(qualname, b, e, indent, tuple(lines[b + 1:e])))
    return regions


def replace_region(source: str, region: CellRegion, body: list[str]) -> str:
    """`source` with the lines between the region's markers replaced by `body`."""
    lines = source.split("\n")
    return "\n".join(lines[: region.begin + 1] + body + lines[region.end:])
