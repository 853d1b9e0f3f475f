"""Hidden checks of a05_layers: DataLoader.__iter__."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    graded,
    run,
    sandbox_type,
    student_engine,
    student_module,
    time_limit,
    type_name,
)

from .common import (
    TIME_LIMIT,
    _sandbox_subclass,
    _slow,
)


# --------------------------------------------------------------------------------------------
# DataLoader
# --------------------------------------------------------------------------------------------
def _list_dataset(n: int):
    """A plain Dataset (not a TensorDataset), made in the sandbox: sample i is (features of i, label i).

    Its class derives from the kit's `Dataset` and from `list` (which gives `len` and indexing),
    so it needs no code of the judge's in the sandbox."""
    data = student_module("solutions.data")
    list_type = sandbox_type([])
    cls = _sandbox_subclass((list_type, data.Dataset), "_ListDataset", {})
    return cls([(np.full(3, float(i)), i) for i in range(n)])


def _ids(batches, label):
    """The sample ids of each batch (the label column holds each sample's index)."""
    Tensor = student_engine().Tensor
    out = []
    for b in batches:
        if not isinstance(b, tuple) or not all(isinstance(t, Tensor) for t in b):
            raise GradingFailure(f"{label}: a batch is a tuple of Tensors (features, labels), got "
                                 f"{type_name(b)}")
        x, y = b
        ids = np.asarray(y.data).astype(int).tolist()
        if x.shape[0] != len(ids) or not np.allclose(np.asarray(x.data)[:, 0], ids):
            raise GradingFailure(f"{label}: the features and labels of a batch must come from the same samples")
        out.append(ids)
    return out


@graded("a05-dataloader", "solutions.data:DataLoader", regions=("__iter__",), points=2, title="DataLoader.__iter__",
        diagnose=("Module.parameters",))
def check_dataloader(DataLoader, rng):
    TensorDataset = student_module("solutions.data").TensorDataset
    with time_limit(TIME_LIMIT, _slow("DataLoader")):
        for n, batch, drop_last, plain in [(10, 4, False, False), (10, 4, True, False), (10, 5, True, False),
                                           (7, 3, False, True), (3, 8, False, False), (9, 2, True, True)]:
            kind = "a plain Dataset" if plain else "a TensorDataset"
            label = f"{n} samples of {kind}, batch_size {batch}, drop_last={drop_last}, no shuffle"
            dataset = _list_dataset(n) if plain else TensorDataset(np.repeat(np.arange(n, dtype=float)[:, None], 3, 1),
                                                                 np.arange(n))
            loader = run(f"{label}: DataLoader(...)",
                         lambda: DataLoader(dataset, batch_size=batch, drop_last=drop_last))
            batches = _ids(run(f"{label}: iterating", lambda: list(loader)), label)
            full = [list(range(i, min(i + batch, n))) for i in range(0, n, batch)]
            want = [b for b in full if len(b) == batch] if drop_last else full
            if batches == want:
                again = _ids(run(f"{label}: a second epoch", lambda: list(loader)), label)
                if again != want:
                    raise GradingFailure(f"{label}: a second pass over the loader (the next epoch) must give every "
                                         "batch again: build the batches inside __iter__")
                continue
            if batches == full[:-1] and not drop_last:
                raise GradingFailure(f"{label}: without drop_last the last, smaller batch is kept")
            if batches == full and drop_last:
                raise GradingFailure(f"{label}: drop_last drops the last batch when it is smaller than batch_size")
            if drop_last and batches == want[:-1]:
                raise GradingFailure(f"{label}: drop_last drops only a *smaller* last batch, never a full one")
            if sorted(sum(batches, [])) == list(range(n)):
                raise GradingFailure(f"{label}: without shuffle the batches follow the dataset's order, "
                                     "samples 0, 1, 2, ...")
            raise GradingFailure(f"{label}: wrong batches; consecutive slices of batch_size samples")

        n, batch = 23, 5
        dataset = TensorDataset(np.repeat(np.arange(n, dtype=float)[:, None], 3, 1), np.arange(n))
        label = f"{n} samples, batch_size {batch}, shuffle=True, seed 3, three epochs"
        loader = run(f"{label}: DataLoader(...)", lambda: DataLoader(dataset, batch_size=batch, shuffle=True, seed=3))
        epochs = [_ids(run(f"{label}: iterating", lambda: list(loader)), label) for _ in range(3)]
        for batches in epochs:
            flat = sum(batches, [])
            if [len(b) for b in batches] != [5, 5, 5, 5, 3]:
                raise GradingFailure(f"{label}: with shuffle the batches still have batch_size samples (the last "
                                     "one fewer)")
            if sorted(flat) != list(range(n)):
                raise GradingFailure(f"{label}: an epoch must visit every sample exactly once: shuffle with a "
                                     "permutation (rng.permutation(n)), not random draws with replacement")
        orders = [sum(b, []) for b in epochs]
        if orders[0] == list(range(n)):
            raise GradingFailure(f"{label}: shuffle=True must shuffle the order of the samples")
        if orders[0] == orders[1] == orders[2]:
            raise GradingFailure(f"{label}: every epoch has the same order: draw each epoch's permutation from "
                                 "self.rng (seeded once, in __init__), do not re-seed in __iter__")
        twin = run(f"{label}: DataLoader(...)", lambda: DataLoader(dataset, batch_size=batch, shuffle=True, seed=3))
        twin_orders = [sum(_ids(run(f"{label}: iterating", lambda: list(twin)), label), []) for _ in range(3)]
        if twin_orders != orders:
            raise GradingFailure(f"{label}: two loaders with the same seed must give the same epochs: draw the "
                                 "permutations from self.rng, not from NumPy's global generator")
