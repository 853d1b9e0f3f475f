"""Train a small CNN (and an MLP beside it) on scikit-learn's 8x8 digits with the course's engine.

    python -m solutions.training                 # both models, default settings
    python -m solutions.training --model cnn --seed 3 --out /tmp/run

(In the students' kit this module is `coursekit.engine.training`: `python -m coursekit.engine.training`
trains on the student's own engine.)

Prints a progress bar, each model's final test accuracy, its confusion matrix and the wall time,
and writes `curves.png` (loss and accuracy per epoch) and `confusion_<model>.png` to --out.

Book: chapter 6 (`book/06_training.md`) imports the pieces: `make_cnn`, `make_mlp`, `make_loaders`, `train`, `evaluate`,
`confusion_matrix`, `plot_history`, `plot_confusion`. Assignment: `assignments/source/a06_training/`
(the capstone: `train_step`, then this whole recipe on the student's own engine).
Tests: `tests/engine/test_training.py`.

The CNN's recipe, chosen to clear 98 % test accuracy on every seed tried (seeds 0-13: 98.3 % to
100 %, mean 99.2 %) in about 15 CPU-seconds of training:
two 3x3 convolutions at 8x8 and one at 4x4, each followed by BatchNorm (which lets Adam run at
a high learning rate), max-pooling down to 2x2, one Linear layer; Adam at 3e-3 with a cosine
decay to 0 over the run, batches of 32, 15 epochs; random shifts of up to one pixel as
augmentation; and label smoothing 0.1. With only 1437 training images the two regularizers
matter most: in PyTorch trials of this recipe, the shifts raised the mean test accuracy over 5
seeds from 98.4 % to 99.1 %, and with label smoothing added the mean over 8 seeds was 99.2 %,
none below 98.9 %.
"""
from __future__ import annotations

import argparse
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from solutions import nn, no_grad, optim
from solutions.data import DataLoader, TensorDataset, load_digits
from solutions.graph import Tensor
from solutions.nn import functional as F

# The settings the tests and the book rely on: `--model cnn` with these reaches >= 98 %.
CNN_SETTINGS = dict(epochs=15, batch_size=32, lr=3e-3, augment=True, label_smoothing=0.1)
MLP_SETTINGS = dict(epochs=20, batch_size=32, lr=3e-3, augment=False, label_smoothing=0.0)
CLASSES = 10


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------
def make_cnn(seed: int = 0, dtype: Any = np.float32) -> nn.Module:
    """(N, 1, 8, 8) images -> (N, 10) logits."""
    rng = np.random.default_rng(seed)

    def block(c_in: int, c_out: int) -> list[nn.Module]:
        # The convolution's bias would be cancelled by BatchNorm's mean subtraction: leave it out.
        return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False, dtype=dtype, rng=rng),
                nn.BatchNorm2d(c_out, dtype=dtype), nn.ReLU()]

    return nn.Sequential(
        *block(1, 32),            # (N, 32, 8, 8)
        *block(32, 32),
        nn.MaxPool2d(2),          # (N, 32, 4, 4)
        *block(32, 64),
        nn.MaxPool2d(2),          # (N, 64, 2, 2)
        nn.Flatten(),             # (N, 256)
        nn.Linear(256, CLASSES, dtype=dtype, rng=rng),
    )


