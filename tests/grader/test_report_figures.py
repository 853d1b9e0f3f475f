"""The class page's figures say what they show (issue 37, small points): the score histogram says
when written answers still wait for a human, and a mistake's label on the chart is never cut before
its diagnosis."""
from __future__ import annotations

from autograder.analytics import plots
from autograder.analytics.gradebook import Row
from autograder.analytics.misconceptions import BUG, group

POINTS = {"a02-mul-hidden": 2.0, "a02-sum-hidden": 2.0, "a02-matmul-batch-written": 3.0}


def _row(student: str, written: float | None) -> Row:
    return Row(student, "graded", score=4.0, max_score=7.0,
               cells={"a02-mul-hidden": 2.0, "a02-sum-hidden": 2.0, "a02-matmul-batch-written": written})


def test_the_histogram_says_when_hand_graded_points_are_pending(tmp_path):
    rows = [_row("ann", None), _row("bo", None), _row("cy", 3.0), Row("di", "failed: unreadable")]
    note = plots.pending(rows, POINTS)
    assert note == "2 of 3 students have written answers still to grade by hand (up to 3 points each not counted yet)"
    assert plots.pending([_row("cy", 3.0)], POINTS) == ""
    plots.scores(tmp_path / "h.png", "a02_broadcasting", rows, 7.0, POINTS)
    assert (tmp_path / "h.png").stat().st_size > 1000


def test_a_long_mistake_keeps_its_diagnosis_on_the_chart(tmp_path):
    diagnosis = "put the reduced axes back as size 1 before broadcasting (kept_shape does it)"
    message = ("summing over the last axis of a (3, 4, 5) float64 array with keepdims=False: Sum.backward: "
               "your code raised ValueError: broadcast_to: cannot broadcast shape (3, 4) to (3, 4, 5) because the "
               f"trailing axes do not match (in backward, line 15). {diagnosis}")
    [g] = group("a02-sum", {"ann": {"message": message, "kind": "wrong"}})
    assert g.kind == BUG
    label = plots.label(g)
    assert " ".join(label.split()).endswith(diagnosis) and "line 15" not in label
    assert max(len(line) for line in label.split("\n")) <= 60
