"""Your own engine, across assignments: the answers you wrote in your other notebooks, plugged in.

Shipped in the kit as `coursekit/answers.py` (generated from autograder/kit/shipped/answers.py).

Each assignment's kit holds the whole engine with *every* exercise of the course left for you. When
a notebook (an assignment's, a chapter's) or `python -m coursekit.engine.training` imports
`coursekit` in one of your assignment folders, the kit finds **all** your assignment notebooks: the
folders beside this one (`../a01_graphs/a01_graphs.ipynb`, `../a02_broadcasting/…`, as JupyterLab's
*Assignments* tab fetches them), this assignment's own notebook (as last saved) included. It runs
their imports cell and their answer cells and plugs every exercise you finished into the engine with
`use`. So in a04 the `GetItem` that runs is the one you wrote in a02, and a chapter opened in
`a01_graphs/` runs on your a03 convolution too. In the notebook you are working on, your cells
plug in the answers as you run them (the saved version only comes first).

    import coursekit
    coursekit.status()                     # which exercises are yours, which are still to do
    coursekit.load_answers("~/course")     # your notebooks live somewhere else: load them from there

What is loaded from a notebook: its imports cell (the first code cell), the given cells your answers
build on (cell ids ending in `-given`) and the answer cells (the cells you wrote your answers in),
in the notebook's order. Keep a helper you wrote inside the answer cell that uses it.
An exercise you have not done (its answer still ends in `raise NotImplementedError()`) or whose
cell fails to run stays the kit's stub, which names the exercise and its assignment when it is
called.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

_ASSIGNMENT_DIR = re.compile(r"^(a\d\d)_\w+$")
_NOT_DONE = re.compile(r"^\s*raise NotImplementedError\(\)\s*$", re.M)


@dataclass
class Answer:
    """What became of one exercise of one of your notebooks."""
    exercise: str
    assignment: str
    status: str          # "yours", "not done", "failed", "not found"
    detail: str = ""


_loaded: dict[str, Answer] = {}


def _kit_assignment() -> str | None:
    """The assignment this kit was released with: the name of the folder that holds coursekit/."""
    folder = Path(__file__).resolve().parent.parent.name
    return folder if _ASSIGNMENT_DIR.match(folder) else None


def _prefix(assignment: str) -> str:
    return assignment.split("_", 1)[0]


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _python(source: str) -> str:
    """A cell's source as plain Python (`%magics` and `!shell` lines turned into what IPython runs)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))
    return TransformerManager().transform_cell(source)


def _grade_id(cell: dict) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") or ""


def not_done(source: str) -> bool:
    """Whether an answer cell is still as released: it ends in nbgrader's `raise NotImplementedError()`."""
    return bool(_NOT_DONE.search(source))


def answer_cells(cells: list[dict], assignment: str) -> list[tuple[str, str]]:
    """(grade id, source) of the cells that are loaded: the imports cell and the answer cells."""
    out = []
    code = [cell for cell in cells if cell.get("cell_type") == "code"]
    for k, cell in enumerate(code):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        cell_id = str(cell.get("id", ""))
        if meta.get("solution") and not meta.get("grade"):
            out.append((_grade_id(cell), _source(cell)))
        elif k == 0 or cell_id == f"{_prefix(assignment)}-imports" or cell_id.endswith("-given"):
            out.append((cell_id or "imports", _source(cell)))
    return out