def make_mlp(seed: int = 0, dtype: Any = np.float32, hidden: int = 128) -> nn.Module:
    """(N, 1, 8, 8) or (N, 64) images -> (N, 10) logits, one hidden layer."""
    rng = np.random.default_rng(seed)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, hidden, dtype=dtype, rng=rng),
        nn.ReLU(),
        nn.Linear(hidden, CLASSES, dtype=dtype, rng=rng),
    )


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def make_loaders(batch_size: int = 32, seed: int = 0, dtype: Any = np.float32,
                 splits: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> dict[str, DataLoader]:
    """{"train": shuffled, seeded loader over the 1437 training images, "test": the 360 test images}.

    `splits` replaces the standard split: {"train": (images, labels), "test": (images, labels)}."""
    if splits is None:
        splits = {name: load_digits(name, dtype=dtype) for name in ("train", "test")}
    train = TensorDataset(np.asarray(splits["train"][0], dtype), np.asarray(splits["train"][1]))
    test = TensorDataset(np.asarray(splits["test"][0], dtype), np.asarray(splits["test"][1]))
    return {
        "train": DataLoader(train, batch_size=batch_size, shuffle=True, seed=seed),
        "test": DataLoader(test, batch_size=512),
    }


def random_shift(images: np.ndarray, rng: np.random.Generator, max_shift: int = 1) -> np.ndarray:
    """Move each (N, C, H, W) image by its own random offset of up to `max_shift` pixels in each
    direction, filling with zeros. One slice copy per offset, not one per image."""
    N, C, H, W = images.shape
    s = max_shift
    padded = np.pad(images, ((0, 0), (0, 0), (s, s), (s, s)))
    dy, dx = rng.integers(0, 2 * s + 1, N), rng.integers(0, 2 * s + 1, N)
    out = np.empty_like(images)
    for a in range(2 * s + 1):
        for b in range(2 * s + 1):
            pick = (dy == a) & (dx == b)
            out[pick] = padded[pick, :, a : a + H, b : b + W]
    return out


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
def evaluate(model: nn.Module, loader: DataLoader,
             loss_fn: Callable[[Tensor, Tensor], Tensor] = F.cross_entropy) -> dict[str, Any]:
    """Mean loss, accuracy, and every prediction and label, in eval mode without a graph.

    `loss_fn(logits, labels)` returns a batch mean (the same function as in training, so that
    the train and test curves are comparable)."""
    was_training = model.training
    model.eval()
    losses, preds, labels = [], [], []
    with no_grad():
        for x, y in loader:
            logits = model(x)
            losses.append(loss_fn(logits, y).item() * len(y))
            preds.append(logits.data.argmax(axis=1))
            labels.append(y.data)
    model.train(was_training)
    preds_all, labels_all = np.concatenate(preds), np.concatenate(labels)
    return {
        "loss": float(np.sum(losses) / len(labels_all)),
        "accuracy": float(np.mean(preds_all == labels_all)),
        "predictions": preds_all,
        "labels": labels_all,
    }


def weights(model: nn.Module) -> dict[str, np.ndarray]:
    """model.state_dict() as a plain {name: ndarray} (what a checkpoint, or a grader, reads)."""
    return {str(k): np.array(getattr(v, "data", v)) for k, v in model.state_dict().items()}


def cosine_lr(base_lr: float, step: int, total_steps: int) -> float:
    r"""$\text{lr}_t = \text{lr}_0 \cdot \tfrac12 (1 + \cos(\pi t / T))$: from lr_0 down to 0 by the last step."""
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * step / total_steps))


