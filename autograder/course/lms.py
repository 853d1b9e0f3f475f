"""The LMS round trip: a roster of LMS identities, Canvas and Moodle export names, their grade imports.

**Roster** (``autograder students import roster.csv``): a CSV with a header row; ``id`` (the course
id, the nbgrader student id; :data:`autograder.course.students.STUDENT_ID_RULE`) is required, every other
column optional and any cell of them may be empty: ``first_name``, ``last_name``, ``email``,
``canvas_id`` (Canvas's numeric user id), ``moodle_id`` (Moodle's participant id, digits),
``sis_id`` (the university's student number: Canvas's "SIS User ID", Moodle's "ID number") and
``sis_login_id`` (Canvas's "SIS Login ID"). An import replaces the roster (kept in
``.autograder/roster.csv`` of the course) and fills nbgrader's student table. A bad row stops the
import before anything is written, its error naming the file, the line and the column; a course
id, a Canvas id, a Moodle id or an email given twice is refused.

**Canvas** ("Download submissions" of an assignment): a zip of flat files. Canvas's own
``lib/content_zipper.rb`` (instructure/canvas-lms, ``get_filename``/``add_upload_submission``)
names each uploaded file ``<name>[_LATE]_<user id>_<file id>_<original name>``, where ``<name>``
is the sortable name ("Doe, Jane") lower-cased with every non-word character removed
(``doejane``), ``_LATE`` marks a submission Canvas itself counts as late, ``<user id>`` is the
Canvas user id (``anon_<id>`` when the assignment anonymises students: those cannot be mapped and
are skipped), and the third field is the id of the uploaded file (the brief's "submission id"; an
issue in canvas-lms shows ``studenttest_3143_207797_zipsubmission.zip``). A resubmitted file keeps
its name with ``-1``, ``-2`` added by Canvas before the extension (the threads students open about
``PPP-1.jar``). The user id is mapped to a course id through the roster's ``canvas_id``.

**Moodle** ("Download all submissions" of an assignment): ``mod/assign`` (``locallib.php``,
``download_submissions``) makes, by default since Moodle 3.1, one folder per submission and plugin
named ``clean_filename(<Full Name>_<participant id>_assignsubmission_file)`` (older releases end it
with ``_`` and write ``<prefix>_assignsubmission_file_<file name>`` flat, both are read), the
full name with ``_`` replaced by spaces. The participant id is Moodle's per-assignment
``assign_user_mapping`` id, so it maps through the roster's ``moodle_id`` only where the roster
was written for that assignment; otherwise the full name (``first_name last_name`` of the roster,
case and spacing ignored) maps when exactly one student has it, and an ambiguous name is refused
with the reason.

A name is the student's to change in Moodle: a student who renamed herself to another student's
full name would take that student's place. So a name-only match is checked against the whole
export and against the earlier collects of the assignment (:func:`vet_moodle_names`, kept in
``.autograder/moodle_names/<assignment>.json``) and refused, with the reason, when it **collides**
(another participant of the export maps to the same student, by id or by name) or **changes**
(this participant was another student before, or this student came from another participant).
What a name cannot show is a renamed student whose namesake has not submitted, at the first
collect: only ids close that, the roster's ``moodle_id`` for the assignment.

**Late submissions**: nbgrader decides lateness from ``timestamp.txt`` against the due date, and
that logic is kept. Neither export carries a submission time file; a zip entry's time is the time
the export was made (Canvas writes entries when the zip is built), so a Canvas file *without*
``_LATE`` that would look late by it gets the due date as its time (Canvas says it was on time), and
one *with* ``_LATE`` keeps the entry's time (an upper bound of the submission time: the penalty
computed from it is reported as such by collect). Moodle files keep the entry's time; one after the
due date is reported as late by that time, which the instructor checks against Moodle's grading
table (its "Last modified (submission)" column), since no Moodle layout says whether it was late.

**Grade imports** (``autograder report``): ``canvas_grades.csv`` in the layout of Canvas's own
gradebook export, which its importer reads back (``Student,ID,SIS User ID,SIS Login ID,Section``
then one column ``<assignment name> (<assignment id>)``; a second row whose first cell is
``Points Possible``, which ``GradebookImporter`` recognises and skips as a student row; a student
is matched by ``ID``); ``moodle_grades.csv`` for Moodle's "Import > CSV file" (gradeimport_csv:
the teacher maps one identifier column, here ``Email address`` or ``ID number``, to the user and
the grade column, and optionally the ``Feedback`` column, to the grade item). Scores are after the
late penalty. A student of the roster without a complete grade (no submission, failed, written
answers not graded yet) gets an empty cell: both importers then leave the LMS grade as it is.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath

from autograder.course import CourseError, safe_csv
from autograder.course.directory import Course
from autograder.course.files import write_file
from autograder.course.students import check_student_id, printable

ROSTER_COLUMNS = ("id", "first_name", "last_name", "email", "canvas_id", "moodle_id", "sis_id", "sis_login_id")
UNIQUE_COLUMNS = ("id", "email", "canvas_id", "moodle_id")
LMS_NAMES = ("canvas", "moodle")

# <name>[_LATE]_<user id>_<file id>_<original name>; the name holds no "_<digits>_" (Canvas removes it);
# an anonymised assignment has no name and "anon_<id>" for the user id
CANVAS_FILE = re.compile(r"(?:(?P<name>\w*?)(?P<late>_LATE)?_)?(?P<user>\d+|anon_[A-Za-z0-9]+)_(?P<file>\d+)_"
                         r"(?P<original>.+)")
MOODLE_FOLDER = re.compile(r"(?P<name>.+?)_(?P<participant>\d+)_+assignsubmission_file_?")
MOODLE_FLAT = re.compile(r"(?P<name>.+?)_(?P<participant>\d+)_+assignsubmission_file_(?P<original>.+)")
RESUBMITTED = re.compile(r"(?P<stem>.+)-(?P<n>\d+)")


@dataclass(frozen=True)
class Student:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    canvas_id: str = ""
    moodle_id: str = ""
    sis_id: str = ""
    sis_login_id: str = ""

    @property
    def full_name(self) -> str:
        return " ".join(part for part in (self.first_name, self.last_name) if part)

    @property
    def sortable_name(self) -> str:
        """Canvas's "Last, First" form."""
        return ", ".join(part for part in (self.last_name, self.first_name) if part) or self.id


