"""Datasets and mini-batches: `Dataset`, `TensorDataset`, `DataLoader`, and the digits data set.

Book: chapter 6 (`book/06_training.md`). Tests: `tests/engine/test_data.py`.

Depends only on NumPy, scikit-learn (for its bundled digits images) and the engine's `Tensor`.

A `DataLoader` over a `TensorDataset` builds each batch with one fancy-indexing operation per
array (`images[idx]`), not one Python call per sample: for a batch of 64 that is the difference
between one copy and 64 `__getitem__` calls plus a stack.

The digits: scikit-learn ships 1797 grey 8x8 images of handwritten digits inside its wheel
(UCI's "Optical Recognition of Handwritten Digits"), so the course trains on real images with no
download. No PyPI package was found that ships MNIST or Fashion-MNIST this way with a usable license.
"""
from __future__ import annotations

import functools
import importlib.util
import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .graph import Tensor

__all__ = ["DataLoader", "Dataset", "TensorDataset", "load_digits", "stratified_split"]


class Dataset:
    """Anything with `len(ds)` and `ds[i]`; `ds[i]` returns one sample, usually a tuple (x, y)."""

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")

    def __getitem__(self, index: Any) -> Any:  # an int (a TensorDataset also takes an index array)
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")


class TensorDataset(Dataset):
    """Samples are the rows of several arrays of equal length: sample i is `(a[i], b[i], ...)`."""

    def __init__(self, *arrays: Any):
        if not arrays:
            raise ValueError("TensorDataset: give at least one array")
        self.arrays = tuple(np.asarray(a.data if isinstance(a, Tensor) else a) for a in arrays)
        lengths = [len(a) for a in self.arrays]
        if len(set(lengths)) != 1:
            shapes = ", ".join(str(a.shape) for a in self.arrays)
            raise ValueError(f"TensorDataset: arrays must have the same first dimension, got shapes {shapes}")

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        """Sample `index` as Tensors; an index array gives a whole batch at once."""
        return tuple(Tensor(a[index]) for a in self.arrays)


def collate(samples: list[Any]) -> Any:
    """Stack a list of samples field by field: [(x0, y0), (x1, y1)] -> (Tensor[x0, x1], Tensor[y0, y1])."""
    first = samples[0]
    if isinstance(first, (tuple, list)):
        return tuple(collate([s[k] for s in samples]) for k in range(len(first)))
    return Tensor(np.stack([np.asarray(s.data if isinstance(s, Tensor) else s) for s in samples]))


class DataLoader:
    """Iterate over a dataset in mini-batches.

    Each pass (epoch) visits every sample once; with `shuffle`, in a fresh random order each
    epoch, drawn from a generator seeded once with `seed`, so the sequence of epochs is
    reproducible. `drop_last` drops a final batch smaller than `batch_size`. Batches are tuples of
    Tensors with the batch on axis 0, e.g. (images (B, 1, 8, 8), labels (B,)).
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int | None = None,
    ):
        if not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, int(batch_size), shuffle, drop_last
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        """Number of batches per epoch."""
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        n = len(self.dataset)
        order = self.rng.permutation(n) if self.shuffle else np.arange(n)
        stop = n - n % self.batch_size if self.drop_last else n
        vectorized = isinstance(self.dataset, TensorDataset)
        for start in range(0, stop, self.batch_size):
            idx = order[start : start + self.batch_size]
            if vectorized:
                yield self.dataset[idx]
            else:
                yield collate([self.dataset[int(i)] for i in idx])


# --------------------------------------------------------------------------------------------
# The digits data set
# --------------------------------------------------------------------------------------------
def stratified_split(labels: np.ndarray, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, test) index arrays with each class in the same proportion in both parts.

    The test part has ceil(test_size * N) samples; each class gives floor(test_size * n_c) of them,
    and the few left over go to the classes with the largest remainders (ties: smaller class
    label). Within a class, which samples go to test is a seeded permutation, so the split
    depends only on (labels, test_size, seed) and NumPy's generator, not on a library version.
    """
    if not 0.0 < test_size < 1.0:
        raise ValueError(f"stratified_split: test_size must be a fraction in (0, 1), got {test_size}")
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    exact = test_size * counts
    take = np.floor(exact).astype(int)
    short = math.ceil(test_size * len(labels)) - take.sum()
    take[np.argsort(-(exact - take), kind="stable")[:short]] += 1
    rng = np.random.default_rng(seed)
    test = [rng.permutation(np.flatnonzero(labels == c))[:k] for c, k in zip(classes, take, strict=True)]
    test_idx = np.sort(np.concatenate(test))
    train_idx = np.setdiff1d(np.arange(len(labels)), test_idx)
    return train_idx, test_idx


@functools.lru_cache(maxsize=1)
def _digits_raw() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 8, 8) float64 in 0..16, labels (1797,) int64), read once per process."""
    # Importing sklearn.datasets pulls in SciPy (about 2 s); the data is one CSV file inside the
    # installed package, so read it directly and keep sklearn's loader as the fallback.
    spec = importlib.util.find_spec("sklearn")
    csv = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None
    if csv is not None and csv.is_file():
        table = np.loadtxt(csv, delimiter=",")
        return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)
    try:
        from sklearn.datasets import load_digits as sklearn_load_digits
    except ImportError:
        raise ImportError("load_digits needs scikit-learn, which ships the digits images: "
                          "pip install scikit-learn") from None
    bunch = sklearn_load_digits()
    return bunch.images.astype(np.float64), bunch.target.astype(np.int64)


def load_digits(
    split: str = "train",
    test_size: float = 0.2,
    seed: int = 0,
    flatten: bool = False,
    dtype: Any = np.float32,
) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 handwritten digits as (images, labels) for one part of a fixed split.

    images: (N, 1, 8, 8), or (N, 64) with `flatten=True`, in `dtype`, scaled from 0..16 to [0, 1];
    labels: (N,) int64 in 0..9. With the defaults, "train" has 1437 images and "test" 360, and
    the two parts are the same everywhere (the book, the tests, the examples).
    """
    if split not in ("train", "test"):
        raise ValueError(f"load_digits: split must be 'train' or 'test', got {split!r}")
    images, labels = _digits_raw()
    train_idx, test_idx = stratified_split(labels, test_size, seed)
    idx = train_idx if split == "train" else test_idx
    x = (images[idx] / 16.0).astype(dtype)
    x = x.reshape(len(idx), 64) if flatten else x.reshape(len(idx), 1, 8, 8)
    return x, labels[idx].copy()


# Their names before they were public (issue 39): notebooks released earlier import them, and are
# still graded.
_collate = collate
