"""``autograder serve``: the grading service. A submission is graded, and its feedback released, on submit.

The service watches the exchange's ``inbound/`` for new submissions of the assignments released
there, and for each student with a new one: collects that student's latest submission with
:func:`autograder.commands.collect.collect_exchange` (the same hardened reading as ``collect
--exchange``: whose, when and what, never through a link), grades it with
:func:`autograder.commands.grade.grade` (the same sandboxes, the same one writer of the gradebook,
the same "done" marker), and releases that student's feedback where *Fetch Feedback* finds it, as
the instructor's policy for the assignment says.

* **Fair under load.** One queue of (assignment, student), each at most once: latest-wins (a
  student's newer submissions while they wait replace the older, since what is collected is the
  latest when their turn comes), and round-robin (a student graded again goes to the back), so
  one student resubmitting 50 times takes one place in the queue. At most ``--jobs`` students are
  graded at a time (or on a Dask cluster with ``--scheduler``, as ``grade`` does).
* **The instructor's policy**, per assignment, in the course's ``nbgrader_config.py``
  (:func:`policy`): what a student sees before the due date (``full`` feedback; ``score``: the
  visible tests' results and the score; ``none``: nothing until the due date, when the full
  feedback is released), and at most ``per_hour`` graded submissions per student and hour (a
  student over it waits; their newest submission is graded when the hour allows, and their course
  page says when: :func:`tell_held`). Every page
  says which submission (its time) it is about and that the grade that counts is decided by the
  due date. With ``c.ExchangeCollect.before_duedate`` a submission after the due date is never
  collected, as for ``collect --exchange``.
* **Nothing lost, nothing twice.** The exchange itself holds every submission; the service's own
  state (``.autograder/serve/state.json``, written then renamed, so whole or not at all) says
  which record names it has seen and what became of each student. A kill -9 at any moment:
  on restart, whoever was waiting or grading is queued again; ``grade`` skips a student whose
  submission is already recorded (its marker) and otherwise overwrites the same gradebook rows;
  a feedback page is replaced by the same page. The instructor's ``collect``, ``grade``,
  ``feedback`` and ``report`` keep working beside it (``grade``'s lock makes the two take turns).
* **Least privilege.** It runs as the course's owner, the account the instructor's commands run
  as: never as root and never as one of the course's students (refused at start).
* **The instructor's controls**: ``--status`` (waiting, grading, done, failed or refused, per
  student and assignment, with the reason), ``--pause``/``--resume``, ``--off A``/``--on A``.
"""

from __future__ import annotations

import contextlib
import fcntl
import html
import json
import os
import pwd
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.course import CourseError, notebook
from autograder.course.directory import Course
from autograder.course.exchange import SECRET, SECRET_FILE, parse_name, release_feedback
from autograder.course.files import write_file
from autograder.course.ngshare import STAMP_FILE, Ngshare, Unreachable, is_ngshare, parse_stamp
from autograder.course.students import printable
from autograder.course.term import Term

if TYPE_CHECKING:
    from autograder.grading.executors import ClusterAccess
    from autograder.grading.record import Outcome
    from autograder.grading.workers import Limits

MODES = ("full", "score", "none")
HOUR = timedelta(hours=1)
MAX_ATTEMPTS = 3        # starts of the grading of one submission that the service did not survive
HISTORY = 5000          # gradings kept in the state for --status and the tests (the oldest dropped)


# -- the instructor's policy ---------------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    before_due: str = "full"        # what a student sees before the due date: one of MODES
    per_hour: int | None = None     # graded submissions per student and hour, None: no limit


def policy(course: Course, assignment: str) -> Policy:
    """The assignment's policy from the course's ``nbgrader_config.py``::

        c.FeedbackService.default = {"before_due": "full"}
        c.FeedbackService.policy = {"a02_broadcasting": {"before_due": "score", "per_hour": 4}}

    An assignment's entry overrides the default's keys; a wrong value is a CourseError naming it."""
    section = course.config().FeedbackService
    merged: dict[str, Any] = {**dict(section.get("default", {}) or {}),
                              **dict((section.get("policy", {}) or {}).get(assignment, {}) or {})}
    where = f"c.FeedbackService in {course.root / 'nbgrader_config.py'}, for {assignment}"
    unknown = sorted(set(merged) - {"before_due", "per_hour"})
    if unknown:
        raise CourseError(f"{where}: unknown setting {', '.join(unknown)} (settings: before_due, per_hour)")
    mode = merged.get("before_due", "full")
    if mode not in MODES:
        raise CourseError(f"{where}: before_due is {mode!r}, expected one of {', '.join(MODES)}")
    per_hour = merged.get("per_hour")
    if per_hour is not None and (not isinstance(per_hour, int) or isinstance(per_hour, bool) or per_hour < 1):
        raise CourseError(f"{where}: per_hour is {per_hour!r}, expected a whole number of 1 or more")
    return Policy(mode, per_hour)


