"""Measure PyTorch's CPU conv2d for chapter 3's speed plot; write book/_data/conv_torch.json.

The book is built without PyTorch, so chapter 3 times the naive loops and the engine live, at
build time, and reads PyTorch's times from the JSON this script writes. Run it with the
oracle venv, from the repository root:

    .venv-golden/bin/python book/_code/measure_torch.py

The JSON is also the single source of the configurations the chapter times: the chapter reads
them from it, so the two sides always time the same convolutions. Next to every PyTorch time
the script stores the engine's time measured in the same session, so the ratio of the two does
not depend on how busy the machine was when the book was built. The method is that of
`benchmarks/fair.py`: blocks of calls per library, never interleaved (threads one library
leaves spinning would steal the cores from the other's next call), after warm-up, each library
at its better of 1 or 2 threads, minimum over rounds. Times in seconds, float32.

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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "book" / "_data" / "conv_torch.json"
sys.path.insert(0, str(ROOT / "benchmarks"))

import fair  # noqa: E402  (benchmarks/fair.py: the timing method)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from bench_conv import SHAPES  # noqa: E402  (the shapes of benchmarks/bench_conv.py)

from solutions import Tensor, conv2d, no_grad  # noqa: E402

# Forward only, one image, C = K = 8 channels, 3x3 kernel, padding 1: the naive loops can
# still finish in about a second at the small sizes.
SWEEP = dict(N=1, C=8, K=8, kernel=3, stride=1, padding=1, sizes=[4, 8, 16, 32, 64, 128, 256])
CALLS = 10  # timed calls per block; many: on a shared machine the minimum needs a quiet moment
ROUNDS = 3  # rounds of blocks (the two libraries take turns); each time is the best over all of them


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def compare(fns: dict, calls: int = CALLS) -> dict[str, tuple[float, int]]:
    """{name: (best seconds, threads)}: blocks, never interleaved, each at its best thread count."""
    return fair.compare(fns, rounds=ROUNDS, calls=calls, warmup=2)


def sweep_row(size: int, rng: np.random.Generator) -> dict:
    """Forward only, one image of size x size."""
    x = rng.standard_normal((SWEEP["N"], SWEEP["C"], size, size)).astype(np.float32)
    w = rng.standard_normal((SWEEP["K"], SWEEP["C"], 3, 3)).astype(np.float32)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)

    def theirs():
        with torch.no_grad():
            return F.conv2d(tx, tw, None, SWEEP["stride"], SWEEP["padding"])

    def ours():
        with no_grad():
            return conv2d(x, w, None, SWEEP["stride"], SWEEP["padding"])

    t = compare({"torch": theirs, "engine": ours})
    print(f"sweep H=W={size:4d}: torch {t['torch'][0] * 1e3:8.3f} ms ({t['torch'][1]} thr), "
          f"engine {t['engine'][0] * 1e3:8.3f} ms ({t['engine'][1]} thr)")
    return dict(size=size, torch_s=t["torch"][0], engine_same_session_s=t["engine"][0],
                torch_threads=t["torch"][1], engine_threads=t["engine"][1])


def sweep() -> list[dict]:
    rng = np.random.default_rng(0)
    return [sweep_row(size, rng) for size in SWEEP["sizes"]]


def shape_row(shape) -> dict:
    """Forward + backward of one of bench_conv's shapes."""
    (N, C, H, W), (K, KH, KW), s, p, d = shape
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

    t = compare({"torch": theirs, "engine": ours}, calls=4)
    print(f"shape {(N, C, H, W)} k{K} {KH}x{KW} s{s} p{p} d{d}: torch {t['torch'][0] * 1e3:8.2f} ms "
          f"({t['torch'][1]} thr), engine {t['engine'][0] * 1e3:8.2f} ms ({t['engine'][1]} thr), forward + backward")
    return dict(x=[N, C, H, W], weight=[K, C, KH, KW], stride=s, padding=p, dilation=d,
                flops_fwd=2.0 * N * K * OH * OW * C * KH * KW,
                torch_s=t["torch"][0], engine_same_session_s=t["engine"][0],
                torch_threads=t["torch"][1], engine_threads=t["engine"][1])


def shapes() -> list[dict]:
    return [shape_row(shape) for shape in SHAPES]


def main() -> None:
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    sweep_rows, shape_rows = sweep(), shapes()
    result = dict(
        generated_by="book/_code/measure_torch.py (run with .venv-golden/bin/python)",
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        machine=dict(cpu=cpu_model(), cores=os.cpu_count(),
                     threads=f"{' or '.join(map(str, fair.THREAD_CHOICES))} (the faster, per row)",
                     system=platform.platform(), python=platform.python_version(), numpy=np.__version__,
                     torch=torch.__version__, load_average_before=load_before),
        dtype="float32",
        method=fair.method(ROUNDS, CALLS) + " (4 calls per block for the forward + backward shapes)",
        sweep=dict(config={k: v for k, v in SWEEP.items() if k != "sizes"}, what="forward only", rows=sweep_rows),
        shapes=dict(what="forward + backward (x, weight and bias all require grad)", rows=shape_rows),
    )
    result["machine"]["load_average_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
