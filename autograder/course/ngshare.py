"""nbgrader's exchange on Kubernetes: ngshare, read and written as the grader needs, students hostile.

On Zero to JupyterHub every student's server runs as the same uid, so the exchange is not a folder
but ngshare, a JupyterHub service that knows each caller by their hub API token
(deploy/kubernetes/README.md). What :mod:`autograder.course.exchange` gets from the kernel on a
one-machine hub, ngshare's server gives here, and nothing else is taken on a student's word:

* **Whose**: the hub user ngshare authenticated when the submission was posted (its ``student_id``).
  A hub name that is not a student id the course can use is refused with its reason.
* **When**: ngshare's own timestamp of the submission, set by the server, never the student's
  ``timestamp.txt`` (ngshare stores whatever files a student posts, that one included).
* **What**: the same as on disk: only the top-level notebooks named like the assignment's, each
  within :data:`MAX_NOTEBOOK_BYTES`; a submission whose download is larger than
  :func:`download_limit` is not read at all (the response is read no further than that).

The grader calls ngshare with a hub API token of its own (``JUPYTERHUB_API_TOKEN``, as
ngshare_exchange does in a student's server): the token of a hub service made an instructor of the
course in ngshare, which may list and download the course's submissions and upload feedback,
nothing more. Feedback goes to the submission it is about (its ngshare timestamp): that student's
*Fetch Feedback* brings it, and ngshare gives it to no other student.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Container, Iterable
from datetime import datetime, timezone
from pathlib import PurePosixPath

from autograder.course import MAX_NOTEBOOK_BYTES, CourseError, size_text
from autograder.course.exchange import Inbound, Record, entry_refusal
from autograder.course.students import MAX_ID_LENGTH, SAFE_ID

STAMP_FILE = "ngshare_submission.txt"  # beside a collected submission: ngshare's name of it (its timestamp)
TIMEOUT = 60                           # seconds for one call: ngshare answers in milliseconds when well
_LISTING_LIMIT = 64 * 2**20            # a listing of a class's submissions is kilobytes


def is_ngshare(exchange: object) -> bool:
    """Whether an exchange named on the command line is ngshare's URL rather than a folder."""
    return isinstance(exchange, str) and exchange.startswith(("http://", "https://"))


def download_limit(notebooks: int) -> int:
    """The most a submission's download may be: its notebooks at the size limit, base64-encoded
    (4/3), and room for the kit a fetched assignment carries back."""
    return (notebooks + 1) * MAX_NOTEBOOK_BYTES * 4 // 3 + 16 * 2**20


def parse_stamp(text: str) -> datetime | None:
    """ngshare's timestamp (``%Y-%m-%d %H:%M:%S.%f``, UTC, with or without `` UTC``) as a UTC time."""
    text = text.strip().removesuffix(" UTC")
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