# -- durable state and the instructor's controls -------------------------------------------------

def _folder(course: Course) -> Path:
    return course.state_dir / "serve"


def _read_json(path: Path, default: dict) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


def controls(course: Course) -> dict:
    """What the instructor set: {"paused": bool, "off": [assignments]}."""
    return {"paused": False, "off": [], **_read_json(_folder(course) / "control.json", {})}


def set_controls(course: Course, paused: bool | None = None, on: Sequence[str] = (), off: Sequence[str] = ()) -> dict:
    current = controls(course)
    if paused is not None:
        current["paused"] = paused
    current["off"] = sorted((set(current["off"]) | set(off)) - set(on))
    write_file(_folder(course) / "control.json", json.dumps(current, indent=1))
    return current


class State:
    """The service's state file: per ``assignment/student`` its status, the record names seen, the
    submission time released and the times it was graded; and the gradings in order."""

    def __init__(self, course: Course):
        self.path = _folder(course) / "state.json"
        data = _read_json(self.path, {})
        self.students: dict[str, dict] = data.get("students", {})
        self.history: list[list[str]] = data.get("history", [])

    def entry(self, assignment: str, student: str) -> dict:
        return self.students.setdefault(f"{assignment}/{student}", {"status": "new", "seen": []})

    def save(self) -> None:
        self.history = self.history[-HISTORY:]
        write_file(self.path, json.dumps({"students": self.students, "history": self.history}, indent=1))


# -- the service -----------------------------------------------------------------------------------

def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _stamp(text: str) -> datetime | None:
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


