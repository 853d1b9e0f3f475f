"""Hidden check of a06_training, the capstone: the student's own engine trains chapter 6's CNN.

Unlike every other exercise, `train_step` is judged on the student's **whole engine**
(`whole_engine=True`): the sandbox's kit has every exercise of the course stubbed, and the
judge fills it with the student's answers from their submitted notebooks of a01..a05 (restored
against the source notebooks), then with this notebook's. So the grade says what the student's
engine reaches, not what the reference reaches around one answer.

Everything in the sandbox is the student's to change, so nothing it says is believed without
a check made here, in the trusted process:

- the judge drives the training: it builds the CNN from the kit's classes, loads initial
  weights it drew itself, and sends every (augmented) batch to the student's `train_step`; the
  held-out images and labels never enter the sandbox;
- every step is replayed with the reference engine from the weights and statistics the
  student's model reported before it, with the same batch and learning rate: the loss, the
  logits (what the model computes must be what its reported weights compute), and the weights
  and batch-norm statistics after the step must agree (when the weights do not, the gradients
  are read to say whether the backward pass or Adam is wrong). So the trained weights can only
  come from the student's steps, each one a correct step of a correct engine: no jump to weights
  made elsewhere, no state_dict that reports something else than the model computes with;
- the held-out accuracy is measured here, with the reference engine, from the verified weights;
  in eval mode the student's model must compute what those weights compute on probe images.

When something falls short, the message names the failing piece and lists which of the
student's pieces fail a gradient check (`coursekit.diagnose`, run in the sandbox: it only shapes
the message).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    current,
    graded,
    kind,
    run,
    student_module,
    time_limit,
    type_name,
)
from solutions.training import blas_threads

# The budget: the fewest epochs and images that still separate a working engine from a broken
# one with a wide margin (benchmarks/bench_capstone.py measures it).
TARGET = 0.90           # held-out accuracy the student's engine must reach (the model answers: 96-98 %)
EPOCHS = 1
AUGMENT = False         # random one-pixel shifts: they pay off over 15 epochs, not over one
TRAIN_IMAGES = 1437     # the rest of the 1797 digits are held out (360, the standard split's size)
BATCH = 32
LR = 3e-3               # Adam, with a cosine decay to 0 over the run (chapter 6's recipe, no label smoothing)
PROBES = 64             # training images the trained model is probed with in eval mode
TRAIN_SECONDS = 120.0   # the training loop and its replay: 2-4 s with the model answers (2 cores, loaded)
SMALL_STEP_SECONDS = 30.0

# Where each parameter of the CNN lives, for messages (keys of the Sequential's state_dict).
LAYERS = {"0": "the first convolution", "1": "the first batch norm", "3": "the second convolution",
          "4": "the second batch norm", "7": "the third convolution", "8": "the third batch norm",
          "12": "the final linear layer"}


def _split(rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A random TRAIN_IMAGES / rest split of the 1797 digits (the held-out part stays here)."""
    from solutions.data import load_digits
    images = np.concatenate([load_digits("train")[0], load_digits("test")[0]]).astype(np.float32)
    labels = np.concatenate([load_digits("train")[1], load_digits("test")[1]])
    order = rng.permutation(len(labels))
    train, test = order[:TRAIN_IMAGES], order[TRAIN_IMAGES:]
    return {"train": (images[train], labels[train]), "test": (images[test], labels[test])}


def _diagnosis() -> str:
    """Which of the student's pieces fail a gradient check, as one sentence (or '')."""
    try:
        answers = _kit_module("coursekit.answers")
        problems = [str(p) for p in answers.diagnose(True)][:8]
    except Exception:  # noqa: BLE001 (the diagnosis only shapes the message)
        return ""
    if not problems:
        return " Every piece of your engine passes its gradient check: look at train_step itself."
    return " These pieces of your engine fail a gradient check: " + "; ".join(problems) + "."


def _kit_module(name: str):
    return current().module(name)


def _where(name: str) -> str:
    layer, _, what = name.partition(".")
    return f"{LAYERS.get(layer, 'layer ' + layer)}'s {what}"


