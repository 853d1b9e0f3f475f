"""Classic student bugs in a05_layers (Module, init, layers, loss, numerical gradient, optimizers,
batches), one solution region each.

`autograder check a05_layers` plants each one in the source notebook and expects it to lose points on
its own exercise only; `tests/grader/test_exercises.py` plants each one in the solutions/ source and
expects the hidden check to fail with a message containing its `expect` phrase.
"""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(
        id="module-tensor-is-parameter",
        expect="a plain Tensor",
        exercise="a05-module",
        find="if isinstance(value, Parameter):",
        replace="if isinstance(value, Tensor):",
        why="any Tensor assigned to a module is registered as a parameter, not only a Parameter",
    ),
    Mutant(
        id="module-shared-module-twice",
        expect="reachable twice",
        exercise="a05-module",
        find="        if id(self) in memo:\n            return\n",
        replace="",
        why="named_modules without a memo: a module shared by two parents is walked twice",
    ),
    Mutant(
        id="module-shared-parameter-twice",
        expect="weight tying",
        exercise="a05-module",
        find="if p is not None and id(p) not in seen:",
        replace="if p is not None:",
        why="a tied weight is listed twice by named_parameters (an optimizer would step it twice)",
    ),
    Mutant(
        id="module-eval-children-only",
        expect="grandchildren",
        exercise="a05-module",
        find="for m in self.modules():",
        replace="for m in [self, *self.children()]:",
        why="train()/eval() set the flag on the direct children only, not on grandchildren",
    ),
    Mutant(
        id="module-state-dict-live-arrays",
        expect="must be copies",
        exercise="a05-module",
        find="(key, array.copy())",
        replace="(key, array)",
        why="state_dict returns the model's live arrays: training afterwards changes the checkpoint",
    ),
    Mutant(
        id="module-state-dict-no-buffers",
        expect="buffers (running statistics",
        exercise="a05-module",
        find=("            for name, b in m._buffers.items():\n                if b is not None:\n"
              "                    arrays[dot + name] = b\n"),
        replace="",
        why="state_dict forgets the buffers (BatchNorm's running statistics)",
    ),
    Mutant(
        id="module-load-rebinds-loop-variable",
        expect="nothing was loaded",
        exercise="a05-module",
        find="array[...] = state_dict[key]",
        replace="array = state_dict[key]",
        why="load_state_dict rebinds a loop variable instead of writing into the array: nothing is loaded",
    ),
    Mutant(
        id="module-load-no-shape-check",
        expect="even when NumPy could broadcast",
        exercise="a05-module",
        find=("        for key, array in own.items():\n            if key in state_dict and np.shape(state_dict[key]) "
              "!= array.shape:\n"),
        replace="        for key, array in own.items():\n            if False:\n",
        why="no shape check: a (1,) checkpoint value is broadcast silently into a (3,) bias",
    ),
    Mutant(
        id="module-load-partial",
        expect="leave the model as it was",
        exercise="a05-module",
        find=("        if errors:  # every check before any change: a failed load leaves the model as it was\n"
              "            raise RuntimeError("),
        replace=("        for key, array in own.items():\n"
                 "            if key in state_dict and np.shape(state_dict[key]) == array.shape:\n"
                 "                array[...] = state_dict[key]\n"
                 "        if errors:\n            raise RuntimeError("),
        why="a failing load raises only after it has already written the keys that matched",
    ),
    Mutant(
        id="module-load-ignores-missing-keys",
        expect="raise a RuntimeError that names the key",
        exercise="a05-module",
        find=("        if strict and missing:\n"
              "            errors.append(\"missing key(s): \" + \", \".join(repr(key) for key in missing))\n"),
        replace="",
        why="strict loading does not report the keys missing from the checkpoint",
    ),
    Mutant(
        id="module-setattr-no-parameter-type-check",
        expect="must raise a TypeError",
        exercise="a05-module",
        find=("            if value is not None:\n"
              "                raise TypeError(\n"
              "                    f\"{type(self).__name__}.{name} is a parameter: assign a Parameter (or None), \"\n"
              "                    f\"not {type(value).__name__}; to change its values write to .{name}.data\"\n"
              "                )\n"),
        replace="",
        why=("an ndarray assigned to a parameter's name silently replaces the Parameter "
             "(and drops it from the registry)"),
    ),
    Mutant(
        id="module-setattr-child-name-stays-a-child",
        expect="no longer a child",
        exercise="a05-module",
        find="            del modules[name]  # anything else in a child's place: no longer a child\n",
        replace="            pass\n",
        why="a child replaced by a plain value (None) stays registered as a child",
    ),
    Mutant(
        id="module-leading-dot",
        expect="no dot at the top",
        exercise="a05-module",
        find='yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo)',
        replace='yield from child.named_modules(f"{prefix}.{name}", memo)',
        why="top-level names start with a dot ('.body.0')",
    ),
    Mutant(
        id="module-named-parameters-ignores-recurse",
        expect="only the module's own parameters",
        exercise="a05-module",
        find="modules = self.named_modules(prefix) if recurse else [(prefix, self)]",
        replace="modules = self.named_modules(prefix)",
        why="recurse=False still lists the descendants' parameters",
    ),
    Mutant(
        id="module-train-returns-none",
        expect="returns the module itself",
        exercise="a05-module",
        find="            m.training = bool(mode)\n        return self\n",
        replace="            m.training = bool(mode)\n",
        why="train() returns None, so model.train().something fails",
    ),
    Mutant(
        id="fan-no-shape-check",
        expect="raise a ValueError",
        exercise="a05-fan-in-fan-out",
        find=("    if len(shape) < 2:\n"
              "        raise ValueError(f\"fan in and fan out need a weight with at least 2 dimensions, "
              "got shape {tuple(shape)}\")\n"),
        replace="",
        why="a 1-D shape is not rejected with a ValueError",
    ),
    Mutant(
        id="kaiming-ignores-rng",
        expect="draw from the generator `rng` you are given",
        exercise="a05-kaiming-uniform",
        find="return uniform_(tensor, -bound, bound, rng)",
        replace="return uniform_(tensor, -bound, bound)",
        why="the generator it is given is ignored: a seeded model differs every time",
    ),
    Mutant(
        id="xavier-normal-ignores-rng",
        expect="draw from the generator `rng` you are given",
        exercise="a05-xavier-normal",
        find="return normal_(tensor, 0.0, std, rng)",
        replace="return normal_(tensor, 0.0, std)",
        why="the generator it is given is ignored: a seeded model differs every time",
    ),
    Mutant(
        id="module-reassigned-parameter-moves-last",
        expect="keeps its position",
        exercise="a05-module",
        find="            params[name] = value  # a name assigned again keeps its place\n",
        replace="            params.pop(name, None)\n            params[name] = value\n",
        why="a parameter assigned again moves to the end of the order (the checkpoint's key order changes)",
    ),
    Mutant(
        id="module-setattr-no-buffer-type-check",
        expect="anything else is a TypeError",
        exercise="a05-module",
        find="            if value is not None and not isinstance(value, np.ndarray):\n",
        replace="            if False:\n",
        why="a list or a number assigned to a buffer's name is filed as the buffer",
    ),
    Mutant(
        id="module-state-keeps-none",
        expect="_state_arrays skips it",
        exercise="a05-module",
        find="                if p is not None:\n                    arrays[dot + name] = p.data\n",
        replace="                arrays[dot + name] = None if p is None else p.data\n",
        why="a parameter set to None (bias=False) still gets a key in the state",
    ),
    Mutant(
        id="module-load-returns-nothing",
        expect="yours returned None",
        exercise="a05-module",
        find="        return LoadResult(missing, unexpected)\n",
        replace="",
        why="load_state_dict returns None instead of LoadResult(missing, unexpected)",
    ),
    Mutant(
        id="fan-no-receptive-field",
        expect="receptive field",
        exercise="a05-fan-in-fan-out",
        find="receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1",
        replace="receptive = 1",
        why="a conv weight's fans without the kernel's receptive field",
    ),
    Mutant(
        id="kaiming-no-sqrt3",
        expect="sqrt(3) is missing",
        exercise="a05-kaiming-uniform",
        find="bound = math.sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity)",
        replace="bound = kaiming_std(tensor, a, mode, nonlinearity)",
        why="the standard deviation used as the uniform bound: the variance is 3 times too small",
    ),
    Mutant(
        id="xavier-uniform-no-gain",
        expect="the gain is missing",
        exercise="a05-xavier-uniform",
        find="bound = gain * math.sqrt(6.0 / (fan_in + fan_out))",
        replace="bound = math.sqrt(6.0 / (fan_in + fan_out))",
        why="the gain is ignored",
    ),
    Mutant(
        id="xavier-uniform-std-as-bound",
        expect="yours is the standard deviation",
        exercise="a05-xavier-uniform",
        find="math.sqrt(6.0 / (fan_in + fan_out))",
        replace="math.sqrt(2.0 / (fan_in + fan_out))",
        why="the normal version's standard deviation used as the uniform bound (variance 3 times too small)",
    ),
    Mutant(
        id="xavier-normal-variance-as-std",
        expect="yours passes the variance",
        exercise="a05-xavier-normal",
        find="std = gain * math.sqrt(2.0 / (fan_in + fan_out))",
        replace="std = gain * 2.0 / (fan_in + fan_out)",
        why="the variance passed where normal_ wants the standard deviation",
    ),
    Mutant(
        id="xavier-normal-raw-fans",
        expect="receptive field",
        exercise="a05-xavier-normal",
        find="fan_in, fan_out = fan_in_and_fan_out(tensor.shape)",
        replace="fan_out, fan_in = tensor.shape[:2]",
        why="a conv weight's fans read from shape[0] and shape[1], without the receptive field",
    ),
    Mutant(
        id="linear-error-without-shapes",
        expect="name both shapes",
        exercise="a05-linear",
        find="f\"linear: input has {x.shape[-1] if x.ndim else 0} features (shape {x.shape}) but the weight \"",
        replace="f\"linear: input has {x.shape[-1] if x.ndim else 0} features but the weight \"",
        why="the error for mismatched features does not name the shapes",
    ),
    Mutant(
        id="linear-no-transpose",
        expect="y = x W^T + b",
        exercise="a05-linear",
        find="y = x @ weight.T",
        replace="y = x @ weight",
        why="x W instead of x W^T for a weight stored (out_features, in_features)",
    ),
    Mutant(
        id="dropout-no-scaling",
        expect="scales the kept units by 1/(1-p)",
        exercise="a05-dropout",
        find="mask = (draws >= p).astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))",
        replace="mask = (draws >= p).astype(x.dtype)",
        why="dropout without the inverse scaling: the expected output shrinks by 1 - p",
    ),
    Mutant(
        id="dropout-keeps-p",
        expect="yours drops 1 - p",
        exercise="a05-dropout",
        find="(draws >= p)",
        replace="(draws < p)",
        why="keeps each unit with probability p instead of dropping it with probability p",
    ),
    Mutant(
        id="dropout-no-p-check",
        expect="not a probability",
        exercise="a05-dropout",
        find=("    if not 0.0 <= p <= 1.0:\n"
              "        raise ValueError(f\"dropout: p must be a probability in [0, 1], got {p}\")\n"),
        replace="",
        why="p is not validated: p = 1.5 scales by 1/(1 - p) = -2",
    ),
    Mutant(
        id="dropout-ignores-training",
        expect="return x unchanged",
        exercise="a05-dropout",
        find="    if not training or p == 0.0:\n",
        replace="    if p == 0.0:\n",
        why="dropout still drops in evaluation (training=False)",
    ),
    Mutant(
        id="dropout-p-one-divides-by-zero",
        expect="never divide by 1 - p = 0",
        exercise="a05-dropout",
        find=("    if p == 1.0:\n"
              "        return x * np.zeros((), dtype=x.dtype)  # keeps the graph: the gradient is zero, not missing\n"),
        replace="",
        why="p = 1 falls through to the scaling 1/(1 - p): a division by zero",
    ),
    Mutant(
        id="dropout-ignores-rng",
        expect="draw the mask from the generator `rng` you are given",
        exercise="a05-dropout",
        find="    rng = rng if rng is not None else np.random.default_rng()\n",
        replace="    rng = np.random.default_rng()\n",
        why="the generator it is given is ignored: the mask cannot be reproduced",
    ),
    Mutant(
        id="batch-norm-running-stats-rebound",
        expect="update running_mean and running_var in place",
        exercise="a05-batch-norm",
        find=("            running_mean *= 1.0 - momentum\n"
              "            running_mean += momentum * mean.data.reshape(C)\n"
              "            running_var *= 1.0 - momentum\n"
              "            running_var += momentum * var.data.reshape(C) * (n / (n - 1))\n"),
        replace=("            running_mean = (1.0 - momentum) * running_mean + momentum * mean.data.reshape(C)\n"
                 "            running_var = (1.0 - momentum) * running_var "
                 "+ momentum * var.data.reshape(C) * (n / (n - 1))\n"),
        why="the running statistics rebound to new local arrays: the module's buffers never change",
    ),
    Mutant(
        id="batch-norm-eval-uses-batch-statistics",
        expect="normalize with the running statistics",
        exercise="a05-batch-norm",
        find="    if training:\n",
        replace="    if True:\n",
        why="evaluation normalizes with the batch's statistics instead of the running ones",
    ),
    Mutant(
        id="batch-norm-no-n-check",
        expect="cannot estimate a variance",
        exercise="a05-batch-norm",
        find=("        if n <= 1:\n"
              "            raise ValueError(\n"),
        replace=("        if False:\n"
                 "            raise ValueError(\n"),
        why="one value per channel in training is not rejected (its variance is 0/0)",
    ),
    Mutant(
        id="cross-entropy-ignores-reduction",
        expect="reduction='sum' adds the N losses",
        exercise="a05-cross-entropy",
        find='return reduce_loss("cross_entropy", loss, reduction)',
        replace="return loss.mean()",
        why="reduction is ignored: always the mean",
    ),
    Mutant(
        id="batch-norm-unbiased-normalization",
        expect="*biased* batch variance",
        exercise="a05-batch-norm",
        find="var = (centered * centered).mean(axis=axes, keepdims=True)",
        replace="var = (centered * centered).sum(axis=axes, keepdims=True) / (n - 1)",
        why="normalizes with the unbiased variance (n - 1) instead of the biased one",
    ),
    Mutant(
        id="batch-norm-momentum-inverted",
        expect="weight of the *new* batch statistic",
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
        expect="*unbiased* batch variance",
        exercise="a05-batch-norm",
        find="running_var += momentum * var.data.reshape(C) * (n / (n - 1))",
        replace="running_var += momentum * var.data.reshape(C)",
        why="running_var tracks the biased batch variance; PyTorch tracks the unbiased one",
    ),
    Mutant(
        id="cross-entropy-overflow",
        expect="overflows for large logits",
        exercise="a05-cross-entropy",
        find="log_probs = log_softmax(logits, axis=1)",
        replace="log_probs = (logits.exp() / logits.exp().sum(axis=1, keepdims=True)).log()",
        why="log of the literal softmax: exp overflows for large logits",
    ),
    Mutant(
        id="cross-entropy-smoothing-sum",
        expect="*mean* over the K classes",
        exercise="a05-cross-entropy",
        find="label_smoothing * log_probs.mean(axis=1)",
        replace="label_smoothing * log_probs.sum(axis=1)",
        why="label smoothing over the sum of the classes' log-probabilities instead of their mean",
    ),
    Mutant(
        id="cross-entropy-no-target-check",
        expect="class_targets",
        exercise="a05-cross-entropy",
        find='t = class_targets("cross_entropy", logits, target)',
        replace="t = np.asarray(target)",
        why="the targets are not checked: one target too few gives a loss over fewer samples, no error",
    ),
    Mutant(
        id="numerical-gradient-one-sided",
        expect="yours is one-sided",
        exercise="a05-numerical-gradient",
        find=("        x[i] = original - eps\n        f_minus = f(x)\n"
              "        x[i] = original  # put it back exactly (adding eps back would be off in the last bits)\n"
              "        grad[i] = (f_plus - f_minus) / (2 * eps)"),
        replace="        x[i] = original\n        grad[i] = (f_plus - f(x)) / eps",
        why="a forward difference, accurate to O(eps) only",
    ),
    Mutant(
        id="numerical-gradient-half-distance",
        expect="2 eps apart",
        exercise="a05-numerical-gradient",
        find="(f_plus - f_minus) / (2 * eps)",
        replace="(f_plus - f_minus) / eps",
        why="divides by eps although the two points are 2 eps apart",
    ),
    Mutant(
        id="numerical-gradient-not-restored",
        expect="x must be restored",
        exercise="a05-numerical-gradient",
        find="        x[i] = original  # put it back exactly (adding eps back would be off in the last bits)\n",
        replace="",
        why="x is left at x - eps, entry after entry: the caller's array is changed",
    ),
    Mutant(
        id="numerical-gradient-restored-by-arithmetic",
        expect="come back exactly",
        exercise="a05-numerical-gradient",
        find=("        x[i] = original + eps\n        f_plus = f(x)\n        x[i] = original - eps\n"
              "        f_minus = f(x)\n"
              "        x[i] = original  # put it back exactly (adding eps back would be off in the last bits)\n"),
        replace=("        x[i] += eps\n        f_plus = f(x)\n        x[i] -= 2 * eps\n        f_minus = f(x)\n"
                 "        x[i] += eps\n"),
        why="x moved and restored by adding and subtracting eps: off in the last bits",
    ),
    Mutant(
        id="numerical-gradient-1d-only",
        expect="any shape",
        exercise="a05-numerical-gradient",
        find="np.ndindex(x.shape)",
        replace="range(x.size)",
        why="the loop indexes x as if it were 1-D",
    ),
    Mutant(
        id="numerical-gradient-perturbs-a-copy",
        expect="perturbing a copy",
        exercise="a05-numerical-gradient",
        find=("        x[i] = original + eps\n        f_plus = f(x)\n        x[i] = original - eps\n"
              "        f_minus = f(x)\n"),
        replace=("        shifted = x.copy()\n        shifted[i] = original + eps\n        f_plus = f(shifted)\n"
                 "        shifted[i] = original - eps\n        f_minus = f(shifted)\n"),
        why="f is evaluated on a perturbed copy: an f that reads x from outside never sees the change",
    ),
    Mutant(
        id="sgd-nesterov-swapped",
        expect="Nesterov",
        exercise="a05-sgd",
        find='g = g + mu * buf if group["nesterov"] else buf',
        replace='g = buf + mu * g if group["nesterov"] else buf',
        why="Nesterov's direction written b + mu g instead of g + mu b",
    ),
    Mutant(
        id="sgd-weight-decay-sign",
        expect="weight decay adds",
        exercise="a05-sgd",
        find="g = g + wd * p.data",
        replace="g = g - wd * p.data",
        why="weight decay with the wrong sign: the weights grow",
    ),
    Mutant(
        id="sgd-dampens-first-step",
        expect="without dampening",
        exercise="a05-sgd",
        find='buf = state["momentum_buffer"] = np.array(g, copy=True)',
        replace='buf = state["momentum_buffer"] = (1 - group["dampening"]) * g',
        why="dampening applied to the first step too (PyTorch starts the buffer at g)",
    ),
    Mutant(
        id="sgd-buffer-aliases-grad",
        expect="copy of the gradient",
        exercise="a05-sgd",
        find="np.array(g, copy=True)",
        replace="g",
        why="the momentum buffer is the gradient array itself (p.grad.data), not a copy",
    ),
    Mutant(
        id="sgd-weight-decay-in-place",
        expect="changed a gradient array",
        exercise="a05-sgd",
        find="g = g + wd * p.data",
        replace="g += wd * p.data",
        why="weight decay added into p.grad's own array",
    ),
    Mutant(
        id="sgd-momentum-sign",
        expect="adds the new gradient",
        exercise="a05-sgd",
        find="                buf += (1 - group[\"dampening\"]) * g\n",
        replace="                buf -= (1 - group[\"dampening\"]) * g\n",
        why="the new gradient subtracted from the momentum buffer (the sign of the -lr g form mixed into b)",
    ),
    Mutant(
        id="sgd-gradient-ascent",
        expect="against the gradient",
        exercise="a05-sgd",
        find="        p.data -= group[\"lr\"] * g\n",
        replace="        p.data += group[\"lr\"] * g\n",
        why="the step goes up the gradient: theta + lr d",
    ),
    Mutant(
        id="sgd-buffer-rebound",
        expect="carry over from step to step",
        exercise="a05-sgd",
        find=("                buf *= mu\n"
              "                buf += (1 - group[\"dampening\"]) * g\n"),
        replace="                buf = mu * buf + (1 - group[\"dampening\"]) * g\n",
        why="the new buffer bound to a local name only: the state keeps the first step's buffer forever",
    ),
    Mutant(
        id="adam-moments-rebound",
        expect="carry over from step to step",
        exercise="a05-adam",
        find=("        m *= beta1\n"
              "        m += (1 - beta1) * g\n"
              "        v *= beta2\n"
              "        v += (1 - beta2) * (g * g)\n"),
        replace=("        m = beta1 * m + (1 - beta1) * g\n"
                 "        v = beta2 * v + (1 - beta2) * (g * g)\n"),
        why="the moments rebound to new local arrays: state['exp_avg'] and state['exp_avg_sq'] stay at zero",
    ),
    Mutant(
        id="adam-weight-decay-in-place",
        expect="changed a gradient array",
        exercise="a05-adam",
        find="g = g + wd * p.data",
        replace="g += wd * p.data",
        why="L2 weight decay added into p.grad's own array",
    ),
    Mutant(
        id="adam-decay-kinds-swapped",
        expect="yours uses the wrong one",
        exercise="a05-adam",
        find="            if self._decoupled:\n",
        replace="            if not self._decoupled:\n",
        why="L2 decay for AdamW and decoupled decay for Adam",
    ),
    Mutant(
        id="adam-step-count-shared",
        expect="a count shared by every parameter",
        exercise="a05-adam",
        find="        t = state[\"step\"]\n",
        replace="        t = max(s[\"step\"] for s in self.state.values() if s)\n",
        why="one step count for every parameter: one skipped in a step gets the others' t",
    ),
    Mutant(
        id="adam-no-bias-correction",
        expect="bias correction is missing",
        exercise="a05-adam",
        find="p.data -= (lr / bias_correction1) * (m / denom)",
        replace="p.data -= lr * m / (np.sqrt(v) + eps)",
        why="Adam without bias correction: the early steps are too large (about 3x at the first, default betas)",
    ),
    Mutant(
        id="adam-eps-inside-sqrt",
        expect="after the square root",
        exercise="a05-adam",
        find="denom = np.sqrt(v) / math.sqrt(bias_correction2) + eps",
        replace="denom = np.sqrt(v / bias_correction2 + eps)",
        why="eps added under the square root",
    ),
    Mutant(
        id="dataloader-always-drops-last",
        expect="the last, smaller batch is kept",
        exercise="a05-dataloader",
        find="stop = n - n % self.batch_size if self.drop_last else n",
        replace="stop = n - n % self.batch_size",
        why="the last, smaller batch is dropped even without drop_last",
    ),
    Mutant(
        id="dataloader-ignores-shuffle",
        expect="shuffle=True must shuffle",
        exercise="a05-dataloader",
        find="order = self.rng.permutation(n) if self.shuffle else np.arange(n)",
        replace="order = np.arange(n)",
        why="shuffle=True is ignored: every epoch in the dataset's order",
    ),
    Mutant(
        id="dataloader-global-generator",
        expect="not from NumPy's global generator",
        exercise="a05-dataloader",
        find="order = self.rng.permutation(n) if self.shuffle else np.arange(n)",
        replace="order = np.random.permutation(n) if self.shuffle else np.arange(n)",
        why="the permutation drawn from NumPy's global generator: the seed does not reproduce the epochs",
    ),
    Mutant(
        id="dataloader-last-sample-lost",
        expect="the last, smaller batch is kept",
        exercise="a05-dataloader",
        find="for start in range(0, stop, self.batch_size):",
        replace="for start in range(0, stop - 1, self.batch_size):",
        why="an off-by-one in the loop's stop: a last batch of one sample is lost",
    ),
    Mutant(
        id="dataloader-reseeds-every-epoch",
        expect="every epoch has the same order",
        exercise="a05-dataloader",
        find="order = self.rng.permutation(n) if self.shuffle else np.arange(n)",
        replace="order = np.random.default_rng(0).permutation(n) if self.shuffle else np.arange(n)",
        why="a generator seeded afresh in every epoch: every epoch has the same order",
    ),
    Mutant(
        id="numerical-gradient-restored-by-adding-eps",
        expect="come back exactly",
        exercise="a05-numerical-gradient",
        find="        x[i] = original  # put it back exactly (adding eps back would be off in the last bits)\n",
        replace="        x[i] += eps\n",
        why="x put back by adding eps to original - eps: off in the last bits for some entries",
    ),
    Mutant(
        id="module-load-always-strict",
        expect="strict=False must not raise",
        exercise="a05-module",
        find=("        if strict and missing:\n"
              "            errors.append(\"missing key(s): \" + \", \".join(repr(key) for key in missing))\n"
              "        if strict and unexpected:\n"),
        replace=("        if missing:\n"
                 "            errors.append(\"missing key(s): \" + \", \".join(repr(key) for key in missing))\n"
                 "        if unexpected:\n"),
        why="strict is ignored: strict=False raises on missing and unexpected keys too",
    ),
    Mutant(
        id="module-load-never-strict",
        expect="strict=True must raise",
        exercise="a05-module",
        find=("        if strict and missing:\n"
              "            errors.append(\"missing key(s): \" + \", \".join(repr(key) for key in missing))\n"
              "        if strict and unexpected:\n"),
        replace=("        if False and missing:\n"
                 "            errors.append(\"missing key(s): \" + \", \".join(repr(key) for key in missing))\n"
                 "        if False and unexpected:\n"),
        why="strict is ignored: strict=True loads what matches and raises nothing",
    ),
]


