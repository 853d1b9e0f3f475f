"""The students' course kit: `coursekit/`, generated from solutions/ with every exercise stubbed out.

    build_kit(folder)  ->  folder/coursekit/
        __init__.py   use(*objs): plug the notebook's own classes and functions into the engine
                      (autograder/kit/shipped/coursekit_init.py, as it is)
        _exercises.py every exercise's name, kit module and id, and what diagnose() names (written here)
        answers.py    loads the student's answers from their notebooks (kit/shipped/answers.py)
        engine/       the reference engine package, every exercise body of every assignment
                      replaced by `raise NotImplementedError("<title> is an exercise you have not
                      done yet: ...")` (stub_message)
        testing.py    solutions/testing.py (gradcheck, assert_close)
        data.py       solutions/data.py (when it exists)

The kit is a build artifact: `autograder release` writes it next to each released notebook and the
tests write it into a temporary folder. Nothing in it is edited by hand; every file starts with a
"generated from ... — do not edit" header. An exercise body is located with `ast` exactly as
`autograder.authoring.sync` locates it (`autograder.course.regions`), so what the notebook's solution region holds
is precisely what the kit leaves out. Everything else (Tensor, Function, the topological backward,
trivial forwards such as `x * y`) is kept, so a student's `Mul.backward` can run on the kit.

    python -m autograder.kit DEST        # writes DEST/coursekit
"""
from __future__ import annotations

import argparse
import functools
import json
import marshal
import re
import shutil
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from autograder.course import REPO_ROOT, catalogue
from autograder.course.catalogue import Spec
from autograder.course.regions import Body, locate

SOLUTIONS = REPO_ROOT / "solutions"
PACKAGE = "coursekit"
# Not part of the students' engine: examples are demos of the reference; the fast kernels are the
# reference engine's private twins of the teaching kernels (solutions/ops/kernels.py picks the
# teaching ones when they are absent); testing and data are top-level modules of the kit. An
# entry names a top-level folder or file of solutions/, or a path relative to it.
ENGINE_EXCLUDE = ("examples", "ops/_fast.py", "testing.py", "data.py")
TOP_LEVEL = ("testing.py", "data.py")
# Shipped as they are: the kit's package file (coursekit/__init__.py) and its loader of the
# student's answers from their assignment notebooks (coursekit/answers.py).
SHIPPED = Path(__file__).with_name("shipped")
INIT = SHIPPED / "coursekit_init.py"
ANSWERS = SHIPPED / "answers.py"


def _header_of(path: Path) -> str:
    return (f"# generated from {path.relative_to(REPO_ROOT).as_posix()} by autograder/kit/__init__.py — "
            "do not edit (rebuild with `python -m autograder.kit DEST`)\n")


def _header(rel: str) -> str:
    return (f"# generated from solutions/{rel} by autograder/kit/__init__.py — do not edit "
            "(rebuild with `python -m autograder.kit DEST`)\n")


# Reference functions that walk a graph (the result is a list of the graph's own nodes): sealed,
# they are asked for the order of the nodes of a mirror of the graph (autograder/judge/sealed.py).
WALKS = frozenset({"solutions.scalar:topological_order", "solutions.graph:toposort"})


def sealed_line(s: Spec) -> str:
    """The body the sandbox's kit has for a sealed exercise: a call to the judge, which runs the
    reference (:mod:`autograder.sandbox.sealed`, :mod:`autograder.judge.sealed`)."""
    kind = "walk" if s.source in WALKS else "call"
    return f"return __import__(\"_sealed\").call({s.id!r}, {kind!r}, locals())"


def stub_line(s: Spec) -> str:
    return f"raise NotImplementedError({stub_message(s)!r})"


# A stub's message is what a student reads when their code reaches an exercise they have not done
# (in a notebook, a chapter, or the grader's feedback): the exercise's title and its assignment's,
# as their notebooks say them. The judge reads the exercise back from the same words (`stubbed`).
NOT_DONE = " is an exercise you have not done yet: "


def stub_message(s: Spec) -> str:
    return (f"{s.title}{NOT_DONE}write it in your notebook {assignment_title(s.prefix)} "
            "(the notebooks after it use it from there)")


