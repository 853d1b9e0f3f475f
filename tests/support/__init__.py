"""What the tests share: the repository's paths, and (one module each) the toy course and its CLI
(``course``), headless Chromium (``browser``), the engine's Hypothesis strategies
(``strategies``), synthetic classes from the mutant catalogue (``classes``), a class of
convergent honest answers with planted copies (``convergent``), the class's hub and
its people (``hub``), ngshare behind a JupyterHub of its own with the students' servers played
(``ngshare``), chapters run as a student runs them (``chapters``), hostile submissions
(``attacks``), the one harness that judges an exercise (``judging``), feedback pages made
without a course (``feedback``), a Jupyter server configured as the hub's (``jupyter``) and
deploy/README.md's commands with whose each is (``readme``).

Test modules import from here, never from one another.
"""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
GOLDEN = TESTS / "golden"
# Screenshots the browser tests keep for a person to look at (not in git: _build/ is ignored).
ARTEFACTS = REPO / "_build" / "test-artefacts"
