"""One source of truth: the notebooks' solution regions are generated from solutions/.

    python -m autograder.authoring.sync [ASSIGNMENT ...]           rewrite the solution regions from solutions/
    python -m autograder.authoring.sync --check [ASSIGNMENT ...]   list every drifted region; exit 1 if any

For every exercise of the catalogue (`autograder.course.catalogue`), the source notebook's solution cell (its
nbgrader grade_id is the exercise id) holds one `### BEGIN SOLUTION` / `### END SOLUTION` region
per def listed in the spec. Each region gets the def's body from solutions/ (the statements after
the docstring, located with `ast`), re-indented to the region's markers. The check also reports
a def whose signature differs from the reference, an exercise without a solution cell, a solution
cell that is not an exercise, and a hidden test cell whose points differ from the spec's.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from autograder.course import REPO_ROOT, catalogue, notebook
from autograder.course.regions import RegionError, cell_regions, locate, replace_region

SOURCE_ROOT = REPO_ROOT / "assignments" / "source"


def assignments(root: Path = SOURCE_ROOT) -> list[str]:
    """Source assignments that have a registry of exercises.

    Installed from a wheel (`pip install .`) the package has no source tree beside it: the registry
    modules (``autograder/exercises/a02_broadcasting.py``) are named after the assignment folders."""
    known = set(catalogue.prefixes())
    if not root.is_dir():
        return catalogue.assignment_names()
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and p.name.split("_", 1)[0] in known and any(p.glob("*.ipynb")))


def _signature(source: str, qualname: str) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    node: ast.AST | None = tree
    for part in qualname.split("."):
        node = next((n for n in getattr(node, "body", []) if getattr(n, "name", None) == part), None)
        if node is None:
            return None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = node.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None  # annotations are documentation; names, kinds and defaults must match
    return ast.dump(args)


def hidden_cell(spec: catalogue.Spec) -> str:
    """The text of an exercise's hidden test cell: it only names the check (never executed). Its
    first line stays in the released notebook, where the hidden region leaves the cell looking
    empty: it tells the student, in the exercise's own title, what the cell is for."""
    return (f'# More checks of "{spec.title}" run when your work is graded: nothing to write or run here.\n'
            f'### {notebook.BEGIN_HIDDEN}\n# judged outside the notebook, by the check "{spec.id}" on {spec.name}\n'
            f'### {notebook.END_HIDDEN}')


def sync_notebook(path: Path, specs: list[catalogue.Spec], write: bool) -> tuple[list[str], bool]:
    """Problems found in one notebook (drift is a problem only when not writing), and whether
    the notebook changed."""
    nb = notebook.read(path)
    by_id = {s.id: s for s in specs}
    problems: list[str] = []
    changed = False
    name = path.name
    for cell in nb.cells:
        meta = notebook.nbgrader(cell)
        grade_id = notebook.grade_id(cell)
        if cell.cell_type != "code":
            continue
        if grade_id.endswith("-hidden") and grade_id[: -len("-hidden")] in by_id:
            # the hidden test cell is written from the spec too: its points and the line naming the check
            s = by_id[grade_id[: -len("-hidden")]]
            text = hidden_cell(s)
            if meta.get("points") != s.points or cell.source != text:
                if write:
                    meta["points"], cell.source = s.points, text
                    changed = True
                elif meta.get("points") != s.points:
                    problems.append(f"{name}: {grade_id}: worth {meta.get('points')} points, the spec says {s.points}")
                else:
                    problems.append(f"{name}: {grade_id}: the hidden test cell differs from what sync writes")
            continue
        if not meta.get("solution"):
            continue
        if grade_id not in by_id:
            if cell_regions(cell.source):
                problems.append(f"{name}: solution cell {grade_id!r} is not an exercise of the catalogue")
            continue
        s = by_id[grade_id]
        reference = s.path.read_text()
        try:
            found = cell_regions(cell.source)
        except RegionError as error:
            problems.append(f"{name}: {grade_id}: {error}")
            continue
        got = sorted(r.qualname for r in found)
        if got != sorted(s.defs):
            problems.append(f"{name}: {grade_id}: solution regions in {got}, the spec wants {sorted(s.defs)}")
            continue
        source = cell.source
        for region in sorted(found, key=lambda r: r.begin, reverse=True):
            body = locate(reference, region.qualname)
            lines = body.text(region.indent)
            where = f"{s.path.relative_to(REPO_ROOT)}:{body.start}-{body.end}"
            if _signature(source, region.qualname) != _signature(reference, region.qualname):
                problems.append(f"{name}: {grade_id}: the signature of {region.qualname} differs from {where}")
            if list(region.lines) != lines:
                if write:
                    source = replace_region(source, region, lines)
                else:
                    problems.append(f"{name}: {grade_id}: {region.qualname} differs from {where}")
        if source != cell.source:
            cell.source = source
            changed = True
    if write and changed:
        notebook.write(nb, path)
    return problems, changed


def sync(names: list[str] | None = None, write: bool = True, root: Path = SOURCE_ROOT) -> list[str]:
    """Sync (or check) the given assignments; returns the problems found."""
    problems: list[str] = []
    for assignment in names or assignments(root):
        folder = root / assignment
        if not folder.is_dir():
            problems.append(f"{assignment}: no folder {folder}")
            continue
        specs = catalogue.assignment(assignment)
        seen: set[str] = set()
        for path in sorted(folder.glob("*.ipynb")):
            found, changed = sync_notebook(path, specs, write)
            problems.extend(found)
            if changed:
                print(f"synced {path}")
            nb = notebook.read(path)
            seen.update(notebook.grade_id(c) for c in nb.cells)
        for s in specs:
            if s.id not in seen:
                problems.append(f"{assignment}: exercise {s.id} has no solution cell (grade_id {s.id!r})")
    return problems


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of sync, for ``autograder sync`` and this module's own command line alike."""
    parser.add_argument("assignment", nargs="*", help="default: every assignment of the course's source/")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region drifted")
    return parser


def run(args: argparse.Namespace, root: Path = SOURCE_ROOT) -> int:
    """Sync (or check, with ``--check``) the assignments of ``args`` in the source folder ``root``."""
    problems = sync(args.assignment or None, write=not args.check, root=root)
    for p in problems:
        print(p, file=sys.stderr)
    if args.check:
        print("sync --check: "
              + (f"{len(problems)} problem(s)" if problems else "every solution region matches solutions/"))
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(prog="python -m autograder.authoring.sync",
                                                   description=__doc__.split("\n")[0]))
    parser.add_argument("--source", default=str(SOURCE_ROOT),
                        help="the course's source folder (default: %(default)s)")
    args = parser.parse_args(argv)
    return run(args, Path(args.source))


if __name__ == "__main__":
    sys.exit(main())
