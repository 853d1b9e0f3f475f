"""Classic student bugs in a02_broadcasting (tensor gradients), one solution region each.

`autograder check a02_broadcasting` plants each one in the source notebook and expects it to lose
points on its own exercise only; `tests/grader/test_exercises.py` plants each one in the solutions/
source and expects the hidden check to fail with a message containing its `expect` phrase.
"""
from autograder.mutants import Mutant

_UNBROADCAST_SUM = "summed = grad.sum(axis=tuple(range(lead)) + stretched, keepdims=True)"

MUTANTS = [
    Mutant(
        id="unbroadcast-axis0-only",
        expect="only axis 0",
        exercise="a02-unbroadcast",
        find="return summed.reshape(shape) if lead else summed",
        replace="return grad.sum(axis=0)",
        why="sums axis 0 whatever the shapes",
    ),
    Mutant(
        id="unbroadcast-leading-axes-only",
        expect="stretched size-1 axes were not summed",
        exercise="a02-unbroadcast",
        find=_UNBROADCAST_SUM,
        replace="summed = grad.sum(axis=tuple(range(lead)), keepdims=True)",
        why="sums the new leading axes but forgets the stretched size-1 axes",
    ),
    Mutant(
        id="unbroadcast-no-keepdims",
        expect="size-1 axes of `shape` were dropped",
        exercise="a02-unbroadcast",
        find=_UNBROADCAST_SUM,
        replace="summed = grad.sum(axis=tuple(range(lead)) + stretched)",
        why="the size-1 axes are summed away instead of kept: (4, 3) -> (4,) for shape (4, 1)",
    ),
    Mutant(
        id="add-forgets-unbroadcast",
        expect="unbroadcast",
        exercise="a02-add",
        find="gy = unbroadcast(grad, y.shape)",
        replace="gy = grad",
        why="a broadcast input's gradient keeps the output's shape",
    ),
    Mutant(
        id="mul-forgets-unbroadcast",
        expect="unbroadcast",
        exercise="a02-mul",
        find="gy = unbroadcast(grad * x, y.shape)",
        replace="gy = grad * x",
        why="a broadcast input's gradient keeps the output's shape",
    ),
    Mutant(
        id="mul-swapped",
        expect="*other* input",
        exercise="a02-mul",
        find="gx = unbroadcast(grad * y, x.shape)",
        replace="gx = unbroadcast(grad * x, x.shape)",
        why="x's gradient multiplied by x itself instead of by the other input",
    ),
    Mutant(
        id="div-missing-minus",
        expect="minus sign",
        exercise="a02-div",
        find="-grad * x / (y * y)",
        replace="grad * x / (y * y)",
        why="d(x/y)/dy = -x/y^2 without its minus sign",
    ),
    Mutant(
        id="div-wrong-power",
        expect="squared",
        exercise="a02-div",
        find="-grad * x / (y * y)",
        replace="-grad * x / y",
        why="d(x/y)/dy with y instead of y^2",
    ),
    Mutant(
        id="pow-off-by-one",
        expect="off by one",
        exercise="a02-pow-scalar",
        find="return grad * p * x ** (p - 1)",
        replace="return grad * p * x ** p",
        why="the power rule without lowering the exponent",
    ),
    Mutant(
        id="exp-uses-input",
        expect="self.output",
        exercise="a02-exp",
        find="return grad * self.output",
        replace="return grad * self.inputs[0]",
        why="exp'(x) = exp(x), not x",
    ),
    Mutant(
        id="log-multiplies",
        expect="1/x",
        exercise="a02-log",
        find="return grad / x",
        replace="return grad * x",
        why="log'(x) = 1/x, not x",
    ),
    Mutant(
        id="tanh-squares-input",
        expect="square the output",
        exercise="a02-tanh",
        find="return grad * (1.0 - t * t)",
        replace="return grad * (1.0 - self.inputs[0] * self.inputs[0])",
        why="tanh' written as 1 - x^2 instead of 1 - tanh(x)^2",
    ),
    Mutant(
        id="sigmoid-missing-factor",
        expect="(1 - sigma(x)) is missing",
        exercise="a02-sigmoid",
        find="return grad * s * (1.0 - s)",
        replace="return grad * s",
        why="sigma' = sigma (1 - sigma) without the (1 - sigma)",
    ),
    Mutant(
        id="sum-no-broadcast",
        expect="broadcast_to",
        exercise="a02-sum",
        find="return broadcast_to(grad.reshape(kept_shape(x.shape, self.axes)), x.shape)",
        replace="return grad.reshape(kept_shape(x.shape, self.axes))",
        why="the reduced axes are restored but the gradient is not copied along them",
    ),
    Mutant(
        id="sum-no-reshape",
        expect="kept_shape",
        exercise="a02-sum",
        find="return broadcast_to(grad.reshape(kept_shape(x.shape, self.axes)), x.shape)",
        replace="return broadcast_to(grad, x.shape)",
        why="broadcasting without putting the reduced axes back: works for axis 0 only",
    ),
    Mutant(
        id="broadcast-to-no-sum",
        expect="unbroadcast",
        exercise="a02-broadcast-to",
        find="return unbroadcast(grad, x.shape)",
        replace="return grad",
        why="the copies' gradients are not summed back",
    ),
    Mutant(
        id="transpose-same-axes",
        expect="inverse permutation",
        exercise="a02-transpose",
        find="return grad.transpose(tuple(np.argsort(self.axes)))",
        replace="return grad.transpose(self.axes)",
        why="the permutation applied again instead of inverted",
    ),
    Mutant(
        id="getitem-assigns",
        expect="do not assign",
        exercise="a02-getitem",
        find="return scatter_add(grad, self.index, x.shape)",
        replace="out = np.zeros(x.shape, dtype=grad.dtype); out[self.index] = grad.data; return Tensor(out)",
        why="assignment instead of np.add.at: an element selected twice gets one copy's gradient",
    ),
    Mutant(
        id="matmul-no-transpose",
        expect="transpose",
        exercise="a02-matmul",
        find="ga = unbroadcast(g @ swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)",
        replace="ga = unbroadcast(g @ b2, a2.shape).reshape(a.shape)",
        why="dL/dA = G B instead of G B^T",
    ),
    Mutant(
        id="matmul-batch-no-unbroadcast",
        expect="unbroadcast",
        exercise="a02-matmul",
        find="gb = unbroadcast(swapaxes(a2, -1, -2) @ g, b2.shape).reshape(b.shape)",
        replace="gb = (swapaxes(a2, -1, -2) @ g).reshape(b.shape)",
        why="a matrix broadcast over a batch does not get its gradient summed over the batch",
    ),
    Mutant(
        id="softmax-no-max",
        expect="subtract the max",
        exercise="a02-softmax",
        find="e = np.exp(x - np.max(x, axis=self.axis, keepdims=True))",
        replace="e = np.exp(x)",
        why="the literal formula overflows for large logits",
    ),
    Mutant(
        id="softmax-backward-diagonal",
        expect="coupled",
        exercise="a02-softmax",
        find="return s * (grad - (grad * s).sum(axis=self.axis, keepdims=True))",
        replace="return s * grad",
        why="only the diagonal of the softmax Jacobian",
    ),
    Mutant(
        id="log-softmax-sign",
        expect="sign",
        exercise="a02-log-softmax",
        find="return grad - self.output.exp() * grad.sum(axis=self.axis, keepdims=True)",
        replace="return grad + self.output.exp() * grad.sum(axis=self.axis, keepdims=True)",
        why="g + softmax * sum(g): the wrong sign",
    ),
]