# Correct answers in other legitimate styles: each must keep full marks (tests/grader/test_exercises.py,
# `autograder check`), as the mutants must lose points.
ALTERNATIVES = [
    Mutant(
        id="module-setattr-through-super",
        exercise="a05-module",
        find="        object.__setattr__(self, name, value)\n",
        replace="        super().__setattr__(name, value)\n",
        why="the attribute stored through super().__setattr__ (ModuleBase defines none: object's runs)",
    ),
    Mutant(
        id="module-state-dict-a-plain-dict",
        exercise="a05-module",
        find="return OrderedDict((key, array.copy()) for key, array in self._state_arrays().items())",
        replace="return {key: np.array(array, copy=True) for key, array in self._state_arrays().items()}",
        why="a plain dict (ordered since Python 3.7) of copies made with np.array(copy=True)",
    ),
    Mutant(
        id="module-train-over-named-modules",
        exercise="a05-module",
        find="        for m in self.modules():\n            m.training = bool(mode)\n",
        replace="        for _, m in self.named_modules():\n            m.training = mode\n",
        why="walks named_modules() and stores mode as given (True/False)",
    ),
    Mutant(
        id="module-load-with-copyto",
        exercise="a05-module",
        find="array[...] = state_dict[key]",
        replace='np.copyto(array, state_dict[key], casting="unsafe")',
        why="np.copyto into the live array (cast to its dtype) instead of a slice assignment",
    ),
    Mutant(
        id="fan-receptive-by-a-loop",
        exercise="a05-fan-in-fan-out",
        find="    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1\n",
        replace="    receptive = 1\n    for k in shape[2:]:\n        receptive *= k\n",
        why="the receptive field as a product written as a loop",
    ),
    Mutant(
        id="fan-numpy-ints",
        exercise="a05-fan-in-fan-out",
        find="int(np.prod(shape[2:])) if len(shape) > 2 else 1",
        replace="np.prod(shape[2:], dtype=np.int64)",
        why="NumPy integers (np.int64) instead of Python ints; np.prod of no dimensions is 1",
    ),
    Mutant(
        id="kaiming-bound-by-hand",
        exercise="a05-kaiming-uniform",
        find="    bound = math.sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity)\n",
        replace=("    fan = fan_in_and_fan_out(tensor.shape)[0 if mode == \"fan_in\" else 1]\n"
                 "    bound = calculate_gain(nonlinearity, a) * (3 / fan) ** 0.5\n"),
        why="the bound written out as gain * sqrt(3 / fan), with an int constant and ** 0.5",
    ),
    Mutant(
        id="xavier-uniform-numpy-sqrt",
        exercise="a05-xavier-uniform",
        find="bound = gain * math.sqrt(6.0 / (fan_in + fan_out))",
        replace="bound = np.sqrt(3) * gain * np.sqrt(2 / (fan_in + fan_out))",
        why="the bound as sqrt(3) times the standard deviation, with NumPy scalars and int constants",
    ),
    Mutant(
        id="xavier-normal-power-half",
        exercise="a05-xavier-normal",
        find="std = gain * math.sqrt(2.0 / (fan_in + fan_out))",
        replace="std = (2 * gain**2 / (fan_in + fan_out)) ** 0.5",
        why="the standard deviation as the square root of the variance 2 gain^2 / (fan_in + fan_out)",
    ),
    Mutant(
        id="linear-other-error-words-and-bias-if",
        exercise="a05-linear",
        find=("        raise ValueError(\n"
              "            f\"linear: input has {x.shape[-1] if x.ndim else 0} features (shape {x.shape}) "
              "but the weight \"\n"
              "            f\"expects {weight.shape[1]} (weight shape {weight.shape}); check in_features\"\n"
              "        )\n"
              "    y = x @ weight.T\n"
              "    return y if bias is None else y + bias\n"),
        replace=("        raise ValueError(f\"linear: cannot multiply x of shape {x.shape} by W^T, "
                 "W of shape {weight.shape}\")\n"
                 "    y = x.matmul(weight.transpose())\n"
                 "    if bias is not None:\n"
                 "        y = y + bias\n"
                 "    return y\n"),
        why="an error worded differently that still names both shapes; the transpose and matmul as methods",
    ),
    Mutant(
        id="dropout-boolean-mask-then-divide",
        exercise="a05-dropout",
        find=("    mask = (draws >= p).astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))\n"
              "    return x * mask\n"),
        replace="    return x * (draws >= p) / (1 - p)\n",
        why="multiply by the boolean keep-mask, then divide by 1 - p (a Python float)",
    ),
    Mutant(
        id="batch-norm-square-and-slice-assignment",
        exercise="a05-batch-norm",
        find=("        var = (centered * centered).mean(axis=axes, keepdims=True)\n"
              "        if running_mean is not None and running_var is not None:\n"
              "            # Statistics, not a computation to differentiate: update the raw buffers in place.\n"
              "            running_mean *= 1.0 - momentum\n"
              "            running_mean += momentum * mean.data.reshape(C)\n"
              "            running_var *= 1.0 - momentum\n"
              "            running_var += momentum * var.data.reshape(C) * (n / (n - 1))\n"),
        replace=("        var = (centered ** 2).mean(axis=axes, keepdims=True)\n"
                 "        if running_mean is not None and running_var is not None:\n"
                 "            unbiased = var.data.reshape(C) * n / (n - 1)\n"
                 "            running_mean[:] = (1 - momentum) * running_mean + momentum * mean.data.reshape(C)\n"
                 "            running_var[:] = (1 - momentum) * running_var + momentum * unbiased\n"),
        why="the variance with ** 2, and the running statistics written with a slice assignment",
    ),
    Mutant(
        id="cross-entropy-one-hot",
        exercise="a05-cross-entropy",
        find="    loss = -log_probs[np.arange(len(t)), t]  # a gather: the gradient scatters back to (i, t_i)\n",
        replace=("    one_hot = np.eye(logits.shape[1], dtype=logits.dtype)[t]\n"
                 "    loss = -(log_probs * one_hot).sum(axis=1)\n"),
        why="the target's log-probability picked by a one-hot product instead of a gather",
    ),
    Mutant(
        id="cross-entropy-log-softmax-by-hand",
        exercise="a05-cross-entropy",
        find="    log_probs = log_softmax(logits, axis=1)\n",
        replace=("    shifted = logits - logits.data.max(axis=1, keepdims=True)  # a constant shift: it cancels\n"
                 "    log_probs = shifted - shifted.exp().sum(axis=1, keepdims=True).log()\n"),
        why="log-softmax written out with the row max subtracted (as a constant), stable as the kit's",
    ),
    Mutant(
        id="numerical-gradient-ndenumerate-and-helper",
        exercise="a05-numerical-gradient",
        find=("    grad = np.zeros(x.shape)\n"
              "    for i in np.ndindex(x.shape):\n"
              "        original = x[i]\n"
              "        x[i] = original + eps\n"
              "        f_plus = f(x)\n"
              "        x[i] = original - eps\n"
              "        f_minus = f(x)\n"
              "        x[i] = original  # put it back exactly (adding eps back would be off in the last bits)\n"
              "        grad[i] = (f_plus - f_minus) / (2 * eps)\n"),
        replace=("    def f_at(i, value):\n"
                 "        x[i] = value\n"
                 "        return f(x)\n"
                 "\n"
                 "    grad = np.zeros_like(x, dtype=float)\n"
                 "    for i, original in np.ndenumerate(x):\n"
                 "        grad[i] = (f_at(i, original + eps) - f_at(i, original - eps)) / (2 * eps)\n"
                 "        x[i] = original\n"
                 "    print(\"numerical gradient of shape\", grad.shape)\n"),
        why="np.ndenumerate, a helper defined inside the answer, zeros_like, and a print",
    ),
    Mutant(
        id="sgd-buffer-stored-back",
        exercise="a05-sgd",
        find=("                buf *= mu\n"
              "                buf += (1 - group[\"dampening\"]) * g\n"),
        replace="                buf = state[\"momentum_buffer\"] = mu * buf + (1 - group[\"dampening\"]) * g\n",
        why="a new buffer array each step, stored back in the state, instead of an in-place update",
    ),
    Mutant(
        id="sgd-first-buffer-g-copy",
        exercise="a05-sgd",
        find="np.array(g, copy=True)  # first step: b_1 = g_1, no dampening\n",
        replace="g.copy()\n",
        why="the first buffer copied with g.copy()",
    ),
    Mutant(
        id="sgd-subtract-with-out",
        exercise="a05-sgd",
        find="        p.data -= group[\"lr\"] * g\n",
        replace="        np.subtract(p.data, group[\"lr\"] * g, out=p.data)\n",
        why="the in-place update written with np.subtract(..., out=p.data)",
    ),
    Mutant(
        id="adam-moments-stored-back-and-textbook-step",
        exercise="a05-adam",
        find=("        m *= beta1\n"
              "        m += (1 - beta1) * g\n"
              "        v *= beta2\n"
              "        v += (1 - beta2) * (g * g)\n"
              "        bias_correction1 = 1 - beta1**t\n"
              "        bias_correction2 = 1 - beta2**t\n"
              "        denom = np.sqrt(v) / math.sqrt(bias_correction2) + eps\n"
              "        p.data -= (lr / bias_correction1) * (m / denom)\n"),
        replace=("        m = state[\"exp_avg\"] = beta1 * m + (1 - beta1) * g\n"
                 "        v = state[\"exp_avg_sq\"] = beta2 * v + (1 - beta2) * g**2\n"
                 "        m_hat = m / (1 - beta1**t)\n"
                 "        v_hat = v / (1 - beta2**t)\n"
                 "        p.data -= lr * m_hat / (np.sqrt(v_hat) + eps)\n"),
        why="the textbook form: new moment arrays stored back in the state, m_hat and v_hat computed first",
    ),
    Mutant(
        id="dataloader-shuffle-in-place-and-collate",
        exercise="a05-dataloader",
        find=("        n = len(self.dataset)\n"
              "        order = self.rng.permutation(n) if self.shuffle else np.arange(n)\n"
              "        stop = n - n % self.batch_size if self.drop_last else n\n"
              "        vectorized = isinstance(self.dataset, TensorDataset)\n"
              "        for start in range(0, stop, self.batch_size):\n"
              "            idx = order[start : start + self.batch_size]\n"
              "            if vectorized:\n"
              "                yield self.dataset[idx]\n"
              "            else:\n"
              "                yield collate([self.dataset[int(i)] for i in idx])\n"),
        replace=("        order = list(range(len(self.dataset)))\n"
                 "        if self.shuffle:\n"
                 "            self.rng.shuffle(order)\n"
                 "        for start in range(0, len(order), self.batch_size):\n"
                 "            idx = order[start : start + self.batch_size]\n"
                 "            if self.drop_last and len(idx) < self.batch_size:\n"
                 "                break\n"
                 "            yield collate([self.dataset[i] for i in idx])\n"),
        why="a list of indices shuffled in place, a break for drop_last, every batch collated sample by sample",
    ),
]
