"""What ``autograder grade`` records, and when a student counts as done: the ledger and the gradebook writes.

This process is the only writer of the real gradebook (any SQLAlchemy URL). For each finished
worker it runs nbgrader's SaveAutoGrades and AssignLatePenalties on the autograded notebooks (no
execution), all of the student's rows in one database transaction, moves the autograded folder
into place, then writes the student's "graded" marker with the fingerprint of the submitted
files, the repairs made to the notebook and the judge's verdicts. The marker is written last and
removed before a regrade starts, so a crash at any point leaves the student "not done" and a
rerun grades them again, overwriting the same rows; a crash before the commit leaves none of
them written.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning

from autograder.course.directory import Course
from autograder.course.exchange import SECRET_FILE
from autograder.course.files import write_file
from autograder.course.nbgrader_glue import one_transaction, record_grades
from autograder.course.term import settle
from autograder.grading.workers import Finished
from autograder.judge.verdict import KINDS


@dataclass
class Outcome:
    student: str
    status: str                       # "graded", "already graded" or "failed"
    detail: str = ""
    score: float | None = None
    max_score: float | None = None
    seconds: float | None = None      # wall time of this student's grading
    log: str = field(default="", repr=False)


def fingerprint(folder: Path) -> str:
    """A hash of every file of a submission folder (names and bytes) but its secret: the secret names
    where the page goes, and the same notebook submitted again comes with a new one (graded once)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder) != Path(SECRET_FILE)):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _naive_utc(stamp: datetime | None) -> datetime | None:
    if stamp is not None and stamp.tzinfo is not None:
        stamp = stamp.astimezone(timezone.utc).replace(tzinfo=None)
    return stamp


