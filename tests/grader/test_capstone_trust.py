"""The capstone (a06-train-step) can only be passed by training with the student's own engine.

Hostile a06 answers that scored 10/10 against the check that let the sandbox train and report
(issue 19, item 3), each judged as `autograder grade` judges a student (the reference a01..a05
notebooks as the earlier ones, this notebook's answer cell replaced), must earn nothing, with a
message that names what is wrong; and the held-out images never reach the sandbox.
"""
from __future__ import annotations

import base64
import io
import textwrap

import numpy as np
import pytest

from autograder.course import catalogue
from autograder.judge.session import Session

from support import REPO, judging

SOURCE = REPO / "assignments" / "source"
EXERCISE = "a06-train-step"

pytestmark = pytest.mark.slow


def judged(answer: str | None = None):
    """The verdict on a06 with the reference earlier notebooks and `answer` as the train_step cell."""
    earlier = [(a, judging.source_cells(a)) for a in sorted(p.name for p in judging.SOURCE.iterdir()) if a < "a06"]
    verdict = judging.verdict(EXERCISE, answers={EXERCISE: answer}, earlier=earlier)
    assert not verdict.detail, verdict.detail
    return verdict


HONEST_STEP = """
def train_step(model, x, y, optimizer, loss_fn):
    logits = model(x)
    loss = loss_fn(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, logits
"""


@pytest.fixture(scope="module")
def pretrained() -> str:
    """Weights of the CNN trained (by the reference) on all 1797 digits, the held-out ones included,
    as a base64 .npz: what a student could embed in a notebook."""
    from solutions import training as R
    from solutions.data import load_digits
    images = np.concatenate([load_digits("train")[0], load_digits("test")[0]])
    labels = np.concatenate([load_digits("train")[1], load_digits("test")[1]])
    model, _, _ = R.fit("cnn", seed=0, epochs=2, progress=False,
                        splits={"train": (images, labels), "test": (images[:10], labels[:10])})
    buffer = io.BytesIO()
    np.savez(buffer, **R.weights(model))
    return base64.b64encode(buffer.getvalue()).decode()


def test_numpy_stand_ins_for_the_engine_earn_nothing():
    """nn.Linear and optim.SGD replaced by NumPy classes (they pass a one-step check on their own)."""
    answer = HONEST_STEP + textwrap.dedent("""
        import numpy as np
        import coursekit.engine.nn as knn
        import coursekit.engine.optim as koptim

        class Linear:
            def __init__(self, n_in, n_out, dtype="float32", rng=None):
                self.w, self.b = np.zeros((n_out, n_in)), np.zeros(n_out)
            def __call__(self, x):
                return x @ self.w.T + self.b

        class SGD:
            def __init__(self, params, lr):
                self.params, self.lr = list(params), lr

        knn.Linear, koptim.SGD = Linear, SGD
        """)
    verdict = judged(answer)
    assert not verdict.passed and "nn.Linear is not your engine's nn.Linear" in verdict.message, verdict.message


@pytest.mark.parametrize("how", ["embedded", "lstsq"])
def test_weights_made_elsewhere_earn_nothing(how, pretrained):
    """An honest train_step that, late in training, puts weights made elsewhere into the model:
    pretrained ones embedded in the notebook (trained on every digit, the held-out ones included),
    or a last layer fitted by least squares, not by the engine, on the images it was sent."""
    swap = {
        "embedded": f"""
            import base64, io
            saved = np.load(io.BytesIO(base64.b64decode("{pretrained}")))
            for name, p in model.named_parameters():
                p.data[...] = saved[name]
            """,
        "lstsq": """
            from coursekit.engine import Tensor, no_grad
            features = Tensor(np.concatenate(seen_x))
            with no_grad():
                for layer in list(model)[:12]:
                    features = layer(features)
            f = np.concatenate([features.data, np.ones((len(features.data), 1))], axis=1)
            fitted = np.linalg.lstsq(f, np.eye(10)[np.concatenate(seen_y)], rcond=None)[0]
            model[12].weight.data[...] = fitted[:-1].T
            model[12].bias.data[...] = fitted[-1]
            """,
    }[how]
    answer = textwrap.dedent("""
        import numpy as np
        calls, seen_x, seen_y = [0], [], []

        def train_step(model, x, y, optimizer, loss_fn):
            if np.ndim(x.data) == 4:  # the CNN's batches (not a smaller model's)
                seen_x.append(np.array(x.data))
                seen_y.append(np.array(y.data))
            logits = model(x)
            loss = loss_fn(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            calls[0] += 1
            if calls[0] == 30:
        """) + textwrap.indent(textwrap.dedent(swap), " " * 8) + "    return loss, logits\n"
    verdict = judged(answer)
    assert not verdict.passed, f"{how}: weights made elsewhere pass"
    # The pretrained weights jump off Adam's path; the least-squares fit does too, and its forward
    # passes in train mode move the batch-norm statistics as no training step does.
    expected = {"embedded": "did not move by Adam's update", "lstsq": "at a training step, "}[how]
    assert expected in verdict.message, verdict.message


def test_a_lying_state_dict_over_a_model_that_never_moves_earns_nothing():
    """train_step never updates the model; its state_dict reports a shadow copy trained honestly."""
    answer = textwrap.dedent("""
        import copy
        from coursekit.engine import nn, optim

        shadows = {}
        honest_state_dict = nn.Module.state_dict

        def lying_state_dict(self):
            return honest_state_dict(shadows[id(self)][0]) if id(self) in shadows else honest_state_dict(self)

        def train_step(model, x, y, optimizer, loss_fn):
            if id(model) not in shadows:
                shadow = copy.deepcopy(model)
                shadows[id(model)] = (shadow, type(optimizer)(shadow.parameters(), lr=optimizer.param_groups[0]["lr"]))
            shadow, shadow_optimizer = shadows[id(model)]
            shadow_optimizer.param_groups[0]["lr"] = optimizer.param_groups[0]["lr"]
            shadow_loss = loss_fn(shadow(x), y)
            shadow_optimizer.zero_grad()
            shadow_loss.backward()
            shadow_optimizer.step()
            logits = model(x)
            loss = loss_fn(logits, y)
            optimizer.zero_grad()
            loss.backward()
            return loss, logits

        nn.Module.state_dict = lying_state_dict
        """)
    verdict = judged(answer)
    assert not verdict.passed and "state_dict" in verdict.message, verdict.message


def test_the_held_out_images_never_enter_the_sandbox(monkeypatch):
    """Every byte the judge sends to the sandbox, for the model answers (which pass): none of the
    held-out images is in it, and no train image is missing (the probe of the search)."""
    from autograder.exercises import a06_training as check
    sent: list[bytes] = []
    original = Session._send

    def recording(self, message, blobs):
        sent.extend(bytes(b) for b in blobs)
        return original(self, message, blobs)

    monkeypatch.setattr(Session, "_send", recording)
    verdict = judged()
    assert verdict.passed, verdict.message
    split = check._split(np.random.default_rng(catalogue.exercise(EXERCISE).seed))
    train = {image.tobytes() for image in split["train"][0]}
    held_out = [image for image in split["test"][0] if image.tobytes() not in train]  # a few digits repeat
    assert len(held_out) > 300
    data = b"".join(sent)
    assert sum(image.tobytes() in data for image in split["train"][0][:20]) > 0  # the search finds what is sent
    leaked = [i for i, image in enumerate(held_out)
              if image.tobytes() in data or image.astype(np.float64).tobytes() in data]
    assert not leaked, f"{len(leaked)} held-out images were sent to the sandbox"
