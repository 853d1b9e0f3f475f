"""The report's figures (matplotlib, files only): each one sized to its content, its title inside it."""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display; before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402

from autograder.analytics.gradebook import Row  # noqa: E402
from autograder.analytics.misconceptions import BUG, CRASH, TIMEOUT, WHERE, Group  # noqa: E402
from autograder.analytics.statistics import ExerciseStats  # noqa: E402
from autograder.course.files import replacing  # noqa: E402

COLORS = {"full": "#55A868", "partial": "#DD8452", "zero, answered": "#C44E52", "not answered": "#BBBBBB"}


def _save(fig, path: Path) -> None:
    with replacing(path, binary=True) as handle:
        fig.savefig(handle, format="png", dpi=110, bbox_inches="tight")  # the whole title and every label, never cut
    plt.close(fig)


def pending(rows: list[Row], points: dict[str, float]) -> str:
    """What the scores do not hold yet: the points of answers waiting to be graded by hand ('' if none).
    ``points``: grade_id -> its points."""
    waiting = [sum(points.get(g, 0.0) for g, score in r.cells.items() if score is None)
               for r in rows if r.score is not None]
    students = sum(1 for w in waiting if w)
    if not students:
        return ""
    return (f"{students} of {len(waiting)} students have written answers still to grade by hand "
            f"(up to {max(waiting):g} points each not counted yet)")


def scores(path: Path, assignment: str, rows: list[Row], max_score: float,
           points: dict[str, float] | None = None) -> None:
    """The histogram of the total scores; ``points`` (grade_id -> points) says which are still pending."""
    values = [r.score for r in rows if r.score is not None]
    waiting = pending(rows, points or {})
    fig, ax = plt.subplots(figsize=(7, 3.6 + 0.3 * bool(waiting)))
    # One bar per point when points are few, so that a bar is a score; else 20 equal bins.
    bins = [b - 0.5 for b in range(int(max_score) + 2)] if max_score <= 30 else 20
    ax.hist(values, bins=bins, range=(0, max_score), color="#4C72B0", edgecolor="white")
    ax.set(title=f"{assignment}: total scores ({len(values)} graded)" + (f"\n{waiting}" if waiting else ""),
           xlabel=f"score after the late penalty (out of {max_score:g})", ylabel="students")
    ax.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]  # MaxNLocator's
    _save(fig, path)


def exercises(path: Path, assignment: str, stats: list[ExerciseStats]) -> None:
    """One bar per exercise: the share of the graded students with full, partial, zero marks, and
    how many of the zeros did not answer."""
    labels = [s.exercise for s in stats][::-1]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.32 * max(1, len(stats))))
    left = [0.0] * len(stats)
    for name in COLORS:
        values = []
        for s in stats[::-1]:
            unanswered = s.graded - s.answered
            count = {"full": s.full, "partial": s.partial, "zero, answered": max(0, s.zero - unanswered),
                     "not answered": min(s.zero, unanswered)}[name]
            values.append(100 * count / s.graded if s.graded else 0.0)
        ax.barh(labels, values, left=left, color=COLORS[name], label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set(xlim=(0, 100), xlabel="% of the graded students",
           title=f"{assignment}: marks per exercise ({stats[0].graded if stats else 0} students)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5 / max(1, len(stats)) - 0.12), ncol=4, frameon=False)
    _save(fig, path)


def misconceptions(path: Path, assignment: str, stats: list[ExerciseStats], top: int = 12) -> None:
    """The largest groups of students who got an exercise wrong the same way (a bug, a crash, a
    time-out: not those who did not answer), across the assignment."""
    mistakes = [g for s in stats for g in s.groups if g.kind in (BUG, CRASH, TIMEOUT)]
    groups = sorted(mistakes, key=lambda g: -len(g.students))[:top][::-1]
    labels = [label(g) for g in groups]
    lines = sum(max(2, lab.count("\n") + 1) for lab in labels)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.28 * max(2, lines)))
    ax.barh(range(len(groups)), [len(g.students) for g in groups], color="#C44E52")
    ax.set_yticks(range(len(groups)), labels, fontsize=8)
    ax.set(xlabel="students", title=f"{assignment}: the most common mistakes"
           + ("" if groups else " (none: every lost point was an answer missing)"))
    ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    _save(fig, path)


def label(group: Group, width: int = 60) -> str:
    """A group's label on the chart, whole: the exercise and what went wrong, wrapped, never cut
    (the diagnosis is often its last words); the line it quotes left out."""
    return "\n".join(textwrap.wrap(f"{group.exercise}: {WHERE.sub('', group.title)}", width))


def course(path: Path, assignments: list[str], scores: dict[str, dict[str, tuple[float, float]]]) -> None:
    """Per assignment, the spread of the students' scores (% of the maximum)."""
    series = [[100 * s / m for a_scores in scores.values() if (sm := a_scores.get(a)) for s, m in [sm] if m]
              for a in assignments]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(assignments) + 2), 3.6))
    ax.boxplot(series, showmeans=True)
    ax.set_xticks(range(1, len(assignments) + 1), assignments, rotation=30 if len(assignments) > 4 else 0,
                  ha="right" if len(assignments) > 4 else "center")
    ax.set(ylim=(-5, 105), ylabel="% of the points", title=f"The course so far: {len(scores)} students")
    _save(fig, path)