class Ledger:
    """The grader's own records in ``<course>/.autograder/``: graded markers and failures."""

    def __init__(self, course: Course, assignment: str):
        self.course, self.assignment = course, assignment
        self.graded_dir = course.state_dir / "graded" / assignment
        self.failed_dir = course.state_dir / "failed" / assignment
        self._gradebook: Gradebook | None = None

    def gradebook(self) -> Gradebook:
        """The run's gradebook, opened at first use and kept until :meth:`close`: one engine for the
        whole run, so that SQLAlchemy compiles nbgrader's statements once (its statement cache is
        per engine: a Gradebook per student compiled them all again, a third of the recording)."""
        if self._gradebook is None:
            self._gradebook = self.course.gradebook()
        return self._gradebook

    def close(self) -> None:
        if self._gradebook is not None:
            self._gradebook.close()
            self._gradebook = None

    @staticmethod
    def _write(path: Path, data: dict) -> None:
        write_file(path, json.dumps(data, indent=1))  # atomic: a marker is either absent or complete

    def marker(self, student: str) -> dict | None:
        path = self.graded_dir / f"{student}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def mark_graded(self, student: str, fp: str, repairs: list[str] | None = None,
                    verdicts: dict[str, dict] | None = None) -> None:
        """``repairs``: what restoring the notebook's structure changed (a deleted test cell put
        back, ...); ``verdicts``: the judge's, per exercise (passed, message, its kind, and the
        traceback of a check that crashed). Kept here for the instructor: the scratch copy that was graded is gone."""
        self._write(self.graded_dir / f"{student}.json", {"fingerprint": fp, "at": _now(), "repairs": repairs or [],
                                                           "verdicts": verdicts or {}})
        (self.failed_dir / f"{student}.json").unlink(missing_ok=True)

    def unmark(self, student: str) -> None:
        (self.graded_dir / f"{student}.json").unlink(missing_ok=True)

    def mark_failed(self, student: str, reason: str, log: str) -> None:
        self._write(self.failed_dir / f"{student}.json", {"reason": reason, "at": _now(), "log": log})

    def failures(self) -> dict[str, dict]:
        return {p.stem: json.loads(p.read_text()) for p in sorted(self.failed_dir.glob("*.json"))}

    def is_done(self, gb: Gradebook, student: str) -> bool:
        submitted = self.course.submitted_dir(student, self.assignment)
        marker = self.marker(student)
        if marker is None or marker["fingerprint"] != fingerprint(submitted):
            return False
        autograded = self.course.autograded_dir(student, self.assignment)
        for path in submitted.glob("*.ipynb"):
            if path.stem in self.course.notebooks(self.assignment) \
                    and not (autograded / path.name).exists():
                return False
        try:
            submission = gb.find_submission(self.assignment, student)
        except MissingEntry:
            return False
        stamp = self.course.coursedir().get_existing_timestamp(str(submitted))
        return stamp is None or _naive_utc(submission.timestamp) == _naive_utc(stamp)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _install(src: Path, dest: Path, keep: set[Path]) -> None:
    """Replace ``dest`` by the files ``keep`` (relative paths) of ``src``, all or nothing.

    Only the notebooks and the files nbgrader put there are kept: anything else the student's
    code wrote into its working folder (a huge file, a symlink to a secret) stays behind.
    """
    staging = dest.with_name(f".{dest.name}.incoming")
    old = dest.with_name(f".{dest.name}.old")
    for leftover in (staging, old):
        shutil.rmtree(leftover, ignore_errors=True)
    staging.mkdir(parents=True)
    for rel in sorted(keep):
        if (src / rel).is_file() and not (src / rel).is_symlink():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, staging / rel, follow_symlinks=False)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def _files(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


def write_grades(gb: Gradebook, course: Course, assignment: str, student: str, autograded: Path,
                 stamp: datetime | None, config) -> None:
    """The student's rows in the gradebook from their autograded notebooks, in one transaction: the
    student, the submission (with its timestamp), 0 for a notebook not handed in (as nbgrader's
    autograde gives), then each notebook's grades, comments and late penalty (nbgrader's rules),
    with the student's own due dates (:mod:`autograder.course.term`)."""
    with one_transaction(gb):
        submission_rows(gb, assignment, student, autograded, stamp)
        for path in sorted(autograded.glob("*.ipynb")):
            record_grades(path, assignment, student, gb, config)
        # the student's extensions and late days (a new timestamp may spend some): their due dates
        settle(gb, course, [student])


def submission_rows(gb: Gradebook, assignment: str, student: str, autograded: Path, stamp: datetime | None) -> None:
    """The student and their submission (its timestamp), and 0 for every notebook they did not hand in."""
    gb.update_or_create_student(student)
    gb.update_or_create_submission(assignment, student, **({"timestamp": stamp} if stamp else {}))
    handed_in = {p.stem for p in autograded.glob("*.ipynb")}
    for entry in gb.find_assignment(assignment).notebooks:
        if entry.name not in handed_in:
            for grade in gb.find_submission_notebook(entry.name, assignment, student).grades:
                grade.auto_score, grade.needs_manual_grade = 0, False


def _record(course: Course, assignment: str, done: Finished, ledger: Ledger, result: dict) -> Outcome:
    student = done.student
    submitted = course.submitted_dir(student, assignment)
    assert done.autograded is not None
    stamp = course.coursedir().get_existing_timestamp(str(submitted))
    with warnings.catch_warnings():
        # nbgrader 0.9.6 on SQLAlchemy 2 warns "Object ... not in session" on every new
        # submission; the rows are written correctly (checked by the tests).
        warnings.simplefilter("ignore", SAWarning)
        gb = ledger.gradebook()
        try:
            write_grades(gb, course, assignment, student, done.autograded, stamp, course.config())
            keep = _files(course.source_dir(assignment)) | _files(submitted) | {Path("timestamp.txt")}
            _install(done.autograded, course.autograded_dir(student, assignment), keep)
            repairs = [str(r) for r in result.get("repairs") or []]
            verdicts = _verdicts(result)
            ledger.mark_graded(student, done.fingerprint, repairs, verdicts)
            outcome = _graded_outcome(course, assignment, student, "graded", gb)
        finally:
            gb.db.close()  # the engine stays for the next student; no connection is held between students
    unreadable = list((result.get("unreadable") or {}).values())
    record = ledger.graded_dir / f"{student}.json"
    crashed = sorted(e for e, v in verdicts.items() if v["detail"])
    outcome.detail = "; ".join([*unreadable, *_repaired(repairs, record),
                                *([f"a check crashed on {', '.join(crashed)} (a bug of the grader: the traceback is in "
                                   f"{record})"] if crashed else []),
                                *([outcome.detail] if outcome.detail else [])])
    return outcome


def _verdicts(result: dict) -> dict[str, dict]:
    """The judge's verdict on each exercise, from the worker's result: {exercise: {"passed",
    "message", "detail", "kind"}} (what nbgrader scores is the same verdict, as the test cells'
    outputs). A kind that is not one of the judge's is recorded as none (read then from the message)."""
    out: dict[str, dict] = {}
    for verdicts in (result.get("notebooks") or {}).values():
        for exercise, verdict in (verdicts if isinstance(verdicts, dict) else {}).items():
            if isinstance(verdict, dict):
                kind = verdict.get("kind")
                out[str(exercise)] = {"passed": verdict.get("passed") is True,
                                      "message": str(verdict.get("message") or ""),
                                      "detail": str(verdict.get("detail") or ""),
                                      "kind": kind if kind in KINDS else ""}
    return out


def _repaired(repairs: list[str], record: Path) -> list[str]:
    """A line for grade's table when the notebook's structure had to be repaired before grading."""
    if not repairs:
        return []
    shown = "; ".join(repairs[:2]) + ("; ..." if len(repairs) > 2 else "")
    return [f"notebook repaired before grading ({len(repairs)}: {shown}; all in {record})"]


def _graded_outcome(course: Course, assignment: str, student: str, status: str,
                    gradebook: Gradebook | None = None) -> Outcome:
    with contextlib.nullcontext(gradebook) if gradebook is not None else course.gradebook() as gb:
        submission = gb.find_submission(assignment, student)
        details = ["written answers to grade by hand"] if submission.needs_manual_grade else []
        penalty = submission.late_submission_penalty or 0.0
        if submission.total_seconds_late > 0:
            details.append(f"{_duration(submission.total_seconds_late)} late"
                           + (f", penalty {penalty:g}" if penalty else ""))
        # the score after the late penalty, as nbgrader's export computes it
        return Outcome(student, status, "; ".join(details), max(0.0, submission.score - penalty),
                       submission.max_score)


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours < 48 else f"{hours // 24} days {hours % 24} h"
