"""The student's course page on the class's hub: every assignment, its due date, their submissions
and their feedback, in one page that is where they land (issues 38, 39 and 41).

A Jupyter server extension of the students' servers (enabled by ``student/jupyter_server_config.json``,
importable through the ``PYTHONPATH`` the hub gives students: ``deploy/hub/jupyterhub_config.py``),
serving ``<base_url>course/``:

* per released assignment, its title (the notebook's first heading), its due date and the
  student's own (an extension), a *Fetch* button or links that open its notebooks in JupyterLab,
  *Submit*, and each of the student's submissions: when it arrived, whether it was late, and what
  happens next as the instructor's policy says (graded within about a minute; the score only
  before the due date; feedback at the due date), or a link to its feedback once the grading
  service has released it;
* the feedback page itself (``course/feedback/<assignment>/<time>/<notebook>``), served as a page
  (math typeset, no "Trust HTML") in a sandbox: a Content-Security-Policy with ``sandbox
  allow-scripts`` gives it an origin of its own, so nothing in it can act as the student's
  server, and it loads nothing from anywhere.

Fetch, submit and the feedback listing are nbgrader's own (its Assignments tab's manager,
``nbgrader.server_extensions.assignment_list``, in this process, as the student): the page and
the tab see and do the same. What the page knows of the policy and the due dates, the grading
service publishes in the exchange (``autograder serve``: ``student_view.json`` in the course's
folder, and a student's own due date beside their feedback, named by their submission's secret
so that no one else can find it). Without the service the page still lists, fetches and submits,
and says the instructor releases the feedback.

It imports nothing of the grader (the students' environment has none of it). It runs as the
student and so can do only what they can; still, everything it reads from the exchange or the
student's files is read without following a link at its name, within a size, and every name
taken from a request is checked (no ``/``, no ``..``).
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jinja2
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.assignment_list.handlers import AssignmentList, chdir
from nbgrader.utils import notebook_hash
from tornado import web

HERE = Path(__file__).resolve().parent
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")        # an assignment's or notebook's name
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})? UTC")  # nbgrader's submission times
SECRET = re.compile(r"[0-9a-f]{16,256}")
STUDENT_VIEW = "student_view.json"  # what `autograder serve` publishes (autograder/commands/serve.py)
OWN_DUE = "due date"                # ... and the note hashed with a secret that names a student's own due date
HELD = "next grading"               # ... and the one of when a student over the hourly limit is graded next
MAX_JSON = 1 << 20
MAX_NOTEBOOK = 16 << 20             # a released notebook read for its title
MAX_PAGE = 64 << 20                 # a feedback page (MathJax inside it is about 3.5 MB)
COURSE_NAME = os.environ.get("AUTOGRAD_COURSE_NAME", "Autograd from Scratch")
# The feedback page runs its own scripts (MathJax, the local time) in an origin of its own, and
# loads nothing: images are inside it (data:), styles inline.
FEEDBACK_POLICY = "; ".join(["sandbox allow-scripts", "default-src 'none'", "script-src 'unsafe-inline'",
                             "style-src 'unsafe-inline'", "img-src data:", "font-src data:", "base-uri 'none'",
                             "form-action 'none'", "frame-ancestors 'self'"])
# The course page: only its own files, no inline script.
PAGE_POLICY = "; ".join(["default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'",
                         "connect-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'self'"])
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def read_bounded(path: str | Path, limit: int) -> bytes | None:
    """The bytes of the regular file ``path``, or None: missing, a link at its name, a FIFO or
    device, or larger than ``limit``."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EACCES, errno.ENXIO):
            return None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def read_json(path: str | Path) -> dict:
    data = read_bounded(path, MAX_JSON)
    try:
        found = json.loads(data) if data else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def parse_time(text: str | None) -> datetime | None:
    """An aware UTC time from nbgrader's ``2026-11-29 05:15:37.285410 UTC`` or an ISO time."""
    if not text:
        return None
    try:
        if STAMP.fullmatch(text):
            return datetime.strptime(text.replace(" UTC", ""), "%Y-%m-%d %H:%M:%S.%f" if "." in text
                                     else "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
        found = datetime.fromisoformat(text)
    except ValueError:
        return None
    return found.replace(tzinfo=timezone.utc) if found.tzinfo is None else found.astimezone(timezone.utc)


def duration(span: timedelta) -> str:
    """``2 days 3 hours``, ``5 hours 12 minutes``, ``40 seconds``: the two largest units."""
    seconds = int(span.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size or (unit == "second" and not parts):
            count, seconds = divmod(seconds, size)
            parts.append(f"{count} {unit}{'' if count == 1 else 's'}")
    return " ".join(parts[:2])


_titles: dict[tuple[str, int, int], str] = {}


def notebook_title(path: str | Path) -> str | None:
    """The notebook's first heading (``# a01 · Graphs and backpropagation``), or None. Remembered
    per file version: the page lists it on every visit."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    key = (str(path), info.st_mtime_ns, info.st_size)
    if key not in _titles:
        data = read_bounded(path, MAX_NOTEBOOK)
        title = None
        try:
            cells = json.loads(data)["cells"] if data else []
            for cell in cells:  # the first heading: a due-date cell may come before it (autograder release --due)
                source = cell.get("source", "") if cell.get("cell_type") == "markdown" else ""
                source = "".join(source) if isinstance(source, list) else str(source)
                heading = next((line for line in source.splitlines() if line.startswith("#")), "")
                if heading:
                    title = heading.lstrip("#").strip()[:200] or None
                    break
        except (ValueError, KeyError, TypeError, AttributeError):
            title = None
        _titles[key] = title
    return _titles[key]


# -- what the page shows ---------------------------------------------------------------------------

@dataclass
class Submission:
    stamp: str                       # nbgrader's text, the key of the submission everywhere
    when: datetime | None
    latest: bool
    pages: list[tuple[str, bool]]    # (notebook, its feedback is in the exchange)
    late_by: timedelta | None = None
    step: str = ""                   # what happens next, when no feedback is there
    held: datetime | None = None     # when it is graded, its student being over the hourly limit till then
    partial: bool = False            # its feedback is the score only, until the due date


@dataclass
class Assignment:
    id: str
    title: str
    status: str                                  # released (not fetched yet) or fetched
    notebooks: list[tuple[str, str]] = field(default_factory=list)  # (notebook, path in JupyterLab)
    due: datetime | None = None
    own_due: datetime | None = None              # with the student's extension
    rules: dict | None = None                    # the service's policy for it, if the service grades it
    submissions: list[Submission] = field(default_factory=list)    # newest first

    @property
    def waiting(self) -> bool:
        """Whether the latest submission's feedback is still to come from the service."""
        return bool(self.submissions and self.rules and self.rules.get("on_submit")
                    and not all(present for _, present in self.submissions[0].pages))


def next_step(a: Assignment, s: Submission, paused: bool, now: datetime) -> str:
    """What happens to submission ``s`` next, in the words of the instructor's policy."""
    if not s.latest:
        return "A newer submission replaced this one: your latest submission is the one graded."
    if not a.rules or not a.rules.get("on_submit"):
        return "Your instructor releases the feedback on this assignment; it will appear here when they do."
    wait = ("Grading is paused by your instructor for the moment: your submission waits, and is graded when "
            "it resumes. " if paused else "")
    if s.held is not None:  # the page follows the sentence with the time
        return wait + (f"Your instructor grades at most {a.rules.get('per_hour')} of your submissions an hour: "
                       "this one is graded at")
    due = a.own_due or a.due
    mode = a.rules.get("before_due", "full") if due is not None and now < due else "full"
    if mode == "none":
        return wait + "It is graded, and its feedback will appear here at the due date."
    if mode == "score":
        return wait + ("It is graded within about a minute: until the due date its feedback shows your score and "
                       "the results of the tests you can see in the notebook; the whole feedback comes at the due "
                       "date.")
    return wait + "It is graded within about a minute, and a link to its feedback will appear here."


class CoursePage:
    """The page's facts for one student, from nbgrader's listing and what the service published."""

    def __init__(self, manager: AssignmentList, root_dir: str):
        self.manager, self.root_dir = manager, root_dir
        with chdir(root_dir):
            config = manager.load_config()
        self.course_id = str(config.CourseDirectory.course_id or "")
        self.exchange = Path(str(config.Exchange.root)) if "root" in config.Exchange else \
            Path("/srv/nbgrader/exchange")
        self.course = self.exchange / self.course_id

    def view(self) -> dict:
        return read_json(self.course / STUDENT_VIEW)

    def secret(self, submission: dict) -> str | None:
        data = read_bounded(Path(submission["path"]) / "submission_secret.txt", 512)
        text = data.decode("ascii", "replace").strip() if data else ""
        return text if SECRET.fullmatch(text) else None

    def theirs(self, submission: dict, what: str) -> dict:
        """What the service published for this student alone (``what``: OWN_DUE, HELD), named by the
        secret of one of their submissions (the one it collected last)."""
        secret = self.secret(submission)
        return read_json(self.course / "feedback" / f"{notebook_hash(secret=secret, notebook_id=what)}.json") \
            if secret else {}

    def held_until(self, submissions: list[dict], now: datetime) -> datetime | None:
        """When the newest submission is graded, if its student is over the assignment's hourly limit
        (``submissions`` newest first: the service names the time by the one it collected last)."""
        for s in submissions:
            held = self.theirs(s, HELD)
            if held:
                at = parse_time(held.get("at") if isinstance(held.get("at"), str) else None)
                return at if at is not None and at > now else None
        return None

    def feedback_path(self, secret: str, notebook: str) -> Path:
        return self.course / "feedback" / f"{notebook_hash(secret=secret, notebook_id=notebook)}.html"

    def assignments(self, now: datetime | None = None) -> tuple[list[Assignment], bool]:
        """(the assignments, whether grading is paused); raises ListingFailed."""
        now = now or datetime.now(timezone.utc)
        listing = self.manager.list_assignments(course_id=self.course_id)
        if not listing.get("success"):
            raise ListingFailed(str(listing.get("value", "")))
        view = self.view()
        rules = view.get("assignments") if isinstance(view.get("assignments"), dict) else {}
        paused = bool(view.get("paused"))
        found: dict[str, Assignment] = {}
        submitted: dict[str, list[dict]] = {}
        for entry in listing["value"]:
            name = str(entry.get("assignment_id", ""))
            if not NAME.fullmatch(name):
                continue
            if entry.get("status") == "submitted":
                submitted[name] = entry.get("submissions", [])
                continue
            outbound = self.course / "outbound" / name
            first = sorted(nb["notebook_id"] for nb in entry.get("notebooks", []))
            title = (notebook_title(outbound / f"{first[0]}.ipynb") if first else None) or name
            a = Assignment(name, title, entry["status"])
            if entry["status"] == "fetched":
                a.notebooks = [(nb["notebook_id"], nb["path"]) for nb in entry.get("notebooks", [])]
            policy = rules.get(name) if isinstance(rules.get(name), dict) else None
            a.rules, a.due = policy, parse_time((policy or {}).get("due"))
            found[name] = a
        for name, submissions in submitted.items():
            a = found.get(name)
            if a is None:  # no longer released: not on the page (the Assignments tab still lists them)
                continue
            ordered = sorted(submissions, key=lambda s: s.get("timestamp", ""), reverse=True)
            for s in ordered:
                stamp = str(s.get("timestamp", ""))
                if not STAMP.fullmatch(stamp):
                    continue
                pages = [(nb["notebook_id"], bool(nb.get("has_exchange_feedback"))) for nb in s.get("notebooks", [])
                         if NAME.fullmatch(str(nb.get("notebook_id", "")))]
                a.submissions.append(Submission(stamp, parse_time(stamp), not a.submissions, pages))
                if a.own_due is None and a.due is not None:
                    own = self.theirs(s, OWN_DUE)
                    a.own_due = parse_time(own.get("due") if isinstance(own.get("due"), str) else None)
            latest = a.submissions[0] if a.submissions else None
            if latest and a.rules and a.rules.get("per_hour") and not any(present for _, present in latest.pages):
                latest.held = self.held_until(ordered, now)
            for s in a.submissions:
                due = a.own_due or a.due
                if due is not None and s.when is not None and s.when > due:
                    s.late_by = s.when - due
                s.step = next_step(a, s, paused, now)
                s.partial = bool(s.latest and a.rules and a.rules.get("before_due") == "score"
                                 and due is not None and now < due)
        return sorted(found.values(), key=lambda a: a.id), paused

    def submission(self, assignment: str, stamp: str) -> dict | None:
        """The student's submission of ``assignment`` made at ``stamp``, as nbgrader lists it."""
        listing = self.manager.list_submitted_assignments(course_id=self.course_id)
        for entry in listing.get("value", []) if listing.get("success") else []:
            if entry.get("assignment_id") == assignment:
                return next((s for s in entry.get("submissions", []) if s.get("timestamp") == stamp), None)
        return None


class ListingFailed(Exception):
    pass


def nbgrader_sentence(value: str) -> str:
    """The last line of the traceback nbgrader's manager returns, without its exception's name."""
    lines = [line.strip() for line in str(value).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return re.sub(r"^[\w.]*(Error|Exception):\s*", "", last)[:300]


# -- the handlers ----------------------------------------------------------------------------------

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                          undefined=jinja2.StrictUndefined)
_env.filters["duration"] = duration


class BaseHandler(JupyterHandler):
    @property
    def content_security_policy(self) -> str:
        return PAGE_POLICY

    @property
    def page(self) -> CoursePage:
        manager = self.settings["autograd_course_manager"]
        return CoursePage(manager, manager.root_dir)

    def link(self, *parts: str) -> str:
        return url_path_join(self.base_url, *(urllib.parse.quote(p, safe="/") for p in parts))

    def render(self, name: str, status: int = 200, **values) -> None:
        hub = os.environ.get("JUPYTERHUB_BASE_URL")
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "same-origin")
        self.finish(_env.get_template(name).render(
            course_name=COURSE_NAME, link=self.link, static=self.link("course", "static") + "/",
            book_url=url_path_join(hub or "/", "services/book/"), hub_url=hub and url_path_join(hub, "hub/home"),
            logout_url=hub and url_path_join(hub, "hub/logout"), xsrf=self.xsrf_form_html(), **values))


class CourseHandler(BaseHandler):
    """The page."""

    @web.authenticated
    def get(self) -> None:
        done, name = self.get_argument("done", ""), self.get_argument("assignment", "")
        self.show(done if done in ("fetch", "submit") else "", name)

    def show(self, done: str = "", name: str = "", error: str = "", status: int = 200) -> None:
        page = self.page
        try:
            assignments, paused = page.assignments()
        except ListingFailed as failure:
            self.log.error("autograd_course_page: nbgrader's listing failed: %s", failure)
            return self.render("course.html", status=503, assignments=[], paused=False, message=None,
                               error="Your course's assignments cannot be listed at the moment. Try again in a "
                                     "minute; if it lasts, tell your instructor.")
        message = None
        chosen = next((a for a in assignments if a.id == name), None)
        if done == "submit" and chosen is not None and chosen.submissions:
            message = ("submit", chosen, chosen.submissions[0])
        elif done == "fetch" and chosen is not None and chosen.status == "fetched":
            message = ("fetch", chosen, None)
        self.render("course.html", status=status, assignments=assignments, paused=paused, message=message,
                    error=error)


class TitlesHandler(BaseHandler):
    """Each assignment's title by its name, for nbgrader's Assignments tab in JupyterLab, which shows
    names (``labextensions/autograd-titles``)."""

    @web.authenticated
    def get(self) -> None:
        page = self.page
        try:
            assignments, _ = page.assignments()
        except ListingFailed:
            assignments = []
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps({"course_id": page.course_id, "course": COURSE_NAME,
                                "titles": {a.id: a.title for a in assignments}}))


