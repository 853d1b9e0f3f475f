"""The numbers chapter 6 reads from book/_data/ablation.json are the ones its training produces.

The chapter's 45-run ablation is run by book/_code/ablation.py and stored; the chapter itself
retrains seed 0 of the two chosen configurations and checks them against the store. Here another
seed is rerun for the plain recipe, the one configuration of each model the chapter does not
retrain (the MLP at both budgets, the CNN: about a minute on a shared machine), and the stored
file is checked for completeness and for the choice it records.

The runs are float32: another processor, or OpenBLAS told to use another kernel for this one
(OPENBLAS_CORETYPE), rounds differently, and thousands of steps later a rerun differs from the
store in the fourth or fifth digit. A rerun is therefore held to the store within the spread of
the stored seeds, epoch by epoch (`ablation.compare`): a change of the code moves a run by as much
as another seed does and fails, a change of rounding does not. The rerun is made twice, with
OPENBLAS_CORETYPE unset and set to Haswell, whatever this machine's environment says.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from support import REPO

ROOT = REPO
SCRIPT = ROOT / "book" / "_code" / "ablation.py"
STORED = ROOT / "book" / "_data" / "ablation.json"
sys.path.insert(0, str(SCRIPT.parent))
import ablation  # noqa: E402


def test_the_store_holds_every_configuration_on_every_seed_and_the_rules_choice():
    stored = json.loads(STORED.read_text())
    keys = [(r["model"], r["recipe"], r["epochs"], r["seed"]) for r in stored["runs"]]
    assert sorted(keys) == sorted((*c, s) for c in ablation.CONFIGS for s in ablation.SEEDS)
    for run in stored["runs"]:
        assert len(run["train_loss"]) == len(run["val_accuracy"]) == run["epochs"], run["model"]
        assert all(0 <= a <= 1 for a in run["val_accuracy"] + run["train_accuracy"])
    for name, test in stored["chosen_on_validation"].items():
        assert tuple(test["config"]) == ablation.choose(stored["runs"], name)
        assert len(test["test_accuracy"]) == len(ablation.SEEDS)


def test_the_one_standard_error_rule_takes_the_simplest_configuration_the_noise_cannot_separate():
    se = ablation.standard_error(0.97)
    assert se == pytest.approx(np.sqrt(0.97 * 0.03 / ablation.VALIDATION_IMAGES))
    configs = [c for c in ablation.CONFIGS if c[0] == "MLP"]  # the simplest first
    for behind, chosen in ((0.9 * se, configs[0]), (1.1 * se, configs[-1])):
        scores = {c: 0.5 for c in configs}
        scores[configs[0]], scores[configs[-1]] = 0.97 - behind, 0.97
        runs = [{"model": m, "recipe": r, "epochs": e, "seed": s, "val_accuracy": [v]}
                for (m, r, e), v in scores.items() for s in ablation.SEEDS]
        assert ablation.choose(runs, "MLP") == chosen, behind / se


def test_a_rerun_is_held_to_the_store_within_the_seeds_spread():
    stored = json.loads(STORED.read_text())
    key = ("MLP", "plain", 20, 1)
    run = next(r for r in stored["runs"] if (r["model"], r["recipe"], r["epochs"], r["seed"]) == key)
    seeds = np.array([r["val_accuracy"] for r in stored["runs"]
                      if (r["model"], r["recipe"], r["epochs"]) == ("MLP", "plain", 20)])
    spread = seeds.max(axis=0) - seeds.min(axis=0)
    rounding = copy.deepcopy(run)  # what another processor's float32 does: the fifth digit
    rounding["val_accuracy"] = [v * (1 + 1e-5) for v in run["val_accuracy"]]
    assert ablation.compare([rounding], stored) == []
    changed = copy.deepcopy(run)  # what a change of the code does: as much as another seed, or more
    changed["val_accuracy"][-1] = run["val_accuracy"][-1] + 1.5 * spread[-1]
    problems = ablation.compare([changed], stored)
    assert len(problems) == 1 and "val_accuracy" in problems[0] and "spread" in problems[0], problems


@pytest.mark.slow
@pytest.mark.parametrize("coretype", [None, "Haswell"], ids=["OPENBLAS_CORETYPE-unset", "OPENBLAS_CORETYPE-Haswell"])
def test_a_rerun_of_seed_1_lands_within_the_seeds_spread(coretype):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "1", "--only", "MLP,plain", "CNN,plain"],
                            cwd=ROOT, capture_output=True, text=True, timeout=1800, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "the rerun lands within the seeds' spread" in result.stdout
    assert result.stdout.count("seed 1: validation") == 3, result.stdout
