"""The LMS round trip: a roster, Canvas's and Moodle's exports collected, their grade-import CSVs read back.

The exports are the fixtures of tests/fixtures/lms/ (built from each system's documented names, see
its README); the grade files are read as each importer does: Canvas's GradebookImporter takes the
first row as the header, skips a row whose first cell says "Points Possible" and matches students
by ID; Moodle's CSV import maps one identifier column and one column per grade item.
"""
import csv
import json
import zipfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import pytest

from autograder.course.lms import (
    Roster,
    Student,
    canvas_placement,
    moodle_names_path,
    moodle_placement,
    notebook_of,
    vet_moodle_names,
)

from support import FIXTURES
from support.course import ASSIGNMENT, NOTEBOOK, SOLUTIONS, autograder, make_course, table, use_toy_catalogue

pytestmark = pytest.mark.xdist_group("autograder")

FIXTURES = FIXTURES / "lms"
ZIP_TIME = (2026, 11, 25, 9, 30, 0)   # when the instructor downloaded the export: after the due date
DUE = "2026-11-20 11:00"              # UTC


@pytest.fixture
def course(tmp_path):
    return make_course(tmp_path / "course")


def _zip(folder: Path, archive: Path) -> Path:
    """The fixture folder as the LMS's zip, every entry timed at the download."""
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), ZIP_TIME)
                zf.writestr(info, path.read_bytes())
    return archive


def _read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


# -- names ---------------------------------------------------------------------------------------

ROSTER = Roster([Student("alice", "Alice", "Doe", canvas_id="3143"),
                 Student("ana", "Ana María", "López", moodle_id="501"),
                 Student("ben", "Ben", "Okafor"),
                 Student("sam1", "Sam", "Lee"), Student("sam2", "Sam", "Lee")])


def test_canvas_names_map_through_the_roster():
    placement = canvas_placement(PurePosixPath("doealice_LATE_3143_207800_a00_toy-2.ipynb"), ROSTER)
    assert placement is not None
    assert (placement.student, placement.original, placement.late, placement.rank) == \
        ("alice", "a00_toy-2.ipynb", True, 207800)
    assert canvas_placement(PurePosixPath("doealice_3143_207797_a00_toy.ipynb"), ROSTER).late is False
    assert canvas_placement(PurePosixPath("alice_a00_toy.ipynb"), ROSTER) is None   # not Canvas's: other rules
    for name, why in [("smithbob_3144_1_a00_toy.ipynb", "Canvas user id 3144 is not in the roster"),
                      ("anon_k3J9xQ_207804_a00_toy.ipynb", "Canvas anonymous submission")]:
        with pytest.raises(ValueError, match=why):
            canvas_placement(PurePosixPath(name), ROSTER)
    with pytest.raises(ValueError, match="no roster"):
        canvas_placement(PurePosixPath("doealice_3143_207797_a00_toy.ipynb"), None)
    assert notebook_of("a00_toy-1.ipynb", ["a00_toy", "b"]) == ("a00_toy", 1)
    assert notebook_of("whatever.ipynb", ["a00_toy"]) == ("a00_toy", 0)
    with pytest.raises(ValueError, match="unknown notebook"):
        notebook_of("whatever.ipynb", ["a00_toy", "b"])


def test_moodle_names_map_by_participant_id_or_unambiguous_full_name():
    def student(path: str) -> str:
        placement = moodle_placement(PurePosixPath(path), ROSTER)
        assert placement is not None
        return placement.student

    assert student("Ana María López_501_assignsubmission_file/a00_toy.ipynb") == "ana"
    assert student("export/ben  OKAFOR_777_assignsubmission_file_/sub/a00_toy.ipynb") == "ben"  # case, spaces
    assert student("Ben Okafor_777_assignsubmission_file_a00_toy.ipynb") == "ben"                  # before 3.1
    assert moodle_placement(PurePosixPath("alice/a00_toy.ipynb"), ROSTER) is None
    with pytest.raises(ValueError, match=r"2 students of the roster are named 'Sam Lee' \(sam1, sam2\)"):
        student("Sam Lee_503_assignsubmission_file/a00_toy.ipynb")
    with pytest.raises(ValueError, match="not in the roster"):
        student("Zed Unknown_504_assignsubmission_file/a00_toy.ipynb")