class ActionHandler(CourseHandler):
    """*Fetch* or *Submit* (the form's ``assignment``), then back to the page (or the page with why not)."""

    @web.authenticated
    def get(self, action: str) -> None:  # a reload of the address a form was sent to
        self.redirect(self.link("course/"))

    @web.authenticated
    def post(self, action: str) -> None:
        name = self.get_body_argument("assignment", "")
        page = self.page
        try:
            assignments, _ = page.assignments()
        except ListingFailed:
            assignments = []
        chosen = next((a for a in assignments if a.id == name), None) if NAME.fullmatch(name) else None
        if chosen is None:
            return self.show(error="There is no assignment of that name to fetch or submit: choose one below.",
                             status=400)
        if action == "fetch":
            if chosen.status == "fetched":  # nbgrader would refuse; the student only needs to open it
                return self.redirect(self.link("course/") + f"?done=fetch&assignment={name}#{name}", status=303)
            result = page.manager.fetch_assignment(page.course_id, name)
        else:
            if chosen.status != "fetched":
                return self.show(error=f"Fetch {chosen.title} first: there is nothing of yours to submit yet.",
                                 status=400)
            result = page.manager.submit_assignment(page.course_id, name)
        if not result.get("success"):
            self.log.error("autograd_course_page: %s of %s failed: %s", action, name, result.get("value"))
            verb = "fetched" if action == "fetch" else "submitted"
            return self.show(error=f"{chosen.title} could not be {verb}: {nbgrader_sentence(result.get('value', ''))}",
                             status=409)
        self.redirect(self.link("course/") + f"?done={action}&assignment={name}#{name}", status=303)


