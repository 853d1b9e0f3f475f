"""What leaves the grader as CSV is safe to open in a spreadsheet (issue 29, section 4).

A roster's names, emails and SIS ids that begin with a formula character reach the Canvas and
Moodle files, and the grader's own copy of the roster, as text a spreadsheet does not evaluate;
every CSV of the grader is written through one helper (checked on the source), replacing a link
planted where it writes instead of following it.
"""
import ast
import csv

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.course import safe_csv
from autograder.course.lms import Grade, Roster, Student, write_canvas, write_moodle

from support import REPO
from support.course import autograder, make_course, table

HOSTILE = ["=HYPERLINK(\"http://x.example\",\"a\")", "+1+cmd|' /c calc'!A1", "-2+3", "@SUM(A1:A9)",
           "\t=1+1", "\r=1+1", " =1+1", "\u00a0@x", "\uff1d1+1", "'=1+1", "=1+1\n=2"]


def _formula(cell: str) -> bool:
    """What a spreadsheet evaluates: a formula character first, after blanks (a leading quote makes text)."""
    return bool(cell) and (cell[0] in "\t\r\0" or cell.lstrip(" \u00a0\n")[:1] in tuple(safe_csv.TRIGGERS))


@pytest.mark.parametrize("value", HOSTILE)
def test_a_formula_cell_is_quoted_and_restored_exactly(value):
    cell = safe_csv.neutralise(value)
    assert cell.startswith("'") and not _formula(cell)
    assert safe_csv.restore(cell) == value


@pytest.mark.parametrize("value", ["Alice", "O'Brien", "'quoted", "a=b", "alice@uni.example", "-3", "+1.5",
                                   "2.5e-3", "", "Ana María"])
def test_plain_cells_and_numbers_are_written_as_they_are(value):
    assert safe_csv.neutralise(value) == value == safe_csv.restore(value)


@given(st.text(alphabet=st.sampled_from("=+-@'\t\r\n \u00a0\uff1d0a1.e"), max_size=8) | st.text(max_size=12))
def test_every_value_comes_back_and_no_written_cell_is_a_formula(value):
    cell = safe_csv.neutralise(value)
    assert safe_csv.restore(cell) == value
    assert not _formula(cell) or safe_csv._NUMBER.fullmatch(cell)


def test_every_csv_writer_of_the_grader_is_the_helper():
    """No module of autograder/ but safe_csv makes a csv.writer or DictWriter (or imports them)."""
    found = []
    for path in sorted((REPO / "autograder").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("writer", "DictWriter") \
                    and isinstance(node.value, ast.Name) and node.value.id == "csv":
                found.append(f"{path.relative_to(REPO)}:{node.lineno} csv.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "csv" \
                    and {a.name for a in node.names} & {"writer", "DictWriter", "*"}:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} from csv import ...")
            if isinstance(node, ast.Import) and any(a.name == "csv" and a.asname for a in node.names):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} import csv as ...")
    assert [f.split(":")[0] for f in found] == ["autograder/course/safe_csv.py"], found


def test_a_link_where_the_file_goes_is_replaced_never_followed(tmp_path):
    target = tmp_path / "outside.txt"
    target.write_text("root's file\n")
    link = tmp_path / "grades.csv"
    link.symlink_to(target)
    safe_csv.write(link, [["student", "score"], ["=alice", "3"]])
    assert target.read_text() == "root's file\n" and not link.is_symlink()
    assert list(csv.reader(link.open(newline=""))) == [["student", "score"], ["'=alice", "3"]]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temporary file left


HOSTILE_ROSTER = Roster([
    Student("mallory", "=HYPERLINK(\"http://x.example\")", "+cmd|' /c calc'!A1", "=x@evil.example", "3150",
            sis_id="@SUM(1)", sis_login_id="-1+1"),
    Student("tab", "\t=1+1", "\r@x", "tab@uni.example", "3151", sis_id="\t-2"),
    Student("alice", "Alice", "Doe", "alice@uni.example", "3143", sis_id="S1001"),
])


def test_the_lms_files_carry_no_formula(tmp_path):
    grades = {"mallory": Grade(3.0, "=1+1 autograder"), "alice": Grade(7.0, "autograder: 7/7")}
    write_canvas(tmp_path / "canvas.csv", HOSTILE_ROSTER, "a00_toy", 7, grades)
    write_moodle(tmp_path / "moodle.csv", HOSTILE_ROSTER, "a00_toy", grades)
    for name in ("canvas.csv", "moodle.csv"):
        rows = list(csv.reader((tmp_path / name).open(newline="", encoding="utf-8")))
        cells = [cell for row in rows for cell in row]
        assert not [c for c in cells if _formula(c)], (name, [c for c in cells if _formula(c)])
        assert any(c.startswith("'") for c in cells)
    canvas = {row[1]: row for row in csv.reader((tmp_path / "canvas.csv").open(newline="", encoding="utf-8"))}
    assert canvas["3150"][0] == "'+cmd|' /c calc'!A1, =HYPERLINK(\"http://x.example\")"  # "Last, First": no quote
    assert canvas["3150"][2:4] == ["'@SUM(1)", "'-1+1"] and canvas["3150"][5] == "3"      # a score stays a number
    assert canvas["3143"][:3] == ["Doe, Alice", "3143", "S1001"]


def test_the_roster_is_kept_quoted_and_read_back_as_imported(tmp_path, capsys):
    course = make_course(tmp_path / "course")
    roster = tmp_path / "roster.csv"
    with open(roster, "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)  # the instructor's own file, as a spreadsheet exports it
        out.writerow(["id", "first_name", "last_name", "email", "canvas_id", "sis_id"])
        out.writerow(["mallory", "=HYPERLINK(\"http://x.example\")", "'=quoted", "=x@evil.example", "3150", "@SUM(1)"])
        out.writerow(["alice", "Alice", "Doe", "alice@uni.example", "3143", "S1001"])
    assert autograder(course, "students", "import", str(roster)) == 0
    kept = list(csv.reader((course.state_dir / "roster.csv").open(newline="", encoding="utf-8")))
    assert not [c for row in kept for c in row if _formula(c)]
    capsys.readouterr()
    assert autograder(course, "students", "list") == 0
    rows = table(capsys.readouterr().out)
    assert rows["mallory"][:2] == ["=HYPERLINK(\"http://x.example\") '=quoted", "=x@evil.example"]
    assert rows["mallory"][-1] == "@SUM(1)" and rows["alice"][0] == "Alice Doe"