class Ngshare:
    """The calls the grader makes to ngshare's API, for one course (``url``: the service's base, as
    ngshare_exchange's ``configureExchange`` takes it, e.g. ``http://ngshare:8080/services/ngshare``)."""

    def __init__(self, url: str, course_id: str, token: str | None = None):
        self.url, self.course_id = url.rstrip("/"), course_id
        self.token = token if token is not None else os.environ.get("JUPYTERHUB_API_TOKEN", "")
        if not self.token:
            raise CourseError(f"ngshare at {self.url} knows its callers by their hub API token: set "
                              "JUPYTERHUB_API_TOKEN to the grading service's token (deploy/kubernetes/README.md)")

    def _call(self, what: str, method: str, path: str, fields: dict[str, str] | None = None,
              limit: int = _LISTING_LIMIT) -> dict:
        """One call; ``what`` says what it was for in an error. A reply is read to ``limit`` bytes at most."""
        address = self.url + urllib.parse.quote(path)
        if method == "GET" and fields:
            address += "?" + urllib.parse.urlencode(fields)
        body = urllib.parse.urlencode(fields).encode() if method == "POST" and fields else None
        request = urllib.request.Request(address, data=body, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:
                data = reply.read(limit + 1)
        except urllib.error.HTTPError as error:
            if error.code >= 500:
                raise Unreachable(f"ngshare at {self.url} failed to {what}: {_message(error)}") from None
            hint = "" if error.code != 403 else (
                f" (the token's account must be an instructor of course {self.course_id} in ngshare: "
                f"`ngshare-course-management add_instructor {self.course_id} ACCOUNT`)")
            raise CourseError(f"ngshare at {self.url} refused to {what}: {_message(error)}{hint}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise Unreachable(f"ngshare at {self.url} cannot be reached to {what} ({reason})") from None
        if len(data) > limit:
            raise _TooLarge(f"larger than {size_text(limit)}")
        try:
            answer = json.loads(data)
        except ValueError:
            raise CourseError(f"ngshare at {self.url} did not answer in JSON when asked to {what}") from None
        if not isinstance(answer, dict) or not answer.get("success"):
            raise CourseError(f"ngshare at {self.url} refused to {what}: {answer}")
        return answer

    def assignments(self) -> list[str]:
        """The course's assignments released to ngshare."""
        answer = self._call(f"list the assignments of course {self.course_id}", "GET",
                            f"/assignments/{self.course_id}")
        return [name for name in answer.get("assignments", []) if isinstance(name, str)]

    def submissions(self, assignment: str) -> list[tuple[str, str]]:
        """Every submission of ``assignment``: (student, ngshare's timestamp), in no particular order."""
        answer = self._call(f"list the submissions of {assignment}", "GET",
                            f"/submissions/{self.course_id}/{assignment}")
        return [(str(s.get("student_id")), str(s.get("timestamp"))) for s in answer.get("submissions", [])
                if isinstance(s, dict)]

    def download(self, assignment: str, student: str, stamp: str, limit: int) -> list[tuple[str, bytes]]:
        """The files of one submission: (path inside it, bytes). Raises :class:`_TooLarge` past ``limit``."""
        answer = self._call(f"send {student}'s submission of {assignment} of {stamp}", "GET",
                            f"/submission/{self.course_id}/{assignment}/{student}", {"timestamp": stamp}, limit)
        files = []
        for item in answer.get("files", []):
            try:
                files.append((str(item["path"]), base64.decodebytes(str(item["content"]).encode())))
            except (KeyError, TypeError, binascii.Error):
                files.append((str(item.get("path", "?")) if isinstance(item, dict) else "?", b""))
        return files

    def release_feedback(self, assignment: str, student: str, stamp: str, pages: dict[str, bytes]) -> None:
        """Upload one student's ``{notebook: page}`` as the feedback of their submission ``stamp``
        (ngshare replaces what that submission had)."""
        files = [{"path": f"{notebook}.html", "content": base64.encodebytes(page).decode()}
                 for notebook, page in sorted(pages.items())]
        self._call(f"take the feedback of {student}'s submission of {assignment} of {stamp}", "POST",
                   f"/feedback/{self.course_id}/{assignment}/{student}",
                   {"timestamp": stamp, "files": json.dumps(files)})


class _TooLarge(CourseError):
    pass


class Unreachable(CourseError):
    """ngshare could not be asked (down, or failing): a moment's trouble, tried again later."""


def _message(error: urllib.error.HTTPError) -> str:
    try:
        said = json.loads(error.read(64 * 1024)).get("message")
    except (ValueError, AttributeError, OSError):
        said = None
    return f"HTTP {error.code}" + (f", {said}" if said else "")


def read_ngshare(client: Ngshare, assignment: str, notebooks: Iterable[str], released: Iterable[str] = (),
                 before: datetime | None = None, students: Container[str] | None = None) -> Inbound:
    """Each student's latest submission of ``assignment`` in ngshare (the latest before ``before``,
    if given), read as the module says: the same :class:`Inbound` as the folder exchange's
    :func:`~autograder.course.exchange.read_inbound`, each record's ``stamp`` its ngshare timestamp."""
    wanted, shipped = {f"{nb}.ipynb": nb for nb in notebooks}, set(released)
    found = Inbound()
    latest: dict[str, tuple[datetime, str]] = {}
    for student, stamp in client.submissions(assignment):
        if students is not None and student not in students:
            continue
        name = f"{student}+{assignment}+{stamp}"
        when = parse_stamp(stamp)
        if when is None:
            found.skipped.append((name, f"ngshare's timestamp {stamp!r} is not one it writes"))
            continue
        if not SAFE_ID.fullmatch(student):
            found.skipped.append((name, f"not a student id (ids are at most {MAX_ID_LENGTH} letters, digits, "
                                        "'.', '_', '-')"))
            continue
        if before is not None and when > before:
            found.skipped.append((name, f"after the due date ({when:%Y-%m-%d %H:%M:%S} UTC); an earlier "
                                        "submission is used"))
            continue
        if student not in latest or (when, stamp) > latest[student]:
            latest[student] = (when, stamp)
    for student, (when, stamp) in sorted(latest.items()):
        name = f"{student}+{assignment}+{stamp}"
        try:
            files = client.download(assignment, student, stamp, download_limit(len(wanted)))
        except _TooLarge as error:
            found.skipped.append((name, f"{error}: not read (its notebooks may be {size_text(MAX_NOTEBOOK_BYTES)} "
                                        "each; the submission holds more than the assignment)"))
            continue
        record = Record(name, student, when, stamp=stamp)
        folders: set[str] = set()
        for path, data in files:
            parts = PurePosixPath(path).parts
            top = parts[0] if parts else path
            if top in shipped:
                if top not in folders:
                    record.released += 1
                folders.add(top)
            elif len(parts) > 1:
                if top not in folders:
                    record.skipped.append((top, entry_refusal(top, True, wanted)))
                folders.add(top)
            elif path in wanted:
                if len(data) > MAX_NOTEBOOK_BYTES:
                    record.skipped.append((path, f"larger than the size limit ({size_text(MAX_NOTEBOOK_BYTES)})"))
                else:
                    record.notebooks[wanted[path]] = data
            elif path not in ("timestamp.txt", "submission_secret.txt"):
                record.skipped.append((path, entry_refusal(path, False, wanted)))
        found.records[student] = record
    return found
