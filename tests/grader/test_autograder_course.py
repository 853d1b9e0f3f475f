"""autograder.course: the course directory, exercise ids, and the gradebook schema stamp."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.dbutil import _temp_alembic_ini

from autograder import cli
from autograder.course import CourseError
from autograder.course.directory import Course
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
    from support.course import make_course
    course = make_course(tmp_path / "course")
    for student in ("alice", "x" * 250, "b" * 64):
        course.submitted_dir(student, "a00_toy").mkdir(parents=True)
    assert course.submitted_students("a00_toy") == ["alice", "b" * 64]


ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="what root does on a user's course: needs root")
# A course whose nbgrader_config.py leaves a mark when it runs: the command must not run it as root.
MARKING_CONFIG = "import os\nc = get_config()  # noqa\nopen({mark!r}, 'w').write(str(os.getuid()))\n"


def _users_course(tmp_path: Path, uid: int) -> tuple[Path, Path]:
    course = tmp_path / "course"
    course.mkdir()
    mark = tmp_path / "config-ran-as"
    (course / "nbgrader_config.py").write_text(MARKING_CONFIG.format(mark=str(mark)))
    os.chown(course, uid, uid)
    os.chown(course / "nbgrader_config.py", uid, uid)
    return course, mark


@ROOT_ONLY
@pytest.mark.slow
def test_root_never_runs_a_course_a_user_controls(tmp_path):
    """The command, started as root on a folder another uid owns, neither runs its configuration
    nor touches it as root: with no account to start again as, it says so and stops."""
    course, mark = _users_course(tmp_path, 4242)
    try:
        done = subprocess.run([sys.executable, "-m", "autograder", "--course", str(course), "report", "a00_toy"],
                              capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert "belongs to uid 4242, which has no account" in done.stderr
        assert not mark.exists()
        # called as a function (a test, a script), it refuses instead of starting again
        assert cli.main(["--course", str(course), "report", "a00_toy"]) == 2
        assert not mark.exists()
        assert not (course / "gradebook.db").exists()
    finally:
        for path in [course, *course.rglob("*")]:
            os.lchown(path, 0, 0)  # nothing left to a uid that the next useradd hands to a stranger


@ROOT_ONLY
def test_whose_course_it_is(tmp_path):
    """A user controls a course if they own it or any folder above it (they can swap what lies
    beneath); a folder anyone may write to without the sticky bit lets anyone control it."""
    from autograder.course.owner import controllers, without_course
    (tmp_path / "a" / "course").mkdir(parents=True)
    assert controllers(tmp_path / "a" / "course") == set()
    os.chown(tmp_path / "a", 4242, 4242)
    try:
        assert controllers(tmp_path / "a" / "course") == {4242}
        (tmp_path / "b").mkdir(mode=0o777)
        os.chmod(tmp_path / "b", 0o777)
        (tmp_path / "b" / "course").mkdir()
        assert -1 in controllers(tmp_path / "b" / "course")
        os.chmod(tmp_path / "b", 0o1777)  # /tmp's mode: no one can swap another's entry
        assert controllers(tmp_path / "b" / "course") == set()
        (tmp_path / "link").symlink_to(tmp_path / "a" / "course")
        assert controllers(tmp_path / "link") == {4242}  # through a link: its target's owners count
    finally:
        os.lchown(tmp_path / "a", 0, 0)
    assert without_course(["--course", "x", "--db", "y", "grade", "a01"]) == ["--db", "y", "grade", "a01"]
    assert without_course(["--course=x", "report", "a01"]) == ["report", "a01"]
