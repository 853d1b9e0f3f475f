"""nbgrader's exchange on disk, read and written as a class's machine needs: students are hostile.

Every student can write into the exchange's ``inbound/`` folder, and owns what they put there
(nbgrader's submit leaves their folder writable by them). So nothing of it is taken on its word:

* **Whose**: a record ``<student>+<assignment>+<time>[+<random>]`` counts as that student's only
  if that student's account made it (its owner; or the account collecting, on a machine with one
  user). A folder made by A in B's name is refused and reported.
* **When**: the time a submission is judged by is the last time its files changed in the exchange
  (the inode change times of the record and of its top-level entries, which no user can set), not
  its ``timestamp.txt`` nor the time in its name, which the student wrote.
* **What**: only the record's top-level notebooks named like the assignment's, and its
  ``submission_secret.txt``, are read: regular files of the record's owner, opened relative to
  the record's folder without following any link (``O_NOFOLLOW``; a FIFO or device is never
  opened), within :data:`MAX_NOTEBOOK_BYTES`. Nothing below the top level is read at all, so no
  depth, link or special file beneath it can stop a collect.
* **One bad record stops no one**: whatever a record is, it is either read or skipped with its
  reason (:class:`Inbound` ``.skipped``).

Writing: :func:`release_feedback` puts each student's pages where their *Fetch Feedback* looks
(nbgrader's own naming, by the submission's secret), one student at a time (one without a secret
is reported, the others are released), each page written then renamed into place.
"""
from __future__ import annotations

import errno
import os
import pwd
import re
import stat
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.utils import notebook_hash

from autograder.course import MAX_NOTEBOOK_BYTES, size_text
from autograder.course.files import write_replacing
from autograder.course.students import MAX_ID_LENGTH, SAFE_ID

SECRET_FILE = "submission_secret.txt"
SECRET = re.compile(r"[0-9a-f]{16,256}")  # nbgrader's secrets.token_hex(64): 128 hex digits
MAX_SECRET_BYTES = 512
_KINDS = {stat.S_IFLNK: "a symbolic link (not followed)", stat.S_IFIFO: "a named pipe (not opened)",
          stat.S_IFCHR: "a device (not opened)", stat.S_IFBLK: "a device (not opened)",
          stat.S_IFSOCK: "a socket (not opened)"}
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


@dataclass
class Record:
    """One submission in the exchange, read: whose, when, its notebooks and its secret."""
    name: str
    student: str
    time: datetime
    notebooks: dict[str, bytes] = field(default_factory=dict)    # notebook name (no .ipynb) -> bytes
    secret: str | None = None
    stamp: str | None = None                                      # an exchange server's own name of it (ngshare)
    released: int = 0                                             # top-level entries the release shipped
    skipped: list[tuple[str, str]] = field(default_factory=list)  # entry inside the record, reason


@dataclass
class Inbound:
    """What a collect found for one assignment: each student's latest record, and what was refused."""
    records: dict[str, Record] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # record (or record/entry), reason


def account_of(student: str) -> int | None:
    try:
        return pwd.getpwnam(student).pw_uid
    except KeyError:
        return None


def parse_name(name: str) -> tuple[str, str] | None:
    """(student, assignment) of a record's folder name, or None if it is not one."""
    parts = name.split("+")
    if len(parts) not in (3, 4) or not all(parts):
        return None
    return parts[0], parts[1]