def train_step(model: nn.Module, x: Tensor, y: Tensor, optimizer: optim.Optimizer,
               loss_fn: Callable[[Tensor, Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """One step of gradient descent on one batch; returns (loss, logits).

    Forward the batch, measure the loss, clear the old gradients, backpropagate, update."""
    logits = model(x)
    loss = loss_fn(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, logits


def train(
    model: nn.Module,
    loaders: dict[str, DataLoader],
    epochs: int,
    optimizer: optim.Optimizer,
    *,
    loss_fn: Callable[[Tensor, Tensor], Tensor] = F.cross_entropy,
    schedule: Callable[[float, int, int], float] | None = cosine_lr,
    augment: Callable[[np.ndarray], np.ndarray] | None = None,
    progress: bool = True,
    desc: str = "train",
) -> dict[str, list[float]]:
    """Train for `epochs` passes over loaders["train"], evaluating on loaders["test"] after each.

    `schedule(base_lr, step, total_steps)` sets every group's learning rate before each step;
    `augment` transforms each batch's raw images. Returns the history: per epoch "train_loss",
    "train_accuracy" (measured on the fly, in train mode), "test_loss", "test_accuracy", and
    "seconds" (cumulative wall time, evaluation included).
    """
    try:
        from tqdm import tqdm  # the text bar: tqdm.auto would need ipywidgets inside notebooks
    except ImportError:  # a student's environment may not have it: no bar then
        progress = False
        tqdm = _NoBar

    history: dict[str, list[float]] = {
        k: [] for k in ("train_loss", "train_accuracy", "test_loss", "test_accuracy", "seconds")}
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    total = epochs * len(loaders["train"])
    step = 0
    start = time.perf_counter()
    bar = tqdm(total=total, desc=desc, unit="batch", disable=not progress, leave=True)
    model.train()
    for _ in range(epochs):
        loss_sum, correct, seen = 0.0, 0, 0
        for x, y in loaders["train"]:
            if schedule is not None:
                for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
                    group["lr"] = schedule(base, step, total)
            if augment is not None:
                x = Tensor(augment(x.data))
            loss, logits = train_step(model, x, y, optimizer, loss_fn)
            step += 1
            n = len(y)
            loss_sum += loss.item() * n
            correct += int(np.sum(logits.data.argmax(axis=1) == y.data))
            seen += n
            bar.update()
        test = evaluate(model, loaders["test"], loss_fn)
        history["train_loss"].append(loss_sum / seen)
        history["train_accuracy"].append(correct / seen)
        history["test_loss"].append(test["loss"])
        history["test_accuracy"].append(test["accuracy"])
        history["seconds"].append(time.perf_counter() - start)
        bar.set_postfix(loss=f"{loss_sum / seen:.3f}", test_acc=f"{test['accuracy']:.3f}")
    bar.close()
    return history


class _NoBar:
    """What `train` uses for a progress bar when tqdm is not installed: nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def update(self, *args: Any) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Limit NumPy's BLAS to n threads inside the block (None: leave it alone).

    The matrix products here are small (a few MFLOP each), so a second BLAS thread gains little,
    and on a machine shared with other work a waiting BLAS thread is far worse: one 32x288 by
    288x2048 float32 product measured 0.9 ms with one thread and 21 ms with two on a busy
    2-core box. threadpoolctl comes with scikit-learn, which `load_digits` needs anyway.
    """
    if n is None:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without it, train with whatever the BLAS does by default
        yield
        return
    with threadpool_limits(limits=n, user_api="blas"):
        yield


def fit(
    model_name: str, seed: int = 0, epochs: int | None = None, progress: bool = True, threads: int | None = 1,
    splits: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[nn.Module, dict[str, list[float]], dict[str, Any]]:
    """Build, train and evaluate "cnn" or "mlp" with the example's settings.

    Returns (model, history, final test evaluation); the same seed gives the same model, batches
    and augmentation, hence the same numbers. `splits` replaces the standard train/test split
    (see `make_loaders`).
    """
    settings: dict[str, Any] | None = {"cnn": CNN_SETTINGS, "mlp": MLP_SETTINGS}.get(model_name)
    if settings is None:
        raise ValueError(f"fit: model must be 'cnn' or 'mlp', got {model_name!r}")
    model = make_cnn(seed) if model_name == "cnn" else make_mlp(seed)
    loaders = make_loaders(settings["batch_size"], seed, splits=splits)
    optimizer = optim.Adam(model.parameters(), lr=settings["lr"])
    aug_rng = np.random.default_rng(seed + 1)
    augment = (lambda images: random_shift(images, aug_rng)) if settings["augment"] else None
    smoothing = settings["label_smoothing"]

    def loss_fn(logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(logits, target, label_smoothing=smoothing)

    with blas_threads(threads):
        history = train(
            model, loaders, epochs or settings["epochs"], optimizer,
            loss_fn=loss_fn, augment=augment, progress=progress, desc=model_name,
        )
        final = evaluate(model, loaders["test"], loss_fn)
    return model, history, final


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------
def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, num_classes: int = CLASSES) -> np.ndarray:
    """(num_classes, num_classes) counts: row = true class, column = predicted class."""
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (np.asarray(labels), np.asarray(predictions)), 1)  # add.at: a pair can repeat
    return cm


def format_confusion(cm: np.ndarray) -> str:
    width = max(3, len(str(cm.max())) + 1)
    head = "true\\pred" + "".join(f"{j:>{width}}" for j in range(cm.shape[1]))
    rows = [f"{i:>9}" + "".join(f"{v:>{width}}" for v in row) for i, row in enumerate(cm)]
    return "\n".join([head, *rows])


def plot_history(histories: dict[str, dict[str, list[float]]], path: str | Path,
                 loss_notes: dict[str, str] | None = None) -> Path:
    """Loss and accuracy per epoch, train and test, one color per model; saved as PNG.

    `loss_notes` adds a remark to a model's loss legend, e.g. {"CNN": "label smoothing 0.1"}:
    a smoothed loss cannot go below the smoothed target's entropy, so its curve sits higher."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    notes = loss_notes or {}
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for (name, h), color in zip(histories.items(), ("tab:blue", "tab:orange", "tab:green"), strict=False):
        epochs = np.arange(1, len(h["train_loss"]) + 1)
        note = f" ({notes[name]})" if name in notes else ""
        ax_loss.plot(epochs, h["train_loss"], color=color, linestyle="--", label=f"{name} train{note}")
        ax_loss.plot(epochs, h["test_loss"], color=color, label=f"{name} test{note}")
        ax_acc.plot(epochs, np.array(h["train_accuracy"]) * 100, color=color, linestyle="--", label=f"{name} train")
        ax_acc.plot(epochs, np.array(h["test_accuracy"]) * 100, color=color, label=f"{name} test")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy (log scale)", yscale="log", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy (%)", title="accuracy", ylim=(80, 100.5))
    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_confusion(cm: np.ndarray, path: str | Path, title: str = "confusion matrix") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.5))
    ax.imshow(cm, cmap="Blues")
    for (i, j), v in np.ndenumerate(cm):
        if v:
            ax.text(j, i, str(v), ha="center", va="center", color="white" if v > cm.max() / 2 else "black", fontsize=8)
    ax.set(xlabel="predicted", ylabel="true", title=title, xticks=range(cm.shape[1]), yticks=range(cm.shape[0]))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> dict[str, dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("cnn", "mlp", "both"), default="both")
    parser.add_argument("--epochs", type=int, default=None, help="default: 15 for the CNN, 20 for the MLP")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("_build/train_digits"))
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads (0: the library's default); see blas_threads")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    names = ["mlp", "cnn"] if args.model == "both" else [args.model]
    histories, results, notes = {}, {}, {}
    for name in names:
        t0 = time.perf_counter()
        model, history, final = fit(name, args.seed, args.epochs, progress=not args.no_progress,
                                    threads=args.threads or None)
        seconds = time.perf_counter() - t0
        cm = confusion_matrix(final["labels"], final["predictions"])
        histories[name.upper()] = history
        smoothing = {"cnn": CNN_SETTINGS, "mlp": MLP_SETTINGS}[name]["label_smoothing"]
        if smoothing:
            notes[name.upper()] = f"label smoothing {smoothing}"
        results[name] = {"accuracy": final["accuracy"], "seconds": seconds, "confusion": cm}
        png = plot_confusion(cm, args.out / f"confusion_{name}.png",
                             f"{name.upper()}: test accuracy {final['accuracy']:.2%}")
        print(f"\n{name.upper()} ({sum(p.size for p in model.parameters())} parameters, seed {args.seed}): "
              f"test accuracy {final['accuracy']:.2%} "
              f"({int(np.trace(cm))}/{cm.sum()}), trained in {seconds:.1f} s")
        print(format_confusion(cm))
        print(f"saved {png}")
    curves = plot_history(histories, args.out / "curves.png", notes)
    print(f"saved {curves}")
    print(f"wall time {time.perf_counter() - start:.1f} s")
    return results


if __name__ == "__main__":
    # `python -m` runs this file as a second copy of the module, `__main__`; run the package's own
    # copy, the one whose train_step the kit's answer loader plugs a student's answer into.
    from solutions import training
    training.main()
