"""assignments/README.md's "Adding an exercise, step by step", followed as an instructor would.

In a copy of the repository (solutions/, autograder/, the course), each step of the README is
done from its own text: its code block is written where the step says, its commands are run with
the CLI. The test fails when a step the procedure needs is missing from the text (the README
would then walk an instructor into a broken course), and when following the text does not give
an exercise that is synced, checked (mutant caught with its phrase, alternative at full marks)
and released without its solution.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap

import nbformat
import pytest

from autograder.course import notebook

from support import REPO

README = REPO / "assignments" / "README.md"
ASSIGNMENT = "a02_broadcasting"
NOTEBOOK = f"assignments/source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
STEP = re.compile(r"<!-- step: (?P<kind>[\w-]+)(?P<args>[^>]*?) -->\n(?:[ \t]*```[\w]*\n(?P<body>.*?)\n[ \t]*```)?",
                  re.S)
NEEDED = ["reference", "answer-cell", "visible-cell", "hidden-cell", "check", "mutants",
          "run: sync", "run: check", "run: release"]


def steps() -> list[tuple[str, list[str], str]]:
    text = README.read_text()
    start = text.index("## Adding an exercise, step by step")
    section = text[start:text.index("\n## ", start + 1)]
    return [(m["kind"], m["args"].split(), textwrap.dedent(m["body"] or "")) for m in STEP.finditer(section)]


def _meta(grade_id: str, kind: str) -> dict:
    """The nbgrader metadata JupyterLab's Create Assignment toolbar writes for each cell type."""
    answer = kind == "answer-cell"
    return {"nbgrader": {"grade": not answer, "grade_id": grade_id, "locked": not answer, "schema_version": 3,
                         "solution": answer, "task": False, **({} if answer else {"points": 0})}}


@pytest.mark.slow
def test_following_the_readme_adds_a_checked_and_released_exercise(tmp_path):
    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "release", "submitted", "autograded", "feedback", "reports",
                                    "gradebook.db", ".autograder")
    for folder in ("solutions", "autograder", "assignments"):
        shutil.copytree(REPO / folder, repo / folder, ignore=ignore)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env["PYTHONPATH"] = str(repo)  # the copy's packages, not the repository's

    done: list[str] = []
    outputs: dict[str, str] = {}
    last_cell = None
    for kind, args, body in steps():
        if kind == "reference":
            assert body.strip() and body.strip() in (repo / args[0]).read_text(), \
                f"step 1's reference is not the one in {args[0]}"
        elif kind.endswith("-cell"):
            nb = nbformat.read(repo / NOTEBOOK, as_version=4)
            ids = [notebook.grade_id(c) for c in nb.cells]
            after = next((a.removeprefix("after=") for a in args if a.startswith("after=")), last_cell)
            assert after in ids, f"the {kind} step says where the cell goes: after={after!r} is not a cell"
            nb.cells.insert(ids.index(after) + 1, nbformat.v4.new_code_cell(body, metadata=_meta(args[0], kind)))
            nbformat.write(nb, repo / NOTEBOOK)
            last_cell = args[0]
        elif kind in ("check", "mutants"):
            with open(repo / args[0], "a") as module:
                module.write("\n\n" + body + "\n")
        elif kind == "run":
            for line in body.splitlines():
                command = shlex.split(line)
                assert command[:3] == ["python", "-m", "autograder"], line
                result = subprocess.run([sys.executable, *command[1:]], cwd=repo, env=env, capture_output=True,
                                        text=True, timeout=900)
                assert result.returncode == 0, f"{line}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
                outputs[command[3]] = result.stdout
                kind = f"run: {command[3]}"
        done.append(kind)
    missing = [step for step in NEEDED if step not in done]
    assert not missing, f"the README's walk-through lacks these steps: {missing}"
    assert [s for s in done if s.startswith("run: ")] == ["run: sync", "run: check", "run: release"], done

    # sync wrote the body from solutions/ and the hidden cell from @graded
    cells = {notebook.grade_id(c): c for c in nbformat.read(repo / NOTEBOOK, as_version=4).cells}
    assert "return grad / (2.0 * self.output)" in cells["a02-sqrt"].source
    assert cells["a02-sqrt-hidden"].source == ('# More checks of "Sqrt" run when your work is graded: nothing to '
                                               'write or run here.\n### BEGIN HIDDEN TESTS\n# judged outside the '
                                               'notebook, by the check "a02-sqrt" on Sqrt\n### END HIDDEN TESTS')
    assert notebook.nbgrader(cells["a02-sqrt-hidden"])["points"] == 2

    # check: the solution full, the unanswered notebook 0, the mutant caught, the alternative full
    report = outputs["check"]
    rows = {line.split()[0]: line for line in report.splitlines() if line.strip()}
    assert "full marks" in rows["solution"] and "0 on every test" in rows["unanswered"], report
    assert rows["sqrt-half-missing"].split()[-1] == "caught", report
    assert "full marks" in rows["alternative-sqrt-from-the-input"], report
    assert f"check {ASSIGNMENT}: OK" in report, report

    # release: the exercise is there for students, without its solution or the hidden test
    released = json.loads((repo / "assignments" / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    text = json.dumps(released)
    assert '"a02-sqrt"' in text and "a02-sqrt-visible" in text
    assert "2.0 * self.output" not in text and "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
