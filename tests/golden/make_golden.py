"""Regenerate the PyTorch golden fixtures: `make golden` (runs in .venv-golden, which has torch).

Each `golden_<name>.py` next to this file that exists defines `make(rng) -> {case: {array: ndarray}}`;
its cases are saved to `<name>.npz` with keys "case/array". The test suite reads only the .npz
files and never imports torch, so nothing in the course depends on it.

    .venv-golden/bin/python tests/golden/make_golden.py          # all modules
    .venv-golden/bin/python tests/golden/make_golden.py ops      # just golden_ops.py
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODULES = ("ops", "conv", "nn", "attention")
SEED = 20261121  # fixed, so that regenerating without changes rewrites the same numbers
BUDGET = 1_000_000  # bytes, all fixture files together: they are committed


def write(name: str) -> Path | None:
    if not (HERE / f"golden_{name}.py").exists():
        print(f"  {name}: no golden_{name}.py, skipped")
        return None
    module = importlib.import_module(f"golden_{name}")
    cases = module.make(np.random.default_rng(getattr(module, "SEED", SEED)))
    arrays = {}
    for case, named in cases.items():
        for array_name, value in named.items():
            key = f"{case}/{array_name}"
            if "/" in case or "/" in array_name:
                raise ValueError(f"make_golden: '/' is the separator, it cannot appear in {key!r}")
            arrays[key] = np.asarray(value)
    path = HERE / f"{name}.npz"
    np.savez_compressed(path, **arrays)
    print(f"  {name}: {len(cases)} cases, {len(arrays)} arrays -> {path.relative_to(HERE.parent.parent)} "
          f"({path.stat().st_size / 1024:.0f} KiB)")
    return path


def main(names: list[str]) -> None:
    sys.path.insert(0, str(HERE))
    import torch

    print(f"golden fixtures from PyTorch {torch.__version__}, NumPy {np.__version__}")
    for name in names:
        write(name)
    total = sum(p.stat().st_size for p in HERE.glob("*.npz"))
    print(f"  total {total / 1024:.0f} KiB of fixtures")
    if total > BUDGET:
        raise SystemExit(f"make_golden: the fixtures take {total} bytes, over the {BUDGET}-byte budget; "
                         "shrink the cases")


if __name__ == "__main__":
    main(sys.argv[1:] or list(MODULES))
