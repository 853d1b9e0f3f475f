"""``autograder collect``: import an LMS export (a folder or a .zip) into nbgrader's ``submitted/``.

Which student a file belongs to, first rule that applies:

1. ``--map CSV`` (header ``file,student``): the file's path inside the export, or its name.
   A mapped file names its notebook like rule 4 does, or may have any name when the assignment
   has a single notebook.
2. A folder per student: ``alice/a02_broadcasting.ipynb`` (the folder that directly holds a file
   named exactly like one of the assignment's notebooks is the student; folders above it are
   ignored, so an export wrapped in one top folder works).
3. An LMS export's own names (``--lms auto``, the default; ``canvas``, ``moodle`` or ``none``): a
   Canvas "Download submissions" file ``<name>[_LATE]_<user id>_<file id>_<original name>``, a
   Moodle "Download all submissions" folder ``<Full Name>_<participant id>_assignsubmission_file``,
   each student found through the roster (``autograder students import``); the layouts, their
   sources and what becomes of Canvas's late flag are in :mod:`autograder.course.lms`.
4. A flat name ``<student>_<notebook>.ipynb`` or ``<notebook>_<student>.ipynb`` (``-`` also
   accepted as the separator), where ``<notebook>`` is one of the assignment's notebook names:
   ``alice_a02_broadcasting.ipynb``, ``a02_broadcasting-alice.ipynb``.

Student ids: 1 to 64 characters, letters, digits, ``.``, ``_`` and ``-``, starting with a letter
or a digit (:data:`autograder.course.students.STUDENT_ID_RULE`; an id becomes folder and file
names). Each imported notebook lands in ``submitted/<student>/<assignment>/<notebook>.ipynb`` with
nbgrader's ``timestamp.txt`` (the file's modification time, which LMS exports set to the submission
time). One import is one
snapshot per student: a student already in ``submitted/`` has the whole submission replaced
(reported), or left alone if the files are identical (so re-importing an export changes nothing
and triggers no regrading).

One bad file never stops the import: a file that cannot be imported (not JSON, nested too deep,
not a notebook, unknown notebook, unknown or invalid student, unsafe path or corrupt entry in a
zip, too large, unreadable) is listed with its reason and skipped, and the rest is imported. A zip
is checked from its directory before anything is unpacked: at most :data:`MAX_ZIP_ENTRIES`
entries, and the notebooks in it at most :data:`MAX_NOTEBOOK_BYTES` each and
:data:`MAX_ZIP_NOTEBOOK_BYTES` together once unpacked (an entry whose data does not match its
directory is a corrupt entry, skipped). Nothing is ever written outside the course
directory. Names from an export are shown through :func:`printable` (control characters and
undecodable bytes escaped), since they reach the instructor's terminal.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import os
import shutil
import stat
import zipfile
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from autograder.course import MAX_NOTEBOOK_BYTES, CourseError, notebook, size_text
from autograder.course.directory import Course
from autograder.course.exchange import SECRET_FILE, read_inbound
from autograder.course.files import write_file
from autograder.course.lms import Placement, Roster, lms_placement, load_roster, notebook_of, vet_moodle_names
from autograder.course.ngshare import STAMP_FILE, Ngshare, is_ngshare, read_ngshare
from autograder.course.students import check_student_id, printable

MAX_ZIP_NOTEBOOK_BYTES = 2**30       # the notebooks of one zip, unpacked: 500 students at 2 MB each
MAX_ZIP_ENTRIES = 100_000
MAX_JSON_DEPTH = 64                  # a notebook nests about 6 deep; deeper input only hurts what reads it
JUNK = ("__MACOSX", ".DS_Store", ".ipynb_checkpoints", "Thumbs.db")
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's own timestamp.txt format


@dataclass(frozen=True)
class Entry:
    """One file of the export: its path inside the export, its bytes and its time."""
    path: PurePosixPath
    size: int
    mtime: datetime
    read: Callable[[], bytes]


@dataclass
class Submission:
    student: str
    notebooks: dict[str, tuple[Entry, bytes]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)   # notebook -> what the LMS said of it (late or not)


@dataclass(frozen=True)
class Rules:
    """How an export's files are placed: ``--map``, ``--lms`` with the roster, the due date."""
    mapping: dict[str, str] = field(default_factory=dict)
    lms: str = "none"
    roster: Roster | None = None
    due: datetime | None = None


