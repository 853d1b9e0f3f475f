"""Synthetic classes for the instructor's report: answers made from the course's own catalogues.

* :func:`answer_cells`: each exercise's answer cell as a student types it, for the reference, for
  each alternative (correct answers in other styles) and for each mutant (classic bugs);
* :func:`disguise`: a planted copy of an answer: variables renamed, a pair of independent
  statements swapped, comments and spacing changed (what copying students do);
* :func:`record_class`: a class of students written into a course the way ``autograder grade``
  writes them (the graded ledger, the gradebook through nbgrader's SaveAutoGrades, the autograded
  notebooks), from verdicts the real judge gave once per mutant, without grading every student.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import json
import re
import shutil

import nbformat

from autograder.authoring.selfcheck import apply_mutant
from autograder.course import notebook
from autograder.course.directory import Course
from autograder.mutants import Mutant, load_alternatives

from support import REPO

SOURCE = REPO / "assignments" / "source"
MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


@functools.cache
def source_notebooks(assignment: str) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((SOURCE / assignment).glob("*.ipynb"))}


def typed(source: str) -> str:
    """A source cell as a student who wrote the same code has it: without nbgrader's markers."""
    return "\n".join(line for line in source.split("\n") if not MARKER.match(line))


def answer_cells(assignment: str, notebooks: dict[str, dict] | None = None) -> dict[str, str]:
    """exercise -> its answer cell's code (markers removed) in ``notebooks`` (default: the source)."""
    out = {}
    for nb in (notebooks or source_notebooks(assignment)).values():
        for cell in nb["cells"]:
            if cell["cell_type"] == "code" and notebook.is_answer(cell) and notebook.grade_id(cell):
                out[notebook.grade_id(cell)] = typed(notebook.text(cell["source"]))
    return out


def with_variant(assignment: str, variant: Mutant, notebooks: dict[str, dict] | None = None) -> dict[str, dict]:
    """``notebooks`` (default the source) with one mutant or alternative applied."""
    notebooks = copy.deepcopy(notebooks or source_notebooks(assignment))
    name, mutated = apply_mutant(notebooks, variant, assignment)
    return {**notebooks, name: mutated}


def variant_answer(assignment: str, variant: Mutant) -> str:
    return answer_cells(assignment, with_variant(assignment, variant))[variant.exercise]


def released_code(assignment: str) -> list[str]:
    """The code cells of the released notebooks: solutions stubbed, hidden tests removed."""
    return [notebook.released(cell) for path in sorted((SOURCE / assignment).glob("*.ipynb"))
            for cell in notebook.read(path).cells if cell.cell_type == "code"]


# -- planted copies ----------------------------------------------------------------------------------

class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        return node


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _swap_independent(body: list[ast.stmt]) -> bool:
    """Swap the first two adjacent simple statements of ``body`` that neither read nor write what
    the other writes; True if a pair was swapped."""
    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
    for i in range(len(body) - 1):
        a, b = body[i], body[i + 1]
        if not (isinstance(a, simple) and isinstance(b, simple)):
            continue
        if isinstance(a, ast.Expr) and isinstance(a.value, ast.Constant):
            continue  # a docstring stays first
        wa, wb = _names(a, ast.Store), _names(b, ast.Store)
        ra, rb = _names(a, ast.Load), _names(b, ast.Load)
        if not (wa & (rb | wb) or wb & ra):
            body[i], body[i + 1] = b, a
            return True
    return False


