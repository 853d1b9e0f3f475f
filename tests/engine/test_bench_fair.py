"""The benchmarks' timing method (`benchmarks/fair.py`): blocks never interleaved, every thread count
tried for every side, thread settings restored; and the before/after check of the engine's step
(`bench_train.py --baseline`): an earlier commit's engine, one process per block, taking turns.
Runs without PyTorch."""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from support import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import fair  # noqa: E402

from solutions.ops import _fast  # noqa: E402


@pytest.mark.slow
def test_calls_run_in_blocks_one_side_at_a_time():
    calls = []
    sides = {name: (lambda name=name: calls.append((name, _fast.THREADS))) for name in ("a", "b")}
    best = fair.compare(sides, rounds=2, calls=3, warmup=1, thread_choices=(1, 2))
    # each block is warmup + calls runs of one side at one thread count, never mixed with the other
    blocks = [(key, len(list(group))) for key, group in itertools.groupby(calls)]
    assert blocks == [(("a", 1), 4), (("a", 2), 4), (("b", 1), 4), (("b", 2), 4)] * 2
    assert set(best) == {"a", "b"} and all(t >= 0 and n in (1, 2) for t, n in best.values())


def test_the_thread_settings_are_restored_even_after_an_error():
    before = _fast.THREADS
    with pytest.raises(RuntimeError), fair.threads(1):
        assert _fast.THREADS == 1
        raise RuntimeError("boom")
    assert _fast.THREADS == before


def test_cpu_clock_compares_one_thread_each_and_says_so():
    seen = []
    best = fair.compare({"a": lambda: seen.append(_fast.THREADS)}, rounds=1, calls=2, warmup=0, clock="cpu")
    assert seen == [1, 1] and best["a"][1] == 1
    assert "CPU time at 1 thread" in fair.method(3, 5, "cpu") and "never interleaved" in fair.method(3, 5)


# --------------------------------------------------------------------------------------------
# The before/after check of the engine's step: `bench_train.py --baseline COMMIT`
# --------------------------------------------------------------------------------------------


def test_an_earlier_commits_engine_is_its_own_files_alone_and_is_removed_after():
    graph = subprocess.run(["git", "-C", str(REPO), "show", "HEAD~1:solutions/graph.py"], capture_output=True,
                           check=True).stdout
    with fair.engine_at("HEAD~1") as tree:
        assert (tree / "solutions" / "graph.py").read_bytes() == graph
        assert [p.name for p in tree.iterdir()] == ["solutions"]  # no benchmarks, tests or packaging of it
    assert not tree.exists()
    with pytest.raises(SystemExit, match="no commit 'no-such-commit'"):
        with fair.engine_at("no-such-commit"):
            pass


def test_the_two_engines_take_turns_in_processes_of_their_own(monkeypatch, capsys):
    import bench_train

    blocks = []

    def fake_block(tree, argv, env=None, wrap=None):
        blocks.append(tree)
        steps = [0.002, 0.003] if tree == REPO else [0.004, 0.006]  # this tree twice as fast
        out = json.dumps({"engine": str(tree / "solutions"), "times": {"1": steps}})
        return subprocess.CompletedProcess([], 0, stdout=f"a line the block printed\n{out}\n")

    monkeypatch.setattr(bench_train, "run_block", fake_block)
    monkeypatch.setattr(bench_train, "torch", None)
    bench_train.against(argparse.Namespace(baseline="HEAD", rounds=3, calls=2, clock="cpu", instructions=False))
    old = blocks[0]
    assert old != REPO and blocks == [old, REPO, REPO, old, old, REPO]  # A B, B A, A B
    assert not old.exists()
    text = capsys.readouterr().out
    short = fair.commit_name("HEAD").split()[0]
    assert f"this tree / {short}: 0.500x by the min, 0.500x by the median; round by round 0.500x" in text
    assert "one process per block" in text and "3 rounds" in text and "process CPU time" in text


def test_with_pytorch_every_side_takes_every_place_in_the_round(monkeypatch, capsys):
    import bench_train

    blocks = []

    def fake_block(tree, argv, env=None, wrap=None):
        blocks.append("PyTorch" if "--torch" in argv else "this" if tree == REPO else "old")
        out = json.dumps({"engine": str(tree / "solutions"), "times": {"1": [0.004 if "--torch" in argv else 0.008]}})
        return subprocess.CompletedProcess([], 0, stdout=out)

    monkeypatch.setattr(bench_train, "run_block", fake_block)
    monkeypatch.setattr(bench_train, "torch", argparse.Namespace(__version__="2.13.0"))
    bench_train.against(argparse.Namespace(baseline="HEAD", rounds=3, calls=1, clock="cpu", instructions=False))
    assert blocks == ["old", "this", "PyTorch", "this", "PyTorch", "old", "PyTorch", "old", "this"]
    assert "this tree / PyTorch: 2.000x by the min" in capsys.readouterr().out


def test_a_block_that_imports_the_wrong_engine_is_an_error(monkeypatch):
    import bench_train

    def wrong_engine(tree, argv, env=None, wrap=None):
        out = json.dumps({"engine": str(REPO / "solutions"), "times": {"1": [0.001]}})
        return subprocess.CompletedProcess([], 0, stdout=out)

    monkeypatch.setattr(bench_train, "run_block", wrong_engine)
    monkeypatch.setattr(bench_train, "torch", None)
    with pytest.raises(SystemExit, match="imported the engine in .*is another `solutions` first on the path"):
        bench_train.against(argparse.Namespace(baseline="HEAD", rounds=1, calls=1, clock="cpu", instructions=False))


def test_callgrind_counts_are_read_per_function_without_the_build_paths(tmp_path):
    import bench_train

    if shutil.which("callgrind_annotate") is None:
        pytest.skip("valgrind's callgrind_annotate is not installed")
    profile = tmp_path / "callgrind.out"
    profile.write_text("events: Ir\n"
                       "fl=/tmp/python-build.1/Python-3.11.7/Objects/obmalloc.c\nfn=_PyObject_Free\n1 100\n"
                       "fl=/venv/lib/numpy/_multiarray_umath.so\nfn=raw_array_assign_array\n2 2500\n")
    assert bench_train.annotate(profile) == {
        "PROGRAM TOTALS": 2600, "obmalloc.c:_PyObject_Free": 100, "_multiarray_umath.so:raw_array_assign_array": 2500}


@pytest.mark.slow
def test_the_baseline_check_runs_for_real_and_prints_the_ratio():
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_train.py"), "--baseline", "HEAD",
                           "--rounds", "2", "--calls", "1", "--clock", "cpu"], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    short = fair.commit_name("HEAD").split()[0]
    assert re.search(rf"this tree / {short}: \d+\.\d+x by the min", done.stdout), done.stdout
    assert re.search(rf"{short}: min +\d+\.\d+ ms, median +\d+\.\d+ ms \(1 thr, 2 steps\)", done.stdout), done.stdout
