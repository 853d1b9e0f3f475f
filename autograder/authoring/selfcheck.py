"""``autograder check``: test an assignment's tests with real nbgrader runs before students do.

In a scratch copy of the course, with its own gradebook (the real one is never touched):

1. nbgrader generate_assignment, as ``autograder release`` does;
2. submissions: ``solution`` (the source notebooks, solutions in), ``unanswered`` (the released
   notebooks) and ``mutant-<id>`` for each mutant of the catalogue (:mod:`autograder.mutants`),
   which is the source with one edit inside one solution region;
3. all graded by :func:`autograder.commands.grade.grade` (parallel workers, the same limits as for
   students);
4. verdicts on the autograded test cells (code grade cells that are not solutions):
   the solution scores full marks on each; the unanswered notebook scores 0 on each (a test that
   passes without an answer tests nothing); each mutant loses points on a test cell of its own
   exercise and on no other cell.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.commands.grade import grade
from autograder.commands.release import add_release_files
from autograder.course import CourseError, catalogue, notebook
from autograder.course.directory import Course
from autograder.grading.record import Outcome
from autograder.grading.workers import Limits, scratch_dir
from autograder.mutants import Mutant, apply_mutant, load_alternatives, load_mutants

SOLUTION, UNANSWERED = "solution", "unanswered"
TIMESTAMP = "2000-01-01 00:00:00.000000 UTC"


@dataclass(frozen=True)
class TestCell:
    notebook: str
    grade_id: str
    points: float


@dataclass(frozen=True)
class CaseResult:
    """One line of `autograder check`'s table: how one case (the solutions, the unanswered notebook,
    a mutant, an alternative) was graded against what it should get. Not the judge's Verdict on an
    exercise (autograder.judge.judge.Verdict), which this is built from through a whole grading."""
    subject: str
    exercise: str
    expected: str
    lost: str
    ok: bool
    verdict: str


def test_cells(course: Course, assignment: str) -> list[TestCell]:
    """The autograded test cells of an assignment, from its source notebooks."""
    cells = []
    for name in course.notebooks(assignment):
        for cell in notebook.read(course.source_dir(assignment) / f"{name}.ipynb").cells:
            if notebook.is_test(cell):
                cells.append(TestCell(name, notebook.grade_id(cell), float(notebook.nbgrader(cell).get("points", 0))))
    return cells


def _read_notebooks(folder: Path) -> dict[str, dict]:
    return {p.stem: notebook.read(p) for p in sorted(folder.glob("*.ipynb"))}


def _write_submission(course: Course, assignment: str, student: str, notebooks: dict[str, dict]) -> None:
    folder = course.submitted_dir(student, assignment)
    folder.mkdir(parents=True)
    for name, nb in notebooks.items():
        notebook.write(nb, folder / f"{name}.ipynb")
    (folder / "timestamp.txt").write_text(TIMESTAMP)


def _scores(course: Course, assignment: str, student: str) -> dict[str, float]:
    with course.gradebook() as gb:
        submission = gb.find_submission(assignment, student)
        return {g.name: g.score for nb in submission.notebooks for g in nb.grades}


def _judge(subject: str, outcome: Outcome, cells: list[TestCell], scores: dict[str, float] | None,
           mutant: Mutant | None) -> CaseResult:
    if mutant is None and (subject == SOLUTION or subject.startswith("alternative-")):
        exercise, expected = "all", "none"
    elif mutant is None:
        exercise, expected = "all", "all"
    else:
        exercise = mutant.exercise
        expected = ", ".join(c.grade_id for c in cells if notebook.exercise_of(c.grade_id) == exercise)
    if scores is None:
        return CaseResult(subject, exercise, expected, "", False, f"ERROR: not graded: {outcome.detail}")
    lost = {c.grade_id: c.points - (scores.get(c.grade_id) or 0.0) for c in cells}
    lost = {gid: pts for gid, pts in lost.items() if pts > 0}
    total = f"{sum(lost.values()):g}"
    if subject == SOLUTION or subject.startswith("alternative-"):
        bad = sorted(lost)
        return CaseResult(subject, exercise, expected, total, not bad,
                       "full marks" if not bad else
                       f"FAIL: {'the solution' if subject == SOLUTION else 'this correct answer'} loses points on "
                       f"{', '.join(bad)}")
    if subject == UNANSWERED:
        passing = sorted(c.grade_id for c in cells if c.grade_id not in lost and c.points > 0)
        return CaseResult(subject, exercise, expected, total, not passing,
                       "0 on every test" if not passing else f"FAIL: passes without an answer: {', '.join(passing)}")
    own = {gid: pts for gid, pts in lost.items() if notebook.exercise_of(gid) == exercise}
    other = {gid: pts for gid, pts in lost.items() if notebook.exercise_of(gid) != exercise}
    if not own:
        verdict = "FAIL: not caught (its exercise keeps full marks)"
    elif other:
        verdict = "FAIL: also breaks " + ", ".join(f"{gid} (-{pts:g})" for gid, pts in sorted(other.items()))
    else:
        verdict = "caught"
    return CaseResult(subject, exercise, expected, total, bool(own) and not other, verdict)


def _messages(course: Course, assignment: str, student: str, exercise: str) -> str:
    """The judge's messages on the exercise's test cells, as the autograded notebooks hold them."""
    out = []
    for path in sorted(course.autograded_dir(student, assignment).glob("*.ipynb")):
        for cell in notebook.read(path).cells:
            if notebook.grade_id(cell) and notebook.exercise_of(notebook.grade_id(cell)) == exercise:
                out += [notebook.failure_message(o, exercise) for o in cell.get("outputs", [])
                        if o.get("output_type") == "error"]
    return "\n".join(out)


def _names_the_mistake(verdict: CaseResult, mutant: Mutant, messages: str) -> CaseResult:
    """A caught mutant whose message does not contain its ``expect`` phrase fails: the student would
    be told that something is wrong, not what."""
    if mutant.expect not in messages:
        shown = messages.split("\n")[0][:160]
        return replace(verdict, ok=False,
                       verdict=f"FAIL: caught, but the message does not name the mistake ({mutant.expect!r}): {shown}")
    return verdict


def check(course: Course, assignment: str, *, jobs: int = 2, cell_timeout: int | None = None,
          progress: bool = True, exercise: str | None = None) -> list[CaseResult]:
    """Self-check one assignment: a verdict for the solution, the unanswered notebook, each mutant
    and alternative (only those of ``exercise``, when given)."""
    cells = test_cells(course, assignment)
    if not cells:
        raise CourseError(f"{assignment} has no autograded test cells (code cells with grade: true)")
    exercises = {notebook.exercise_of(c.grade_id) for c in cells}
    if exercise is not None and exercise not in exercises:
        raise CourseError(f"{assignment} has no exercise {exercise!r} (no test cell {exercise}-visible / -hidden)")
    mutants = [m for m in load_mutants(assignment) if exercise in (None, m.exercise)]
    alternatives = [m for m in load_alternatives(assignment) if exercise in (None, m.exercise)]
    source = _read_notebooks(course.source_dir(assignment))
    mutated: dict[str, dict[str, dict]] = {}
    for mutant in mutants:  # all catalogue errors before any (slow) nbgrader run
        if mutant.exercise not in exercises:
            raise CourseError(f"mutant '{mutant.id}' of {assignment}: exercise '{mutant.exercise}' has no "
                              f"test cells (expected grade_ids {mutant.exercise}-visible / -hidden)")
        name, changed = apply_mutant(source, mutant, assignment)
        mutated[f"mutant-{mutant.id}"] = {**source, name: changed}
    for alternative in alternatives:  # correct answers in other styles: full marks
        name, changed = apply_mutant(source, alternative, assignment)
        mutated[f"alternative-{alternative.id}"] = {**source, name: changed}

    tmp = scratch_dir("autograder-check-")
    try:
        scratch = Course(tmp, f"sqlite:///{tmp / 'gradebook.db'}")
        shutil.copy(course.root / "nbgrader_config.py", scratch.root)
        shutil.copytree(course.source_dir(assignment), scratch.source_dir(assignment),
                        ignore=shutil.ignore_patterns(*course.coursedir().ignore))
        result = scratch.api().generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"nbgrader generate_assignment failed for {assignment}:\n{result.get('log', '')}")
        add_release_files(scratch, assignment)  # the kit, if the notebooks use it: as `release` does

        submissions = {SOLUTION: source, UNANSWERED: _read_notebooks(scratch.release_dir(assignment)),
                       **mutated}
        for student, notebooks in submissions.items():
            _write_submission(scratch, assignment, student, notebooks)
        if any(s.whole_engine for s in catalogue.assignment(assignment)):
            # Judged on the student's whole engine: every subject has finished the earlier
            # assignments with the reference answers (their source notebooks), so only this
            # assignment's answers differ between the subjects.
            for earlier in course.assignments():
                if earlier.split("_", 1)[0] >= assignment.split("_", 1)[0]:
                    continue
                shutil.copytree(course.source_dir(earlier), scratch.source_dir(earlier),
                                ignore=shutil.ignore_patterns(*course.coursedir().ignore))
                for student in submissions:
                    _write_submission(scratch, earlier, student, _read_notebooks(course.source_dir(earlier)))
        by_student = {f"mutant-{m.id}": m for m in mutants}
        outcomes = grade(scratch, assignment, list(submissions), jobs=jobs,
                         limits=Limits(cell_timeout=cell_timeout), progress=progress)
        verdicts = []
        for outcome in outcomes:
            scores = _scores(scratch, assignment, outcome.student) if outcome.status != "failed" else None
            subject = by_student.get(outcome.student)
            verdict = _judge(subject.id if subject else outcome.student, outcome, cells, scores, subject)
            if subject is not None and verdict.ok:
                verdict = _names_the_mistake(verdict, subject,
                                             _messages(scratch, assignment, outcome.student, subject.exercise))
            verdicts.append(verdict)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    order = {SOLUTION: 0, UNANSWERED: 1}
    return sorted(verdicts, key=lambda v: (order.get(v.subject, 2), v.subject))