class Service:
    """The queue and one pass of work at a time (:meth:`step`); :meth:`run` loops over it."""

    def __init__(self, course: Course, exchange: str | Path | None = "", jobs: int = 1,
                 limits: Limits | None = None, unsafe: bool = False, scheduler: str | None = None,
                 access: ClusterAccess | None = None, now: Callable[[], datetime] = _utc_now):
        from autograder.grading.workers import Limits
        self.course, self.jobs, self.unsafe, self.now = course, max(1, jobs), unsafe, now
        self.limits = limits or Limits()
        self.scheduler, self.access = scheduler, access
        self.config = course.exchange_config(exchange)
        # the exchange: a folder (one machine's hub), or ngshare's URL (Kubernetes), whose API the
        # service reads and writes instead (autograder.course.ngshare); ``root`` is the folder's only
        self.ngshare = Ngshare(str(exchange), course.course_id) if is_ngshare(exchange) else None
        self.exchange = str(exchange) if self.ngshare else str(self.config.Exchange.root)
        self.root = Path(self.exchange) / course.course_id
        self._times: dict[str, float] = {}  # record name -> when ngshare took it
        self.state = State(course)
        self.queue: deque[tuple[str, str]] = deque()
        # after a restart, whoever was waiting or grading goes first, in the order they came; a
        # submission the service died on MAX_ATTEMPTS times is not tried again (it would stop everyone)
        for entry in self.state.students.values():
            if entry["status"] == "grading" and entry.get("attempts", 0) >= MAX_ATTEMPTS:
                entry.update(status="failed", attempts=0,
                             detail=f"the service stopped while grading this submission {MAX_ATTEMPTS} times: not "
                                    "tried again until the student submits again")
                self.state.save()
        pending = sorted((entry.get("since", ""), key) for key, entry in self.state.students.items()
                         if entry["status"] in ("waiting", "grading"))
        for _, key in pending:
            assignment, student = key.split("/", 1)
            self.queue.append((assignment, student))

    # -- what is new in the exchange

    def released(self) -> list[str]:
        """The course's assignments released to the exchange (the Assignments tab lists them)."""
        if self.ngshare is not None:
            there = set(self.ngshare.assignments())
            return [a for a in self.course.assignments() if a in there]
        outbound = self.root / "outbound"
        return [a for a in self.course.assignments() if (outbound / a).is_dir()]

    def records(self, assignments: list[str]) -> dict[tuple[str, str], list[str]]:
        """Every submission's record name in the exchange, per (assignment, student)."""
        names: dict[tuple[str, str], list[str]] = {}
        if self.ngshare is not None:
            for assignment in assignments:
                for student, stamp in self.ngshare.submissions(assignment):
                    name = f"{student}+{assignment}+{stamp}"
                    when = parse_stamp(stamp)
                    self._times[name] = when.timestamp() if when else float("inf")
                    names.setdefault((assignment, student), []).append(name)
            return {key: sorted(seen) for key, seen in names.items()}
        try:
            with os.scandir(self.root / "inbound") as entries:
                listing = sorted(entry.name for entry in entries)
        except FileNotFoundError:
            listing = []
        for name in listing:
            parsed = parse_name(name)
            if parsed is not None and parsed[1] in assignments:
                names.setdefault((parsed[1], parsed[0]), []).append(name)
        return names

    def poll(self) -> None:
        """Queue every student with a record name not seen yet, and every student whose feedback
        waits for a due date that has passed."""
        off = set(controls(self.course)["off"])
        assignments = [a for a in self.released() if a not in off]
        names = self.records(assignments)
        new: list[tuple[float, str, str]] = []
        for (assignment, student), seen in names.items():
            entry = self.state.entry(assignment, student)
            if not set(seen) <= set(entry["seen"]):
                arrived = min(self._arrived(name) for name in set(seen) - set(entry["seen"]))
                entry["seen"] = seen
                new.append((arrived, assignment, student))
        # in the order they came, not by name: with one worker busy, a whole grading's arrivals are
        # seen at once, and "aaron" must not pass "zoe" who submitted first (round-robin is by turn)
        arrivals = [(assignment, student) for _, assignment, student in sorted(new)]
        for assignment in assignments:
            for held, entry in self.state.students.items():
                if held.startswith(f"{assignment}/") and _owes_full_page(entry):
                    student = held.split("/", 1)[1]
                    due = self.due(assignment, student)  # their own: an extension moves it
                    if due is not None and self.now() >= due:
                        arrivals.append((assignment, student))
        changed = False
        for key in arrivals:
            entry = self.state.entry(*key)
            if key in self.queue:
                continue
            if entry["status"] != "grading":
                entry.update(status="waiting", since=self.now().isoformat(), detail="")
            # else: a newer submission while the older is graded: in line for the next run
            # (:meth:`_graded` says "waiting" once the older is done, so a restart keeps it)
            self.queue.append(key)
            changed = True
        if changed:
            self.state.save()
        publish_student_view(self)

    def _arrived(self, name: str) -> float:
        """When the record ``name`` came: its folder's ctime, which the kernel sets (a student can set
        the time in its name and its mtime, not this; a change makes it later, never earlier); in
        ngshare, the time ngshare took it."""
        if self.ngshare is not None:
            return self._times.get(name, float("inf"))
        try:
            return os.lstat(self.root / "inbound" / name).st_ctime
        except OSError:  # gone meanwhile: it goes last, and collect finds what is there
            return float("inf")

    def due(self, assignment: str, student: str | None = None) -> datetime | None:
        """The assignment's due date, or ``student``'s own: with the extension the instructor gave them
        (``autograder extend``, :mod:`autograder.course.term`), so what they see before it follows it."""
        with self.course.gradebook() as gb:
            try:
                due = gb.find_assignment(assignment).duedate
            except Exception:  # nbgrader's MissingEntry: released without a due date
                return None
        if due is None:
            return None
        if student is not None:
            due += timedelta(seconds=Term.load(self.course).base_extension(student, assignment, due))
        return due.replace(tzinfo=timezone.utc)

    # -- one pass

    def step(self) -> bool:
        """Poll, then grade the students in the queue, round-robin, in one run of the assignment at
        its head: the run starts with up to ``jobs`` of them, and each time a worker is free it takes
        the next in line if that one is of the same assignment (:meth:`_take`), so a slow submission
        holds one worker, not the others. A student over the hourly limit waits. Returns whether
        anything was graded or released."""
        self.poll()
        first = self._take(self.jobs)
        if not first:
            self.state.save()
            return False
        assignment = first[0][0]
        taken = [student for _, student in first]
        # a surprise of the run itself (its first collect, the gradebook) fails those it was grading
        with self._surprises(assignment, taken):
            self._grade(assignment, taken)
        return True

    def _take(self, n: int, assignment: str | None = None, taken: Sequence[str] = ()) -> list[tuple[str, str]]:
        """Up to ``n`` students from the front of the queue, all of one assignment (``assignment``,
        or the first one's); the others keep their places. A student of an assignment turned off,
        or over the hourly limit, goes to the back; a student already graded in this run (in
        ``taken``) waits for the next run. Marks those taken as grading."""
        now = controls(self.course)
        if now["paused"]:
            return []
        batch: list[tuple[str, str]] = []
        held, kept = [], []
        while self.queue and len(batch) < n:
            key = self.queue.popleft()
            if key[0] in now["off"]:
                held.append(key)  # kept in line, graded once the assignment is on again
                continue
            if assignment is not None and key[0] != assignment or key[1] in taken:
                kept.append(key)
                if key[0] != assignment:
                    break  # another assignment's turn: this run takes no one past it
                continue
            wait = self._over_limit(*key)
            if wait is not None:
                held.append(key)
                self.state.entry(*key)["detail"] = (f"at most {policy(self.course, key[0]).per_hour} graded "
                                                    f"submissions an hour: next at {wait:%H:%M} UTC")
                tell_held(self, *key, wait)
                continue
            assignment = key[0]
            batch.append(key)
        self.queue.extendleft(reversed(kept))
        self.queue.extend(held)
        for key in batch:
            tried = self.state.entry(*key).get("attempts", 0)
            self._set(*key, "grading", attempts=tried + 1)
        if batch:
            self.state.save()
        return batch

    def _over_limit(self, assignment: str, student: str) -> datetime | None:
        """When the student may be graded again, or None if now."""
        limit = policy(self.course, assignment).per_hour
        entry = self.state.entry(assignment, student)
        if limit is None or _owes_full_page(entry):  # the due date's page grades nothing new
            return None
        recent = sorted(t for t in entry.get("graded_at", []) if datetime.fromisoformat(t) > self.now() - HOUR)
        entry["graded_at"] = recent
        return datetime.fromisoformat(recent[-limit]) + HOUR if len(recent) >= limit else None

    def _set(self, assignment: str, student: str, status: str, detail: str = "", **more: Any) -> None:
        more.setdefault("attempts", 0)  # only "grading" counts the attempts; any outcome ends them
        self.state.entry(assignment, student).update(status=status, detail=detail, **more)

    def _grade(self, assignment: str, students: list[str]) -> None:
        """One run of ``assignment``: ``students`` first, then whoever :meth:`_take` hands over while a
        worker is free; each collected just before it is graded, and its feedback released as soon
        as it is recorded."""
        from autograder.commands.grade import grade

        rules = policy(self.course, assignment)
        taken = students  # the caller's list: it sees whom the run took (a surprise fails those still grading)

        def more() -> list[str]:
            self.poll()
            keys = self._take(1, assignment, taken)
            students = [student for _, student in keys]
            taken.extend(students)
            with self._surprises(assignment, students):  # theirs, not the run's: the others go on
                return self._collect(assignment, students)
            return []

        def each(outcome: Outcome) -> None:
            with self._surprises(assignment, [outcome.student]):
                self._graded(assignment, outcome, rules)
            self.state.save()

        todo = self._collect(assignment, list(students))
        if not todo:
            return
        try:
            grade(self.course, assignment, todo, jobs=self.jobs, limits=self.limits, progress=False,
                  unsafe=self.unsafe, scheduler=self.scheduler, access=self.access, more=more, each=each)
        except CourseError as error:  # the instructor's own `grade` runs: this one's turn comes again
            for student in taken:
                if self.state.entry(assignment, student)["status"] == "grading":
                    self._set(assignment, student, "waiting", f"not graded yet: {error}")
                    self.queue.append((assignment, student))
            self.state.save()

    @contextlib.contextmanager
    def _surprises(self, assignment: str, students: list[str]):
        """An unexpected error about ``students`` fails them, and no one else."""
        try:
            yield
        except Exception as error:
            for student in students:
                if self.state.entry(assignment, student)["status"] == "grading":  # not one already done
                    self._set(assignment, student, "failed",
                              f"the service failed on it: {type(error).__name__}: {error}")
            self.state.save()

    def _collect(self, assignment: str, students: list[str]) -> list[str]:
        """Collect ``students``' latest submissions (as ``collect --exchange`` does); returns those
        collected, the others marked refused (or failed) with the reason."""
        from autograder.commands.collect import collect_exchange

        if not students:
            return []
        try:
            report = collect_exchange(self.course, assignment, self.exchange, students=students)
        except Unreachable as error:  # ngshare away for a moment: they keep their turn, nothing failed
            for student in students:
                self._set(assignment, student, "waiting", f"not collected yet: {error}")
                self.queue.append((assignment, student))
            self.state.save()
            return []
        except CourseError as error:
            for student in students:
                self._set(assignment, student, "failed", str(error))
            self.state.save()
            return []
        collected = {student for student, _, _ in report.imported}
        for student in students:
            if student not in collected:
                reasons = [f"{name}: {reason}" for name, reason in report.skipped
                           if name.startswith((f"{student}+", f"{student}/"))]
                self._set(assignment, student, "refused", "; ".join(reasons) or "no notebook of the assignment")
        self.state.save()
        return [s for s in students if s in collected]

    def _graded(self, assignment: str, outcome: Outcome, rules: Policy) -> None:
        """Record what became of one student's grading, and release their feedback as ``rules`` say."""
        entry = self.state.entry(assignment, outcome.student)
        stamp = (self.course.submitted_dir(outcome.student, assignment) / "timestamp.txt").read_text().strip()
        if outcome.status == "failed":
            self._set(assignment, outcome.student, "failed", outcome.detail or "grading failed", submission=stamp)
            if (assignment, outcome.student) in self.queue:
                entry.update(status="waiting", since=self.now().isoformat())
            return
        if outcome.status == "graded":
            entry.setdefault("graded_at", []).append(self.now().isoformat())
            self.state.history.append([assignment, outcome.student, stamp, self.now().isoformat()])
        self._release(assignment, outcome.student, stamp, rules)
        # they submitted again meanwhile (not: their page waits for ngshare, which _release said)
        if (assignment, outcome.student) in self.queue and entry["status"] != "waiting":
            entry.update(status="waiting", since=self.now().isoformat(),
                         detail=f"a newer submission waits; last graded: {entry['detail']}")

    # -- feedback, as the policy says

    def _release(self, assignment: str, student: str, stamp: str, rules: Policy) -> None:
        due = self.due(assignment, student)
        mode = rules.before_due if due is None or self.now() < due else "full"
        entry = self.state.entry(assignment, student)
        score = _score_text(self.course, assignment, student)
        if mode == "none":
            self._set(assignment, student, "done", f"{score}; feedback withheld until the due date",
                      submission=stamp, withheld=True)
            return
        secret = collected_key(self.course, assignment, student)
        if entry.get("released") == [stamp, mode, secret]:  # this very page is out already
            self._set(assignment, student, "done", score, submission=stamp, withheld=False)
            return
        # else a first page; or the due date's; or the same notebook submitted again, whose page is
        # named by its own secret
        note = submission_note(stamp, due)
        try:
            if mode == "full":
                from autograder.commands.feedback import feedback
                report = feedback(self.course, assignment, self.exchange, students=[student], note=lambda _: note)
                problems = [reason for _, reason in report.failed + report.unreleased]
                if problems:
                    raise CourseError("; ".join(problems))
            else:
                self._release_score(assignment, student, note)
        except Unreachable as error:  # ngshare away: graded and recorded; the page goes out on its next turn
            self._set(assignment, student, "waiting", f"graded ({score}); its feedback waits: {error}",
                      submission=stamp)
            if (assignment, student) not in self.queue:
                self.queue.append((assignment, student))
            return
        except (CourseError, OSError) as error:
            self._set(assignment, student, "failed", f"graded ({score}), but its feedback was not released: {error}",
                      submission=stamp)
            return
        self._set(assignment, student, "done", f"{score}; feedback released ({mode})", submission=stamp,
                  withheld=False, released=[stamp, mode, secret])

    def _release_score(self, assignment: str, student: str, note: str) -> None:
        pages = {nb: score_page(self.course, assignment, student, nb, note).encode()
                 for nb in self.course.notebooks(assignment)}
        if self.ngshare is not None:
            stamp = collected_key(self.course, assignment, student)
            if stamp is None:
                raise CourseError("no ngshare timestamp beside the submission")
            self.ngshare.release_feedback(assignment, student, stamp, pages)
            return
        secret = collected_secret(self.course, assignment, student)
        if secret is None:
            raise CourseError("no submission secret beside the submission")
        outbound = self.root / "feedback"
        outbound.mkdir(mode=0o711, exist_ok=True)
        release_feedback(outbound, pages, secret)

    # -- the loop

    def run(self, interval: float = 2.0, once: bool = False, stop: threading.Event | None = None) -> None:
        """Steps until ``stop`` is set (SIGTERM), or with ``once`` until the queue is empty."""
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                worked = self.step()
            except Unreachable as error:  # the exchange's server away: told once, looked at again
                if once:  # a cron job's run says it failed
                    raise
                _tell_once(f"grading service: {error}; trying again every {interval:g} s")
                worked = False
            if once and not self.queue:
                return
            if not worked:
                stop.wait(interval)


