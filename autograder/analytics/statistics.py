"""Per exercise: how the class did (full, partial, zero, answered, late) and what went wrong.

An exercise's score is the sum of its auto-graded test cells with points (a 0-point visible cell
is a check for the student, not a grade); written answers are graded by hand and left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from autograder.analytics import misconceptions
from autograder.analytics.gradebook import Row, written
from autograder.analytics.misconceptions import NOT_ANSWERED, NOT_HANDED_IN, Group
from autograder.course import notebook as nbfile
from autograder.course.catalogue import title


@dataclass
class ExerciseStats:
    exercise: str
    title: str
    points: float
    graded: int = 0          # students graded on it
    full: int = 0
    partial: int = 0
    zero: int = 0
    answered: int = 0        # handed in and not the stub
    late: int = 0            # answered in a late submission
    total: float = 0.0       # points earned by the class
    groups: list[Group] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return self.total / self.graded if self.graded else 0.0

    @property
    def failing(self) -> int:
        return self.graded - self.full


def exercises(cells: list[tuple[str, str, float]]) -> dict[str, tuple[float, list[str]]]:
    """exercise -> (its auto-graded points, its grade cells with points), in notebook order."""
    out: dict[str, tuple[float, list[str]]] = {}
    for _, grade_id, points in cells:
        if written(grade_id) or points <= 0:
            continue
        exercise = nbfile.exercise_of(grade_id)
        total, ids = out.get(exercise, (0.0, []))
        out[exercise] = (total + points, [*ids, grade_id])
    return out


def exercise_stats(rows: list[Row], cells: list[tuple[str, str, float]]) -> list[ExerciseStats]:
    stats = []
    graded = [r for r in rows if r.score is not None]
    for exercise, (points, ids) in exercises(cells).items():
        entry = ExerciseStats(exercise, title(exercise), points)
        failures: dict[str, dict] = {}
        for row in graded:
            scores = [row.cells.get(gid) for gid in ids]
            if any(s is None for s in scores):
                continue
            score = sum(s or 0.0 for s in scores)
            verdict = row.verdicts.get(exercise)
            entry.graded += 1
            entry.total += score
            if score >= points:
                entry.full += 1
            elif score > 0:
                entry.partial += 1
            else:
                entry.zero += 1
            answered = verdict is not None and (verdict["passed"] or misconceptions.kind_of(verdict) != NOT_ANSWERED)
            entry.answered += answered
            entry.late += answered and row.seconds_late > 0
            if score < points:
                failures[row.student] = verdict if verdict and not verdict["passed"] else {"kind": NOT_HANDED_IN}
        entry.groups = misconceptions.group(exercise, failures)
        stats.append(entry)
    return stats