def load_cells(assignment: str, cells: list[dict]) -> list[Answer]:
    """Run one notebook's imports and answer cells and plug its finished exercises into the engine."""
    from . import EXERCISES, use  # type: ignore[attr-defined]  # shipped as coursekit/answers.py

    mine = {eid: name for name, (_module, eid) in EXERCISES.items() if eid.startswith(_prefix(assignment) + "-")}
    namespace: dict = {"__name__": f"coursekit_answers_{_prefix(assignment)}"}
    ran: dict[str, str] = {}   # grade id -> "" (ran) or the error
    for grade_id, source in answer_cells(cells, assignment):
        if grade_id in mine and not_done(source):
            ran[grade_id] = "not done"
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(_python(source), f"<{assignment} cell {grade_id or '?'}>", "exec"), namespace)
            ran[grade_id] = ""
        except Exception as e:  # a broken cell costs its own exercise only
            ran[grade_id] = f"{type(e).__name__}: {e}"
    answers = []
    for eid, name in sorted(mine.items(), key=lambda item: _order(item[0])):
        if eid not in ran:
            answers.append(Answer(eid, assignment, "not found", "its answer cell is not in the notebook"))
        elif ran[eid] == "not done":
            answers.append(Answer(eid, assignment, "not done"))
        elif ran[eid]:
            answers.append(Answer(eid, assignment, "failed", f"its cell raised {ran[eid]}"))
        elif name not in namespace:
            answers.append(Answer(eid, assignment, "failed", f"its cell does not define {name}"))
        else:
            try:
                use(namespace[name])
                answers.append(Answer(eid, assignment, "yours"))
            except (TypeError, ValueError) as e:
                answers.append(Answer(eid, assignment, "failed", str(e)))
    for a in answers:
        _loaded[a.exercise] = a
    return answers


def _order(exercise: str) -> int:
    """Where an exercise comes in its notebook: what the student reads is in the notebooks' order."""
    from ._exercises import TITLES  # type: ignore[import-not-found]  # shipped as coursekit/answers.py
    return list(TITLES).index(exercise) if exercise in TITLES else len(TITLES)


def title(exercise: str) -> str:
    """An exercise as the student's notebook names it ("Mul", "unbroadcast")."""
    from ._exercises import TITLES  # type: ignore[import-not-found]  # shipped as coursekit/answers.py
    return TITLES.get(exercise, exercise)


def assignment_title(assignment: str) -> str:
    """An assignment as its notebook's heading names it ("a02 · Broadcasting and ...")."""
    from ._exercises import ASSIGNMENTS  # type: ignore[import-not-found]  # shipped as coursekit/answers.py
    return ASSIGNMENTS.get(_prefix(assignment), assignment)


def notebooks(root: Path, before: str | None = None) -> dict[str, Path]:
    """assignment -> its notebook `aNN_name/aNN_name.ipynb`, for every assignment folder under `root`
    (only those that come before the assignment `before`, when given)."""
    found = {}
    for folder in sorted(Path(root).expanduser().glob("a[0-9][0-9]_*")):
        if not (folder.is_dir() and _ASSIGNMENT_DIR.match(folder.name)):
            continue
        if before is not None and _prefix(folder.name) >= _prefix(before):
            continue
        notebook = folder / f"{folder.name}.ipynb"
        if notebook.is_file():
            found[folder.name] = notebook
    return found


def load_answers(root: str | Path | None = None, before: str | None = None, quiet: bool = False) -> list[Answer]:
    """Load your answers from your assignment notebooks found under `root` (default: the folder that
    holds this assignment's folder): every one of them, or only those before the assignment `before`."""
    root = Path(root).expanduser() if root is not None else Path(__file__).resolve().parent.parent.parent
    answers = []
    for assignment, path in notebooks(root, before).items():
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError) as e:
            print(f"Could not read your notebook {path.name} ({e}); its exercises stay to do")
            continue
        answers += load_cells(assignment, cells)
    if not quiet and answers:
        print(summary(answers))
    return answers


def autoload() -> list[Answer]:
    """What importing the kit does: load the answers of every assignment notebook beside this one (its
    own included), when this kit sits in an assignment's folder (`aNN_name/coursekit/`). The judge's
    kit never calls it: a sandbox gets exactly the answers the judge sends (`load_cells`)."""
    if _kit_assignment() is None:
        return []
    # Under `python -m coursekit.engine.training` a notebook's imports cell imports the module runpy
    # is about to run as __main__, and runpy warns; harmless, since that module's main block runs
    # the imported copy, the one the answers are plugged into.
    warnings.filterwarnings("ignore", message=r"'coursekit\.[\w.]+' found in sys\.modules", category=RuntimeWarning)
    return load_answers()