class FeedbackHandler(BaseHandler):
    """One feedback page, as the grading service released it for the student's submission."""

    @property
    def content_security_policy(self) -> str:
        return FEEDBACK_POLICY

    @web.authenticated
    def get(self, assignment: str, stamp: str, notebook: str) -> None:
        if not (NAME.fullmatch(assignment) and NAME.fullmatch(notebook) and STAMP.fullmatch(stamp)):
            raise web.HTTPError(404)
        page = self.page
        submission = page.submission(assignment, stamp)
        secret = page.secret(submission) if submission else None
        html = read_bounded(page.feedback_path(secret, notebook), MAX_PAGE) if secret else None
        if html is None:
            self.set_header("Content-Security-Policy", PAGE_POLICY)
            return self.render("no_feedback.html", status=404, stamp=stamp, moment=parse_time(stamp),
                               assignment=assignment)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "no-referrer")
        self.finish(with_way_back(html, self.link("course/") + f"#{assignment}"))


def with_way_back(page: bytes, href: str) -> bytes:
    """The page with a link back to the course page first in its body (a link only: the page's
    sandbox lets it navigate itself, nothing more)."""
    nav = (f'<nav aria-label="Course" style="margin:0.5em 1em"><a href="{href}">Back to your course page</a>'
           "</nav>").encode()
    body = re.search(rb"<body\b[^>]*>", page)  # after the head's MathJax (3.5 MB) in a released page
    return page[:body.end()] + nav + page[body.end():] if body else nav + page


