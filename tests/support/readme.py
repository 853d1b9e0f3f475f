"""deploy/README.md's shell commands, and who the README gives each block to (issue 39).

Every ```bash block of the README follows a marker, an HTML comment a reader of the rendered page
does not see, on the line before it: ``<!-- who: ROLE ... -->``. The roles:

- ``instructor``: typed by the instructor, as themselves, in a terminal of their own JupyterLab;
  tests/deploy/test_first_hour.py types every one of them there, in Chromium, in the README's order.
- ``root``: the deployer's, as root (``sudo``), on the machine: they make the hub itself.
- ``service``: a command that runs until it is stopped (a service); the hub starts it as a managed
  service (tests/deploy/test_grading_service.py), not a person in a terminal.
- ``cluster``: an instructor's command that needs a Dask cluster running first (deploy/dask.md);
  tests/deploy/test_first_hour.py types it once it has started one as the README says.

A block without a marker fails tests/deploy/test_readme_commands.py: a command added later is given
to someone, and the instructor's are typed by the test.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from support import REPO

README = REPO / "deploy" / "README.md"
ROLES = ("instructor", "root", "service", "cluster")
BLOCK = re.compile(r"(?:^|(?P<before>[^\n]*)\n)```bash\n(?P<body>.*?)```", flags=re.S)
MARKER = re.compile(r"<!-- who: (?P<role>\w+)\b.*-->")


@dataclass(frozen=True)
class Command:
    role: str  # one of ROLES, or "" for a block without a marker
    line: str  # as typed: continuation lines joined, the comment after it left out
    comment: str  # what the README says after `#` on its line


def commands(text: str | None = None) -> list[Command]:
    """Every command of the README's shell blocks, in the README's order."""
    text = README.read_text() if text is None else text
    found = []
    for block in BLOCK.finditer(text):
        marker = MARKER.fullmatch((block["before"] or "").strip())
        role = marker["role"] if marker else ""
        for line in re.sub(r"[ \t]*\\\n[ \t]*", " ", block["body"]).splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            command, _, comment = line.partition("  #")
            found.append(Command(role, command.strip(), comment.strip()))
    return found