def stubbed(message: str) -> Spec | None:
    """The exercise whose stub raised ``message`` (its first line), or None for any other message."""
    title, found, _ = message.partition(NOT_DONE)
    if not found:
        return None
    return next((s for s in catalogue.in_engine() if s.title == title), None)


def assignment_title(prefix: str) -> str:
    """What a student calls an assignment: its notebook's heading ("a02 · Broadcasting and the
    gradients of tensor ops"), from the course's source notebook; the prefix ("a02") without one."""
    return _assignment_title(_assignment_of_prefix(prefix))


def _assignment_of_prefix(prefix: str) -> str:
    return _assignment_name(prefix, tuple(catalogue.search_path()))


@functools.lru_cache(maxsize=64)
def _assignment_title(name: str) -> str:
    source = REPO_ROOT / "assignments" / "source" / name / f"{name}.ipynb"
    try:
        cells = json.loads(source.read_text(encoding="utf-8"))["cells"]
        heading = "".join(cells[0]["source"]).split("\n", 1)[0]
    except (OSError, ValueError, LookupError, TypeError):
        heading = ""
    return heading.removeprefix("# ").strip() if heading.startswith("# ") else name.split("_", 1)[0]


@functools.lru_cache(maxsize=256)
def _assignment_name(prefix: str, search_path: tuple[Path, ...]) -> str:
    """catalogue.assignment_name, once per prefix and catalogue path (it lists the catalogue's
    folders; a kit asks it for every stub, and the judge builds a kit per exercise judged)."""
    return catalogue.assignment_name(prefix)


def exercise_bodies(specs: list[Spec] | None = None) -> dict[Path, list[tuple[Spec, Body]]]:
    """source file -> [(spec, body)] for every exercise body of every assignment."""
    found: dict[Path, list[tuple[Spec, Body]]] = defaultdict(list)
    for s in specs if specs is not None else catalogue.in_engine():
        path = s.path.resolve()
        text = path.read_text()
        for qualname in s.defs:
            found[path].append((s, locate(text, qualname)))
    return found


def stubbed_source(path: Path, bodies: list[tuple[Spec, Body]],
                   sealed: frozenset[str] = frozenset()) -> str:
    """The file's text with each exercise body replaced by its NotImplementedError stub, or, for
    the exercises whose ids are in ``sealed``, by the call to the judge that stands in for it
    (:mod:`autograder.judge.sealed`)."""
    lines = path.read_text().split("\n")
    for s, body in sorted(bodies, key=lambda sb: sb[1].start, reverse=True):
        lines[body.start - 1:body.end] = [body.indent + (sealed_line(s) if s.id in sealed else stub_line(s))]
    return "\n".join(lines)


@functools.lru_cache(maxsize=1024)  # the same few texts for every kit the judge builds (one per exercise judged)
def rename(text: str, top_level: bool, package: str = PACKAGE) -> str:
    """Point the copy at the kit: `solutions` -> `coursekit.engine` (testing and data live at
    the kit's top level); a top-level module's relative imports reach into `.engine`.
    ``package``: the kit's name (the judge imports private copies under names of their own)."""
    text = re.sub(r"\bsolutions\.(testing|data)\b", rf"{package}.\1", text)
    text = re.sub(r"\bsolutions\b(?![/\\])", f"{package}.engine", text)
    if top_level:
        text = re.sub(r"^(\s*)from \.(?=\w)", r"\1from .engine.", text, flags=re.M)
        text = re.sub(r"^(\s*)from \. import", r"\1from .engine import", text, flags=re.M)
    return text