def read_inbound(inbound: Path, assignment: str, notebooks: Iterable[str], released: Iterable[str] = (),
                 collector: int | None = None, before: datetime | None = None,
                 students: Container[str] | None = None) -> Inbound:
    """Each student's latest record of ``assignment`` in ``inbound`` (the latest before ``before``,
    if given), read as the module says. ``released``: the top-level names the release shipped
    besides its notebooks (counted, not read); ``collector``: the uid whose records count for any
    student (default: this process's); ``students``: only the records named for these (the grading
    service collects one student at a time)."""
    collector = os.geteuid() if collector is None else collector
    wanted, shipped = {f"{nb}.ipynb": nb for nb in notebooks}, set(released)
    found = Inbound()
    try:
        folder = os.open(inbound, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise OSError(error.errno, f"cannot read the exchange's inbound folder {inbound}: {error.strerror}") from None
    try:
        with os.scandir(folder) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            parsed = parse_name(name)
            if parsed is None or parsed[1] != assignment or (students is not None and parsed[0] not in students):
                continue  # another assignment's record, or not a record: not this collect's business
            try:
                record = _read_record(folder, name, parsed[0], wanted, shipped, collector)
            except RecordRefused as refused:
                found.skipped.append((name, str(refused)))
                continue
            if before is not None and record.time > before:
                found.skipped.append((name, f"after the due date ({record.time:%Y-%m-%d %H:%M:%S} UTC); "
                                            "an earlier submission is used"))
                continue
            current = found.records.get(record.student)
            if current is None or (record.time, record.name) > (current.time, current.name):
                found.records[record.student], superseded = record, current
            else:
                superseded = record
            if superseded is not None:  # only what no honest submission holds is worth a line
                found.skipped += [(f"{superseded.name}/{entry}", reason) for entry, reason in superseded.skipped
                                  if reason in _KINDS.values() or reason.startswith("a file of ")]
    finally:
        os.close(folder)
    return found


class RecordRefused(Exception):
    """A record that is not read at all; the message says why."""


def _read_record(inbound: int, name: str, student: str, wanted: dict[str, str], shipped: set[str],
                 collector: int) -> Record:
    if not SAFE_ID.fullmatch(student):
        raise RecordRefused(f"not a student id (ids are at most {MAX_ID_LENGTH} letters, digits, '.', '_', '-')")
    try:
        folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=inbound)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RecordRefused("not a folder (a link or a file): not followed") from None
        raise RecordRefused(f"cannot be read ({error.strerror})") from None
    try:
        info = os.fstat(folder)
        owner = info.st_uid
        if owner != collector and owner != account_of(student):
            raise RecordRefused(f"made by {_user(owner)}, not by {student}: a submission in another's name is "
                                "refused")
        record = Record(name, student, _utc(info.st_ctime))
        changed = info.st_ctime
        with os.scandir(folder) as entries:
            listing = sorted((entry.name, entry.stat(follow_symlinks=False)) for entry in entries)
        for entry, meta in listing:
            changed = max(changed, meta.st_ctime)
            kind = stat.S_IFMT(meta.st_mode)
            if entry in shipped:
                record.released += 1
            elif kind in _KINDS:
                record.skipped.append((entry, _KINDS[kind]))
            elif entry in wanted or entry == SECRET_FILE:
                limit = MAX_NOTEBOOK_BYTES if entry in wanted else MAX_SECRET_BYTES
                try:
                    data = _read_file(folder, entry, meta, owner, limit)
                except RecordRefused as refused:
                    record.skipped.append((entry, str(refused)))
                    continue
                if entry in wanted:
                    record.notebooks[wanted[entry]] = data
                else:
                    secret = data.decode("ascii", "replace").strip()
                    if SECRET.fullmatch(secret):
                        record.secret = secret
                    else:
                        record.skipped.append((entry, "not a submission secret (hex digits)"))
            elif entry != "timestamp.txt":
                record.skipped.append((entry, entry_refusal(entry, kind == stat.S_IFDIR, wanted)))
        record.time = _utc(changed)
        return record
    finally:
        os.close(folder)


def entry_refusal(entry: str, folder: bool, wanted: Iterable[str]) -> str:
    """Why a top-level entry of a submission that is neither a notebook of the assignment nor
    something the release shipped is not read (every exchange says it in the same words)."""
    if folder:
        return "a folder the release did not ship (only the submission's top-level notebooks are read)"
    if entry.endswith(".ipynb"):
        return f"not one of the assignment's notebooks ({', '.join(sorted(wanted)) or 'none'})"
    return "not a notebook file (.ipynb)"


def _read_file(folder: int, name: str, seen: os.stat_result, owner: int, limit: int) -> bytes:
    """A regular file of ``owner`` in the open ``folder``, at most ``limit`` bytes, never through a link."""
    if seen.st_uid != owner:
        raise RecordRefused(f"a file of {_user(seen.st_uid)}, not of the submission's author")
    if seen.st_size > limit:
        raise RecordRefused(f"larger than the size limit ({size_text(limit)})")
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=folder)
    except OSError as error:
        raise RecordRefused(f"cannot be read ({error.strerror})") from None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
            raise RecordRefused("changed while it was read (not the file that was listed)")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise RecordRefused(f"larger than the size limit ({size_text(limit)})")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


# -- feedback ----------------------------------------------------------------------------------------

def feedback_name(secret: str, notebook: str) -> str:
    """The file name nbgrader's *Fetch Feedback* looks for: its hash of the secret and notebook."""
    return f"{notebook_hash(secret=secret, notebook_id=notebook)}.html"


def release_feedback(outbound: Path, pages: dict[str, bytes], secret: str) -> list[Path]:
    """Write one student's ``{notebook: page}`` into the exchange's ``feedback/`` folder, each
    page written beside its place and renamed into it (a reader never sees half a page, and a
    link planted at the name is replaced, never followed). Returns the paths written."""
    written = []
    folder = os.open(outbound, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for notebook, page in sorted(pages.items()):
            name = feedback_name(secret, notebook)
            write_replacing(folder, name, page, mode=0o644)
            written.append(outbound / name)
    finally:
        os.close(folder)
    return written