# --------------------------------------------------------------------------------------------
# The student's engine, as the kit built it
# --------------------------------------------------------------------------------------------
def _kit_class(cls: Any, name: str) -> Any:
    """``cls`` (a proxy) must be a class or function of the course kit or of the student's own
    answers (loaded by the kit), not one a cell of this notebook put in its place."""
    module = ""
    if kind(cls) in ("type", "function"):
        try:
            module = str(current().request("getattr", cls, "__module__"))  # a proxy's own __module__ is local
        except Exception:  # noqa: BLE001 (a student's metaclass may do anything)
            module = "?"
    if not module.startswith("coursekit"):
        raise GradingFailure(f"{name} is not your engine's {name} (it was replaced by "
                             f"{'a class of this notebook' if module == '__main__' else 'something else'}): "
                             "the model must be trained by the engine you built in a01-a05, so leave its "
                             "classes in place")
    return cls


def _tensor_class(S: Any) -> Any:
    return _kit_class(S.Tensor, "Tensor")


def _weights(training, model) -> dict[str, np.ndarray]:
    weights = run("model.state_dict() (your Module of a05)", training.weights, model)
    if not isinstance(weights, dict) or not all(isinstance(v, np.ndarray) for v in weights.values()):
        raise GradingFailure("model.state_dict() must map names to the parameters' and buffers' arrays "
                             "(a05's Module)")
    return {str(k): v for k, v in weights.items()}