def _owes_full_page(entry: dict) -> bool:
    """Whether the student's graded submission was shown less than the full page (the policy before
    the due date): once the due date has passed, they are owed it."""
    return entry["status"] == "done" and (entry.get("withheld") or (entry.get("released") or ["", "full"])[1] != "full")


def _score_text(course: Course, assignment: str, student: str) -> str:
    with course.gradebook() as gb:
        submission = gb.find_submission(assignment, student)
        return f"{submission.score:g}/{submission.max_score:g}"


# The submission's time in the reader's own time zone (the UTC text stays where scripts do not run).
LOCAL_TIME = ("for (const t of document.querySelectorAll('.submission-note time')) {"
              " const d = new Date(t.dateTime);"
              " if (!isNaN(d)) t.textContent = d.toLocaleString(undefined, {dateStyle: 'full', timeStyle: 'long'}); }")


def submission_note(stamp: str, due: datetime | None) -> str:
    """What every page says first: which submission it is about, and what decides the grade."""
    when = _stamp(stamp)
    shown = f"{when:%Y-%m-%d %H:%M:%S} UTC" if when else stamp
    iso = when.isoformat() if when else ""
    due_text = (f", due {due:%Y-%m-%d %H:%M} UTC" if due else "")
    return ('<div class="submission-note" role="note" style="border:2px solid #1a5fb4;padding:0.5em 1em;'
            'margin:1em 0">'
            f'<p>This feedback is about your submission of <time datetime="{html.escape(iso)}">'
            f"{html.escape(shown)}</time>.</p>"
            f"<p>The grade that counts is the one of the submission the due date decides{html.escape(due_text)}: "
            "you may submit again until then, and your latest submission is graded.</p>"
            f"<script>{LOCAL_TIME}</script></div>")


