"""deploy/README.md's commands: each shell block says whose it is, and they are right on any hub (issue 39).

Who: tests/support/readme.py reads the marker before each block; tests/deploy/test_first_hour.py types
every instructor's command in the instructor's terminal. The exchange: the hub's own
`$AUTOGRAD_EXCHANGE` (jupyterhub_config.py sets it in every user's environment), never a folder
written out, which on a second hub of the same machine would publish into the first one's exchange."""
from __future__ import annotations

import re

import pytest

from support.readme import ROLES, commands

EXCHANGE_DEFAULT = "/srv/nbgrader/exchange"  # deploy/hub.py's and jupyterhub_config.py's default


def test_every_block_of_the_readme_says_whose_it_is():
    found = commands()
    assert not [c.line for c in found if c.role not in ROLES], "a ```bash block without <!-- who: ROLE -->"
    by_role = {role: [c for c in found if c.role == role] for role in ROLES}
    assert len(by_role["instructor"]) >= 10, by_role["instructor"]
    # the instructor types as themselves: nothing of root's, nothing that holds the terminal until stopped
    for c in by_role["instructor"]:
        assert c.line.startswith("autograder ") and "sudo" not in c.line, c
        assert not re.search(r"\bserve\b(?!.*--(status|pause|resume|on|off)\b)", c.line), c
    assert all(c.line.startswith("sudo ") for c in by_role["root"]), by_role["root"]


@pytest.mark.parametrize("text, says", [
    ("```bash\nautograder --course ~/course grade a01\n```\n", ""),
    ("<!-- who: instructor (typed) -->\n```bash\nautograder x  # why\n# only a comment\n\nb \\\n  --c d\n```\n",
     "instructor"),
])
def test_the_marker_is_read_from_the_line_before_the_block(text, says):
    found = commands(text)
    assert {c.role for c in found} == {says}, found
    assert found[0].line.startswith("autograder ") and found[-1].line in ("b --c d", found[0].line), found
    assert says == "" or (found[0].comment == "why" and len(found) == 2), found


def test_no_command_of_the_readme_names_the_exchange_folder():
    lines = [c.line for c in commands()]
    exchanges = [line for line in lines if "--exchange" in line]
    assert len(exchanges) >= 5, exchanges  # release, collect, feedback (twice), serve
    for line in lines:
        assert EXCHANGE_DEFAULT not in line, line
        for value in re.findall(r"--exchange[ =](\S+)", line):
            assert value == '"$AUTOGRAD_EXCHANGE"', line
