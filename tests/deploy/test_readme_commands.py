"""deploy/README.md's commands are right on any hub: the exchange is the hub's own `$AUTOGRAD_EXCHANGE`
(jupyterhub_config.py sets it in every user's environment), never a folder written out, which on a
second hub of the same machine would publish into the first one's exchange (issue 39)."""
from __future__ import annotations

import re

from support import REPO

README = REPO / "deploy" / "README.md"
EXCHANGE_DEFAULT = "/srv/nbgrader/exchange"  # deploy/hub.py's and jupyterhub_config.py's default


def commands(text: str) -> list[str]:
    """Every line of the README's shell blocks (```bash) that runs something."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_no_command_of_the_readme_names_the_exchange_folder():
    lines = commands(README.read_text())
    exchanges = [line for line in lines if "--exchange" in line]
    assert len(exchanges) >= 5, exchanges  # release, collect, feedback (twice), serve
    for line in lines:
        assert EXCHANGE_DEFAULT not in line, line
        for value in re.findall(r"--exchange[ =](\S+)", line):
            assert value == '"$AUTOGRAD_EXCHANGE"', line