def score_page(course: Course, assignment: str, student: str, notebook_name: str, note: str) -> str:
    """The page of the ``score`` policy: the visible tests' results and the score, nothing of a hidden test."""
    from autograder.course.catalogue import title

    source = notebook.read(course.source_dir(assignment) / f"{notebook_name}.ipynb")
    visible = [notebook.grade_id(c) for c in source.cells
               if notebook.is_test(c) and notebook.BEGIN_HIDDEN not in notebook.text(c.get("source"))]
    with course.gradebook() as gb:
        submission = gb.find_submission_notebook(notebook_name, assignment, student)
        passed = {g.name: g.score == g.max_score for g in submission.grades}
        score, total = submission.score, submission.max_score
    rows = "".join(
        f"<tr><td>{html.escape(title(notebook.exercise_of(cell)))}</td>"
        f"<td>{'passed' if passed[cell] else 'not passed'}</td></tr>"
        for cell in visible if cell in passed)
    name = html.escape(f"{assignment}: {notebook_name}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Feedback: {name}</title></head>'
            f"<body>\n{note}\n<h1>Feedback: {name}</h1>"
            f"<p>Score: {score:g} out of {total:g} (the hidden tests are counted, not shown, until the due date)."
            "</p><table><caption>The tests you can see in the notebook</caption>"
            f"<thead><tr><th>exercise</th><th>result</th></tr></thead><tbody>{rows}</tbody></table></body></html>\n")


