"""Judge one exercise of one notebook: the check runs here, the answer runs in a sandbox.

For exercise E the sandbox gets (1) the course kit in which E is stubbed, the other exercises
of E's assignment are sealed (the judge runs their reference on plain data: isolation, one
early bug costs points once, without their code in the sandbox), later assignments are stubbed
and earlier ones are the reference (see :func:`_engine`); (2) the student's code cells above
E's first test cell, in notebook order (test cells never run: the judge decides); (3) E's name.
The check registered for E is then called with a proxy of the student's answer and decides,
from plain data only, whether it passes. Every way the sandbox can end becomes a verdict with
a message, never an exception:

what happened                             verdict message
========================================  ==========================================
the check raised GradingFailure           its message
the answer raised NotImplementedError     not done yet: its cell still raises ...
the answer raised anything else           your code raised X: ... (in f, line n)
the sandbox ran over its time budget      ran over the time limit ... (endless loop?)
the sandbox died (os._exit, segfault)     the Python process running your code ...
========================================  ==========================================
=======
=====================================  ==========================================  =============
what happened                          verdict message                             kind
=====================================  ==========================================  =============
the check passed                                                                   right
the check raised GradingFailure        its message                                 wrong
  (on the answer raising at a line     ... your code raised X ... (in f, line n)   wrong
  of the student's; without one)                                                   crash
the answer is not defined              ... is not defined: write it in its ...     not answered
the answer raised NotImplementedError  not done yet: its cell still raises ...     not answered
the answer raised anything else        your code raised X: ... (in f, line n)      wrong (crash
                                                                                   without a line)
the sandbox ran over its time budget   ran over the time limit ... (endless loop?)  time-out
the sandbox died (os._exit, segfault)  the Python process running your code ...    sandbox died
the check itself failed                the grader could not check this exercise    grader error
=====================================  ==========================================  =============

The kind (:mod:`autograder.judge.verdict`) is decided here, once, and stored with the verdict:
what reads the verdicts later never guesses it from the message.
"""
from __future__ import annotations

import functools
import time
import traceback

import numpy as np

from autograder import kit
from autograder.course import catalogue, notebook
from autograder.course.catalogue import Spec
from autograder.judge.bubblewrap import Sandbox
from autograder.judge.checks import GradingFailure, first_line, prepare, raised
from autograder.judge.context import judging
from autograder.judge.proxy import StudentError
from autograder.judge.scrub import scrub
from autograder.judge.sealed import Oracle
from autograder.judge.session import SandboxDied, SandboxFailure, SandboxTimeout, Session
from autograder.judge.verdict import (
    CRASH,
    GRADER_ERROR,
    NOT_ANSWERED,
    RIGHT,
    SANDBOX_DIED,
    TIMEOUT,
    WRONG,
    Verdict,
)


@functools.cache
def transform(source: str) -> str:
    """IPython syntax (magics, ``!shell``, ``x?``) as plain Python calls on ``get_ipython()``.

    Text in, text out: the trusted side only rewrites the student's source, never runs it.
    """
    from IPython.core.inputtransformer2 import TransformerManager
    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 (unparseable input stays as it is and fails in the sandbox)
        return source


def code_cells(cells: list[dict], exercise: str | None = None) -> list[tuple[str, str]]:
    """(label, source) of the code cells above ``exercise``'s first test cell (every code cell
    without ``exercise``), test cells left out.

    ``cells`` are nbformat cells of a notebook whose structure was restored from the template,
    so test cells are the template's and carry its metadata.
    """
    out = []
    for index, cell in enumerate(cells):
        grade_id = notebook.grade_id(cell)
        if notebook.is_test(cell) and notebook.exercise_of(grade_id) == exercise:
            break
        if cell.get("cell_type") != "code" or notebook.is_test(cell):
            continue
        out.append((grade_id or f"cell {index + 1}", transform(notebook.text(cell.get("source", "")))))
    return out