def _exercises_source(specs: list[Spec], autoload: bool, package: str = PACKAGE) -> str:
    """coursekit/_exercises.py: every exercise's name -> (its kit module, its id), read by the kit's
    `use` and its answer loader, and whether importing the kit loads the student's answers."""
    homes: dict[str, tuple[str, str]] = {}
    for s in specs:
        module = rename(s.module, top_level=False, package=package)
        if s.name in homes and homes[s.name][0] != module:
            raise ValueError(f"two exercises define {s.name!r} in different modules "
                             f"({homes[s.name][0]} and {module}); coursekit.use could not tell them apart")
        homes[s.name] = (module, s.id)
    table = "\n".join(f"    {name!r}: ({module!r}, {eid!r})," for name, (module, eid) in sorted(homes.items()))
    pieces: dict[str, list[str]] = defaultdict(list)
    for s in specs:
        for piece in s.diagnosed_by:
            pieces[piece].append(s.id)
    diagnosed = "\n".join(f"    {piece!r}: {tuple(sorted(ids))!r}," for piece, ids in sorted(pieces.items()))
    titles = "\n".join(f"    {s.id!r}: {s.title!r}," for s in specs)
    assignments = "\n".join(f"    {p!r}: {assignment_title(p)!r}," for p in dict.fromkeys(s.prefix for s in specs))
    return ("# generated by autograder/kit/__init__.py — do not edit (rebuild with `python -m autograder.kit DEST`)\n"
            '"""Every exercise of the course: name -> (the kit module that defines it, exercise id); the\n'
            'exercises each piece of `coursekit.diagnose()` is made of (from the catalogue\'s @graded); and\n'
            'what the student reads: each exercise\'s title, in the notebooks\' order, and each assignment\'s."""\n\n'
            f"EXERCISES = {{\n{table}\n}}\n\n"
            f"DIAGNOSED = {{\n{diagnosed}\n}}\n\n"
            f"TITLES = {{\n{titles}\n}}\n\n"
            f"ASSIGNMENTS = {{\n{assignments}\n}}\n\n"
            "# whether `import coursekit` plugs in the answers of the notebooks beside it (coursekit/answers.py)\n"
            f"AUTOLOAD = {autoload}\n")


def kit_files(stubbed: list[Spec] | None = None,
              specs: list[Spec] | None = None, autoload: bool = True,
              private: bool = False, sealed: Sequence[Spec] = (), package: str = PACKAGE) -> dict[Path, str]:
    """The kit as {path relative to the kit's parent folder: text}.

    ``stubbed``: the exercises whose bodies are replaced by stubs (default: every exercise, the
    students' kit); ``sealed``: those whose bodies become a call to the judge, which runs the
    reference there (the grader's sandbox: see :func:`autograder.judge.judge._engine`);
    ``package``: the kit's top-level name.
    """
    specs = specs if specs is not None else catalogue.in_engine()
    sealed_ids = frozenset(s.id for s in sealed)
    bodies = exercise_bodies([*(specs if stubbed is None else stubbed), *sealed])
    files: dict[Path, str] = {}
    for path in sorted(SOLUTIONS.rglob("*.py")):
        rel = path.relative_to(SOLUTIONS)
        if "__pycache__" in rel.parts:
            continue
        top_level = str(rel) in TOP_LEVEL
        excluded = rel.parts[0] in ENGINE_EXCLUDE or rel.as_posix() in ENGINE_EXCLUDE
        if not top_level and excluded and not (private and rel.parts[0] != "examples"):
            continue
        text = stubbed_source(path, bodies[path.resolve()], sealed_ids) if path.resolve() in bodies \
            else path.read_text()
        target = Path(package) / rel if top_level else Path(package) / "engine" / rel
        files[target] = _header(rel.as_posix()) + rename(text, top_level, package)
    files[Path(package) / "__init__.py"] = _header_of(INIT) + INIT.read_text()
    files[Path(package) / "_exercises.py"] = _exercises_source(specs, autoload, package)
    files[Path(package) / "answers.py"] = _header_of(ANSWERS) + ANSWERS.read_text()
    return files


def build_kit(dest_dir: str | Path, specs: list[Spec] | None = None) -> Path:
    """Write `dest_dir/coursekit/` (replacing an older one) and return its path."""
    kit = Path(dest_dir) / PACKAGE
    if kit.exists():
        shutil.rmtree(kit)
    for rel, text in kit_files(specs=specs).items():
        (Path(dest_dir) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(dest_dir) / rel).write_text(text)
    return kit


