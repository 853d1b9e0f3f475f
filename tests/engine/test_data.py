"""solutions.data: datasets, the DataLoader's batches and shuffling, and the fixed digits split."""
from __future__ import annotations

import numpy as np
import pytest

from solutions import Tensor
from solutions.data import DataLoader, Dataset, TensorDataset, load_digits, stratified_split


def numbered(n=10):
    """A dataset whose sample i is (i, 2i) so batches show which samples they hold."""
    return TensorDataset(np.arange(n), np.arange(n) * 2.0)


def test_tensor_dataset_items_and_errors():
    ds = TensorDataset(np.arange(12).reshape(6, 2), Tensor(np.arange(6)))
    assert len(ds) == 6
    x, y = ds[4]
    assert isinstance(x, Tensor) and x.data.tolist() == [8, 9] and y.item() == 4
    xb, yb = ds[np.array([0, 5])]
    assert xb.shape == (2, 2) and yb.data.tolist() == [0, 5]
    with pytest.raises(ValueError, match=r"same first dimension, got shapes \(6, 2\), \(5,\)"):
        TensorDataset(np.zeros((6, 2)), np.zeros(5))


@pytest.mark.parametrize("n, batch, drop_last, sizes", [
    (10, 3, False, [3, 3, 3, 1]),
    (10, 3, True, [3, 3, 3]),
    (9, 3, True, [3, 3, 3]),
    (4, 10, False, [4]),
    (4, 10, True, []),
])
def test_batch_sizes_and_len(n, batch, drop_last, sizes):
    loader = DataLoader(numbered(n), batch_size=batch, drop_last=drop_last)
    assert [len(x) for x, _ in loader] == sizes
    assert len(loader) == len(sizes)


def test_unshuffled_batches_are_in_order_and_paired():
    batches = list(DataLoader(numbered(7), batch_size=3))
    assert [x.data.tolist() for x, _ in batches] == [[0, 1, 2], [3, 4, 5], [6]]
    assert all(np.array_equal(y.data, 2.0 * x.data) for x, y in batches)


def test_shuffle_visits_each_sample_once_per_epoch_in_a_fresh_order():
    loader = DataLoader(numbered(50), batch_size=8, shuffle=True, seed=0)
    epochs = [np.concatenate([x.data for x, _ in loader]) for _ in range(3)]
    for order in epochs:
        assert sorted(order.tolist()) == list(range(50))
    assert not np.array_equal(epochs[0], epochs[1]) and not np.array_equal(epochs[1], epochs[2])
    assert not np.array_equal(epochs[0], np.arange(50))
    for x, y in loader:  # features and labels stay paired through the shuffle
        assert np.array_equal(y.data, 2.0 * x.data)


def test_seeded_shuffle_is_reproducible():
    def orders(seed):
        loader = DataLoader(numbered(30), batch_size=4, shuffle=True, seed=seed)
        return [np.concatenate([x.data for x, _ in loader]).tolist() for _ in range(2)]

    assert orders(3) == orders(3)
    assert orders(3) != orders(4)


def test_drop_last_with_shuffle_drops_different_samples_each_epoch():
    loader = DataLoader(numbered(10), batch_size=4, shuffle=True, drop_last=True, seed=1)
    seen = [set(np.concatenate([x.data for x, _ in loader]).tolist()) for _ in range(4)]
    assert all(len(s) == 8 for s in seen) and len(set(map(frozenset, seen))) > 1


def test_a_plain_dataset_is_collated_field_by_field():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.array([i, i * i]), i % 2

    (x, parity), *rest = list(DataLoader(Squares(), batch_size=2))
    assert x.data.tolist() == [[0, 0], [1, 1]] and parity.data.tolist() == [0, 1]
    assert len(rest) == 2 and rest[-1][0].shape == (1, 2)
    with pytest.raises(NotImplementedError, match="Dataset does not define __len__"):
        len(Dataset())


def test_loader_errors():
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        DataLoader(numbered(), batch_size=0)


# --------------------------------------------------------------------------------------------
# The digits
# --------------------------------------------------------------------------------------------
def test_digits_shapes_dtypes_and_range():
    x, y = load_digits("train")
    xt, yt = load_digits("test")
    assert x.shape == (1437, 1, 8, 8) and xt.shape == (360, 1, 8, 8)
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0
    assert set(np.unique(y)) == set(range(10)) == set(np.unique(yt))
    flat, _ = load_digits("test", flatten=True, dtype=np.float64)
    assert flat.shape == (360, 64) and flat.dtype == np.float64
    assert np.array_equal(flat.reshape(360, 1, 8, 8), xt)


def test_digits_split_is_fixed_stratified_and_disjoint():
    _, y = load_digits("train")
    _, yt = load_digits("test")
    # Every class is 20 % test, to within one image.
    counts, test_counts = np.bincount(np.concatenate([y, yt])), np.bincount(yt)
    assert np.all(np.abs(test_counts - 0.2 * counts) < 1)
    train_idx, test_idx = stratified_split(np.concatenate([y, yt]), 0.2, seed=0)
    assert len(np.intersect1d(train_idx, test_idx)) == 0 and len(train_idx) + len(test_idx) == 1797
    raw_labels = np.concatenate([y, yt])  # any labels work: the split only looks at class sizes
    assert np.array_equal(stratified_split(raw_labels, 0.2, 0)[1], test_idx)
    assert not np.array_equal(stratified_split(raw_labels, 0.2, 1)[1], test_idx)


def test_digits_split_pins_the_exact_test_images():
    # A fingerprint of the split: if it changes, every chapter's numbers change with it.
    from solutions.data import _digits_raw

    _, labels = _digits_raw()
    _, test_idx = stratified_split(labels, 0.2, seed=0)
    assert test_idx[:10].tolist() == [5, 9, 12, 14, 16, 17, 19, 23, 24, 34] and int(test_idx.sum()) == 326571
    xt, yt = load_digits("test")
    assert np.bincount(yt).tolist() == [36, 37, 35, 37, 36, 36, 36, 36, 35, 36]
    assert yt[:12].tolist() == [5, 9, 2, 4, 6, 7, 9, 3, 4, 6, 8, 5]
    assert float(xt.astype(np.float64).sum() * 16) == 112133.0  # raw pixel values are integers 0..16


def test_digits_errors():
    with pytest.raises(ValueError, match="split must be 'train' or 'test', got 'val'"):
        load_digits("val")
    with pytest.raises(ValueError, match=r"test_size must be a fraction in \(0, 1\), got 1.5"):
        load_digits("test", test_size=1.5)
