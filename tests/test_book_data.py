"""The numbers chapter 6 reads from book/_data/ablation.json are the ones its training produces.

The chapter's 45-run ablation is run by book/_code/ablation.py and stored; the chapter itself
retrains seed 0 of the two chosen configurations and checks them against the store. Here another
seed is rerun for the plain recipe, the one configuration of each model the chapter does not
retrain (the MLP at both budgets, the CNN: about a minute on a shared machine), and the stored
file is checked for completeness and for the choice it records. A rerun against a store with one
number changed by one validation image fails (`ablation.py --check 1 --out <tampered copy>`).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.mark.slow
def test_a_rerun_of_seed_1_reproduces_the_stored_numbers(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "1", "--only", "MLP,plain", "CNN,plain"],
                            cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "the rerun matches" in result.stdout
    assert result.stdout.count("seed 1: validation") == 3, result.stdout