def test_a_moodle_name_that_collides_or_changes_is_refused(course):
    """A student renamed in Moodle to a classmate's full name (issue 29, section 2) takes nobody's place."""
    roster = [Student("alice", "Alice", "Doe"), Student("xena", "Xena", "Smith"),
              Student("ana", "Ana María", "López", moodle_id="501")]

    def collect(assignment: str, *folders: str) -> dict[str, str]:
        """Each folder's student, or why it is refused, as collect sees them (one export)."""
        this = Roster(list(roster))
        paths = [PurePosixPath(f"{folder}_assignsubmission_file/{NOTEBOOK}.ipynb") for folder in folders]
        vet_moodle_names(course, assignment, this, paths)
        out = {}
        for folder, path in zip(folders, paths, strict=True):
            try:
                out[folder] = moodle_placement(path, this).student
            except ValueError as error:
                out[folder] = str(error)
        return out

    assert collect("a1", "Xena Smith_700", "Alice Doe_701") == {"Xena Smith_700": "xena", "Alice Doe_701": "alice"}
    # Xena renames herself "Alice Doe": two participants of one name, neither is taken
    both = collect("a1", "Alice Doe_700", "Alice Doe_701")
    assert all("also Moodle participant" in why and "neither is taken by name" in why for why in both.values()), both
    # alone in a later export, the renamed participant is still not Alice: it was Xena before
    assert "was 'Xena Smith' (xena) in an earlier collect of a1 and is now named 'Alice Doe'" in \
        collect("a1", "Alice Doe_700")["Alice Doe_700"]
    # and Alice arriving from another participant than before is a change too
    assert "alice ('Alice Doe') was Moodle participant 701 in an earlier collect of a1" in \
        collect("a1", "Alice Doe_702")["Alice Doe_702"]
    assert collect("a1", "Alice Doe_701", "Xena Smith_700") == {"Alice Doe_701": "alice", "Xena Smith_700": "xena"}
    # a name that is also a participant matched by its id: the id wins, the name is refused
    ana = collect("a2", "Ana María López_501", "Ana María López_777")
    assert ana["Ana María López_501"] == "ana" and "also Moodle participant 501" in ana["Ana María López_777"]
    # another assignment (Moodle's participant ids are per assignment) starts its own record
    assert collect("a2", "Alice Doe_900") == {"Alice Doe_900": "alice"}
    assert json.loads(moodle_names_path(course, "a1").read_text())["700"] == {"student": "xena", "name": "Xena Smith"}


def test_collect_takes_no_moodle_file_whose_name_collides(course, tmp_path, capsys):
    assert autograder(course, "students", "import", str(FIXTURES / "moodle_roster.csv")) == 0
    export = tmp_path / "moodle"
    with zipfile.ZipFile(FIXTURES / "moodle.zip") as archive:
        archive.extractall(export)
    impostor = export / "Ben Okafor_990_assignsubmission_file"   # another account, renamed "Ben Okafor"
    impostor.mkdir()
    kim = export / "Kim Park_505_assignsubmission_file_a00_toy.ipynb"
    (impostor / f"{NOTEBOOK}.ipynb").write_bytes(kim.read_bytes())
    capsys.readouterr()
    assert autograder(course, "collect", ASSIGNMENT, str(export)) == 0
    rows = table(capsys.readouterr().out)
    assert "ben" not in rows and sorted(course.submitted_students(ASSIGNMENT)) == ["ana", "kim"]
    for folder in ("Ben Okafor_502", "Ben Okafor_990"):
        assert "neither is taken by name" in rows[f"{folder}_assignsubmission_file/{NOTEBOOK}.ipynb"][0]


