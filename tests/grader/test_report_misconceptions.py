"""The judge's messages grouped by bug: the same bug is one group whatever case failed first and
whatever values, shapes, dtypes, line numbers and names the message quotes; not answered, crashes,
time-outs and a notebook that could not be read are kinds of their own. The kind is the one the
judge recorded with the verdict; a verdict recorded without one (before kinds were) is read from
its message, in the judge's wording of then (autograder/exercises/, autograder/judge/judge.py)."""
from autograder.analytics.misconceptions import (
    BUG,
    CRASH,
    GRADER,
    NOT_ANSWERED,
    NOT_HANDED_IN,
    TIMEOUT,
    UNREADABLE,
    classify,
    group,
)

AXIS0 = ("you summed only axis 0: sum over every axis that broadcasting "
         "added in front or stretched from size 1")


def test_one_bug_in_two_cases_and_two_dtypes_is_one_group():
    first = classify(f"summing back over a stretched size-1 last axis, float64: {AXIS0}")
    other = classify(f"summing back over a new leading axis and a stretched size-1 axis, float32: {AXIS0}")
    assert first == other and first[0] == BUG
    assert classify("x and y of the same shape, float64: the sign of y's gradient: d(x/y)/dy = -x / y^2 "
                    "(a minus sign)") != first


def test_an_exception_at_a_line_of_the_students_is_a_bug_grouped_by_what_was_raised():
    """A wrong answer that raises, the judge quoting the student's line, is a bug of that code (issue
    37): labelled so, grouped by the exception, whatever line or values it quotes."""
    a = classify("summing over the last axis, float64: Sum.backward: your code raised ValueError: broadcast_to: "
                 "cannot broadcast shape (3,) to (3, 4) (in backward, line 15). put the reduced axes back")
    b = classify("summing over the first axis, float32: Sum.backward: your code raised ValueError: broadcast_to: "
                 "cannot broadcast shape (4, 2) to (3, 4, 2) (in my_helper, line 31). put the reduced axes back")
    assert a == b and a[0] == BUG
    assert group("a02-sum", {"ann": {"message": "summing over the last axis, float64: Sum.backward: your code raised "
                                        "ValueError: bad (in backward, line 15)", "kind": "wrong"}}
                 )[0].title.startswith("your code raised")
    assert classify("your code raised KeyError: 'alice' (in f, line 2)") == \
        classify("your code raised KeyError: 'bob' (in g, line 9)")
    assert classify("your code raised KeyError: 'x'")[1] != classify("your code raised IndexError: 'x'")[1]
    assert classify("your code raised KeyError: 'x'")[0] == CRASH   # no line of the student's to show
    assert classify("the Python process running your code exited with code 3 (os._exit, sys.exit or a crash) "
                    "while this exercise was checked")[0] == CRASH


def test_the_kind_recorded_with_a_verdict_decides_its_group_whatever_the_message_says():
    """A message reworded (or one that happens to quote a phrase of another kind's) stays in its group."""
    assert classify("Mul is missing: write it in its cell (a02-mul)", "not answered") == (NOT_ANSWERED, NOT_ANSWERED)
    assert classify("the check gave up after 10 s", "time-out") == (TIMEOUT, TIMEOUT)
    assert classify("the worker that ran your code stopped", "sandbox died")[0] == CRASH
    assert classify("the grader hit a snag", "grader error") == (GRADER, GRADER)
    assert classify("case A, float64: you wrote 'not implemented yet' in a string", "wrong") == \
        (BUG, "you wrote 'not implemented yet' in a string")
    groups = group("a02-mul", {"ann": {"message": "reworded: Mul is not there yet", "kind": "not answered"},
                               "bo": {"message": "not implemented yet (the function still raises NotImplementedError)"},
                               "cy": {"kind": NOT_HANDED_IN}})
    assert [(g.kind, g.students) for g in groups] == [(NOT_ANSWERED, ["ann", "bo"]), (NOT_HANDED_IN, ["cy"])]


def test_the_judges_own_outcomes_are_kinds_of_their_own():
    assert classify("not implemented yet (the function still raises NotImplementedError)") == \
        (NOT_ANSWERED, NOT_ANSWERED)
    assert classify("Mul is not defined: write it in the exercise cell (a02-mul) and run it")[0] == NOT_ANSWERED
    assert classify("your code ran over the time limit of 10 s while running your cell a02-mul (an endless loop, "
                    "or far too slow?)") == (TIMEOUT, TIMEOUT)
    assert classify("a02_broadcasting.ipynb could not be read as a notebook (NotJSONError)")[0] == UNREADABLE
    assert classify("the grader could not check this exercise; your instructor has been told")[0] == GRADER


def test_groups_are_ranked_by_size_with_their_students_and_one_message():
    failures = {"ann": f"case A, float64: {AXIS0}", "bo": f"case B, float32: {AXIS0}",
                "cy": "not implemented yet (the function still raises NotImplementedError)",
                "di": "case A, float64: the stretched size-1 axes were not summed",
                "fa": f"case C, float64: {AXIS0}"}
    recorded = {s: {"message": m} for s, m in failures.items()}   # recorded before verdicts had kinds
    groups = group("a02-unbroadcast", {**recorded, "ed": {"kind": NOT_HANDED_IN}})
    assert [(g.kind, g.students) for g in groups] == [(BUG, ["ann", "bo", "fa"]), (BUG, ["di"]),
                                                      (NOT_ANSWERED, ["cy"]), (NOT_HANDED_IN, ["ed"])]
    assert groups[0].title == AXIS0 and groups[0].example == failures["ann"]
    assert groups[-1].title == NOT_HANDED_IN
