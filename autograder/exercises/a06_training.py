"""Hidden check of a06_training, the capstone: the student's own engine trains chapter 6's CNN.

Unlike every other exercise, `train_step` is judged on the student's **whole engine**
(`whole_engine=True`): the sandbox's kit has every exercise of the course stubbed, and the
judge fills it with the student's answers from their submitted notebooks of a01..a05 (restored
against the source notebooks), then with this notebook's. So the grade says what the student's
engine reaches, not what the reference reaches around one answer.

The verdict is decided here, from plain data: the student's engine trains the CNN in the sandbox
on a split of the digits this check draws (the student cannot know which images are held out);
the trained weights come back as arrays and the *reference* engine evaluates them on the held-out
images. When the accuracy falls short, the message lists which of the student's pieces fail a
gradient check (`coursekit.diagnose`, run in the sandbox: it only shapes the message).
"""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import kind, run, time_limit, type_name
from autograder.judge.judge import student_module
from autograder.judge.registry import GradingFailure
from autograder.spec import graded

TARGET = 0.97           # test accuracy the student's engine must reach
TRAIN_SECONDS = 240.0   # the CNN's 15 epochs: 10-16 s on the reference answers (teaching kernels), 2 cores, load 4
SMALL_STEP_SECONDS = 30.0


def _split(rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A random 1437 / 360 split of the 1797 digits (the standard split's sizes, other images)."""
    from solutions.data import load_digits
    images = np.concatenate([load_digits("train")[0], load_digits("test")[0]])
    labels = np.concatenate([load_digits("train")[1], load_digits("test")[1]])
    order = rng.permutation(len(labels))
    train, test = order[:1437], order[1437:]
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
    from autograder.judge.judge import current
    return current().module(name)


def _weights(training, model) -> dict[str, np.ndarray]:
    weights = run("model.state_dict() (your Module of a05)", training.weights, model)
    if not isinstance(weights, dict) or not all(isinstance(v, np.ndarray) for v in weights.values()):
        raise GradingFailure("model.state_dict() must map names to the parameters' and buffers' arrays "
                             "(a05's Module)")
    return weights


def _accuracy(weights: dict[str, np.ndarray], split) -> float:
    """The reference CNN with the student's trained weights, on the held-out images."""
    from solutions import training as R
    model = R.make_cnn(0)
    expected = {k: v.shape for k, v in R.weights(model).items()}
    got = {k: v.shape for k, v in weights.items()}
    if expected != got:
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        detail = (f"missing {missing[:4]}" if missing else "") + (f" unexpected {extra[:4]}" if extra else "")
        if not detail:
            detail = "shapes differ from the parameters' and buffers'"
        raise GradingFailure(f"the trained CNN's state_dict does not match the CNN's parameters and buffers "
                             f"({detail.strip()}): look at your Module (a05)")
    model.load_state_dict(weights)
    loaders = R.make_loaders(512, 0, splits=split)
    return R.evaluate(model, loaders["test"])["accuracy"]


def _one_step(train_step) -> None:
    """A step on a tiny model with plain SGD: the loss is returned, the gradients are this batch's
    only, and the parameters moved by -lr * grad."""
    S = student_module("solutions")
    training = student_module("solutions.training")
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((6, 4)), np.array([0, 1, 2, 0, 1, 2])
    model = S.nn.Linear(4, 3, dtype="float64", rng=_kit_module("numpy").random.default_rng(0))
    before = training.weights(model)
    optimizer = S.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = S.nn.functional.cross_entropy
    for p in model.parameters():  # a stale gradient from an earlier batch: zero_grad must clear it
        p.grad = S.Tensor(np.full(p.shape, 100.0))  # (stale, below)
    result = run("train_step", train_step, model, S.Tensor(x), S.Tensor(y), optimizer, loss_fn)
    if not (kind(result) in ("object",) and type_name(result) in ("tuple", "list")):
        raise GradingFailure(f"train_step must return (loss, logits), got a {type_name(result)}")
    if len(result) != 2:
        raise GradingFailure(f"train_step must return two things, (loss, logits), got {len(result)}")
    loss, logits = result[0], result[1]
    if type_name(loss) != "Tensor" or type_name(logits) != "Tensor":
        raise GradingFailure("train_step returns (loss, logits), both Tensors")

    from solutions import Tensor, nn
    from solutions.nn import functional as F
    reference = nn.Linear(4, 3, dtype=np.float64)
    reference.load_state_dict(before)
    want_logits = reference(Tensor(x))
    want_loss = F.cross_entropy(want_logits, Tensor(y))
    want_loss.backward()
    if not np.allclose(np.asarray(logits.data), want_logits.data, rtol=1e-6, atol=1e-8):
        raise GradingFailure("the logits train_step returns are not model(x) before the update")
    if not np.isclose(float(loss.item()), want_loss.item(), rtol=1e-6):
        raise GradingFailure("the loss train_step returns is not loss_fn(model(x), y) before the update")
    after = training.weights(model)
    grads = {"weight": reference.weight.grad.data, "bias": reference.bias.grad.data}
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
        if not np.allclose(moved, 0.5 * grads[name], rtol=1e-5, atol=1e-8):
            raise GradingFailure("the parameters did not move by -lr * (this batch's gradient): the order is "
                                 "zero_grad, backward, step")


@graded("a06-train-step", "solutions.training:train_step", points=10, title="train_step: your engine trains the CNN",
        whole_engine=True, budget=TRAIN_SECONDS + 60)
def check_train_step(train_step, rng):
    with time_limit(SMALL_STEP_SECONDS, "one train_step on a tiny model took too long; is there an endless loop?"):
        try:
            _one_step(train_step)
        except GradingFailure as failure:
            raise GradingFailure(str(failure).rstrip(".") + "." + _diagnosis()) from None
    split = _split(rng)
    training = student_module("solutions.training")
    seed = int(rng.integers(0, 1000))
    with time_limit(TRAIN_SECONDS, f"training the CNN on your engine took more than {TRAIN_SECONDS:g} s "
                                   "(the reference answers take 10 to 20 s): is one of your ops very slow?"):
        try:
            fitted = run("training the CNN on your engine (training.fit)", training.fit, "cnn", seed, None, False,
                         1, split)
        except GradingFailure as failure:
            raise GradingFailure(str(failure).rstrip(".") + "." + _diagnosis()) from None
        weights = _weights(training, fitted[0])
    accuracy = _accuracy(weights, split)
    if not accuracy >= TARGET:
        raise GradingFailure(f"the CNN trained on your engine reached {accuracy:.1%} test accuracy on held-out digits; "
                             f"{TARGET:.0%} is needed.{_diagnosis()}")