# -- the roster ----------------------------------------------------------------------------------

def test_students_import_fills_the_gradebook_and_list_shows_it(course, capsys):
    assert autograder(course, "students", "list") == 2
    assert "no roster yet" in capsys.readouterr().err
    assert autograder(course, "students", "import", str(FIXTURES / "canvas_roster.csv")) == 0
    assert "5 student(s) imported" in capsys.readouterr().out
    with course.gradebook() as gb:
        alice = gb.find_student("alice")
        assert (alice.first_name, alice.last_name, alice.email, alice.lms_user_id) == \
            ("Alice", "Doe", "alice.doe@uni.example", "3143")
        assert sorted(s.id for s in gb.students) == ["alice", "bob", "carol", "dave", "erin"]
    assert autograder(course, "students", "list") == 0
    rows = table(capsys.readouterr().out)
    assert rows["bob"] == ["Bob Smith", "bob.smith@uni.example", "3144", "S1002"]
    assert rows["erin"] == ["Erin Ng"]


HEADER = "id,first_name,last_name,email,canvas_id,moodle_id\n"


@pytest.mark.parametrize("text, error", [
    (HEADER + "alice,A,D,a@x.org,1,\nbad id,B,S,b@x.org,2,\n", "line 3, column id: bad student id 'bad id'"),
    (HEADER + "alice,A,D,a@x.org,1,\nalice,B,S,b@x.org,2,\n", "line 3, column id: 'alice' is already on line 2"),
    (HEADER + "alice,A,D,a@x.org,1,\nbob,B,S,b@x.org,1,\n", "line 3, column canvas_id: '1' is already on line 2"),
    (HEADER + "alice,A,D,a@x.org,1,\nbob,B,S,A@X.org,2,\n", "line 3, column email: 'A@X.org' is already on line 2"),
    (HEADER + "alice,A,D,a@x.org,12a,\n", "line 2, column canvas_id: '12a' is not a number"),
    (HEADER + "alice,A,D,not-an-email,1,\n", "line 2, column email: 'not-an-email' is not an email address"),
    (HEADER + "alice,A,D,a@x.org,1,,extra\n", "line 2: more cells than the header has columns"),
    ("student,email\nalice,a@x.org\n", "line 1: no 'id' column"),
    ("id,canvas_user\nalice,1\n", "line 1: unknown column(s) 'canvas_user'"),
    (HEADER + "alice,A,D,a@x.org,1,\nbob," + "B" * 200_000 + ",S,b@x.org,2,\n",  # over csv's field limit
     "after line 2: cannot be read as CSV (field larger than field limit"),
], ids=lambda value: value[:40] if isinstance(value, str) else None)
def test_a_bad_roster_is_refused_naming_file_line_and_column(course, tmp_path, capsys, text, error):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    assert autograder(course, "students", "import", str(roster)) == 2
    err = capsys.readouterr().err
    assert f"roster {roster}, {error}" in err
    with course.gradebook() as gb:
        assert gb.students == []   # nothing half-imported
    assert not (course.state_dir / "roster.csv").exists()


# -- Moodle: collect -----------------------------------------------------------------------------