def summary(answers: list[Answer]) -> str:
    """The line importing the kit prints: the exercises the student sees by their titles."""
    done = sum(a.status == "yours" for a in answers)
    todo = [title(a.exercise) for a in answers if a.status != "yours"]
    line = f"Your exercises from your notebooks: {done} done and in use"
    if todo:
        shown = ", ".join(todo[:6]) + (f" and {len(todo) - 6} more" if len(todo) > 6 else "")
        line += f"; still to do: {shown}"
    return line


def status() -> None:
    """Print what became of every exercise of the notebooks loaded."""
    if not _loaded:
        print("No answers loaded: none of your assignment notebooks is in the folders beside this "
              "assignment's (coursekit.load_answers(folder) loads them from another folder)")
        return
    width = max(len(title(a.exercise)) for a in _loaded.values())
    for a in sorted(_loaded.values(), key=lambda a: _order(a.exercise)):
        print(f"{title(a.exercise):<{width}}  {assignment_title(a.assignment)}: "
              f"{a.status}{': ' + a.detail if a.detail else ''}")


# --------------------------------------------------------------------------------------------
# Which of your ops is wrong? Gradient checks of the engine's pieces, each named by its exercises.
# --------------------------------------------------------------------------------------------
def _cases():
    """(what, check) for every piece the CNN's training runs through (the exercises each is made of:
    `DIAGNOSED` in `_exercises.py`). Each check uses only the engine's public API and central
    differences: it knows no answer, it compares your backward with your forward."""
    import numpy as np

    from .engine import Function, Tensor, nn, optim
    from .engine.nn import functional as F
    from .engine.ops import avg_pool2d, conv2d, max_pool2d
    from .testing import gradcheck

    rng = np.random.default_rng(0)

    def t(*shape, low=None):
        data = rng.uniform(0.5, 2.0, shape) if low else rng.standard_normal(shape)
        return Tensor(data, requires_grad=True)

    class Twice(Function):  # a given op: the backward walk alone is checked with it
        def forward(self, x):
            return 2.0 * x

        def backward(self, grad):
            return Twice.apply(grad)

    def walk():
        x = Tensor(np.ones(3), requires_grad=True)
        a = Twice.apply(x)
        out = Twice.apply(a)
        out2 = Twice.apply(a)
        for root in (out, out2):
            root.backward(Tensor(np.ones(3)), retain_graph=True)
        if not np.allclose(x.grad.data, 8.0):
            raise AssertionError(f"two backward passes of 2*(2x) should accumulate 8 into x.grad, got {x.grad.data}")

    def adam():
        p = Tensor(np.array([1.0, -2.0]), requires_grad=True)
        opt = optim.Adam([p], lr=0.1)
        for _ in range(20):
            p.grad = Tensor(2 * p.data)  # the gradient of |p|^2
            opt.step()
        if not np.all(np.abs(p.data) < np.array([1.0, 2.0])):
            raise AssertionError("20 Adam steps on |p|^2 did not move p towards 0")

    def im2col_adjoint():
        from .engine.ops import im2col as module
        cols_of, image_of = getattr(module, "im2col", None), getattr(module, "col2im", None)
        if cols_of is None or image_of is None:
            return
        x = rng.standard_normal((2, 3, 6, 5))
        try:
            cols = cols_of(x, (3, 2), 1, 1, 1)
            back = image_of(rng.standard_normal(cols.shape), x.shape, (3, 2), 1, 1, 1)
        except TypeError:
            return  # another signature: the conv2d check covers them
        c = rng.standard_normal(cols.shape)
        lhs, rhs = float(np.sum(cols * c)), float(np.sum(x * image_of(c, x.shape, (3, 2), 1, 1, 1)))
        if back.shape != x.shape or not np.isclose(lhs, rhs):
            raise AssertionError("col2im is not the adjoint of im2col: <im2col(x), c> != <x, col2im(c)>")

    labels = np.array([0, 2, 1, 2])
    return [
        ("the backward walk", walk),
        ("x + y (broadcast)", lambda: gradcheck(lambda a, b: a + b, t(3, 4), t(4))),
        ("x * y (broadcast)", lambda: gradcheck(lambda a, b: a * b, t(3, 4), t(3, 1))),
        ("x / y", lambda: gradcheck(lambda a, b: a / b, t(3, 4), t(4, low=True))),
        ("x ** p", lambda: gradcheck(lambda a: a ** 3, t(3, 4))),
        ("exp, log", lambda: gradcheck(lambda a: a.exp() + a.log(), t(3, 4, low=True))),
        ("tanh, sigmoid", lambda: gradcheck(lambda a: a.tanh() * a.sigmoid(), t(3, 4))),
        ("sum", lambda: gradcheck(lambda a: a.sum(axis=1), t(3, 4))),
        ("transpose, reshape", lambda: gradcheck(lambda a: a.transpose(1, 0) * 1.0, t(3, 4))),
        ("indexing", lambda: gradcheck(lambda a: a[np.array([0, 0, 2]), 1:3], t(3, 4))),
        ("matmul", lambda: gradcheck(lambda a, b: a @ b, t(3, 4), t(4, 2))),
        ("log_softmax", lambda: gradcheck(lambda a: a.log_softmax(axis=1), t(3, 4))),
        ("im2col / col2im", im2col_adjoint),
        ("conv2d", lambda: gradcheck(lambda a, w: conv2d(a, w, padding=1, stride=2), t(2, 3, 5, 5), t(4, 3, 3, 3))),
        ("max_pool2d", lambda: gradcheck(lambda a: max_pool2d(a, 2), t(2, 3, 4, 4))),
        ("avg_pool2d", lambda: gradcheck(lambda a: avg_pool2d(a, 2), t(2, 3, 4, 4))),
        ("linear", lambda: gradcheck(F.linear, t(5, 4), t(3, 4), t(3))),
        ("batch_norm", lambda: gradcheck(
            lambda a: F.batch_norm(a, np.zeros(3), np.ones(3), training=True), t(4, 3, 2, 2))),
        ("cross_entropy", lambda: gradcheck(
            lambda a: F.cross_entropy(a, labels, label_smoothing=0.1), t(4, 3))),
        ("Adam", adam),
        ("Module.parameters", lambda: len(list(nn.Linear(2, 3).parameters())) == 2 or (_ for _ in ()).throw(
            AssertionError("nn.Linear(2, 3).parameters() should give its weight and bias"))),
    ]


def diagnose(quiet: bool = False) -> list[str]:
    """Check every piece of the engine the CNN's training runs through; return (and print) one line
    per piece that fails, naming the exercises it is made of."""
    from ._exercises import DIAGNOSED  # type: ignore[import-not-found]  # shipped as coursekit/answers.py
    problems = []
    for what, check in _cases():
        try:
            check()
        except Exception as error:  # noqa: BLE001 (whatever your code raises is the diagnosis)
            named = [title(e) for e in DIAGNOSED.get(what, ())]
            where = ", ".join(named[:6]) + (" …" if len(named) > 6 else "")
            message = str(error).strip().split("\n")[0][:200]
            if isinstance(error, NotImplementedError):  # its message names the exercise to do
                problems.append(f"{what}: {message}")
            else:
                problems.append(f"{what}: {type(error).__name__}: {message} [exercises: {where or '?'}]")
    if not quiet:
        print("\n".join(problems) if problems else "diagnose: every piece passes its gradient check")
    return problems
