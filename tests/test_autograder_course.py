"""autograder.course: the course directory, exercise ids, and the gradebook schema stamp."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.dbutil import _temp_alembic_ini

from autograder import cli
from autograder.course import Course, CourseError
from autograder.course.nbgrader_glue import alembic_head
from autograder.course.notebook import exercise_of

pytestmark = pytest.mark.xdist_group("autograder")


def test_grade_ids_map_to_their_exercise():
    assert exercise_of("a02-mul-backward") == "a02-mul-backward"
    assert exercise_of("a02-mul-backward-visible") == "a02-mul-backward"
    assert exercise_of("a02-mul-backward-hidden") == "a02-mul-backward"
    assert exercise_of("a02-mul-backward-hidden-2") == "a02-mul-backward"
    assert exercise_of("a02-mul-backward-written") == "a02-mul-backward"
    assert exercise_of("a02-hidden-layer") == "a02-hidden-layer"


def test_a_folder_without_nbgrader_config_is_refused(tmp_path, capsys):
    with pytest.raises(CourseError, match="not an nbgrader course directory"):
        Course.open(tmp_path)
    assert cli.main(["--course", str(tmp_path), "report", "a00_toy"]) == 2
    assert "is not an nbgrader course directory" in capsys.readouterr().err


@pytest.mark.slow
def test_alembic_head_is_what_nbgrader_would_stamp():
    """Course replaces nbgrader's `alembic heads` subprocess by alembic's API: same answer."""
    alembic = Path(sys.executable).parent / "alembic"
    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        output = subprocess.check_output([str(alembic), "-c", ini, "heads"], text=True)
    assert alembic_head() == output.split()[0]


def test_a_submission_folder_with_an_over_long_id_is_not_a_student(tmp_path):
    """A folder placed in submitted/ by hand with a 250-character name would make `grade` write a
    file name past the file system's limit while recording: it is not listed, its neighbour is."""
    from autograder_support import make_course
    course = make_course(tmp_path / "course")
    for student in ("alice", "x" * 250, "b" * 64):
        course.submitted_dir(student, "a00_toy").mkdir(parents=True)
    assert course.submitted_students("a00_toy") == ["alice", "b" * 64]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes files another user must get back")
def test_a_command_run_as_root_gives_the_instructors_course_back(tmp_path):
    """On a hub the instructor grades as root (bubblewrap needs it) a course they own; their
    formgrader runs as them and must write what grading made. Every command hands back, as it
    ends, whatever root made in the course; a link is changed itself, never what it points to."""
    instructor = 4242
    course_dir = tmp_path / "course"
    course_dir.mkdir()
    (course_dir / "nbgrader_config.py").write_text("c = get_config()  # noqa\n")
    os.chown(course_dir, instructor, instructor)
    outside = tmp_path / "root-file"
    outside.write_text("root's")
    (course_dir / "reports").mkdir()
    (course_dir / "reports" / "grades.csv").write_text("student,score\n")
    (course_dir / "elsewhere").symlink_to(outside)
    assert cli.main(["--course", str(course_dir), "report", "a00_toy"]) == 2  # fails: no such assignment
    owned = {p.relative_to(course_dir).as_posix(): (p.lstat().st_uid, p.lstat().st_gid) for p in course_dir.rglob("*")}
    assert owned and set(owned.values()) == {(instructor, instructor)}, owned
    assert outside.stat().st_uid == 0
    # nothing is left to give back the second time
    assert Course.open(tmp_path / "course").give_back() == 0