@dataclass
class CollectReport:
    assignment: str
    source: str
    imported: list[tuple[str, str, str]] = field(default_factory=list)   # student, notebooks, status
    skipped: list[tuple[str, str]] = field(default_factory=list)         # file, reason
    released_ignored: dict[str, int] = field(default_factory=dict)       # student, released kit entries submitted back


# -- reading an export ---------------------------------------------------------------------------

def _folder_entries(root: Path, report: CollectReport) -> Iterator[Entry]:
    for folder, dirs, files in os.walk(root):  # does not follow symbolic links to folders
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            path = Path(folder, name)
            rel = PurePosixPath(path.relative_to(root).as_posix())
            try:
                if path.is_symlink():
                    report.skipped.append((str(rel), "symbolic link (not followed)"))
                elif path.is_file():
                    info = path.stat()
                    yield Entry(rel, info.st_size, datetime.fromtimestamp(info.st_mtime, timezone.utc),
                                path.read_bytes)
            except OSError as error:
                report.skipped.append((str(rel), f"cannot be read ({error.strerror or error})"))


def _zip_entries(archive: zipfile.ZipFile, source: Path, report: CollectReport) -> Iterator[Entry]:
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise CourseError(f"{source} has {len(infos):,} entries, more than the {MAX_ZIP_ENTRIES:,} one import "
                          "accepts (a zip bomb, or split the export); nothing was unpacked")
    wanted = []
    for info in infos:
        if info.is_dir():
            continue
        name = info.filename
        rel = PurePosixPath(name)
        if name.startswith(("/", "\\")) or "\\" in name or ".." in rel.parts or ":" in rel.parts[0]:
            report.skipped.append((name, "unsafe path in the zip (absolute or ../ path traversal)"))
        elif stat.S_ISLNK(info.external_attr >> 16):
            report.skipped.append((name, "symbolic link in the zip"))
        else:
            wanted.append(info)
    notebooks = [info for info in wanted if _is_candidate(PurePosixPath(info.filename))
                 and info.file_size <= MAX_NOTEBOOK_BYTES]
    total = sum(info.file_size for info in notebooks)
    if total > MAX_ZIP_NOTEBOOK_BYTES:
        raise CourseError(f"{source}: its notebooks would unpack to {size_text(total)}, more than the "
                          f"{size_text(MAX_ZIP_NOTEBOOK_BYTES)} one import accepts (a zip bomb, or split the "
                          "export); nothing was unpacked")
    for info in wanted:
        try:
            mtime = datetime(*info.date_time).astimezone(timezone.utc)  # zip times are local times
        except ValueError:  # month 0 and the like: the zip's own time is the best left
            mtime = datetime.fromtimestamp(source.stat().st_mtime, timezone.utc)

        def read(info=info) -> bytes:
            # zipfile unpacks no more than the size in the directory, which the total was checked on,
            # and raises BadZipFile when the data does not match it (CRC)
            with archive.open(info) as handle:
                return handle.read()

        yield Entry(PurePosixPath(info.filename), info.file_size, mtime, read)


def _is_candidate(path: PurePosixPath) -> bool:
    """A file that collect would read: a notebook, outside the folders operating systems add."""
    return path.suffix == ".ipynb" and not any(part in JUNK for part in path.parts)


# -- deciding whose file it is -------------------------------------------------------------------

