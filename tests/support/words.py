"""The course's internal vocabulary, and a scanner for it in what students read (issue 39, item 4).

A student learns the course's words from the book and from their notebooks: exercise titles
("Mul", "unbroadcast"), assignment headings ("a02 · Broadcasting and the gradients of tensor ops"),
the course kit `coursekit/` (book/intro.md) and the engine (book/glossary.md). What the course's
machinery calls the same things (grade ids, its modules, its private helpers, the folders of its
repository) they were never taught; :func:`internal_words` finds those in a text. Each allowed
exception is in :data:`ALLOWED`, with why.
"""
from __future__ import annotations

import ast
import html
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]


RULES = [
    Rule("grade id", re.compile(r"\ba\d\d-[a-z][\w-]*")),                        # a02-unbroadcast-hidden
    Rule("module name", re.compile(r"\b(?:coursekit\.(?=\w)|autograder\b|nbgrader_glue\b|solutions[./])")),
    Rule("private name", re.compile(r"(?<![\w\\])_[a-zA-Z]\w*")),               # _stable_logsumexp, ._loaded
    Rule("folder slug", re.compile(r"\ba\d\d_[a-z]\w*\b(?![/.])|\bautograd-course\b")),  # a02_broadcasting
    Rule("Python internal", re.compile(
        r"\bTraceback\b|\bGrade cell\b|\b(?:Attribute|Name|Type|Key|Index|Import|ModuleNotFound|Runtime|"
        r"Value|Assertion|Timeout|NotImplemented)Error\b|\bsys\.modules\b|\b__\w+__\b")),
]

# (rule, the exact word allowed, why). Nothing else of a rule's is, but for what a notebook's own code
# defines and what the book's chapters teach (internal_words' ``taught``).
ALLOWED = [
    ("Python internal", "NotImplementedError",
     "every notebook's 'How this notebook works' teaches it: 'replace `raise NotImplementedError()` by "
     "your code'; the judge and Validate say it in those words"),
    *(("private name", name, "a05's Module exercise: PyTorch's own names for a module's registries, which the "
       "notebook's contract teaches and the student's __setattr__ fills")
      for name in ("_parameters", "_modules", "_buffers", "_registries")),
    ("private name", "_children", "a01's Value contract (micrograd's name for a value's inputs), taught in its "
     "prose and set by the student's own code"),
    ("private name", "_update", "SGD._update and Adam._update: the methods a05 asks the student to write, "
     "their exercises' titles"),
]
# The kit's public API: every notebook's first cell imports from it and its prose teaches it (and the
# book's intro, 'the course kit, `coursekit/`'). Allowed in a notebook's prose, never in a message the
# course prints (a status line, feedback, Validate): those name exercises, not the kit's functions.
KIT_API = ("coursekit.engine", "coursekit.testing", "coursekit.data", "coursekit.use", "coursekit.status",
           "coursekit.diagnose", "coursekit.load_answers")
# A folder slug followed by "/" or ".ipynb" is a path in the student's own home, which their file
# browser shows ("../a01_graphs/a01_graphs.ipynb"): the rule's lookahead leaves those out.
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)  # LaTeX: x_i and fan\_in are not names


@dataclass(frozen=True)
class Hit:
    rule: str
    word: str
    where: str
    line: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule} {self.word!r} in {self.line.strip()[:160]!r}"


def _allowed(rule: str, word: str) -> bool:
    return any(rule == r and word == w for r, w, _ in ALLOWED)


def internal_words(text: str, where: str = "", taught: frozenset[str] = frozenset(),
                   kit_api: bool = False) -> list[Hit]:
    """Every word of the internal vocabulary in ``text`` (prose, a message, a page's text), but those
    ``taught`` (names a notebook's own code defines, Python's names the book's chapters use) and, with
    ``kit_api`` (a notebook's prose), the kit's public API."""
    hits = []
    for line in _MATH.sub(" ", text).split("\n"):
        for rule in RULES:
            for match in rule.pattern.finditer(line):
                word = match.group(0)
                if word == "coursekit.":  # the whole dotted name
                    word += re.match(r"\w*", line[match.end():]).group(0)  # type: ignore[union-attr]
                if _allowed(rule.name, word) or word.lstrip(".") in taught or (kit_api and word in KIT_API):
                    continue
                hits.append(Hit(rule.name, word, where, line))
    return hits


def defined_names(sources: list[str]) -> frozenset[str]:
    """The names code defines (functions, classes, their parameters, variables, attributes it sets):
    a notebook teaches the names of its own given code, private ones included (a01's `_backward`)."""
    names: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return frozenset(names)


def code_words(source: str) -> str:
    """What a student reads of a code cell as words: its comments and its string literals (a visible
    test's messages), and the names it imports (a private import is a name they were not taught).
    The code itself is Python, which the notebook asks them to read as code."""
    words: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                words.append(token.string)
            elif token.type == tokenize.STRING:
                words.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        words.append(source)  # unreadable as Python: read it all
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            words += [alias.name for alias in node.names if alias.name.startswith("_")]
    return "\n".join(words)


def notebook_words(nb: dict) -> list[tuple[str, str]]:
    """(where, text) of every word a student reads in a notebook: markdown cells whole, the words
    of code cells (:func:`code_words`), and the text of every output."""
    out = []
    for index, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        where = f"cell {index}"
        out.append((where, source if cell["cell_type"] == "markdown" else code_words(source)))
        for output in cell.get("outputs", []):
            text = output.get("text") or "".join(str(v) for v in output.get("data", {}).values()) \
                or f"{output.get('ename', '')}: {output.get('evalue', '')}"
            out.append((f"{where} output", "".join(text) if isinstance(text, list) else str(text)))
    return out


def book_python_names(book: Path) -> frozenset[str]:
    """Python's own names the book's chapters use (ValueError, __setattr__): taught, where they are."""
    names: set[str] = set()
    for chapter in sorted(book.glob("*.md")):
        names.update(re.findall(r"\b(?:[A-Z]\w*Error|__\w+__)\b", chapter.read_text(encoding="utf-8")))
    return frozenset(names)


def visible(text: str) -> str:
    """The words of a page a reader sees (no tags, no attributes)."""
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", "", text, flags=re.S))
    return re.sub(r"\s+([.,:;])", r"\1", re.sub(r"\s+", " ", html.unescape(text)))
