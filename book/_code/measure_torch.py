"""Measure PyTorch's CPU conv2d for chapter 3's speed plot; write book/_data/conv_torch.json.

The book is built without PyTorch, so chapter 3 times the naive loops and the engine live, at
build time, and reads PyTorch's times from the JSON this script writes. Run it with the
oracle venv, from the repository root:

    .venv-golden/bin/python book/_code/measure_torch.py

The JSON is also the single source of the configurations the chapter times: the chapter reads
them from it, so the two sides always time the same convolutions. Next to every PyTorch time
the script stores the engine's time measured in the same session (engine and PyTorch alternate
inside every repeat), so the ratio of the two does not depend on how busy the machine was when
the book was built. Times are minima over repeats after warm-up, in seconds, float32.

The book's execution cache is keyed on the chapter's code, not on this file: after rewriting
the JSON, rebuild with `jupyter-book clean --all .` (or remove chapter 3's cache record with
`jcache cache -p _build/.jupyter_cache remove ID`) so that the page reads the new numbers.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "book" / "_data" / "conv_torch.json"
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench_conv import SHAPES  # noqa: E402  (the shapes of benchmarks/bench_conv.py)
from solutions import Tensor, conv2d, no_grad  # noqa: E402

# Forward only, one image, C = K = 8 channels, 3x3 kernel, padding 1: the naive loops can
# still finish in about a second at the small sizes.
SWEEP = dict(N=1, C=8, K=8, kernel=3, stride=1, padding=1, sizes=[4, 8, 16, 32, 64, 128, 256])
REPEATS = 30  # many: on a shared machine the minimum needs a quiet moment to land in
ROUNDS = 3  # the whole measurement runs this many times, a minute apart; each time is the best round


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def blas_threads() -> int:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def side_by_side(fns: dict, repeats: int = REPEATS, warmup: int = 2) -> dict[str, float]:
    """Minimum time of each function; they alternate inside every repeat."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    best = {name: math.inf for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def sweep() -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for size in SWEEP["sizes"]:
        x = rng.standard_normal((SWEEP["N"], SWEEP["C"], size, size)).astype(np.float32)
        w = rng.standard_normal((SWEEP["K"], SWEEP["C"], 3, 3)).astype(np.float32)
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)

        def theirs():
            with torch.no_grad():
                return F.conv2d(tx, tw, None, SWEEP["stride"], SWEEP["padding"])

        def ours():
            with no_grad():
                return conv2d(x, w, None, SWEEP["stride"], SWEEP["padding"])

        t = side_by_side({"torch": theirs, "engine": ours})
        rows.append(dict(size=size, torch_s=t["torch"], engine_same_session_s=t["engine"]))
        print(f"sweep H=W={size:4d}: torch {t['torch'] * 1e3:8.3f} ms, engine {t['engine'] * 1e3:8.3f} ms")
    return rows


def shapes() -> list[dict]:
    rows = []
    for (N, C, H, W), (K, KH, KW), s, p, d in SHAPES:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = (rng.standard_normal((K, C, KH, KW)) / math.sqrt(C * KH * KW)).astype(np.float32)
        b = rng.standard_normal(K).astype(np.float32)
        OH, OW = (H + 2 * p - d * (KH - 1) - 1) // s + 1, (W + 2 * p - d * (KW - 1) - 1) // s + 1
        g = rng.standard_normal((N, K, OH, OW)).astype(np.float32)
        tx, tw, tb, tg = (torch.from_numpy(a) for a in (x, w, b, g))

        def theirs():
            xt, wt, bt = (a.clone().requires_grad_() for a in (tx, tw, tb))
            F.conv2d(xt, wt, bt, s, p, d).backward(tg)

        def ours():
            xt, wt, bt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True), Tensor(b, requires_grad=True)
            conv2d(xt, wt, bt, s, p, d).backward(g)

        t = side_by_side({"torch": theirs, "engine": ours}, repeats=10)
        rows.append(dict(x=[N, C, H, W], weight=[K, C, KH, KW], stride=s, padding=p, dilation=d,
                         flops_fwd=2.0 * N * K * OH * OW * C * KH * KW,
                         torch_s=t["torch"], engine_same_session_s=t["engine"]))
        print(f"shape {(N, C, H, W)} k{K} {KH}x{KW} s{s} p{p} d{d}: torch {t['torch'] * 1e3:8.2f} ms, "
              f"engine {t['engine'] * 1e3:8.2f} ms (forward + backward)")
    return rows


def best_of(rounds: list[list[dict]]) -> list[dict]:
    """Row by row, the smallest of each time over the rounds."""
    best = [dict(row) for row in rounds[0]]
    for rows in rounds[1:]:
        for keep, row in zip(best, rows):
            for key in ("torch_s", "engine_same_session_s"):
                keep[key] = min(keep[key], row[key])
    return best


def main() -> None:
    threads = blas_threads()
    torch.set_num_threads(threads)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rounds = []
    for r in range(ROUNDS):
        if r:
            time.sleep(60)
        print(f"round {r + 1} of {ROUNDS}")
        rounds.append((sweep(), shapes()))
    result = dict(
        generated_by="book/_code/measure_torch.py (run with .venv-golden/bin/python)",
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        machine=dict(cpu=cpu_model(), cores=os.cpu_count(), threads=threads, system=platform.platform(),
                     python=platform.python_version(), numpy=np.__version__, torch=torch.__version__,
                     load_average_before=load_before),
        dtype="float32",
        method=(f"minimum over {ROUNDS} rounds a minute apart, each the minimum over repeats after 2 warm-up "
                "runs; engine and PyTorch alternate inside every repeat"),
        sweep=dict(config={k: v for k, v in SWEEP.items() if k != "sizes"}, what="forward only",
                   rows=best_of([sw for sw, _ in rounds])),
        shapes=dict(what="forward + backward (x, weight and bias all require grad)",
                    rows=best_of([sh for _, sh in rounds])),
    )
    result["machine"]["load_average_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
