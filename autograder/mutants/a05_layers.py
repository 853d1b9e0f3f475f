"""Classic student bugs in a05_layers (init, layers, loss, optimizers, batches), one solution region each.

`autograder check a05_layers` plants each one in the source notebook and expects it to lose points on
its own exercise only; `tests/test_exercises.py` plants each one in the solutions/ source and
expects the hidden check to fail with a message containing `EXPECTED[mutant id]`.
"""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(
        id="fan-no-receptive-field",
        exercise="a05-fan-in-fan-out",
        find="receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1",
        replace="receptive = 1",
        why="a conv weight's fans without the kernel's receptive field",
    ),
    Mutant(
        id="kaiming-no-sqrt3",
        exercise="a05-kaiming-uniform",
        find="bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)",
        replace="bound = _kaiming_std(tensor, a, mode, nonlinearity)",
        why="the standard deviation used as the uniform bound: the variance is 3 times too small",
    ),
    Mutant(
        id="linear-no-transpose",
        exercise="a05-linear",
        find="y = x @ weight.T",
        replace="y = x @ weight",
        why="x W instead of x W^T for a weight stored (out_features, in_features)",
    ),
    Mutant(
        id="dropout-no-scaling",
        exercise="a05-dropout",
        find="mask = (draws >= p).astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))",
        replace="mask = (draws >= p).astype(x.dtype)",
        why="dropout without the inverse scaling: the expected output shrinks by 1 - p",
    ),
    Mutant(
        id="dropout-keeps-p",
        exercise="a05-dropout",
        find="(draws >= p)",
        replace="(draws < p)",
        why="keeps each unit with probability p instead of dropping it with probability p",
    ),
    Mutant(
        id="batch-norm-unbiased-normalization",
        exercise="a05-batch-norm",
        find="var = (centered * centered).mean(axis=axes, keepdims=True)",
        replace="var = (centered * centered).sum(axis=axes, keepdims=True) / (n - 1)",
        why="normalizes with the unbiased variance (n - 1) instead of the biased one",
    ),
    Mutant(
        id="batch-norm-momentum-inverted",
        exercise="a05-batch-norm",
        find=("running_mean *= 1.0 - momentum\n            running_mean += momentum * mean.data.reshape(C)\n"
              "            running_var *= 1.0 - momentum\n"
              "            running_var += momentum * var.data.reshape(C) * (n / (n - 1))"),
        replace=("running_mean *= momentum\n            running_mean += (1.0 - momentum) * mean.data.reshape(C)\n"
                 "            running_var *= momentum\n"
                 "            running_var += (1.0 - momentum) * var.data.reshape(C) * (n / (n - 1))"),
        why="momentum taken as the weight of the old running statistic (Keras' convention), not of the new one",
    ),
    Mutant(
        id="batch-norm-running-var-biased",
        exercise="a05-batch-norm",
        find="running_var += momentum * var.data.reshape(C) * (n / (n - 1))",
        replace="running_var += momentum * var.data.reshape(C)",
        why="running_var tracks the biased batch variance; PyTorch tracks the unbiased one",
    ),
    Mutant(
        id="cross-entropy-overflow",
        exercise="a05-cross-entropy",
        find="log_probs = log_softmax(logits, axis=1)",
        replace="log_probs = (logits.exp() / logits.exp().sum(axis=1, keepdims=True)).log()",
        why="log of the literal softmax: exp overflows for large logits",
    ),
    Mutant(
        id="cross-entropy-smoothing-sum",
        exercise="a05-cross-entropy",
        find="label_smoothing * log_probs.mean(axis=1)",
        replace="label_smoothing * log_probs.sum(axis=1)",
        why="label smoothing over the sum of the classes' log-probabilities instead of their mean",
    ),
    Mutant(
        id="sgd-nesterov-swapped",
        exercise="a05-sgd",
        find='g = g + mu * buf if group["nesterov"] else buf',
        replace='g = buf + mu * g if group["nesterov"] else buf',
        why="Nesterov's direction written b + mu g instead of g + mu b",
    ),
    Mutant(
        id="sgd-weight-decay-sign",
        exercise="a05-sgd",
        find="g = g + wd * p.data",
        replace="g = g - wd * p.data",
        why="weight decay with the wrong sign: the weights grow",
    ),
    Mutant(
        id="sgd-dampens-first-step",
        exercise="a05-sgd",
        find='buf = state["momentum_buffer"] = np.array(g, copy=True)',
        replace='buf = state["momentum_buffer"] = (1 - group["dampening"]) * g',
        why="dampening applied to the first step too (PyTorch starts the buffer at g)",
    ),
    Mutant(
        id="adam-no-bias-correction",
        exercise="a05-adam",
        find="p.data -= (lr / bias_correction1) * (m / denom)",
        replace="p.data -= lr * m / (np.sqrt(v) + eps)",
        why="Adam without bias correction: the early steps are too large (about 3x at the first, default betas)",
    ),
    Mutant(
        id="adam-eps-inside-sqrt",
        exercise="a05-adam",
        find="denom = np.sqrt(v) / math.sqrt(bias_correction2) + eps",
        replace="denom = np.sqrt(v / bias_correction2 + eps)",
        why="eps added under the square root",
    ),
    Mutant(
        id="dataloader-always-drops-last",
        exercise="a05-dataloader",
        find="stop = n - n % self.batch_size if self.drop_last else n",
        replace="stop = n - n % self.batch_size",
        why="the last, smaller batch is dropped even without drop_last",
    ),
    Mutant(
        id="dataloader-reseeds-every-epoch",
        exercise="a05-dataloader",
        find="order = self.rng.permutation(n) if self.shuffle else np.arange(n)",
        replace="order = np.random.default_rng(0).permutation(n) if self.shuffle else np.arange(n)",
        why="a generator seeded afresh in every epoch: every epoch has the same order",
    ),
]

# The kind of mistake each mutant's hidden-test message must name (checked by tests/test_exercises.py).
EXPECTED = {
    "fan-no-receptive-field": "receptive field",
    "kaiming-no-sqrt3": "sqrt(3) is missing",
    "linear-no-transpose": "y = x W^T + b",
    "dropout-no-scaling": "scales the kept units by 1/(1-p)",
    "dropout-keeps-p": "yours drops 1 - p",
    "batch-norm-unbiased-normalization": "*biased* batch variance",
    "batch-norm-momentum-inverted": "weight of the *new* batch statistic",
    "batch-norm-running-var-biased": "*unbiased* batch variance",
    "cross-entropy-overflow": "overflows for large logits",
    "cross-entropy-smoothing-sum": "*mean* over the K classes",
    "sgd-nesterov-swapped": "Nesterov",
    "sgd-weight-decay-sign": "weight decay adds",
    "sgd-dampens-first-step": "without dampening",
    "adam-no-bias-correction": "bias correction is missing",
    "adam-eps-inside-sqrt": "after the square root",
    "dataloader-always-drops-last": "the last, smaller batch is kept",
    "dataloader-reseeds-every-epoch": "every epoch has the same order",
}