def test_collect_a_moodle_export_folder_then_its_zip(course, tmp_path, capsys):
    assert autograder(course, "students", "import", str(FIXTURES / "moodle_roster.csv")) == 0
    capsys.readouterr()
    export = tmp_path / "moodle"
    with zipfile.ZipFile(FIXTURES / "moodle.zip") as archive:  # the download, unpacked as an instructor would
        archive.extractall(export)
    assert autograder(course, "collect", ASSIGNMENT, str(export)) == 0
    out = capsys.readouterr().out
    assert "3 student(s) imported, 3 file(s) skipped" in out
    rows = table(out)
    assert rows["ana"] == [NOTEBOOK, "new"] and rows["ben"] == [NOTEBOOK, "new"] and rows["kim"] == [NOTEBOOK, "new"]
    sam = rows[f"Sam Lee_503_assignsubmission_file/{NOTEBOOK}.ipynb"][0]
    assert "2 students of the roster are named 'Sam Lee'" in sam
    assert "not in the roster" in rows[f"Zed Unknown_504_assignsubmission_file/{NOTEBOOK}.ipynb"][0]
    assert rows["Ben Okafor_502_assignsubmission_onlinetext/onlinetext.html"][0].startswith("not a notebook file")
    ben = export / "Ben Okafor_502_assignsubmission_file" / f"{NOTEBOOK}.ipynb"
    assert (course.submitted_dir("ben", ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_bytes() == ben.read_bytes()

    # the same export as Moodle's zip: nothing collected twice
    assert autograder(course, "collect", ASSIGNMENT, str(_zip(export, tmp_path / "moodle.zip"))) == 0
    rows = table(capsys.readouterr().out)
    assert all(rows[s][1].startswith("unchanged") for s in ("ana", "ben", "kim"))
    assert sorted(course.submitted_students(ASSIGNMENT)) == ["ana", "ben", "kim"]

    # --lms canvas reads no Moodle name
    assert autograder(course, "collect", ASSIGNMENT, str(export), "--lms", "canvas") == 0
    assert "0 student(s) imported, 6 file(s) skipped" in capsys.readouterr().out

    # Moodle says nothing of lateness: a file timed after the due date is reported with its time
    with course.gradebook() as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=datetime(2026, 11, 20, 11, 0))
    assert autograder(course, "collect", ASSIGNMENT, str(tmp_path / "moodle.zip")) == 0
    zip_time = datetime(*ZIP_TIME).astimezone(timezone.utc)
    assert table(capsys.readouterr().out)["ana"][1] == (
        "unchanged (identical to the submission already collected); after the due date by the Moodle export's "
        f"file time {zip_time:%Y-%m-%d %H:%M} UTC (check it against the LMS's submission time)")


# -- Canvas: collect, grade, report --------------------------------------------------------------

def _grade_by_hand(course, student: str, points: float) -> None:
    """What the formgrader does for the written answer."""
    with course.gradebook() as gb:
        grade = gb.find_grade("a00-square-backward-written", NOTEBOOK, ASSIGNMENT, student)
        grade.manual_score = points
        grade.needs_manual_grade = False
        gb.db.commit()


@pytest.mark.slow
def test_canvas_zip_to_canvas_and_moodle_grade_files(course, tmp_path, capsys, monkeypatch):
    use_toy_catalogue(monkeypatch)
    with open(course.root / "nbgrader_config.py", "a") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--due", DUE) == 0
    assert autograder(course, "students", "import", str(FIXTURES / "canvas_roster.csv")) == 0
    capsys.readouterr()

    archive = _zip(FIXTURES / "canvas", tmp_path / "submissions.zip")
    assert autograder(course, "collect", ASSIGNMENT, str(archive)) == 0
    out = capsys.readouterr().out
    assert "3 student(s) imported, 4 file(s) skipped" in out
    rows = table(out)
    assert rows["alice"] == [NOTEBOOK, "new; on time (Canvas): timed at the due date"]
    assert rows["bob"][1].startswith("new; late (Canvas)")
    assert "superseded by the newer smithbob_LATE_3144_207800_a00_toy-1.ipynb" in \
        rows["smithbob_LATE_3144_207790_a00_toy.ipynb"][0]
    assert "Canvas user id 9999 is not in the roster" in rows["strangerx_9999_207803_a00_toy.ipynb"][0]
    assert "Canvas anonymous submission" in rows["anon_k3J9xQ_207804_a00_toy.ipynb"][0]
    assert rows["browncarol_3145_207802_notes.txt"][0].startswith("not a notebook file")
    stamp = {s: (course.submitted_dir(s, ASSIGNMENT) / "timestamp.txt").read_text() for s in ("alice", "bob")}
    assert stamp["alice"] == "2026-11-20 11:00:00.000000 UTC"   # Canvas: on time, whenever the zip was made
    zip_time = datetime(*ZIP_TIME).astimezone(timezone.utc)      # zip times are local times
    assert stamp["bob"] == zip_time.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    assert (course.submitted_dir("bob", ASSIGNMENT) / f"{NOTEBOOK}.ipynb").read_bytes() == \
        (FIXTURES / "canvas" / "smithbob_LATE_3144_207800_a00_toy-1.ipynb").read_bytes()

    assert autograder(course, "grade", ASSIGNMENT, "--jobs", "1") == 0
    for student in ("alice", "bob", "carol"):
        _grade_by_hand(course, student, 1)
    capsys.readouterr()
    assert autograder(course, "report", ASSIGNMENT, "--canvas-assignment-id", "48213") == 0
    out = capsys.readouterr().out
    assert "canvas: 1 student(s) of the roster left out (no canvas_id): erin" in out
    assert "moodle: 1 student(s) of the roster left out (neither email nor sis_id): erin" in out
    with course.gradebook() as gb:
        expected = {s: gb.find_submission(ASSIGNMENT, s) for s in ("alice", "bob", "carol")}
        expected_scores = {s: max(0.0, sub.score - (sub.late_submission_penalty or 0)) for s, sub in expected.items()}
        assert expected["bob"].late_submission_penalty > 0 and expected["alice"].late_submission_penalty in (0, None)
    assert expected_scores["alice"] == 7 and expected_scores["carol"] == 4 and expected_scores["bob"] < 7

    # Canvas: header, the Points Possible row, students by ID
    folder = course.reports_dir(ASSIGNMENT)
    canvas = _read_csv(folder / "canvas_grades.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{ASSIGNMENT} (48213)"]
    assert "Points Possible" in canvas[1][0] and float(canvas[1][5]) == 7
    by_id = {row[1]: row for row in canvas[2:]}
    assert sorted(by_id) == ["3143", "3144", "3145", "3146"]
    assert by_id["3143"][:4] == ["Doe, Alice", "3143", "S1001", "adoe"]
    for student, canvas_id in (("alice", "3143"), ("bob", "3144"), ("carol", "3145")):
        assert float(by_id[canvas_id][5]) == expected_scores[student]
    assert by_id["3146"][5] == ""   # dave handed nothing in: Canvas keeps whatever it has

    # Moodle: identified by email (or ID number), one grade column, feedback
    with open(folder / "moodle_grades.csv", newline="", encoding="utf-8") as handle:
        moodle = {row["Email address"]: row for row in csv.DictReader(handle)}
    assert sorted(moodle) == [f"{s}@uni.example" for s in ("alice.doe", "bob.smith", "carol.brown", "dave.green")]
    assert float(moodle["bob.smith@uni.example"][ASSIGNMENT]) == expected_scores["bob"]
    assert "late penalty" in moodle["bob.smith@uni.example"]["Feedback"]
    assert moodle["carol.brown@uni.example"]["ID number"] == "S1003"
    assert float(moodle["carol.brown@uni.example"][ASSIGNMENT]) == 4
    assert moodle["dave.green@uni.example"][ASSIGNMENT] == "" == moodle["dave.green@uni.example"]["Feedback"]

    # a grade still waiting for a human never leaves as if it were final
    with course.gradebook() as gb:
        grade = gb.find_grade("a00-square-backward-written", NOTEBOOK, ASSIGNMENT, "carol")
        grade.manual_score, grade.needs_manual_grade = None, True
        gb.db.commit()
    assert autograder(course, "report", ASSIGNMENT, "--lms", "canvas") == 0
    assert "no grade sent for 1 student(s) not completely graded: carol" in capsys.readouterr().out
    canvas = _read_csv(folder / "canvas_grades.csv")
    assert canvas[0][5] == ASSIGNMENT   # no id: Canvas matches the assignment by name
    assert {row[1]: row[5] for row in canvas[2:]}["3145"] == ""