MUTANTS += [
    Mutant(
        id="matmul-expand-dims-order",
        expect="vector @ vector",
        exercise="a02-matmul",
        find=("        if b.ndim == 1:  # first: for vector @ vector the gradient is 0-d and has no axis -2 yet\n"
              "            g = g.expand_dims(-1)\n        if a.ndim == 1:\n            g = g.expand_dims(-2)\n"),
        replace=("        if a.ndim == 1:\n            g = g.expand_dims(-2)\n"
                 "        if b.ndim == 1:\n            g = g.expand_dims(-1)\n"),
        why="the left operand's axis put back first: a 0-d gradient (vector @ vector) has no axis -2",
    ),
]
MUTANTS += [
    Mutant(
        id="matmul-gb-wrong-transpose",
        expect="transpose",
        exercise="a02-matmul",
        find="gb = unbroadcast(swapaxes(a2, -1, -2) @ g, b2.shape).reshape(b.shape)",
        replace="gb = unbroadcast(swapaxes(g, -1, -2) @ a2, b2.shape).reshape(b.shape)",
        why="dL/dB = G^T A instead of A^T G: the transpose of the right answer",
    ),
]
MUTANTS += [
    Mutant(
        id="pow-no-zero-guard",
        expect="guard the case p = 0",
        exercise="a02-pow-scalar",
        find="        if p == 0:  # x**-1 would turn 0 * inf into nan at x = 0\n            return grad * 0.0\n",
        replace="",
        why="no guard for p = 0: at x = 0 the gradient is 0 * inf = nan",
    ),
]