# -- what a student may read: the course page (deploy/hub/student/python/autograd_course_page) --------

STUDENT_VIEW = "student_view.json"   # in the exchange's course folder, beside inbound/ and outbound/
OWN_DUE = "due date"                 # hashed with a submission's secret: the name of its student's own due date


HELD = "next grading"                # ... and the name of when a student over the hourly limit is graded next


def own_due_name(secret: str, what: str = OWN_DUE) -> str:
    """The file in the exchange's ``feedback/`` folder (listed by no one) that holds the own due date
    (or ``what`` else is theirs alone) of the student who made the submission with this secret:
    only they can name it."""
    from nbgrader.utils import notebook_hash
    return f"{notebook_hash(secret=secret, notebook_id=what)}.json"


def collected_key(course: Course, assignment: str, student: str) -> str | None:
    """What names the student's submission collected last in the exchange: its secret, or, from
    ngshare, ngshare's timestamp of it (a page goes to the submission it names)."""
    secret = collected_secret(course, assignment, student)
    if secret is not None:
        return secret
    stamp = course.submitted_dir(student, assignment) / STAMP_FILE
    if stamp.is_file() and not stamp.is_symlink():
        text = stamp.read_text().strip()
        return text if parse_stamp(text) is not None else None
    return None


def collected_secret(course: Course, assignment: str, student: str) -> str | None:
    """The secret of the student's submission collected last (never read through a link)."""
    secret_file = course.submitted_dir(student, assignment) / SECRET_FILE
    if not secret_file.is_file() or secret_file.is_symlink():
        return None
    secret = secret_file.read_text().strip()
    return secret if SECRET.fullmatch(secret) else None


