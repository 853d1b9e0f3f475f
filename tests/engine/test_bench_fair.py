"""The benchmarks' timing method (`benchmarks/fair.py`): blocks never interleaved, every thread count
tried for every side, thread settings restored. Runs without PyTorch."""
from __future__ import annotations

import itertools
import sys

import pytest

from support import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import fair  # noqa: E402

from solutions.ops import _fast  # noqa: E402


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
