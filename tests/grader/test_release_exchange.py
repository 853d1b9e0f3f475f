"""``release --exchange`` believes the exchange only once it lists the release back.

nbgrader's release_assignment reports ``success`` from the plugin's own word; ngshare on
SQLAlchemy 2 says "published" and stores nothing, and students then find no assignment. Two
exchange plugins that lie the same way stand in for it here: one stores nothing, one drops a
helper file the notebooks import.
"""

import pytest

from support.course import ASSIGNMENT, SOLUTIONS, autograder, make_course, use_toy_catalogue

pytestmark = pytest.mark.xdist_group("autograder")

PLUGINS = '''
import os
from nbgrader.exchange.default import ExchangeReleaseAssignment


class StoresNothing(ExchangeReleaseAssignment):
    """Says it released, as ngshare on SQLAlchemy 2 does, and stores nothing."""

    def copy_files(self):
        self.log.info("Released as: %s", self.coursedir.assignment_id)


class DropsHelpers(ExchangeReleaseAssignment):
    """Copies the notebooks and loses the files beside them."""

    def copy_files(self):
        super().copy_files()
        os.remove(os.path.join(self.dest_path, "helpers", "plotting.py"))
'''


@pytest.fixture
def course(tmp_path, monkeypatch):
    use_toy_catalogue(monkeypatch)
    course = make_course(tmp_path / "course")
    helpers = course.root / "source" / ASSIGNMENT / "helpers"
    helpers.mkdir()
    (helpers / "plotting.py").write_text("WIDTH = 80\n")
    (tmp_path / "lying_exchange.py").write_text(PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return course


def test_a_release_the_exchange_lists_back_is_published(course, tmp_path, capsys):
    exchange = tmp_path / "exchange"
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--exchange", str(exchange)) == 0
    assert "published to the nbgrader exchange" in capsys.readouterr().out
    assert (exchange / course.course_id / "outbound" / ASSIGNMENT / "helpers" / "plotting.py").is_file()


@pytest.mark.parametrize("plugin, missing", [
    ("StoresNothing", f"does not hold the assignment {ASSIGNMENT}, {ASSIGNMENT}.ipynb, helpers/plotting.py"),
    ("DropsHelpers", "does not hold helpers/plotting.py:"),
])
def test_an_exchange_that_says_success_and_stores_nothing_fails_the_release(course, tmp_path, capsys, plugin,
                                                                            missing):
    with open(course.root / "nbgrader_config.py", "a") as config:
        config.write(f'\nc.ExchangeFactory.release_assignment = "lying_exchange.{plugin}"\n')
    exchange = tmp_path / "exchange"
    assert autograder(course, "release", ASSIGNMENT, "--solutions", str(SOLUTIONS), "--exchange", str(exchange)) == 2
    captured = capsys.readouterr()
    assert "published to the nbgrader exchange" not in captured.out
    assert f"nbgrader reported {ASSIGNMENT} released, but its exchange ({exchange}" in captured.err
    assert missing in captured.err
    assert "students would find nothing to fetch" in captured.err
