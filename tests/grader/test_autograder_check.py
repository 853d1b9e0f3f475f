"""autograder check: solutions full, unanswered 0, mutants caught by their own exercise only."""

import pytest

from autograder.course import CourseError
from autograder.mutants import Mutant, apply_mutant

from support.course import ASSIGNMENT, FIXTURE, autograder, make_course, source_notebook, table

pytestmark = pytest.mark.xdist_group("autograder")

EXTRA_MUTANTS = '''
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(id="add-subtracts", exercise="a00-add",
           find="np.asarray(x, dtype=float) + np.asarray(y, dtype=float)",
           replace="np.asarray(x, dtype=float) - np.asarray(y, dtype=float)", why="sign error"),
    # adds into the caller's array: caught by add's hidden check; the next exercise's visible test
    # reuses that `x`, but every exercise is judged in a fresh sandbox, so it costs nothing there
    Mutant(id="in-place-add", exercise="a00-add",
           find="return np.asarray(x, dtype=float) + np.asarray(y, dtype=float)",
           replace="out = np.asarray(x, dtype=float)\\n    out += np.asarray(y, dtype=float)\\n    return out",
           why="mutates its input"),
    # an equivalent rewrite that no test can tell apart
    Mutant(id="equivalent", exercise="a00-square-backward",
           find="2.0 * np.asarray(x, dtype=float) * grad", replace="np.asarray(x, dtype=float) * grad * 2",
           why="not a bug"),
]
'''


def test_apply_mutant_edits_only_inside_the_solution_region():
    nb = {"a00_toy": source_notebook()}
    name, mutated = apply_mutant(nb, Mutant("m", "a00-add", "dtype=float) +", "dtype=float) -"), ASSIGNMENT)
    cell = next(c for c in mutated["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "a00-add")
    assert name == "a00_toy" and "dtype=float) - np.asarray(y" in cell["source"]
    with pytest.raises(CourseError, match="occurs 2 times"):
        apply_mutant(nb, Mutant("m", "a00-add", "dtype=float", "dtype=int"), ASSIGNMENT)
    with pytest.raises(CourseError, match="occurs 0 times"):  # in the docstring, outside the region
        apply_mutant(nb, Mutant("m", "a00-add", "Elementwise", "Pointwise"), ASSIGNMENT)
    with pytest.raises(CourseError, match="no solution cell with grade_id 'a00-nope'"):
        apply_mutant(nb, Mutant("m", "a00-nope", "x", "y"), ASSIGNMENT)


@pytest.mark.slow
def test_check_reports_caught_leaking_and_uncaught_mutants(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUTOGRADER_EXERCISES", str(FIXTURE / "exercises"))
    course = make_course(tmp_path / "course")
    catalogue = tmp_path / "mutants"
    catalogue.mkdir()
    (catalogue / f"{ASSIGNMENT}.py").write_text(EXTRA_MUTANTS)
    monkeypatch.setenv("AUTOGRADER_MUTANTS", str(catalogue))

    assert autograder(course, "check", ASSIGNMENT, "--jobs", "2") == 1
    out = capsys.readouterr().out
    rows = table(out)
    assert rows["solution"][-1] == "full marks"
    assert rows["unanswered"][-1] == "0 on every test"
    assert rows["add-subtracts"] == ["a00-add", "a00-add-visible, a00-add-hidden", "3", "caught"]
    assert rows["in-place-add"][-1] == "caught"
    assert rows["equivalent"][-1] == "FAIL: not caught (its exercise keeps full marks)"
    assert "check a00_toy: FAILED (1 of 5)" in out
    # the real course was not touched: check works in a scratch copy
    assert not (course.root / "gradebook.db").exists() and not (course.root / "submitted").exists()

    (catalogue / f"{ASSIGNMENT}.py").write_text(
        "from autograder.mutants import Mutant\nMUTANTS = [Mutant('twice', 'a00-add', 'dtype=float', 'dtype=int')]\n")
    assert autograder(course, "check", ASSIGNMENT) == 2
    assert "mutant 'twice' of a00_toy: `find` occurs 2 times" in capsys.readouterr().err


def test_a_caught_mutant_must_be_told_its_mistake(tmp_path, monkeypatch):
    from autograder.authoring.selfcheck import CaseResult, _names_the_mistake
    from autograder.course import CourseError
    from autograder.mutants import Mutant, load_mutants

    caught = CaseResult("m", "a02-mul", "a02-mul-hidden", "2", True, "caught")
    mutant = Mutant(id="m", exercise="a02-mul", find="x", replace="y", expect="unbroadcast")
    assert _names_the_mistake(caught, mutant, "a02-mul: sum it back with unbroadcast").ok
    vague = _names_the_mistake(caught, mutant, "a02-mul: wrong values")
    assert not vague.ok and "does not name the mistake" in vague.verdict
    # a catalogue that names one mutant's mistake names every one's
    (tmp_path / "a09_toy.py").write_text(
        "from autograder.mutants import Mutant\n"
        "MUTANTS = [Mutant(id='named', expect='unbroadcast', exercise='a09-x', find='a', replace='b'),\n"
        "           Mutant(id='unnamed', exercise='a09-x', find='a', replace='c')]\n")
    monkeypatch.setenv("AUTOGRADER_MUTANTS", str(tmp_path))
    with pytest.raises(CourseError, match="mutant 'unnamed' has no expect phrase"):
        load_mutants("a09_toy")