@functools.cache
def _engine(exercise_id: str) -> tuple[dict, dict[str, str], tuple[Spec, ...], frozenset[str]]:
    """The sandbox's kit for one exercise, every exercise name -> its kit module, the exercises
    sealed in it (their reference runs here, see :mod:`autograder.judge.sealed`) and the ones the
    oracle's engine stubs.

    What the kit holds of each exercise, for an exercise E of assignment A:

    - E: a stub (its reference is nowhere in the sandbox);
    - every other exercise of A, answered or not: sealed (isolation: the engine's unbroadcast is
      the reference's when Mul is judged, yet none of its code is in the sandbox). So E's verdict
      depends on E's answer alone: a sibling left blank, answered wrongly or answered rightly is
      the same sealed reference, and skipping one exercise costs that exercise only;
    - the exercises E's check withholds (``@graded(..., withholds=...)``): stubs, because their
      reference computes E's answer without calling E (attention's backward holds the softmax's
      gradient), so an answer calling them would be served by the course's code;
    - exercises of later assignments: stubs, as in the student's own kit (sealed for the few
      checks that drive them, ``@graded(..., drives=...)``);
    - exercises of earlier assignments: the reference (what a student of A has done already);
      a verdict's message is scrubbed of their code in every form (:mod:`autograder.judge.scrub`).

    The oracle's engine stubs what the sandbox stubs, E included (E while a request runs, so that
    one engine serves a whole assignment): a sealed reference that calls E (Add's backward calls
    unbroadcast) meets E's stub, never E's reference, so an answer cannot have a sealed sibling
    compute E for it (the oracle says so, :class:`autograder.judge.sealed.Oracle`).
    A check that wants E where a sibling calls it drives E itself with the arguments the sibling
    would pass, computed in the judge (``checks.recorded_calls``). The one exception: a check that
    drives later assignments (run_backward's), whose ops' gradients the oracle runs on the graph walk.
    """
    judged = catalogue.exercise(exercise_id)
    specs = catalogue.in_engine()
    homes = {s.name: kit.rename(s.module, top_level=False) for s in specs}
    if judged.whole_engine:  # every exercise stubbed: the student's answers fill the engine
        return kit.compiled(kit.kit_modules(specs, specs)), homes, (), frozenset()
    driven = judged.drives
    later = [s for s in specs if s.prefix > judged.prefix and s.prefix not in driven]
    withheld = [s for s in specs if s.id in judged.withholds]
    sealed = tuple(s for s in specs if (s.prefix == judged.prefix or s.prefix in driven)
                   and s.id != judged.id and s.id not in judged.withholds)
    if judged.in_engine:
        specs = [*(s for s in specs if s.id != judged.id), judged]
        homes[judged.name] = kit.rename(judged.module, top_level=False)
    stubbed = [*later, *withheld, judged] if judged.in_engine else [*later, *withheld]
    return (kit.compiled(kit.kit_modules(stubbed, specs, sealed=list(sealed))), homes, sealed,
            frozenset(s.id for s in [*later, *withheld]))


class HungCells:
    """The cells that ran over their exercise's budget, remembered for the exercises below them.

    Every exercise re-runs the cells above it in a fresh sandbox; a cell that hangs would cost
    each of them a whole budget. This base class fails the exercises below a hung cell at once,
    with the same message (:func:`judge` on its own, as the tests call it); grading a submission
    uses :class:`autograder.judge.submission.SkippedCells`, which skips the cell instead, as
    nbgrader interrupts a cell and goes on.
    """

    def __init__(self) -> None:
        self.hung: dict[tuple[str, str], str] = {}

    def known(self, cells: list[tuple[str, str]]) -> str | None:
        return next((self.hung[cell] for cell in cells if cell in self.hung), None)

    def remember(self, cells: list[tuple[str, str]], label: str, message: str) -> None:
        for cell in cells:
            if cell[0] == label:
                self.hung[cell] = message


