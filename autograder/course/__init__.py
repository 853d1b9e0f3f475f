"""The course model: the nbgrader course directory, its notebooks and the files around it.

This face holds what every floor may read without importing nbgrader: where the course and the
reference are, the largest notebook a submission may be, and the course's error. The package's
modules: ``directory`` (:class:`~autograder.course.directory.Course`: the course folder, its
``nbgrader_config.py`` and gradebook, through nbgrader's own API; only the instructor's side
imports it), ``catalogue`` (every exercise: its spec, its check and its title, declared
with ``@graded`` in ``autograder/exercises/``), ``notebook`` (cells, their nbgrader metadata, solution and hidden-test
regions, the judge's message on a test cell), ``regions`` (an exercise's body in ``solutions/``
and in a notebook cell), ``codelines`` (code as the leak scan and the scrub compare it),
``students`` (what an id may be, and names as a terminal shows them), ``nbgrader_glue`` (what we
set or patch in nbgrader), ``lms`` (the roster, and the files Canvas and Moodle export and
import), ``exchange`` (nbgrader's exchange read and written as a class's machine needs: its
students are hostile), ``owner`` (who a command runs as: never root on a course a user controls),
``files`` and ``safe_csv`` (how every output is written: never through a link, no formula in a
CSV), ``safe_html`` (the one sanitizer of every page that shows a student's HTML), ``term`` (the
term's rules on time: extensions, accommodations, late days) and ``spans`` (a length of time in words).
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The course is where the instructor works, never where the package was installed: `assignments/`
# of the current directory (the repository's root in a checkout), or --course.
DEFAULT_COURSE = Path("assignments")
DEFAULT_SOLUTIONS = REPO_ROOT / "solutions"  # the reference next to the package, installed or not

# The largest notebook a submission may hold, on every path (an LMS export, the exchange, a Dask
# worker's reply, which carries the graded notebook: this plus the judge's capped messages).
MAX_NOTEBOOK_BYTES = 24 * 2**20


def size_text(n: int) -> str:
    """A size as a person reads it: GiB, MiB, or bytes below one MiB."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"


class CourseError(Exception):
    """A problem with the course directory, an assignment or a student, worded for the instructor."""