class StaticHandler(BaseHandler, web.StaticFileHandler):
    @web.authenticated
    def get(self, path: str, include_body: bool = True):
        return web.StaticFileHandler.get(self, path, include_body)


def _jupyter_server_extension_points():
    return [{"module": "autograd_course_page"}]


def _load_jupyter_server_extension(serverapp) -> None:
    web_app = serverapp.web_app
    manager = web_app.settings.get("assignment_list_manager")
    if manager is None:  # nbgrader's Assignments tab not loaded (yet): the same manager, our own
        manager = AssignmentList(parent=serverapp)
        manager.root_dir = serverapp.root_dir
    web_app.settings["autograd_course_manager"] = manager
    base = web_app.settings.get("base_url", "/")
    web_app.add_handlers(".*$", [
        (url_path_join(base, r"course/?"), CourseHandler),
        (url_path_join(base, r"course/(fetch|submit)"), ActionHandler),
        (url_path_join(base, r"course/titles\.json"), TitlesHandler),
        (url_path_join(base, r"course/feedback/([^/]+)/([^/]+)/([^/]+)"), FeedbackHandler),
        (url_path_join(base, r"course/static/(.*)"), StaticHandler, {"path": str(HERE / "static")}),
    ])
    serverapp.log.info("autograd_course_page: the course page at %scourse/", base)
