"""The course directory: nbgrader's course folder, its configuration and gradebook, read in one place.

Every command goes through :class:`Course`, so that the course root, the gradebook URL and the
``nbgrader_config.py`` of the course are read in one place and handed to nbgrader's own API.
Only the instructor's side imports it (nbgrader's applications with it); the trusted worker reads
the course's data (:mod:`autograder.course.catalogue`, :mod:`autograder.course.notebook`) without it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder.course import DEFAULT_COURSE, CourseError
from autograder.course.nbgrader_glue import api_defaults, fast_gradebook_creation
from autograder.course.ngshare import is_ngshare
from autograder.course.students import SAFE_ID


def nbgrader_errors(result: dict) -> str:
    """The error lines of an NbGraderAPI result (its log, else its traceback), for a CourseError."""
    errors = [line for line in (result.get("log") or "").splitlines()
              if line.startswith(("[ERROR]", "[CRITICAL]"))]
    return "\n".join(errors or [result.get("error") or "(no message)"])


@dataclass(frozen=True)
class Course:
    root: Path
    db_url: str

    @classmethod
    def open(cls, root: str | Path | None = None, db_url: str | None = None) -> Course:
        fast_gradebook_creation()
        root = Path(root or DEFAULT_COURSE).resolve()
        if not (root / "nbgrader_config.py").is_file():
            raise CourseError(f"{root} is not an nbgrader course directory (no nbgrader_config.py)")
        return cls(root, db_url or f"sqlite:///{root / 'gradebook.db'}")

    # -- configuration ---------------------------------------------------------------------------

    def config(self) -> Config:
        """The course's nbgrader_config.py, with this course's root and gradebook forced in."""
        config = PyFileConfigLoader("nbgrader_config.py", path=str(self.root)).load_config()
        config.CourseDirectory.root = str(self.root)
        config.CourseDirectory.db_url = self.db_url
        return config

    @property
    def course_id(self) -> str:
        return self.coursedir().course_id

    def coursedir(self, config: Config | None = None) -> CourseDirectory:
        return CourseDirectory(config=config or self.config())

    def api(self, config: Config | None = None) -> NbGraderAPI:
        config = api_defaults(config or self.config())
        return NbGraderAPI(coursedir=self.coursedir(config), config=config)

    def exchange_config(self, exchange: str | Path | None = None) -> Config:
        """The course configuration pointed at nbgrader's exchange (what JupyterLab's Assignments tab reads).

        ``exchange`` (``--exchange DIR``) wins over the course's ``c.Exchange.root``; with neither,
        there is no exchange to use, and falling back to nbgrader's default would publish to, or
        collect from, a folder the instructor never chose. ``exchange`` may be ngshare's URL
        (Kubernetes): then the course's configuration is returned as it is, and what reads or
        writes the exchange calls ngshare (:mod:`autograder.course.ngshare`).
        """
        config = self.config()
        if is_ngshare(exchange):  # a server, not a folder: what reads it takes the URL itself
            return config
        if exchange:
            config.Exchange.root = str(Path(exchange).resolve())
        elif "root" not in config.Exchange:
            raise CourseError("no nbgrader exchange: pass --exchange DIR or set c.Exchange.root "
                              f"in {self.root / 'nbgrader_config.py'}")
        # A class's hub makes the course's folders of the exchange root's, shared by the
        # instructors' group (deploy/hub.py): nbgrader then writes them as a group member.
        folder = Path(config.Exchange.root) / self.coursedir(config).course_id
        if folder.is_dir() and folder.stat().st_uid != os.geteuid():
            config.CourseDirectory.groupshared = True
        return config

    def gradebook(self) -> Gradebook:
        return Gradebook(self.db_url, self.course_id)

    # -- paths (nbgrader's directory_structure, so a customised layout is respected) --------------

    def _path(self, step: str, student: str, assignment: str) -> Path:
        coursedir = self.coursedir()
        step_dir = getattr(coursedir, f"{step}_directory")
        return Path(coursedir.format_path(step_dir, student, assignment))

    def source_dir(self, assignment: str) -> Path:
        return self._path("source", ".", assignment)

    def release_dir(self, assignment: str) -> Path:
        return self._path("release", ".", assignment)

    def submitted_dir(self, student: str, assignment: str) -> Path:
        return self._path("submitted", student, assignment)

    def autograded_dir(self, student: str, assignment: str) -> Path:
        return self._path("autograded", student, assignment)

    def feedback_dir(self, student: str, assignment: str) -> Path:
        return self._path("feedback", student, assignment)

    def reports_dir(self, assignment: str) -> Path:
        return self.root / "reports" / assignment

    @property
    def state_dir(self) -> Path:
        """The autograder's own bookkeeping (locks, graded markers, failures); not nbgrader's."""
        return self.root / ".autograder"

    # -- what the course holds -------------------------------------------------------------------

    def assignments(self) -> list[str]:
        source = self.source_dir("*").parent
        return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) \
            if source.is_dir() else []

    def require_assignment(self, assignment: str) -> str:
        if assignment not in self.assignments():
            known = ", ".join(self.assignments()) or "none"
            raise CourseError(f"no assignment '{assignment}' in {self.source_dir('*').parent} "
                              f"(assignments: {known})")
        return assignment

    def notebooks(self, assignment: str) -> list[str]:
        """Notebook names (without .ipynb) of an assignment, from its source folder."""
        return sorted(p.stem for p in self.source_dir(assignment).glob("*.ipynb"))

    def submitted_students(self, assignment: str) -> list[str]:
        """Students with a submission folder for the assignment, whatever is inside it."""
        pattern = self.submitted_dir("*", assignment)
        students = []
        for path in pattern.parent.parent.glob(f"*/{pattern.name}"):
            if path.is_dir() and SAFE_ID.fullmatch(path.parent.name):
                students.append(path.parent.name)
        return sorted(students)