def build_reference_kit(dest_dir: str | Path) -> Path:
    """`dest_dir/coursekit/`: the kit's API with the whole reference behind it (no stub, the private
    fast kernels included). Never released: the book is built on it, so that the chapters import
    what students import (`coursekit.engine`, `coursekit.testing`) and run the reference."""
    kit = Path(dest_dir) / PACKAGE
    if kit.exists():
        shutil.rmtree(kit)
    for rel, text in kit_files(stubbed=[], autoload=False, private=True).items():
        (Path(dest_dir) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(dest_dir) / rel).write_text(text)
    return kit


def kit_modules(stubbed: list[Spec], specs: list[Spec] | None = None,
                sealed: Sequence[Spec] = (), package: str = PACKAGE) -> dict[str, list]:
    """The kit as importable modules {dotted name: [is_package, source, filename]}, for an in-memory
    importer (:mod:`autograder.sandbox.memory`: the sandbox's, and the judge's for its oracle). It
    never loads answers by itself: the sandbox has no notebooks, and the judge decides what runs
    there."""
    modules = {}
    files = kit_files(stubbed, specs, autoload=False, sealed=sealed, package=package)
    for rel, text in files.items():
        parts = rel.with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = [is_package, text, rel.as_posix()]
    for rel in list(files):  # namespace folders without an __init__.py
        for parent in rel.parents:
            name = ".".join(parent.parts)
            if name and name not in modules:
                modules[name] = [True, "", (parent / "__init__.py").as_posix()]
    return modules


def compiled(modules: dict[str, list]) -> dict[str, list]:
    """{name: [is_package, source, filename]} (:func:`kit_modules`) -> the same with marshalled code
    objects instead of sources, what :class:`autograder.sandbox.memory.Modules` imports."""
    return {name: [is_package, _marshalled(source, filename), filename]
            for name, (is_package, source, filename) in modules.items()}


@functools.lru_cache(maxsize=2048)
def _marshalled(source: str, filename: str) -> bytes:
    """Most of the kit's modules are the same text for every exercise: compiled once per process."""
    return marshal.dumps(compile(source, filename, "exec"))


def body_lines(specs: list[Spec] | None = None) -> list[tuple[str, str]]:
    """(where, line) for every meaningful line of every exercise body: what must never be released.

    A line that also occurs in the given (non-exercise) code of the students' kit is left out:
    students legitimately see it (e.g. `x, y = self.inputs`). What the kit does not ship (the
    private fast kernels, the examples) is no excuse for a line."""
    bodies = exercise_bodies(specs)
    given: set[str] = set()
    for text in kit_files(specs=specs).values():
        given.update(line.strip() for line in text.split("\n"))
    out = []
    for path, items in bodies.items():
        for s, body in items:
            for k, line in enumerate(body.lines):
                stripped = line.strip()
                if stripped and not stripped.startswith("#") and stripped not in given:
                    out.append((f"{s.id} ({path.relative_to(SOLUTIONS.parent)}:{body.start + k})", stripped))
    return out


def leaks(kit_dir: str | Path, specs: list[Spec] | None = None) -> list[str]:
    """Exercise-body lines found in a built kit (should be none)."""
    secret = {line: where for where, line in body_lines(specs)}
    found = []
    for path in sorted(Path(kit_dir).rglob("*.py")):
        for lineno, line in enumerate(path.read_text().split("\n"), 1):
            if line.strip() in secret:
                found.append(f"{path}:{lineno}: {line.strip()}  (body of {secret[line.strip()]})")
    return found


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of the kit's builder, for ``autograder kit`` and ``python -m autograder.kit`` alike."""
    parser.add_argument("dest", help="folder that receives coursekit/ (e.g. release/a02_broadcasting)")
    parser.add_argument("--reference", action="store_true",
                        help="the reference behind the kit's API, for the book build (never release it)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Write the kit (or the reference kit, with ``--reference``) into ``args.dest``; 1 if it leaks."""
    if args.reference:
        print(f"wrote {build_reference_kit(args.dest)} (the reference: never release it)")
        return 0
    kit = build_kit(args.dest)
    problems = leaks(kit)
    for p in problems:
        print(f"LEAK {p}", file=sys.stderr)
    print(f"wrote {kit}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(prog="python -m autograder.kit", description=__doc__.split("\n")[0]))
    return run(parser.parse_args(argv))
