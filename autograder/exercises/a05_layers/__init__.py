"""Hidden checks of a05_layers: the Module, initialization, layers, the loss and its numerical
gradient, optimizers and mini-batches.

The exercises are `solutions/nn/module.py`'s `Module` (its registration, walks and state dict),
functions of `solutions/nn/` (fan_in_and_fan_out, kaiming_uniform_, xavier_uniform_, xavier_normal_,
linear, dropout, batch_norm, cross_entropy, numerical_gradient), `solutions/optim.py` (SGD._update,
Adam._update) and `solutions/data.py` (DataLoader.__iter__). Each is graded by the trusted judge: the
student's answer runs in the sandbox's engine, where every other exercise is the reference, on
inputs built there with that engine (Tensors, modules, generators, datasets, running-statistics
arrays); the same case runs through the reference engine here, and only plain data (arrays,
numbers) crosses, so gradients are checked fully. Random parts (initialization, dropout masks,
shuffling) draw from generators made in the sandbox and are checked by their contract, not by the
reference's exact draws: bounds and variances, mask values and rates, permutations,
reproducibility from the given generator. Optimizers are run for several steps with gradients set
by hand and compared with PyTorch's update rules. Messages name the kind of mistake.
"""
# The submodules in the notebook's order: @graded declares each exercise as its module is imported.
from . import module, init, functional, numerical, optim, dataloader  # noqa: F401, I001