def tell_held(service: Service, assignment: str, student: str, at: datetime) -> None:
    """Tell a student over the hourly limit, and no one else, when their newest submission is graded:
    beside their feedback, named by the secret of their submission collected last (:func:`own_due_name`),
    so their course page says it instead of "within about a minute". Not with ngshare: there is no
    course page on that deployment (deploy/kubernetes/README.md)."""
    if service.ngshare is not None:
        return
    with contextlib.suppress(OSError):  # a courtesy, as the course page is: nothing of it stops the grading
        secret = collected_secret(service.course, assignment, student)
        if secret is not None:
            (service.root / "feedback").mkdir(mode=0o711, exist_ok=True)
            _publish(service.root / "feedback" / own_due_name(secret, HELD), json.dumps({"at": at.isoformat()}))


def publish_student_view(service: Service) -> None:
    """Publish what every student may read: per released assignment, its due date, what the policy
    shows before it, and whether the service grades it on submit (``STUDENT_VIEW``); and, for each
    student with an extension, their own due date, named by the secret of their collected
    submission (:func:`own_due_name`): an accommodation stays between them and the instructor, and
    shows once the service has collected one of their submissions. Each file is written (then
    renamed) only when what it says changes, so a poll that finds nothing new writes nothing.
    Not with ngshare: no course page runs on that deployment (deploy/kubernetes/README.md)."""
    if service.ngshare is not None:
        return
    try:
        _publish_student_view(service)
    except Exception as error:  # the page is a courtesy: nothing of it may stop the grading
        _tell_once(f"grading service: the students' course page is not up to date ({type(error).__name__}: {error})")


_TOLD: set[str] = set()


def _tell_once(complaint: str) -> None:
    """Say it on the service's log once, not at every look at the exchange."""
    if complaint not in _TOLD:
        _TOLD.add(complaint)
        print(complaint, file=sys.stderr, flush=True)


def _publish_student_view(service: Service) -> None:
    course, now = service.course, controls(service.course)
    term = Term.load(course)
    view: dict[str, Any] = {"paused": bool(now["paused"]), "assignments": {}}
    own: dict[str, str] = {}
    with course.gradebook() as gb:
        for assignment in service.released():
            try:
                rules = policy(course, assignment)
            except CourseError:  # a wrong policy: `serve --status` names it; the page says nothing of it
                continue
            try:
                due = gb.find_assignment(assignment).duedate
            except Exception:  # nbgrader's MissingEntry: released without a due date
                due = None
            view["assignments"][assignment] = {
                "due": due.replace(tzinfo=timezone.utc).isoformat() if due else None,
                "before_due": rules.before_due, "per_hour": rules.per_hour, "on_submit": assignment not in now["off"]}
            for student in sorted(set(term.extensions) | set(term.standing)) if due else ():
                extra = term.base_extension(student, assignment, due)
                secret = collected_secret(course, assignment, student) if extra > 0 else None
                if secret is not None:
                    theirs = due + timedelta(seconds=extra)
                    own[own_due_name(secret)] = theirs.replace(tzinfo=timezone.utc).isoformat()
    _publish(service.root / STUDENT_VIEW, json.dumps(view, indent=1, sort_keys=True))
    if own:
        (service.root / "feedback").mkdir(mode=0o711, exist_ok=True)
    for name, due_text in own.items():
        _publish(service.root / "feedback" / name, json.dumps({"due": due_text}))


def _publish(path: Path, text: str) -> None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if path.read_text() == text:
            return
    write_file(path, text)


# -- the command -----------------------------------------------------------------------------------

def refuse_account(course: Course) -> None:
    """The service never runs as root, nor as one of the course's students."""
    if os.geteuid() == 0:
        raise CourseError("the grading service never runs as root: run `autograder serve` as the course's "
                          "owner, the account the instructor's commands run as (deploy/README.md)")
    me = pwd.getpwuid(os.geteuid()).pw_name
    with course.gradebook() as gb:
        if me in {s.id for s in gb.students}:
            raise CourseError(f"the grading service never runs as a student, and {me} is a student of this "
                              "course: run it as the course's owner")