def disguise(code: str) -> str:
    """A copy of ``code`` as a student who copied it hands it in: every argument and local variable
    renamed, the first pair of independent statements swapped, the comments replaced and the
    spacing changed. Function, class and attribute names stay (the exercise's contract)."""
    tree = ast.parse(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    args = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg) and a.arg not in ("self", "ctx")}
    renamed = {name: f"my_{name}_{i}" for i, name in enumerate(sorted(stored | args))}
    tree = _Rename(renamed).visit(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _swap_independent(node.body):
            break
    lines = ast.unparse(tree).split("\n")
    out = []
    for line in lines:  # other comments, other spacing
        indent = line[: len(line) - len(line.lstrip())]
        if line.lstrip().startswith(("return", "for ", "if ")):
            out.append(f"{indent}# here is my step")
        out.append(line.replace(", ", ",").replace(" = ", "  =  "))
    return "\n".join(out)


# -- a class recorded as grade records it --------------------------------------------------------------

def judged(assignment: str, exercise: str, notebooks: dict[str, dict]):
    """The real judge's verdict on ``exercise`` in ``notebooks``."""
    from support import judging

    nb = next(nb for nb in notebooks.values() if any(notebook.grade_id(c) == exercise for c in nb["cells"]))
    verdict = judging.verdict(exercise, nb["cells"])
    assert not verdict.detail, (exercise, verdict)
    return verdict


def unanswered(assignment: str, exercise: str, notebooks: dict[str, dict] | None = None) -> dict[str, dict]:
    """``notebooks`` (default the source) with the exercise's answer cell as released (the stub)."""
    notebooks = copy.deepcopy(notebooks or source_notebooks(assignment))
    for nb in notebooks.values():
        for cell in nb["cells"]:
            if notebook.grade_id(cell) == exercise and notebook.is_answer(cell):
                cell["source"] = notebook.released(nbformat.from_dict(
                    {**cell, "source": notebook.text(cell["source"])}))
    return notebooks


def alternatives_by_exercise(assignment: str) -> dict[str, list[Mutant]]:
    out: dict[str, list[Mutant]] = {}
    for alt in load_alternatives(assignment):
        out.setdefault(alt.exercise, []).append(alt)
    return out


def released_course(root, assignment: str, due: str = "2026-11-20 10:00") -> Course:
    """A course at ``root`` (made) with the repository's ``assignment`` released, due at ``due``."""
    from support.course import autograder

    root.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(SOURCE / assignment, root / "source" / assignment)
    course = Course.open(root)
    assert autograder(course, "release", assignment, "--due", due) == 0
    return course


def record_class(course: Course, assignment: str, students: dict[str, dict],
                 late: frozenset[str] = frozenset()) -> None:
    """Write ``students`` (student -> {"notebooks": {name: nb}, "verdicts": {exercise: Verdict}}; a
    verdict given as (passed, message) is recorded without its kind, as a grader before kinds did)
    into ``course`` as ``grade`` does: the submission, the autograded notebook with the judge's
    messages on the failed exercises' test cells, the gradebook rows (SaveAutoGrades and the late
    penalty, as grade's recording step runs them) and the ledger's verdicts."""
    from autograder.grading.record import Ledger, _record, fingerprint
    from autograder.grading.workers import Finished
    from autograder.judge.restore import restore
    from autograder.judge.submission import autograded, judged_exercises
    from autograder.judge.verdict import WRONG, Verdict

    ledger = Ledger(course, assignment)
    template_dir = course.source_dir(assignment)
    for student, sub in sorted(students.items()):
        submitted = course.submitted_dir(student, assignment)
        submitted.mkdir(parents=True, exist_ok=True)
        stamp = "2026-11-21 10:00:00.000000 UTC" if student in late else "2026-11-19 10:00:00.000000 UTC"
        (submitted / "timestamp.txt").write_text(stamp)
        scratch = course.root / ".scratch" / student
        scratch.mkdir(parents=True, exist_ok=True)
        result: dict = {"notebooks": {}, "repairs": [], "unreadable": {}}
        for name, nb in sub["notebooks"].items():
            (submitted / f"{name}.ipynb").write_text(json.dumps(nb))
            restored, _ = restore(notebook.read(template_dir / f"{name}.ipynb"), notebook.validated(json.dumps(nb)))
            given = {e: sub["verdicts"].get(e) or Verdict(e, True) for e in judged_exercises(restored.cells)}
            # a (passed, message) has a kind only for the autograded notebook, which shows none
            verdicts = {e: v if isinstance(v, Verdict) else Verdict(e, v[0], v[1], kind="" if v[0] else WRONG)
                        for e, v in given.items()}
            notebook.write(autograded(restored, verdicts), scratch / f"{name}.ipynb")
            result["notebooks"][name] = {e: dataclasses.asdict(v) if isinstance(given[e], Verdict) else
                                         {"passed": v.passed, "message": v.message, "detail": ""}
                                         for e, v in verdicts.items()}
        (scratch / "timestamp.txt").write_text(stamp)
        done = Finished(student, fingerprint(submitted), 0.0, result, scratch)
        _record(course, assignment, done, ledger, result)
