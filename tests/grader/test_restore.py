"""autograder.judge.restore: a damaged submission is rebuilt on the template's nbgrader structure."""
import copy
from collections import Counter

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.course import notebook
from autograder.judge.restore import restore

from support import REPO

SOURCES = sorted((REPO / "assignments" / "source").glob("*/*.ipynb"))

MUL = "def mul(x, y):\n    \"\"\"x * y.\"\"\"\n    ### BEGIN SOLUTION\n    return x * y\n    ### END SOLUTION"
ADD = "def add(x, y):\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION"
STUB = 'def mul(x, y):\n    """x * y."""\n    # YOUR CODE HERE\n    raise NotImplementedError()'  # MUL as released
MUL_HIDDEN = "assert mul(1, 1) == 1\n### BEGIN HIDDEN TESTS\nassert mul(0, 5) == 0\n### END HIDDEN TESTS"


def _meta(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id, "schema_version": 3}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def test_cell(grade_id: str, source: str, points: float = 2) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata=_meta(grade_id, grade=True, solution=False, locked=True, points=points))


test_cell.__test__ = False  # a cell builder, not a test


def answer_cell(grade_id: str, source: str) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata=_meta(grade_id, grade=False, solution=True, locked=False))


def written_cell(grade_id: str, source: str, points: float = 3) -> nbformat.NotebookNode:
    return new_markdown_cell(source, metadata=_meta(grade_id, grade=True, solution=True, locked=False, points=points))


def template() -> nbformat.NotebookNode:
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                                "language_info": {"name": "python"}})
    nb.cells = [
        new_markdown_cell("# a02 · broadcasting"),
        new_code_cell("import numpy as np"),
        new_markdown_cell("## mul"),
        answer_cell("a02-mul", MUL),
        test_cell("a02-mul-visible", "assert mul(2, 3) == 6", points=1),
        test_cell("a02-mul-hidden", MUL_HIDDEN),
        new_markdown_cell("## add"),
        answer_cell("a02-add", ADD),
        test_cell("a02-add-hidden", "### BEGIN HIDDEN TESTS\nassert add(1, 2) == 3\n### END HIDDEN TESTS"),
        new_markdown_cell("Why does broadcasting need unbroadcast in backward?"),
        written_cell("a02-x-written", "Because the gradient has the output's shape."),
    ]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"  # nbformat draws random ids: two templates must be equal
    return nb


