"""A reader can write chapter 7's sorting model from the chapter alone.

The chapter's own cells, taken from book/07_attention.md as a reader copies them (the imports, the data,
the model class, the loss, the decoding), run here on the reference kit, outside the book build:
the model they define is trained for the chapter's budget (`sequence.Settings()`, 300 steps of 64
lines, which the chapter's training cell uses) by `sequence.train`, the module's copy of the loop the
chapter writes out (its Check runs five steps of both and asserts the same losses), and must sort
at least 95 % of held-out lines exactly with the chapter's greedy decoding. The cells
run in a fresh interpreter (the reference kit is a package named `coursekit`, which other tests
build for the student's side).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from autograder.kit import build_reference_kit

from support import REPO

ROOT = REPO
CHAPTER = ROOT / "book" / "07_attention.md"
# What a reader copies to have the model: the first code cell (the imports), then the cells that
# define these names.
DEFINES = ("SEP, VOCAB = ", "class Block(", "class Sorter(", "def next_token_loss(", "def sort_greedily(")

RUN = """
import json, sys
import numpy as np
namespace = {}
for cell in json.loads(sys.argv[1]):
    exec(compile(cell, "<chapter 7>", "exec"), namespace)
sequence, Sorter = namespace["sequence"], namespace["Sorter"]
settings = sequence.Settings()
with namespace["blas_threads"](1):
    model, record = sequence.train(settings, model=Sorter(settings, np.random.default_rng(settings.seed)),
                                   loss=namespace["next_token_loss"])
held = sequence.make_batch(np.random.default_rng(2024), 1000, settings.length, "test")
answer = namespace["sort_greedily"](model, held[:, : settings.length + 1], settings.length)
exact = float((answer == held[:, settings.length + 1:]).all(axis=1).mean())
print(json.dumps({"exact": exact, "steps": settings.steps, "batch": settings.batch_size,
                  "first_loss": record["losses"][0], "last_loss": record["losses"][-1]}))
"""


def chapter_cells() -> list[str]:
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", CHAPTER.read_text(), flags=re.S)
    visible = [c for c in cells if not c.startswith(":tags: [remove-cell]")]
    imports = visible[0]
    wanted = [next(c for c in visible if name in c) for name in DEFINES]
    return [imports, *wanted]


def test_the_chapter_defines_the_model_loss_and_decoding_in_cells_of_their_own():
    imports, *cells = chapter_cells()
    assert "from coursekit.engine import" in imports
    for name, cell in zip(DEFINES, cells, strict=True):
        assert name in cell and "sequence.train" not in cell, cell[:200]
    code = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", CHAPTER.read_text(), flags=re.S)
    training = next(c for c in code if "def train(" in c)
    assert "losses = train(model, settings, next_token_loss)" in training, training
    check = next(c for c in code if "sequence.train(" in c)  # the page's loop is the module's
    assert "by_page = train(" in check and "assert np.allclose(by_page, by_module" in check, check
    settings = re.search(r"^settings = sequence\.Settings\(\)", CHAPTER.read_text(), flags=re.M)
    assert settings, "the chapter trains with the module's default budget, which this test uses"


@pytest.mark.slow
def test_the_model_written_from_the_chapters_cells_learns_to_sort(tmp_path):
    build_reference_kit(tmp_path)
    result = subprocess.run([sys.executable, "-c", RUN, json.dumps(chapter_cells())], cwd=tmp_path,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert (outcome["steps"], outcome["batch"]) == (300, 64), outcome
    assert outcome["last_loss"] < 0.1 * outcome["first_loss"], outcome
    assert outcome["exact"] >= 0.95, outcome