def _read_map(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or not {"file", "student"} <= set(reader.fieldnames):
            raise CourseError(f"map file {path} needs a header row with the columns file,student")
        mapping = {}
        for number, row in enumerate(reader, 2):
            student = (row["student"] or "").strip()
            try:
                check_student_id(student)
            except ValueError as error:
                raise CourseError(f"map file {path}, line {number}: {error}") from None
            mapping[(row["file"] or "").strip()] = student
    return mapping


def _split_name(stem: str, notebooks: list[str]) -> list[tuple[str, str]]:
    """Every (student, notebook) reading of a flat name ``<student>_<nb>`` or ``<nb>_<student>``."""
    readings = set()
    for nb in notebooks:
        for sep in "_-":
            if stem.startswith(nb + sep):
                readings.add((stem[len(nb) + 1:], nb))
            if stem.endswith(sep + nb):
                readings.add((stem[:-len(nb) - 1], nb))
    return sorted(readings)


def identify(path: PurePosixPath, notebooks: list[str], mapping: dict[str, str]) -> tuple[str, str]:
    """(student, notebook) of an export file, or raise ValueError saying why it cannot be placed."""
    stem = path.stem
    mapped = mapping.get(str(path), mapping.get(path.name))
    if mapped:
        if stem in notebooks:
            return mapped, stem
        names = {nb for _, nb in _split_name(stem, notebooks)}
        if len(names) == 1:
            return mapped, names.pop()
        if len(notebooks) == 1:
            return mapped, notebooks[0]
        raise ValueError(f"mapped to {mapped}, but which notebook is it? (expected one of {', '.join(notebooks)})")
    if stem in notebooks:
        if len(path.parts) < 2:
            raise ValueError("no student in the name and no student folder (use --map)")
        return path.parts[-2], stem
    readings = _split_name(stem, notebooks)
    if not readings:
        raise ValueError(f"unknown notebook: the name contains none of {', '.join(notebooks)}")
    if len(readings) > 1:
        raise ValueError("ambiguous name: " + " or ".join(f"{s}/{nb}" for s, nb in readings))
    return readings[0]


def _check_notebook(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
        content = json.loads(text)
    except ValueError as error:  # UnicodeDecodeError included
        raise ValueError(f"not JSON ({error})") from None
    except RecursionError:  # json recurses once per bracket
        raise ValueError(f"nested too deep (a notebook nests at most {MAX_JSON_DEPTH} levels)") from None
    if _too_deep(content, MAX_JSON_DEPTH):  # nbformat, and later grade, recurse over it too
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep (a notebook nests about 6)")
    try:
        notebook.validated(text)
    except Exception as error:  # nbformat raises several kinds for "JSON but not a notebook"
        first_line = (str(error) or type(error).__name__).splitlines()[0][:120]
        raise ValueError(f"JSON but not a valid notebook ({printable(first_line)})") from None


def _too_deep(content: object, limit: int) -> bool:
    """Whether parsed JSON nests lists and objects more than ``limit`` deep (no recursion)."""
    stack = [(content, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


# -- the command ---------------------------------------------------------------------------------

def collect(course: Course, assignment: str, source: str | Path, map_csv: str | None = None,
            lms: str = "auto") -> CollectReport:
    source = Path(source)
    report = CollectReport(assignment, str(source))
    rules = Rules(_read_map(map_csv), lms, load_roster(course), _due_date(course, assignment))
    with contextlib.ExitStack() as stack:
        if source.is_dir():
            entries = _folder_entries(source, report)
        elif zipfile.is_zipfile(source):
            try:
                archive = stack.enter_context(zipfile.ZipFile(source))
            except (zipfile.BadZipFile, OSError, ValueError) as error:
                raise CourseError(f"{source}: cannot read the zip's directory ({error})") from None
            entries = _zip_entries(archive, source, report)
        else:
            raise CourseError(f"{source} is neither a folder nor a .zip file")
        if rules.roster is not None and lms in ("auto", "moodle"):  # Moodle's names, vetted across the export
            listed = list(entries)
            vet_moodle_names(course, assignment, rules.roster, [entry.path for entry in listed])
            entries = iter(listed)
        _import(course, assignment, entries, rules, report)
    return report


def _due_date(course: Course, assignment: str) -> datetime | None:
    """The assignment's due date in the gradebook (nbgrader keeps naive UTC), None if it has none."""
    with course.gradebook() as gb:
        try:
            due = gb.find_assignment(assignment).duedate
        except Exception:  # nbgrader's MissingEntry: never released with a due date
            return None
    return None if due is None else due.replace(tzinfo=timezone.utc)


def collect_exchange(course: Course, assignment: str, exchange: str | Path | None = None,
                     students: Collection[str] | None = None) -> CollectReport:
    """Import what students submitted from JupyterLab's Assignments tab (nbgrader's exchange).

    The exchange is read by :func:`autograder.course.exchange.read_inbound` (or, when ``exchange``
    is ngshare's URL, :func:`autograder.course.ngshare.read_ngshare`), not nbgrader's own
    collect (which copies each folder with its links resolved and takes the student's name and
    time on their word): each student's latest record that their own account made, its top-level
    notebooks only, timed by when its files last changed. From there the notebooks go through the
    same checks and the same all-or-nothing import per student as an LMS export; the submission's
    secret (which names the student's feedback in the exchange) is kept beside it. With
    ``c.ExchangeCollect.before_duedate`` the latest record before the due date is taken. With
    ``students``, only the records named for them are read (the grading service's one student).
    """
    config = course.exchange_config(exchange)
    before = _due_date(course, assignment) if config.ExchangeCollect.get("before_duedate") else None
    if is_ngshare(exchange):
        report = CollectReport(assignment, f"ngshare {exchange}")
        found = read_ngshare(Ngshare(str(exchange), course.course_id), assignment, course.notebooks(assignment),
                             _released_entries(course, assignment), before=before, students=students)
    else:
        root = Path(config.Exchange.root)
        report = CollectReport(assignment, f"nbgrader exchange {root}")
        inbound = root / course.course_id / "inbound"
        if not inbound.is_dir():
            raise CourseError(f"no inbound folder {inbound}: nothing was ever submitted to course "
                              f"{course.course_id!r} in this exchange (was it released there?)")
        try:
            found = read_inbound(inbound, assignment, course.notebooks(assignment),
                                 _released_entries(course, assignment), before=before, students=students)
        except OSError as error:
            raise CourseError(str(error)) from None
    report.skipped += [(name, reason) for name, reason in found.skipped]
    entries = []
    for student, record in sorted(found.records.items()):
        report.skipped += [(f"{record.name}/{entry}", reason) for entry, reason in record.skipped]
        if record.released:
            report.released_ignored[student] = record.released
        for nb, data in sorted(record.notebooks.items()):
            entries.append(Entry(PurePosixPath(student, f"{nb}.ipynb"), len(data), record.time,
                                 functools.partial(bytes, data)))
        if not record.notebooks:
            report.skipped.append((record.name, "no notebook of the assignment in it"))
    _import(course, assignment, iter(entries), Rules(), report)
    for student, _, _ in report.imported:
        record = found.records[student]
        # what names the submission in the exchange, for its feedback: nbgrader's secret, or
        # ngshare's timestamp (also for a notebook submitted again unchanged: its page goes to the newest)
        for name, value in ((SECRET_FILE, record.secret), (STAMP_FILE, record.stamp)):
            if value is not None:
                write_file(course.submitted_dir(student, assignment) / name, value)
    return report


def _released_entries(course: Course, assignment: str) -> set[str]:
    """The top-level names the release shipped besides its notebooks (the kit): a fetched
    assignment submits them back, and they are expected, not worth a line each."""
    release = course.release_dir(assignment)
    if not release.is_dir():
        return set()
    return {p.name for p in release.iterdir() if p.suffix != ".ipynb"}


def _import(course: Course, assignment: str, entries: Iterator[Entry], rules: Rules,
            report: CollectReport) -> None:
    notebooks = course.notebooks(assignment)
    submissions: dict[str, Submission] = {}
    ranks: dict[PurePosixPath, int] = {}
    for entry in entries:
        name = str(entry.path)
        if any(part in JUNK for part in entry.path.parts):
            continue
        if not _is_candidate(entry.path):
            report.skipped.append((name, "not a notebook file (.ipynb)"))
            continue
        try:
            student, notebook, data, lms = place(entry, notebooks, rules)
        except ValueError as error:
            report.skipped.append((name, str(error)))
            continue
        except Exception as error:  # one file never stops the import; its reason is reported
            report.skipped.append((name, f"cannot be imported ({type(error).__name__}: {error})"))
            continue
        entry, note = _lms_time(entry, lms, rules.due)
        sub = submissions.setdefault(student, Submission(student))
        other = sub.notebooks.get(notebook)
        rank = lms.rank if lms else 0
        if other is not None and (other[0].mtime, ranks[other[0].path]) > (entry.mtime, rank):
            report.skipped.append((name, f"superseded by the newer {other[0].path}"))
            continue
        if other is not None:  # the same notebook twice in one export: the newer one wins
            report.skipped.append((str(other[0].path), f"superseded by the newer {name}"))
        ranks[entry.path] = rank
        sub.notebooks[notebook] = (entry, data)
        sub.notes[notebook] = note
    _store_all(course, assignment, submissions, report)


def place(entry: Entry, notebooks: list[str], rules: Rules) -> tuple[str, str, bytes, Placement | None]:
    """(student, notebook, the file's bytes, the LMS's placement if an LMS layout named the student)
    for one export file, or ValueError saying why it is skipped. The one place that decides a file's
    student and checks what it holds."""
    mapped = str(entry.path) in rules.mapping or entry.path.name in rules.mapping
    lms = None if mapped else lms_placement(entry.path, rules.lms, rules.roster)
    if lms is not None:
        notebook, resubmission = notebook_of(lms.original, notebooks)
        student = lms.student
        lms = Placement(lms.student, lms.original, lms.late, lms.rank or resubmission, lms.system)
    else:
        student, notebook = identify(entry.path, notebooks, rules.mapping)
    check_student_id(student)
    if entry.size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than the size limit ({size_text(MAX_NOTEBOOK_BYTES)})")
    try:
        data = entry.read()
    except zipfile.BadZipFile as error:  # a wrong CRC, a truncated entry
        raise ValueError(f"corrupt zip entry ({error})") from None
    except (OSError, EOFError, RuntimeError, NotImplementedError) as error:  # unreadable, encrypted, lzma...
        raise ValueError(f"cannot be read ({type(error).__name__}: {error})") from None
    _check_notebook(data)
    return student, notebook, data, lms


def _lms_time(entry: Entry, lms: Placement | None, due: datetime | None) -> tuple[Entry, str]:
    """The entry with the time nbgrader should judge it by, and a note for the report.

    A Canvas zip entry's time is when the zip was made: a file Canvas counts on time is given the
    due date if its entry time is later; a file Canvas flags late keeps it (an upper bound). A
    Moodle file keeps its time; after the due date, the report says what that time is."""
    if lms is None:
        return entry, ""
    if lms.late is None:
        if due is not None and entry.mtime > due:
            return entry, (f"after the due date by the {lms.system.capitalize()} export's file time "
                           f"{entry.mtime:%Y-%m-%d %H:%M} UTC (check it against the LMS's submission time)")
        return entry, ""
    if not lms.late:
        if due is not None and entry.mtime > due:
            return Entry(entry.path, entry.size, due, entry.read), "on time (Canvas): timed at the due date"
        return entry, ""
    return entry, "late (Canvas): timed by the zip entry, an upper bound of the submission time"


def _store_all(course: Course, assignment: str, submissions: dict[str, Submission],
               report: CollectReport) -> None:
    with course.gradebook() as gb:
        for student in sorted(submissions):
            sub = submissions[student]
            try:
                status = _store(course, assignment, sub)
            except OSError as error:  # a full disk, a permission: this student only
                for entry, _ in sub.notebooks.values():
                    report.skipped.append((str(entry.path), f"cannot be stored in submitted/ ({error})"))
                continue
            gb.update_or_create_student(student)
            status = "; ".join([status, *sorted({note for note in sub.notes.values() if note})])
            report.imported.append((student, ", ".join(sorted(sub.notebooks)), status))


def _store(course: Course, assignment: str, sub: Submission) -> str:
    dest = course.submitted_dir(sub.student, assignment)
    root = course.root.resolve()
    if not dest.resolve().is_relative_to(root):  # belt and braces: ids are already validated
        raise CourseError(f"refusing to write {dest} outside the course {root}")
    files = {f"{nb}.ipynb": data for nb, (_, data) in sub.notebooks.items()}
    stamp = max(entry.mtime for entry, _ in sub.notebooks.values())

    status = "new"
    if dest.exists():
        old = {p.name: p.read_bytes() for p in dest.glob("*.ipynb")}
        if old == files:
            return "unchanged (identical to the submission already collected)"
        previous = (dest / "timestamp.txt").read_text().strip() if (dest / "timestamp.txt").exists() else "?"
        status = f"resubmitted: replaced the submission of {previous}"

    staging = dest.with_name(f".{dest.name}.incoming")
    old_dir = dest.with_name(f".{dest.name}.old")
    for leftover in (staging, old_dir):
        shutil.rmtree(leftover, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, data in files.items():
        (staging / name).write_bytes(data)
    (staging / "timestamp.txt").write_text(stamp.strftime(TIMESTAMP_FORMAT))
    if dest.exists():
        dest.rename(old_dir)
    os.replace(staging, dest)
    shutil.rmtree(old_dir, ignore_errors=True)
    return status