@dataclass
class Roster:
    students: list[Student]
    # Moodle participant id -> why its name may not map (set by vet_moodle_names for one collect)
    refused: dict[str, str] = field(default_factory=dict)

    def by(self, column: str, value: str) -> Student | None:
        return next((s for s in self.students if value and getattr(s, column) == value), None)

    def named(self, full_name: str) -> list[Student]:
        key = _name_key(full_name)
        return [s for s in self.students if s.full_name and _name_key(s.full_name) == key]


@dataclass(frozen=True)
class Placement:
    """Whose file an LMS export entry is, and what the LMS says about it."""
    student: str
    original: str           # the file name the student uploaded, the LMS's additions removed
    late: bool | None       # Canvas's _LATE flag; None when the layout does not say
    rank: int               # orders two copies of one notebook: Canvas's file id, a resubmission's -N
    system: str = "canvas"


def _name_key(name: str) -> str:
    return " ".join(unicodedata.normalize("NFC", name).casefold().split())


# -- the roster ----------------------------------------------------------------------------------

def read_roster(path: str | Path, neutralised: bool = False) -> Roster:
    """The roster in ``path``, or CourseError naming the file, the line and the column at fault.
    ``neutralised``: the file is the course's own copy, whose cells :mod:`~autograder.course.safe_csv`
    wrote (read back exactly as they were imported)."""

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is fine
    except (OSError, UnicodeDecodeError) as error:
        raise CourseError(f"roster {path}: cannot be read ({error})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))  # a quoted cell may hold a line break
    header = [(name or "").strip() for name in reader.fieldnames or []]
    if "id" not in header:
        raise CourseError(f"roster {path}, line 1: no 'id' column (the header names the columns: "
                          f"{', '.join(ROSTER_COLUMNS)}; only id is required)")
    unknown = [name for name in header if name not in ROSTER_COLUMNS]
    if unknown:
        raise CourseError(f"roster {path}, line 1: unknown column(s) {', '.join(map(repr, unknown))} "
                          f"(columns: {', '.join(ROSTER_COLUMNS)})")
    reader.fieldnames = header
    students: list[Student] = []
    seen: dict[tuple[str, str], int] = {}
    for number, row in enumerate(_rows(reader, path), 2):
        if None in row:
            raise CourseError(f"roster {path}, line {number}: more cells than the header has columns")
        unquote = safe_csv.restore if neutralised else str
        cells = {name: unquote(row.get(name) or "").strip() for name in ROSTER_COLUMNS}
        if not any(cells.values()):
            continue
        where = f"roster {path}, line {number}"
        try:
            check_student_id(cells["id"])
        except ValueError as error:
            raise CourseError(f"{where}, column id: {error}") from None
        for column in ("canvas_id", "moodle_id"):
            if cells[column] and not cells[column].isdigit():
                raise CourseError(f"{where}, column {column}: {printable(repr(cells[column]))} is not a number "
                                  "(the LMS's numeric id)")
        if cells["email"] and not re.fullmatch(r"[^@\s]+@[^@\s]+", cells["email"]):
            raise CourseError(f"{where}, column email: {printable(repr(cells['email']))} is not an email address")
        for column in UNIQUE_COLUMNS:
            value = cells[column].casefold() if column == "email" else cells[column]
            if not value:
                continue
            if (column, value) in seen:
                raise CourseError(f"{where}, column {column}: {printable(repr(cells[column]))} is already on "
                                  f"line {seen[column, value]} (each {column} names one student)")
            seen[column, value] = number
        students.append(Student(**cells))
    return Roster(students)


def _rows(reader: csv.DictReader, path: Path) -> Iterator[dict]:
    """The reader's rows; a line the csv module cannot read (a cell over its field limit, a NUL) is
    a CourseError naming the file and the line, not a traceback."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise CourseError(f"roster {path}, after line {reader.line_num}: cannot be read as CSV ({error})") from None
        yield row


def roster_path(course: Course) -> Path:
    return course.state_dir / "roster.csv"


def load_roster(course: Course) -> Roster | None:
    """The course's imported roster, or None before ``students import``."""
    path = roster_path(course)
    return read_roster(path, neutralised=True) if path.is_file() else None


def import_roster(course: Course, source: str | Path) -> Roster:
    """Check ``source``, fill nbgrader's student table from it, then keep it as the course roster."""
    roster = read_roster(source)
    if not roster.students:
        raise CourseError(f"roster {source}: no students")
    with course.gradebook() as gb:
        for s in roster.students:
            gb.update_or_create_student(s.id, first_name=s.first_name or None, last_name=s.last_name or None,
                                        email=s.email or None, lms_user_id=s.canvas_id or s.moodle_id or None)
    path = roster_path(course)
    path.parent.mkdir(parents=True, exist_ok=True)
    safe_csv.write(path, [ROSTER_COLUMNS, *([getattr(s, f.name) for f in fields(Student)] for s in roster.students)])
    return roster


# -- export layouts ------------------------------------------------------------------------------

def canvas_placement(path: PurePosixPath, roster: Roster | None) -> Placement | None:
    """The Canvas reading of an export file, None if its name is not Canvas's, ValueError if it is
    Canvas's but names nobody of the roster."""
    match = CANVAS_FILE.fullmatch(path.name)
    if not match:
        return None
    user = match["user"]
    if user.startswith("anon_"):
        raise ValueError(f"Canvas anonymous submission ({user}): unmask the assignment's students before "
                         "downloading, or use --map")
    if roster is None:
        raise ValueError(f"Canvas user id {user}: no roster to map it (autograder students import roster.csv)")
    student = roster.by("canvas_id", user)
    if student is None:
        raise ValueError(f"Canvas user id {user} is not in the roster (no row with canvas_id {user})")
    return Placement(student.id, match["original"], match["late"] is not None, int(match["file"]))


def moodle_placement(path: PurePosixPath, roster: Roster | None) -> Placement | None:
    """The Moodle reading of an export file (its folder, or its flat name), like :func:`canvas_placement`."""
    found = _moodle_name(path)
    if found is None:
        return None
    participant, name, original = found
    if roster is None:
        raise ValueError(f"Moodle participant {participant} ({name}): no roster to map it "
                         "(autograder students import roster.csv)")
    student = roster.by("moodle_id", participant)
    if student is None and participant in roster.refused:
        raise ValueError(roster.refused[participant])
    if student is None:
        named = roster.named(name)
        if len(named) > 1:
            raise ValueError(f"Moodle participant {participant}: {len(named)} students of the roster are named "
                             f"{name!r} ({', '.join(s.id for s in named)}); give them their moodle_id")
        if not named:
            raise ValueError(f"Moodle participant {participant} ({name}) is not in the roster "
                             "(no moodle_id and no first_name last_name that match)")
        student = named[0]
    return Placement(student.id, original, None, 0, "moodle")


def _moodle_name(path: PurePosixPath) -> tuple[str, str, str] | None:
    """(participant id, full name, the uploaded file's name) of a Moodle export file, None if the
    path is not Moodle's: its folder's name, else (before Moodle 3.1) its own."""
    match = None
    for folder in path.parts[:-1]:
        match = MOODLE_FOLDER.fullmatch(folder) or match
    if match is not None:
        return match["participant"], match["name"].strip(), path.name
    match = MOODLE_FLAT.fullmatch(path.name)
    return (match["participant"], match["name"].strip(), match["original"]) if match else None


def moodle_names_path(course: Course, assignment: str) -> Path:
    return course.state_dir / "moodle_names" / f"{assignment}.json"


def vet_moodle_names(course: Course, assignment: str, roster: Roster, paths: list[PurePosixPath]) -> None:
    """Refuse, in ``roster.refused``, the name-only Moodle matches of an export that collide or
    change (see the module's docstring), then remember the others for the next collect."""
    record_path = moodle_names_path(course, assignment)
    try:
        earlier: dict[str, dict] = json.loads(record_path.read_text()) if record_path.is_file() else {}
    except (OSError, ValueError) as error:
        raise CourseError(f"{record_path}: cannot be read ({error}); move it away to start the record anew") from None
    seen = {found[:2] for path in paths if (found := _moodle_name(path)) is not None}
    by_id = {participant: known.id for participant, _ in seen if (known := roster.by("moodle_id", participant))}
    by_name: dict[str, tuple[str, str]] = {}   # participant -> (student, the name that matched)
    for participant, name in sorted(seen):
        named = roster.named(name)
        if participant not in by_id and len(named) == 1:
            by_name[participant] = (named[0].id, name)
    sources: dict[str, list[str]] = {}
    for participant, student in [*by_id.items(), *((p, s) for p, (s, _) in by_name.items())]:
        sources.setdefault(student, []).append(participant)
    advice = "check the account in Moodle, then give the roster the students' moodle_id or name the files with --map"
    for participant, (student, name) in by_name.items():
        others = sorted(set(sources[student]) - {participant})
        before = earlier.get(participant)
        moved = sorted(p for p, seen_as in earlier.items() if seen_as.get("student") == student and p != participant)
        if others:
            roster.refused[participant] = (
                f"Moodle participant {participant} is named {name!r}, as {student}, who is also Moodle participant "
                f"{', '.join(others)} in this export: a name can be changed in Moodle, so neither is taken by name; "
                + advice)
        elif before is not None and before.get("student") != student:
            roster.refused[participant] = (
                f"Moodle participant {participant} was {before.get('name')!r} ({before.get('student')}) in an "
                f"earlier collect of {assignment} and is now named {name!r} ({student}): a renamed account; " + advice)
        elif moved:
            roster.refused[participant] = (
                f"{student} ({name!r}) was Moodle participant {', '.join(moved)} in an earlier collect of {assignment} "
                f"and is now participant {participant}: a renamed account; " + advice)
    kept = {**earlier, **{p: {"student": s, "name": n} for p, (s, n) in by_name.items() if p not in roster.refused}}
    if kept != earlier:
        write_file(record_path, json.dumps(kept, indent=1, sort_keys=True))


def lms_placement(path: PurePosixPath, lms: str, roster: Roster | None) -> Placement | None:
    """The placement of an export file under ``--lms`` (``auto``, ``canvas``, ``moodle`` or ``none``):
    None leaves the file to collect's own rules (``none``, or ``auto`` with neither layout's name)."""
    if lms == "none":
        return None
    readers = {"canvas": canvas_placement, "moodle": moodle_placement}
    for name in (LMS_NAMES if lms == "auto" else (lms,)):
        placement = readers[name](path, roster)
        if placement is not None:
            return placement
    if lms != "auto":
        raise ValueError(f"not a {lms.capitalize()} export name (--lms {lms})")
    return None


def notebook_of(original: str, notebooks: list[str]) -> tuple[str, int]:
    """(notebook, resubmission number) of an uploaded file name, or ValueError. Canvas's ``-1``,
    ``-2`` is removed; with a single notebook in the assignment, any ``.ipynb`` name is that notebook."""
    stem = PurePosixPath(original).stem
    if stem in notebooks:
        return stem, 0
    resubmitted = RESUBMITTED.fullmatch(stem)
    if resubmitted and resubmitted["stem"] in notebooks:
        return resubmitted["stem"], int(resubmitted["n"])
    if len(notebooks) == 1:
        return notebooks[0], 0
    raise ValueError(f"unknown notebook {original!r} (expected one of {', '.join(notebooks)})")


# -- grade imports -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Grade:
    """What the LMS receives for one student: a score (after the late penalty) or nothing yet."""
    score: float | None
    feedback: str


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def write_canvas(path: Path, roster: Roster, column: str, points: float, grades: dict[str, Grade]) -> list[str]:
    """Canvas's gradebook CSV; returns the roster ids left out (no canvas_id: Canvas could not match them)."""
    left_out = [s.id for s in roster.students if not s.canvas_id]
    rows = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", column],
            ["Points Possible", "", "", "", "", _num(points)]]
    for s in roster.students:
        if s.canvas_id:
            grade = grades.get(s.id)
            rows.append([s.sortable_name, s.canvas_id, s.sis_id, s.sis_login_id, "",
                         _num(grade.score) if grade else ""])
    safe_csv.write(path, rows)
    return left_out


def write_moodle(path: Path, roster: Roster, column: str, grades: dict[str, Grade]) -> list[str]:
    """Moodle's grade-import CSV; returns the roster ids left out (neither email nor ID number)."""
    left_out = [s.id for s in roster.students if not (s.email or s.sis_id)]
    rows = [["Email address", "ID number", "First name", "Last name", column, "Feedback"]]
    for s in roster.students:
        if s.email or s.sis_id:
            grade = grades.get(s.id)
            rows.append([s.email, s.sis_id, s.first_name, s.last_name,
                         _num(grade.score) if grade else "", grade.feedback if grade else ""])
    safe_csv.write(path, rows)
    return left_out


def parse_lms_list(text: str) -> list[str]:
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in (*LMS_NAMES, "none")]
    if bad or not names:
        raise CourseError(f"--lms {text!r}: name canvas, moodle (comma-separated) or none")
    return [] if names == ["none"] else list(dict.fromkeys(names))


def students_table(roster: Roster) -> Iterable[list[str]]:
    for s in roster.students:
        yield [s.id, s.full_name, s.email, s.canvas_id, s.moodle_id, s.sis_id]