def _same_layout(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    want = {k: v.shape for k, v in expected.items()}
    have = {k: v.shape for k, v in got.items()}
    if want != have:
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        detail = (f"missing {missing[:4]}" if missing else "") + (f" unexpected {extra[:4]}" if extra else "")
        raise GradingFailure(f"the CNN's state_dict does not match its parameters and buffers "
                             f"({detail.strip() or 'shapes differ'}): look at your Module (a05)")


def _build_cnn(S: Any, rng: Any) -> Any:
    """Chapter 6's CNN (solutions.training.make_cnn), built in the sandbox from the kit's classes."""
    nn = S.nn
    Conv2d, BatchNorm2d, ReLU = (_kit_class(getattr(nn, n), f"nn.{n}") for n in ("Conv2d", "BatchNorm2d", "ReLU"))
    MaxPool2d, Flatten, Linear, Sequential = (_kit_class(getattr(nn, n), f"nn.{n}")
                                              for n in ("MaxPool2d", "Flatten", "Linear", "Sequential"))

    def block(c_in: int, c_out: int) -> list:
        return [Conv2d(c_in, c_out, 3, padding=1, bias=False, dtype="float32", rng=rng),
                BatchNorm2d(c_out, dtype="float32"), ReLU()]

    return run("building the CNN from your engine's layers", lambda: Sequential(
        *block(1, 32), *block(32, 32), MaxPool2d(2), *block(32, 64), MaxPool2d(2), Flatten(),
        Linear(256, 10, dtype="float32", rng=rng)))


# --------------------------------------------------------------------------------------------
# Comparing with the reference
# --------------------------------------------------------------------------------------------
def _near(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> bool:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return False
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    return bool(np.allclose(got, want, rtol=rtol, atol=atol * scale))


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return np.inf
    return float(np.linalg.norm(got - want) / (np.linalg.norm(want) + 1e-12))


class Reference:
    """The reference engine's CNN and Adam, stepped beside the student's: before each step it takes
    the weights and statistics the student's model reports, and makes the step a correct engine
    makes from there with the same batch and learning rate. Its Adam state is built from its own
    (correct) gradients, so the student's weights cannot drift from a correct run step by step."""

    def __init__(self, initial: dict[str, np.ndarray]):
        from solutions import optim
        from solutions import training as R
        self.model = R.make_cnn(0)
        self.model.load_state_dict(initial)
        self.model.train()
        self.params = dict(self.model.named_parameters())
        self.optimizer = optim.Adam(list(self.params.values()), lr=LR)

    def step(self, before: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, lr: float) -> dict[str, Any]:
        from solutions import Tensor
        from solutions import training as R
        from solutions.nn import functional as F
        self.model.load_state_dict(before)
        self.optimizer.param_groups[0]["lr"] = lr
        loss, logits = R.train_step(self.model, Tensor(x), Tensor(y), self.optimizer, F.cross_entropy)
        return {"loss": loss.item(), "logits": np.array(logits.data), "after": R.weights(self.model),
                "grads": {name: np.array(getattr(p.grad, "data", 0.0)) for name, p in self.params.items()}}


def _check_step(want: dict[str, Any], before: dict[str, np.ndarray], got_loss: float, got_logits: np.ndarray,
                after: dict[str, np.ndarray], params: dict[str, Any]) -> None:
    """The student's step against the reference's from the same state (see Reference)."""
    if not _near(got_logits, want["logits"], rtol=1e-3, atol=1e-3):
        raise GradingFailure("at a training step, the logits train_step returned are not what a correct engine "
                             "computes from the weights your model's state_dict reports: the forward pass of "
                             "your engine (convolution, batch norm, pooling, linear) or your Module's "
                             "state_dict is wrong")
    if not np.isclose(got_loss, want["loss"], rtol=1e-3, atol=1e-5):
        raise GradingFailure("at a training step, the loss train_step returned is not the cross-entropy of its "
                             "logits: look at cross_entropy and log_softmax")
    for name in want["after"]:
        moved, want_moved = after[name] - before[name], want["after"][name] - before[name]
        if _relative_error(moved, want_moved) <= 1e-2:
            continue
        if name not in params:
            raise GradingFailure(f"at a training step, {_where(name)} did not move as a correct batch norm moves "
                                 "it (running statistics go by momentum towards the batch's, the variance "
                                 "unbiased): look at batch_norm (a05)")
        grads = _grads(params)
        wrong = [n for n in want["grads"] if grads is not None and _relative_error(grads[n], want["grads"][n]) > 2e-3]
        if wrong:
            raise GradingFailure(f"at a training step, your engine's gradient of {_where(wrong[0])} differs from a "
                                 "correct engine's (same weights, same batch): a backward pass on its path is wrong")
        raise GradingFailure(f"at a training step, {_where(name)} did not move by Adam's update of its gradient "
                             "(or moved when it should not have): look at Adam._update (a05), or at train_step "
                             "if the weights are changed anywhere else")


# --------------------------------------------------------------------------------------------
# The one-step check: train_step's own contract, with messages for each classic mistake
# --------------------------------------------------------------------------------------------
def _one_step(train_step) -> None:
    """A step on a tiny model with plain SGD: the loss is returned, the gradients are this batch's
    only, and the parameters moved by -lr * grad."""
    S = student_module("solutions")
    training = student_module("solutions.training")
    Linear = _kit_class(S.nn.Linear, "nn.Linear")
    SGD = _kit_class(S.optim.SGD, "optim.SGD")
    Tensor = _tensor_class(S)
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((6, 4)), np.array([0, 1, 2, 0, 1, 2])
    model = Linear(4, 3, dtype="float64", rng=_kit_module("numpy").random.default_rng(0))
    before = training.weights(model)
    optimizer = SGD(model.parameters(), lr=0.5)
    loss_fn = S.nn.functional.cross_entropy
    for p in model.parameters():  # a stale gradient from an earlier batch: zero_grad must clear it
        p.grad = Tensor(np.full(p.shape, 100.0))  # (stale, below)
    result = run("train_step", train_step, model, Tensor(x), Tensor(y), optimizer, loss_fn)
    loss, logits = _unpack(result, Tensor)

    from solutions import Tensor as RTensor
    from solutions import nn
    from solutions.nn import functional as F
    reference = nn.Linear(4, 3, dtype=np.float64)
    reference.load_state_dict(before)
    want_logits = reference(RTensor(x))
    want_loss = F.cross_entropy(want_logits, RTensor(y))
    want_loss.backward()
    if not np.allclose(np.asarray(logits.data), want_logits.data, rtol=1e-6, atol=1e-8):
        raise GradingFailure("the logits train_step returns are not model(x) before the update")
    if not np.isclose(float(loss.item()), want_loss.item(), rtol=1e-6):
        raise GradingFailure("the loss train_step returns is not loss_fn(model(x), y) before the update")
    after = training.weights(model)
    grads = {"weight": reference.weight.grad.data, "bias": reference.bias.grad.data}  # type: ignore[union-attr]
    stale = 100.0
    for name in ("weight", "bias"):
        moved = before[name] - after[name]
        if np.allclose(moved, 0):
            raise GradingFailure("the parameters did not change: the order is zero_grad, backward, step "
                                 "(a step with no gradient moves nothing)")
        if np.allclose(moved, 0.5 * (grads[name] + stale)):
            raise GradingFailure("the update added this batch's gradient to one left from an earlier batch: "
                                 "call optimizer.zero_grad() before loss.backward()")
        if np.allclose(moved, 0.5 * stale):
            raise GradingFailure("the update used the gradient left from an earlier batch, not this one's: "
                                 "call optimizer.step() after loss.backward()")
        for times in (2, 3):  # backward run more than once: each run adds the batch's gradient again
            if np.allclose(moved, 0.5 * times * grads[name], rtol=1e-5, atol=1e-8):
                raise GradingFailure(f"the gradients are {times} times what one backward pass gives: call "
                                     "loss.backward() once per step (each call adds this batch's gradient again)")
        if not np.allclose(moved, 0.5 * grads[name], rtol=1e-5, atol=1e-8):
            raise GradingFailure("the parameters did not move by -lr * (this batch's gradient): the order is "
                                 "zero_grad, backward, step")


def _unpack(result: Any, Tensor: Any, checked: bool = True) -> tuple[Any, Any]:
    if not (kind(result) in ("object",) and type_name(result) in ("tuple", "list")):
        raise GradingFailure(f"train_step must return (loss, logits), got a {type_name(result)}")
    if len(result) != 2:
        raise GradingFailure(f"train_step must return two things, (loss, logits), got {len(result)}")
    loss, logits = result[0], result[1]
    if type_name(loss) != "Tensor" or type_name(logits) != "Tensor" or \
            (checked and not (isinstance(loss, Tensor) and isinstance(logits, Tensor))):
        raise GradingFailure("train_step returns (loss, logits), both Tensors of your engine")
    return loss, logits


# --------------------------------------------------------------------------------------------
# The training, driven and verified from here
# --------------------------------------------------------------------------------------------
def _grads(params: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """The gradients the step left in the parameters (None if train_step cleared them at its end)."""
    out = {}
    for name, p in params.items():
        grad = run("reading a parameter's .grad after train_step", lambda p=p: p.grad)
        if grad is None:
            return None
        out[name] = run("reading a parameter's .grad.data", lambda g=grad: np.asarray(g.data))
    return out


def _group(optimizer: Any) -> Any:
    """A handle to the optimizer's one parameter group, whose "lr" the judge sets before each step.

    ``param_groups`` comes back here as a copy; the judge gives the optimizer an equal list it
    holds a handle to (the same parameters, the same hyperparameters) and sets "lr" there."""
    session = current()
    groups = run("optimizer.param_groups (your Optimizer of a05)", lambda: optimizer.param_groups)
    if not (isinstance(groups, list) and len(groups) == 1 and isinstance(groups[0], dict) and "lr" in groups[0]):
        raise GradingFailure("optim.Adam must keep its parameters and hyperparameters in param_groups, a list "
                             "of dicts with an \"lr\" (a05's Optimizer)")
    group = session.request("ref", groups[0])
    run("setting optimizer.param_groups", lambda: setattr(optimizer, "param_groups", session.request("ref", [group])))
    return group


def train_and_verify(train_step, rng: np.random.Generator, split) -> dict[str, np.ndarray]:
    """Train the CNN on the student's engine with the judge's batches; return its verified weights."""
    from solutions import training as R
    S = student_module("solutions")
    training = student_module("solutions.training")
    Tensor = _tensor_class(S)
    initial = R.weights(R.make_cnn(int(rng.integers(0, 2**31))))
    model = _build_cnn(S, _kit_module("numpy").random.default_rng(0))
    _same_layout(_weights(training, model), initial)
    run("model.load_state_dict (your Module of a05)", model.load_state_dict, initial)
    loaded = _weights(training, model)
    _same_layout(loaded, initial)
    if not all(_near(loaded[k], initial[k], rtol=0, atol=0) for k in initial):
        raise GradingFailure("model.load_state_dict did not put the given arrays into the parameters and buffers "
                             "(a05's Module)")
    named = run("model.named_parameters() (your Module of a05)", lambda: list(model.named_parameters()))
    params = {str(name): p for name, p in named}
    if sorted(params) != sorted(k for k in initial if "running" not in k and "num_batches" not in k):
        raise GradingFailure("model.named_parameters() does not list the CNN's parameters (a05's Module)")
    if not all(isinstance(p, Tensor) for p in params.values()):
        raise GradingFailure("the CNN's parameters are not Tensors of your engine")
    Adam = _kit_class(S.optim.Adam, "optim.Adam")
    loss_fn = _kit_class(S.nn.functional.cross_entropy, "nn.functional.cross_entropy")
    optimizer = run("optim.Adam (your optimizer of a05)", lambda: Adam(list(params.values()), lr=LR))
    group = _group(optimizer)

    images, labels = split["train"]
    total = EPOCHS * -(-len(labels) // BATCH)
    reference = Reference(initial)
    before, step = loaded, 0
    run("model.train()", model.train)
    for _ in range(EPOCHS):
        order = rng.permutation(len(labels))
        for start in range(0, len(labels), BATCH):
            pick = order[start:start + BATCH]
            x, y = (R.random_shift(images[pick], rng) if AUGMENT else images[pick]), labels[pick]
            lr = R.cosine_lr(LR, step, total)
            group["lr"] = lr
            result = run("train_step", train_step, model, Tensor(x), Tensor(y), optimizer, loss_fn)
            loss, logits = _unpack(result, Tensor, checked=step == 0)
            got_logits = run("the logits train_step returned (logits.data)", lambda t=logits: np.asarray(t.data))
            got_loss = run("the loss train_step returned (loss.item())", lambda t=loss: float(t.item()))
            after = _weights(training, model)
            _same_layout(after, initial)
            _check_step(reference.step(before, x, y, lr), before, got_loss, got_logits, after, params)
            before, step = after, step + 1
    _probe(model, before, images[:PROBES], Tensor, training)
    return before


def _probe(model: Any, final: dict[str, np.ndarray], x: np.ndarray, Tensor: Any, training: Any) -> None:
    """In eval mode the student's model must compute what its reported weights compute."""
    from solutions import Tensor as RTensor
    from solutions import no_grad
    from solutions import training as R
    run("model.eval()", model.eval)
    got = run("your trained model, in eval mode", lambda: np.asarray(model(Tensor(x)).data))
    reference = R.make_cnn(0)
    reference.load_state_dict(final)
    reference.eval()
    with no_grad():
        want = reference(RTensor(x)).data
    if not _near(got, want, rtol=1e-3, atol=1e-3):
        raise GradingFailure("in eval mode, your trained model does not compute what the weights its state_dict "
                             "reports compute: look at Module.eval and state_dict, and batch_norm's evaluation "
                             "with the running statistics (a05)")
    again = _weights(training, model)
    if not all(_near(again[k], final[k], rtol=0, atol=0) for k in final):
        raise GradingFailure("your model's weights changed in eval mode: evaluation must not train")


def accuracy(weights: dict[str, np.ndarray], split) -> float:
    """The reference CNN with the trained weights, on the held-out images (here, never in the sandbox)."""
    from solutions import Tensor, no_grad
    from solutions import training as R
    model = R.make_cnn(0)
    model.load_state_dict(weights)
    model.eval()
    images, labels = split["test"]
    with no_grad():
        predictions = model(Tensor(images)).data.argmax(axis=1)
    return float(np.mean(predictions == labels))


@graded("a06-train-step", "solutions.training:train_step", points=10, title="train_step: your engine trains the CNN",
        whole_engine=True, budget=TRAIN_SECONDS + 60)
def check_train_step(train_step, rng):
    split = _split(rng)
    with time_limit(SMALL_STEP_SECONDS, "one train_step on a tiny model took too long; is there an endless loop?"):
        try:
            _one_step(train_step)
        except GradingFailure as failure:
            raise GradingFailure(str(failure).rstrip(".") + "." + _diagnosis(), failure.kind) from None
    with time_limit(TRAIN_SECONDS, f"training the CNN on your engine took more than {TRAIN_SECONDS:g} s "
                                   "(the reference answers take a few seconds): is one of your ops very slow?"):
        try:
            # One BLAS thread for the reference's steps, as in the sandbox: these products are small,
            # and a second thread waiting on a busy machine costs far more than it gains.
            with blas_threads(1):
                weights = train_and_verify(train_step, rng, split)
        except GradingFailure as failure:
            raise GradingFailure(str(failure).rstrip(".") + "." + _diagnosis(), failure.kind) from None
    got = accuracy(weights, split)
    if not got >= TARGET:
        raise GradingFailure(f"the CNN trained on your engine reached {got:.1%} test accuracy on held-out digits; "
                             f"{TARGET:.0%} is needed.{_diagnosis()}")