# Correct answers in other styles: each must keep full marks (tests/grader/test_exercises.py, `check`).
ALTERNATIVES = [
    Mutant(id="unbroadcast-loops", exercise="a02-unbroadcast",
           find=("    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and have[lead + i] != 1)\n"
                 "    if not stretched:  # only leading axes were added: one sum removes them\n"
                 "        return grad.sum(axis=tuple(range(lead)))\n"
                 "    summed = grad.sum(axis=tuple(range(lead)) + stretched, keepdims=True)\n"
                 "    return summed.reshape(shape) if lead else summed\n"),
           replace=("    for _ in range(lead):  # one leading axis at a time\n        grad = grad.sum(axis=0)\n"
                    "    for i, n in enumerate(shape):\n        if n == 1 and grad.shape[i] != 1:\n"
                    "            grad = grad.sum(axis=i, keepdims=True)\n    return grad\n"),
           why="a loop that sums one axis at a time instead of one sum over a tuple of axes"),
    Mutant(id="add-if-statements-and-a-list", exercise="a02-add",
           find=("        gx = unbroadcast(grad, x.shape) if self.needs_input_grad[0] else None\n"
                 "        gy = unbroadcast(grad, y.shape) if self.needs_input_grad[1] else None\n"
                 "        return gx, gy"),
           replace=("        gx = gy = None\n        if self.needs_input_grad[0]:\n"
                    "            gx = unbroadcast(grad * 1, list(x.shape))\n"
                    "        if self.needs_input_grad[1]:\n            gy = unbroadcast(grad, y.shape)\n"
                    "        return [gx, gy]"),
           why="if statements, an int factor, a shape given as a list and the gradients returned in a list"),
    Mutant(id="mul-print-and-other-order", exercise="a02-mul",
           find="        x, y = self.inputs\n",
           replace="        x, y = self.inputs\n        print('Mul.backward', grad.shape)\n",
           why="a print in the body"),
    Mutant(id="div-negative-powers", exercise="a02-div",
           find="-grad * x / (y * y)", replace="grad * (-x) * y ** -2",
           why="-x y^-2 written with an int negative power"),
    Mutant(id="div-reciprocal", exercise="a02-div",
           find="unbroadcast(grad / y, x.shape)", replace="unbroadcast(grad * (1 / y), x.shape)",
           why="multiplying by the reciprocal 1 / y"),
    Mutant(id="pow-scalar-int-zero", exercise="a02-pow-scalar",
           find="return grad * 0.0", replace="return grad * 0",
           why="an int 0 instead of 0.0"),
    Mutant(id="exp-recomputed", exercise="a02-exp",
           find="return grad * self.output", replace="return self.inputs[0].exp() * grad",
           why="exp(x) recomputed instead of reusing the output"),
    Mutant(id="log-negative-power", exercise="a02-log",
           find="return grad / x", replace="return grad * x ** -1",
           why="1/x written as x ** -1"),
    Mutant(id="tanh-int-power", exercise="a02-tanh",
           find="return grad * (1.0 - t * t)", replace="return grad - grad * t ** 2",
           why="expanded, with an int power"),
    Mutant(id="sigmoid-expanded", exercise="a02-sigmoid",
           find="return grad * s * (1.0 - s)", replace="return grad * (s - s * s)",
           why="s (1 - s) expanded as s - s^2"),
    Mutant(id="sum-times-ones", exercise="a02-sum",
           find="return broadcast_to(grad.reshape(kept_shape(x.shape, self.axes)), x.shape)",
           replace=("ones = Tensor(np.ones(x.shape, dtype=grad.data.dtype))\n"
                    "        return grad.reshape(kept_shape(x.shape, self.axes)) * ones"),
           why="broadcasting by multiplying with ones instead of broadcast_to"),
    Mutant(id="broadcast-to-loops", exercise="a02-broadcast-to",
           find="return unbroadcast(grad, x.shape)",
           replace=("g = grad\n        while g.ndim > x.ndim:\n            g = g.sum(axis=0)\n"
                    "        for i, n in enumerate(x.shape):\n            if n == 1 and g.shape[i] != 1:\n"
                    "                g = g.sum(axis=i, keepdims=True)\n        return g"),
           why="the copies summed with a loop instead of unbroadcast"),
    Mutant(id="transpose-inverse-by-loop", exercise="a02-transpose",
           find="return grad.transpose(tuple(np.argsort(self.axes)))",
           replace=("inverse = [0] * len(self.axes)\n        for i, axis in enumerate(self.axes):\n"
                    "            inverse[axis] = i\n        return grad.transpose(inverse)"),
           why="the inverse permutation built by a loop, passed as a list"),
    Mutant(id="getitem-print-and-index", exercise="a02-getitem",
           find="(x,) = self.inputs",
           replace="x = self.inputs[0]\n        print('GetItem.backward', x.shape)",
           why="a print in the body and self.inputs[0] instead of unpacking"),
    Mutant(id="matmul-reshape-instead-of-expand-dims", exercise="a02-matmul",
           find=("            g = g.expand_dims(-1)\n        if a.ndim == 1:\n            g = g.expand_dims(-2)\n"),
           replace=("            g = g.reshape(g.shape + (1,))\n        if a.ndim == 1:\n"
                    "            g = g.reshape(g.shape[:-1] + (1,) + g.shape[-1:])\n"),
           why="reshape with an explicit shape instead of expand_dims"),
    Mutant(id="softmax-method-max", exercise="a02-softmax",
           find="e = np.exp(x - np.max(x, axis=self.axis, keepdims=True))",
           replace="shifted = x - x.max(axis=self.axis, keepdims=True)\n        e = np.exp(shifted)",
           why="the array's max method and a named intermediate"),
    Mutant(id="softmax-backward-distributed", exercise="a02-softmax",
           find="return s * (grad - (grad * s).sum(axis=self.axis, keepdims=True))",
           replace="return s * grad - s * (s * grad).sum(axis=self.axis, keepdims=True)",
           why="s (g - <g, s>) distributed"),
    Mutant(id="log-softmax-named-softmax", exercise="a02-log-softmax",
           find="return grad - self.output.exp() * grad.sum(axis=self.axis, keepdims=True)",
           replace=("softmax = self.output.exp()\n"
                    "        return grad - grad.sum(axis=self.axis, keepdims=True) * softmax"),
           why="the softmax named first, the product in the other order"),
]