@contextlib.contextmanager
def _only_service(course: Course):
    _folder(course).mkdir(parents=True, exist_ok=True)
    with open(_folder(course) / "service.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CourseError(f"the grading service already runs on {course.root}") from None
        lock.write(str(os.getpid()))
        lock.flush()
        yield


def running(course: Course) -> bool:
    path = _folder(course) / "service.lock"
    if not path.exists():
        return False
    with open(path) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def status_rows(course: Course) -> list[list[str]]:
    state, off = State(course), set(controls(course)["off"])
    rows = []
    for key, entry in sorted(state.students.items()):
        if entry["status"] == "new":
            continue
        assignment, student = key.split("/", 1)
        status = entry["status"] + (" (assignment off)" if assignment in off and entry["status"] == "waiting" else "")
        rows.append([assignment, printable(student), status, entry.get("submission", ""),
                     printable(entry.get("detail", ""))])
    return rows


def add_arguments(sub) -> None:
    sub.add_argument("--exchange", default="", metavar="DIR|URL",
                     help="the nbgrader exchange to watch (default: the course's c.Exchange.root), or ngshare's "
                          "URL (Kubernetes; the service's hub token in JUPYTERHUB_API_TOKEN)")
    sub.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                     help="students graded at a time (default: the CPUs, %(default)s)")
    sub.add_argument("--interval", type=float, default=2.0, help="seconds between looks at the exchange")
    sub.add_argument("--once", action="store_true", help="grade what is waiting, then stop (for a cron job)")
    sub.add_argument("--unsafe", action="store_true", help="grade without a sandbox (never for real students)")
    sub.add_argument("--scheduler", metavar="tls://HOST:PORT",
                     help="grade on this Dask cluster's workers, as `grade --scheduler` (deploy/dask.md)")
    sub.add_argument("--tls", nargs=3, metavar=("CA", "CERT", "KEY"),
                     help="the cluster's CA, this grader's certificate and its key (deploy/dask_certs.py)")
    group = sub.add_mutually_exclusive_group()
    group.add_argument("--status", action="store_true", help="what the service does: per student and assignment")
    group.add_argument("--pause", action="store_true", help="stop grading (submissions still wait in the queue)")
    group.add_argument("--resume", action="store_true", help="grade again after --pause")
    group.add_argument("--on", metavar="ASSIGNMENT", help="grade this assignment's submissions on submit")
    group.add_argument("--off", metavar="ASSIGNMENT", help="stop grading this assignment on submit")


def command(course: Course, args, table: Callable[[list[str], list[list[str]]], str]) -> int:
    if args.pause or args.resume or args.on or args.off:
        for name in filter(None, (args.on, args.off)):
            course.require_assignment(name)
        now = set_controls(course, paused=True if args.pause else False if args.resume else None,
                           on=[args.on] if args.on else [], off=[args.off] if args.off else [])
        print(f"grading service: {'paused' if now['paused'] else 'grading'}; assignments off: "
              f"{', '.join(now['off']) or 'none'}")
        return 0
    if args.status:
        now = controls(course)
        print(f"grading service: {'running' if running(course) else 'not running'}"
              f"{', paused' if now['paused'] else ''}; assignments off: {', '.join(now['off']) or 'none'}")
        rows = status_rows(course)
        print(table(["assignment", "student", "status", "submission", "detail"], rows) if rows
              else "no submission seen yet")
        return 0
    refuse_account(course)
    # the course's folder as the working one: where it was started (a hub's own folder, say) may be
    # one this account cannot enter, and the grading workers it forks would fail there
    os.chdir(course.root)
    access = None
    if args.scheduler:
        from autograder.grading.executors import ClusterAccess
        access = ClusterAccess(*(args.tls or (None, None, None)))
    with _only_service(course):
        service = Service(course, args.exchange, jobs=args.jobs, unsafe=args.unsafe, scheduler=args.scheduler,
                          access=access)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        watched = f"ngshare at {service.exchange}" if service.ngshare else service.root / "inbound"
        try:
            released = ", ".join(service.released()) or "nothing released yet"
        except Unreachable:  # said by the first look, which tries again
            released = "not answering yet"
        print(f"grading service on {course.root}: watching {watched} ({released})", flush=True)
        try:
            service.run(args.interval, args.once, stop)
        except KeyboardInterrupt:
            print("grading service stopped: whoever was waiting or being graded is graded when it starts again",
                  file=sys.stderr)
            return 130
    return 0