def judge(exercise_id: str, cells: list[tuple[str, str]], *, sandbox: Sandbox, budget: float = 60.0,
          hung: HungCells | None = None, earlier: list[tuple[str, list[dict]]] | None = None) -> Verdict:
    """Run the hidden check of ``exercise_id`` on the answer the cells define.

    ``earlier``: for an exercise judged on the student's whole engine (``Spec.whole_engine``), the
    cells of the student's notebooks of the earlier assignments, [(assignment, cells)]. Nothing
    else of the student's is read: the other exercises of the assignment are sealed whatever the
    student wrote there (:func:`_engine`)."""
    started = time.monotonic()
    the_spec = catalogue.exercise(exercise_id)  # LookupError names an unregistered exercise: a course error
    others = [s.name for s in catalogue.assignment(exercise_id) if s.id != exercise_id]
    modules, homes, sealed_specs, stubbed = _engine(exercise_id)

    def verdict(kind: str = RIGHT, message: str = "", detail: str = "") -> Verdict:
        # passed is the kind's to say: a bool given as the kind is not one of KINDS, and Verdict refuses it
        seconds = time.monotonic() - started  # the judging, not the scrubbing (its index is built once)
        return Verdict(exercise_id, kind == RIGHT, scrub(message, exercise_id), seconds, detail, kind)

    known = hung.known(cells) if hung is not None else None
    if known is not None:
        return verdict(TIMEOUT, known)
    try:
        with Session(sandbox, budget=budget) as session, judging(session, the_spec):
            # A check that drives later assignments (run_backward's) has the oracle run their ops'
            # gradients on the engine's graph walk: there E is machinery, and a sealed node is no walk.
            session.oracle = Oracle(list(sealed_specs), stubbed, None if the_spec.drives else the_spec)
            ready = session.setup(modules, homes, cells, the_spec.name, others,
                                  (earlier or []) if the_spec.whole_engine else None)
            if not ready.defined:
                return verdict(*_undefined(the_spec.name, exercise_id, ready.cells))
            try:
                assert the_spec.check is not None
                answer = ready.answer if the_spec.whole_engine or not the_spec.in_engine \
                    else prepare(ready.answer, the_spec)
                the_spec.check(answer, np.random.default_rng(the_spec.seed))
            except GradingFailure as failure:
                return verdict(failure.kind, str(failure))
            except NotImplementedError as error:
                stub = first_line(error)
                other = kit.stubbed(stub)
                if other is not None and other.id != exercise_id:
                    if the_spec.whole_engine:
                        # a piece of an earlier assignment the student has not done (or not handed in)
                        return verdict(NOT_ANSWERED, f"your engine is missing a piece: {stub}")
                    return verdict(WRONG, _stub_met(the_spec, other, stub))
                # the words of the notebook's own instructions ("replace `raise NotImplementedError()`")
                return verdict(NOT_ANSWERED, "not done yet: its cell still raises NotImplementedError() "
                                             "where your code goes")
            except StudentError as error:
                return verdict(raised(error), f"your code raised {error.remote_type}: {first_line(error)}{error.where}")
            except Exception as error:  # noqa: BLE001 (a bug of the check's own: the student is not blamed silently)
                return verdict(GRADER_ERROR, "the grader could not check this exercise; your instructor has been told",
                               detail="".join(traceback.format_exception(error)))
    except SandboxTimeout as failure:
        message = f"your code {failure} (an endless loop, or far too slow?)"
        label = str(failure).rpartition("while running your cell ")[2] if "while running your cell" in str(failure) \
            else None
        if hung is not None and label:
            hung.remember(cells, label, message)
        return verdict(TIMEOUT, message)
    except SandboxDied as failure:
        where = "" if "while running your cell" in str(failure) else " while this exercise was checked"
        return verdict(SANDBOX_DIED, f"the Python process running your code {failure}{where}")
    except SandboxFailure as failure:  # it broke the sandbox's protocol: the sandbox is of no more use
        return verdict(SANDBOX_DIED, f"your code {failure}")
    return verdict()


def _stub_met(judged: Spec, other: Spec, stub: str) -> str:
    """What to tell a student whose answer reached the kit's stub of another exercise, ``other``
    (its message ``stub``): one its check withholds, or one of a later assignment. Never "not done":
    whether the student did it is not what decides (the check reads nothing but this exercise's
    answer). Exercises and assignments are named by their titles, as the notebooks name them."""
    if other.id in judged.withholds:
        return (f"your code calls {other.title}, which is not run while {judged.title} is checked: "
                f"the course's {other.title} computes this exercise's answer itself; write {judged.title} "
                "without it")
    if other.prefix > judged.prefix:
        return (f"your code calls {other.title}, an exercise of a later assignment "
                f"({kit.assignment_title(other.prefix)}): the engine of "
                f"{kit.assignment_title(judged.prefix)} does not have it yet")
    return f"your code calls another exercise that is not there: {stub}"


def _undefined(name: str, exercise_id: str, cells: list[dict]) -> tuple[str, str]:
    """(kind, message) of an answer the student's cells did not define."""
    own = next((c for c in cells if c["label"] == exercise_id), None)
    if own is not None and own["error"] is not None:
        e = own["error"]
        return CRASH, (f"the cell that defines {name} raised {e['type']}: {e['msg'][:300]}{e['where']}; "
                       "fix it and rerun it")
    return NOT_ANSWERED, f"{name} is not defined: write it in its exercise cell and run it"


__all__ = ["Verdict", "judge", "code_cells", "transform"]