def released(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook as students get it: every cell as nbgrader's release makes it (solution regions
    stubbed, hidden test regions gone, a written answer's cell emptied to its prompt)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        cell.source = notebook.released(cell)
    return nb


def _nb(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _index(nb, grade_id: str) -> int:
    (index,) = [i for i, c in enumerate(nb.cells) if _nb(c).get("grade_id") == grade_id]
    return index


def _ids(nb) -> list[str]:
    return [_nb(c)["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]


def _restored(submitted) -> tuple[nbformat.NotebookNode, list[str]]:
    nb, messages = restore(template(), submitted)
    nbformat.validate(nb)
    assert _ids(nb) == _ids(template())  # every graded cell once, in the template's order
    return nb, messages


# -- an intact submission ------------------------------------------------------------------------

def test_an_intact_submission_comes_back_unchanged():
    nb, messages = _restored(template())
    assert nb.cells == template().cells and messages == []


def test_the_released_notebook_gets_its_hidden_tests_back_and_nothing_to_report():
    student = released(template())
    nb, messages = _restored(student)
    assert messages == []
    assert nb.cells[_index(nb, "a02-mul-hidden")].source == MUL_HIDDEN
    assert nb.cells[_index(nb, "a02-mul")].source == student.cells[3].source  # the student's answer, stubbed here


def test_the_release_copy_works_as_the_template_too():
    student = released(template())
    del student.cells[5]
    nb, messages = restore(released(template()), student)
    assert _ids(nb) == _ids(template()) and messages == ["restored test cell a02-mul-hidden (deleted)"]
    assert nb.cells[_index(nb, "a02-mul-hidden")].source == "assert mul(1, 1) == 1"


# -- test cells ----------------------------------------------------------------------------------

def test_a_deleted_test_cell_comes_back_after_the_cell_before_it():
    student = template()
    del student.cells[5]
    nb, messages = _restored(student)
    assert messages == ["restored test cell a02-mul-hidden (deleted)"]
    assert nb.cells == template().cells


def test_deleted_neighbours_come_back_in_order_at_the_start_too():
    student = template()
    del student.cells[:6]
    nb, messages = _restored(student)
    assert [c.source for c in nb.cells[:4]] == [STUB, "assert mul(2, 3) == 6", MUL_HIDDEN, "## add"]
    assert messages[0] == "restored answer cell a02-mul (deleted) with the release stub"


def test_an_emptied_test_cell_gets_its_source_back_and_loses_its_outputs():
    student = template()
    student.cells[4].source = ""
    student.cells[4].outputs = [nbformat.v4.new_output("stream", text="hi")]
    student.cells[4].execution_count = 7
    nb, messages = _restored(student)
    assert nb.cells[4] == template().cells[4]
    assert messages == ["restored the source of test cell a02-mul-visible (edited)"]


@pytest.mark.parametrize("where", [0, 6, 11])
def test_a_duplicated_test_cell_appears_once(where):
    student = template()
    student.cells.insert(where, copy.deepcopy(student.cells[5]))
    nb, messages = _restored(student)
    assert nb.cells == template().cells
    assert messages == ["dropped a duplicate of test cell a02-mul-hidden"]


def test_a_test_cell_retyped_as_markdown_is_code_again():
    student = template()
    student.cells[4].cell_type = "markdown"
    del student.cells[4]["outputs"], student.cells[4]["execution_count"]
    nb, messages = _restored(student)
    assert nb.cells == template().cells
    assert messages == ["restored the type of test cell a02-mul-visible to code (was markdown)"]


def test_a_relabelled_test_cell_is_a_plain_cell_and_the_test_comes_back():
    student = template()
    student.cells[5].metadata.nbgrader.grade_id = "my-test"
    nb, messages = _restored(student)
    assert messages == ["removed nbgrader metadata from an extra cell 'my-test'",
                        "restored test cell a02-mul-hidden (deleted)"]
    assert nb.cells[5] == template().cells[5]
    assert nb.cells[6].source == MUL_HIDDEN and "nbgrader" not in nb.cells[6].metadata


def test_edited_points_and_flags_are_reset():
    student = template()
    student.cells[5].metadata.nbgrader.update(points=100, locked=False)
    student.cells[8].metadata.nbgrader.update(grade=False, solution=True)
    nb, messages = _restored(student)
    assert nb.cells == template().cells
    assert messages == ["reset points of a02-mul-hidden to 2", "reset locked of a02-mul-hidden to True",
                        "reset grade of a02-add-hidden to True", "reset solution of a02-add-hidden to False"]


def test_a_test_cell_moved_above_its_answer_goes_back_after_it():
    student = template()
    student.cells.insert(2, student.cells.pop(5))
    nb, messages = _restored(student)
    assert nb.cells == template().cells
    assert messages == ["moved test cell a02-mul-hidden back to its place in the template order"]


# -- answer cells --------------------------------------------------------------------------------

def test_a_duplicated_answer_keeps_the_first_as_the_answer_and_the_copy_as_a_plain_cell():
    student = template()
    student.cells[3].source = "def mul(x, y):\n    return 0"
    student.cells.insert(4, copy.deepcopy(template().cells[3]))
    nb, messages = _restored(student)
    assert messages == ["turned a duplicate of answer cell a02-mul into a plain cell"]
    assert nb.cells[3].source == "def mul(x, y):\n    return 0" and _nb(nb.cells[3]) == _nb(template().cells[3])
    assert nb.cells[4].source == MUL and "nbgrader" not in nb.cells[4].metadata


def test_a_deleted_answer_comes_back_as_the_release_stub_after_its_question():
    student = template()
    del student.cells[10], student.cells[3]
    nb, messages = _restored(student)
    assert messages == ["restored answer cell a02-mul (deleted) with the release stub",
                        "restored answer cell a02-x-written (deleted) with the release stub"]
    assert nb.cells[3].source == STUB
    assert (nb.cells[10].cell_type, nb.cells[10].source) == ("markdown", "YOUR ANSWER HERE")
    assert [_nb(c) for c in nb.cells] == [_nb(c) for c in template().cells]


def test_an_answer_under_a_new_grade_id_stays_a_plain_cell_after_the_stub():
    student = template()
    student.cells[3].metadata.nbgrader.update(grade_id="a02-mul-mine", points=100, grade=True)
    nb, messages = _restored(student)
    assert messages == ["removed nbgrader metadata from an extra cell 'a02-mul-mine'",
                        "restored answer cell a02-mul (deleted) with the release stub"]
    # the stub goes before the student's cell: their `def mul` runs last and is the one tested
    assert "NotImplementedError" in nb.cells[3].source
    assert nb.cells[4].source == MUL and "nbgrader" not in nb.cells[4].metadata


def test_a_retyped_answer_gets_the_template_type_and_keeps_the_students_source():
    student = template()
    student.cells[3] = new_markdown_cell("def mul(x, y): return 1", metadata=student.cells[3].metadata)
    student.cells[10] = new_code_cell("chain rule", metadata=student.cells[10].metadata)
    nb, messages = _restored(student)
    assert (nb.cells[3].cell_type, nb.cells[3].source, nb.cells[3].outputs) == ("code", "def mul(x, y): return 1", [])
    assert (nb.cells[10].cell_type, nb.cells[10].source) == ("markdown", "chain rule")
    assert "outputs" not in nb.cells[10]
    assert messages == ["restored the type of answer cell a02-mul to code (was markdown)",
                        "restored the type of answer cell a02-x-written to markdown (was code)"]


def test_answers_in_swapped_order_are_put_back_in_template_order_with_their_sources():
    student = template()
    student.cells[3].source, student.cells[7].source = "def mul(x, y): return x * y", "def add(x, y): return x + y"
    student.cells[3], student.cells[7] = student.cells[7], student.cells[3]
    nb, messages = _restored(student)
    assert nb.cells[_index(nb, "a02-mul")].source == "def mul(x, y): return x * y"
    assert nb.cells[_index(nb, "a02-add")].source == "def add(x, y): return x + y"
    assert messages == ["moved answer cell a02-mul back to its place in the template order",
                        "moved answer cell a02-add back to its place in the template order"]


# -- the student's own cells ---------------------------------------------------------------------

def test_an_extra_cell_with_grade_metadata_loses_it_and_keeps_its_place():
    student = template()
    student.cells.insert(5, test_cell("my-cell", "assert True", points=100))
    student.cells.insert(0, new_code_cell("x = 1", metadata={"nbgrader": {"grade": True, "points": 5}}))
    nb, messages = _restored(student)
    assert messages == ["removed nbgrader metadata from an extra cell '#1'",
                        "removed nbgrader metadata from an extra cell 'my-cell'"]
    assert [c.source for c in nb.cells] == ["x = 1", *[c.source for c in template().cells[:5]], "assert True",
                                            *[c.source for c in template().cells[5:]]]


def test_ordinary_template_cells_are_the_students_to_edit_or_delete():
    student = template()
    student.cells[1].source = "import numpy as np\nimport math"
    del student.cells[0]
    nb, messages = _restored(student)
    assert messages == [] and nb.cells == student.cells


def test_garbage_is_normalised_not_raised_on():
    student = template()
    student.metadata = "junk"
    student.cells[0].source = ["# a02", " · ", 3]
    del student.cells[1]["metadata"]
    student.cells[2].metadata.nbgrader = "not a dict"
    student.cells[3].source = ["def mul(x, y):\n", "    return x * y\n"]
    student.cells[4].source = None
    student.cells[5].metadata.nbgrader = {"grade_id": 5, "grade": "yes"}
    student.cells[6].cell_type = "heading"
    student.cells[7].outputs = "junk"
    student.cells[7].execution_count = "1"
    student.cells[9].attachments = "junk"
    student.cells.append(nbformat.from_dict({"cell_type": "markdown", "metadata": {}, "source": 12}))
    nb, messages = _restored(student)
    assert nb.metadata == template().metadata
    assert [c.source for c in nb.cells[:2]] == ["# a02 · 3", "import numpy as np"]
    assert nb.cells[3].source == "def mul(x, y):\n    return x * y\n"
    assert nb.cells[4].source == "assert mul(2, 3) == 6"
    assert nb.cells[6].source == MUL_HIDDEN and nb.cells[7].cell_type == "raw"  # the junk relabel, then the heading
    assert nb.cells[-1].source == "12"
    assert "restored test cell a02-mul-hidden (deleted)" in messages


# -- the notebook as a whole ---------------------------------------------------------------------

def test_kernelspec_and_format_version_come_from_the_template():
    student = template()
    student.metadata.kernelspec = {"name": "julia", "display_name": "Julia"}
    student.metadata.extensions = {"jupyter_dashboards": {}}
    old = template()
    old.nbformat_minor = 4
    for cell in old.cells:
        del cell["id"]
    nb, _ = restore(old, student)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 4) and not any("id" in c for c in nb.cells)
    assert nb.metadata.kernelspec == old.metadata.kernelspec and nb.metadata.extensions == {"jupyter_dashboards": {}}
    nbformat.validate(nb)


def test_cell_ids_stay_unique_and_test_cells_keep_the_templates():
    student = template()
    copied = copy.deepcopy(student.cells[4])
    copied.metadata.nbgrader.grade_id = "mine"  # a relabelled copy: same cell id as the test cell
    student.cells.insert(2, copied)
    del student.cells[1]["id"]
    nb, _ = _restored(student)
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids) and nb.cells[_index(nb, "a02-mul-visible")].id == template().cells[4].id


def test_restoring_twice_changes_nothing_more():
    student = template()
    student.cells[5].source = ""
    student.cells.insert(0, copy.deepcopy(student.cells[8]))
    student.cells.insert(9, copy.deepcopy(student.cells[4]))
    del student.cells[4]["id"], student.cells[8]
    once, messages = restore(template(), student)
    twice, again = restore(template(), once)
    assert messages and again == []
    assert twice == once


def test_a_deleted_answer_comes_back_exactly_as_nbgrader_releases_it():
    from nbgrader.preprocessors import ClearSolutions

    nb = nbformat.read(SOURCES[0], as_version=4)
    stubbed, _ = ClearSolutions().preprocess(copy.deepcopy(nb), {})
    answers = [i for i, c in enumerate(nb.cells) if _nb(c).get("solution")]
    student = copy.deepcopy(nb)
    student.cells = [c for i, c in enumerate(nb.cells) if i not in answers]
    restored, _ = restore(nb, student)
    assert [restored.cells[i].source for i in answers] == [stubbed.cells[i].source for i in answers]


# -- random damage -------------------------------------------------------------------------------

DAMAGES = ("delete", "empty", "duplicate", "retype", "relabel", "points", "flags", "extra", "move", "junk")


def damage(nb: nbformat.NotebookNode, steps: list[tuple[str, int, int]]) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    for n, (what, i, j) in enumerate(steps):
        cells = nb.cells
        if not cells and what != "extra":
            continue
        cell = cells[i % len(cells)] if cells else None
        meta = cell.metadata.get("nbgrader") if cell is not None else None
        if what == "delete":
            cells.remove(cell)
        elif what == "empty":
            cell.source = ""
        elif what == "duplicate":
            cells.insert(j % (len(cells) + 1), copy.deepcopy(cell))
        elif what == "retype":
            kind = "markdown" if cell.cell_type == "code" else "code"
            cells[cells.index(cell)] = (new_code_cell if kind == "code" else new_markdown_cell)(
                cell.source, metadata=cell.metadata)
        elif what == "relabel" and isinstance(meta, dict):
            meta["grade_id"] = f"relabelled-{n}"
        elif what == "points" and isinstance(meta, dict):
            meta["points"] = j
        elif what == "flags" and isinstance(meta, dict):
            meta.update(grade=not meta.get("grade"), solution=not meta.get("solution"), locked=False)
        elif what == "extra":
            cells.insert(j % (len(cells) + 1), test_cell(f"extra-{n}", "assert True", points=j))
        elif what == "move":
            cells.insert(j % len(cells), cells.pop(i % len(cells)))
        elif what == "junk":
            cell.metadata["nbgrader"] = [1, 2]
    return nb


def _graded(nb) -> Counter:
    return Counter((_nb(c)["grade_id"], _nb(c).get("points"), c.cell_type)
                   for c in nb.cells if "nbgrader" in c.metadata)


@given(st.lists(st.tuples(st.sampled_from(DAMAGES), st.integers(0, 30), st.integers(0, 30)), max_size=12),
       st.booleans())
def test_any_damage_is_repaired(steps, from_release):
    tpl = template()
    student = damage(released(tpl) if from_release else tpl, steps)
    nb, _ = restore(tpl, student)
    nbformat.validate(nb)
    assert _graded(nb) == _graded(tpl)
    assert _ids(nb) == _ids(tpl)
    tests = {_nb(c)["grade_id"]: c.source for c in tpl.cells if _nb(c).get("grade")}
    assert all(c.source == tests[_nb(c)["grade_id"]] for c in nb.cells if _nb(c).get("grade_id") in tests
               and not _nb(c)["solution"])
    assert restore(tpl, nb) == (nb, [])


# -- the course's own notebooks ------------------------------------------------------------------

@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_the_course_notebooks_restore_to_themselves_and_from_their_release(path):
    source = nbformat.read(path, as_version=4)
    nb, messages = restore(source, source)
    assert messages == [] and nb == source

    student = released(source)
    hidden = [i for i, c in enumerate(source.cells) if "BEGIN HIDDEN TESTS" in c.source]
    assert hidden and all("BEGIN HIDDEN TESTS" not in student.cells[i].source for i in hidden)
    nb, messages = restore(source, student)
    assert messages == []
    assert [nb.cells[i].source for i in hidden] == [source.cells[i].source for i in hidden]
