"""Answers still waiting for the instructor's hand (the written answers, graded in the formgrader),
counted from the gradebook and said in one sentence, so that feedback released before they are
graded says so to the instructor: `autograder feedback` prints it, and the formgrader on the hub
shows it when its Release Feedback is pressed. nbgrader's Gradebook only: deploy/hub.py copies this
file beside the formgrader guard, where the grader is not installed (one source, two readers)."""
from __future__ import annotations

from collections.abc import Collection


def waiting(gradebook, assignment: str, students: Collection[str] | None = None) -> int:
    """How many answers of ``assignment``'s submissions (those of ``students``, or all) still need
    a grade by hand."""
    return sum(1 for submission in gradebook.assignment_submissions(assignment)
               if students is None or submission.student_id in students
               for nb in submission.notebooks for grade in nb.grades if grade.needs_manual_grade)


def warning(assignment: str, count: int) -> str:
    """The instructor's sentence, or "" when nothing waits."""
    if not count:
        return ""
    answers = "answer waits" if count == 1 else "answers wait"
    return (f"{count} written {answers} to be graded by hand in {assignment}: its feedback shows no score for "
            f"{'it' if count == 1 else 'them'} yet. Grade them in the formgrader (Manage Students), then "
            "release the feedback again.")
