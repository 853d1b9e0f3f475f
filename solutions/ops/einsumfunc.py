r"""einsum: any sum of products over named indices, with a gradient that is itself an einsum.

Book: chapter 2 (`book/02_broadcasting.md`) for the reductions and products it generalizes.
Tests: `tests/engine/test_ops_more.py`, `tests/engine/test_golden.py`.

For $z = \text{einsum}(s_1, \dots, s_m \to o;\ x_1, \dots, x_m)$ the gradient of operand k
multiplies the upstream gradient (indexed by o) with every other operand and sums over
whatever $s_k$ does not keep:

    dx_k = einsum(o, s_1, .., s_{k-1}, s_{k+1}, .., s_m -> s_k; grad, x_1, .., x_m without x_k)

Two things einsum's output cannot say are added as constant operands:
- an index that only x_k has (summed inside x_k: 'ij->i'): the gradient is copied along it,
  which is a product with ones(n);
- an index repeated in $s_k$ ('ii->i', the diagonal; 'ii->', the trace): the output subscript
  cannot repeat it, so the second occurrence gets a fresh letter and the identity matrix ties
  the two (the gradient lands on the diagonal, zeros elsewhere).
`...` is expanded into letters first (broadcasting a size-1 axis against a longer one is a
fresh letter of its own, which the gradient then sums over). Since every gradient is an
einsum of tensors, create_graph works and gradients of gradients are einsums too.
"""
from __future__ import annotations

import string

import numpy as np

from ..graph import Function, Tensor, as_tensor

LETTERS = string.ascii_letters


class Einsum(Function):
    """One einsum over explicit subscripts (no `...`, output given): `inputs` -> `output`."""

    def __init__(self, inputs: tuple[str, ...], output: str, sizes: dict[str, int]):
        self.subs, self.out, self.sizes = inputs, output, sizes

    def forward(self, *xs):
        return np.einsum(",".join(self.subs) + "->" + self.out, *xs, optimize=len(xs) > 2)

    def backward(self, grad):
        xs = self.inputs
        return tuple(self._operand_grad(k, grad) if self.needs_input_grad[k] else None for k in range(len(xs)))

    def _operand_grad(self, k: int, grad: Tensor) -> Tensor:
        target = self.subs[k]
        subs = [self.out] + [s for j, s in enumerate(self.subs) if j != k]
        operands: list = [grad] + [x for j, x in enumerate(self.inputs) if j != k]
        # A repeated index: its second (third...) occurrence gets a fresh letter, tied by eye(n).
        used = set("".join(self.subs) + self.out)
        fresh = (c for c in LETTERS if c not in used)
        renamed, seen = [], set()
        for c in target:
            if c in seen:
                c2 = next(fresh)
                subs.append(c + c2)
                operands.append(np.eye(self.sizes[c], dtype=grad.dtype))
                renamed.append(c2)
            else:
                seen.add(c)
                renamed.append(c)
        # An index no operand of the gradient has: copy along it (a product with ones).
        present = set("".join(subs))
        for c in dict.fromkeys(target):
            if c not in present:
                subs.append(c)
                operands.append(np.ones(self.sizes[c], dtype=grad.dtype))
        return einsum_explicit(tuple(subs), "".join(renamed), *operands)


def einsum_explicit(inputs: tuple[str, ...], output: str, *operands) -> Tensor:
    """einsum on explicit subscripts (one letter per axis, output given, no `...`)."""
    operands = tuple(as_tensor(x) for x in operands)
    return Einsum.apply(*operands, inputs=tuple(inputs), output=output, sizes=_sizes(inputs, operands))


def _sizes(inputs: tuple[str, ...], operands) -> dict[str, int]:
    """Each index letter's size, checked equal across the operands that name it."""
    if len(inputs) != len(operands):
        raise ValueError(f"einsum: {len(inputs)} subscripts for {len(operands)} operands")
    sizes: dict[str, int] = {}
    for sub, x in zip(inputs, operands, strict=True):
        if len(sub) != x.ndim:
            raise ValueError(f"einsum: subscripts '{sub}' do not fit an operand of shape {x.shape}")
        for c, n in zip(sub, x.shape, strict=True):
            if sizes.setdefault(c, n) != n:
                raise ValueError(f"einsum: index '{c}' has size {sizes[c]} in one operand and {n} in another "
                                 f"(subscripts {','.join(inputs)}, shapes {[tuple(o.shape) for o in operands]})")
    return sizes


def _parse(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Explicit subscripts: `...` replaced by letters, the implicit output made explicit, and each
    size-1 axis that broadcasts against a longer one renamed to a fresh letter of its own."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a string such as 'ij,jk->ik', got {subscripts!r}")
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise ValueError(f"einsum: subscripts '{subscripts}' name {len(subs)} operands but {len(shapes)} were given")
    for part in subs + ([rhs] if arrow else []):
        bad = set(part.replace("...", "")) - set(LETTERS)
        if bad or part.count("...") > 1:
            raise ValueError(
                f"einsum: invalid subscripts '{subscripts}'; use letters, ',', '->' and at most one '...' per operand"
            )
    unused = [c for c in LETTERS if c not in spec]
    ell_ndim = 0
    for sub, shape in zip(subs, shapes, strict=True):
        named = len(sub.replace("...", ""))
        if ("..." in sub and named > len(shape)) or ("..." not in sub and named != len(shape)):
            raise ValueError(
                f"einsum: operand subscripts '{sub}' do not fit an operand of shape {shape} ({len(shape)} axes)"
            )
        if "..." in sub:
            ell_ndim = max(ell_ndim, len(shape) - named)
    if ell_ndim > len(unused):
        raise ValueError("einsum: too many axes under '...' for the letters left")
    ell = "".join(unused[:ell_ndim])
    unused = unused[ell_ndim:]
    explicit = []
    for sub, shape in zip(subs, shapes, strict=True):
        if "..." in sub:
            k = len(shape) - len(sub.replace("...", ""))
            sub = sub.replace("...", ell[ell_ndim - k:])  # aligned from the right, as broadcasting
        explicit.append(sub)
    if arrow:
        rhs = rhs.replace("...", ell)  # an output without '...' sums those axes away
        if len(set(rhs)) != len(rhs):
            raise ValueError(f"einsum: output subscripts '{rhs}' repeat an index")
        missing = set(rhs) - set("".join(explicit))
        if missing:
            raise ValueError(f"einsum: output index '{sorted(missing)[0]}' appears in no operand of '{subscripts}'")
        out = rhs
    else:  # implicit output: '...' first, then the letters that appear once, sorted (NumPy's rule)
        counts = "".join(s.replace("...", "") for s in subs)
        out = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1))
    # Broadcasting: a size-1 axis against a longer one gets a letter of its own (summed, size 1).
    longest: dict[str, int] = {}
    for sub, shape in zip(explicit, shapes, strict=True):
        for c, n in zip(sub, shape, strict=True):
            longest[c] = max(longest.get(c, 1), n)
    for i, (sub, shape) in enumerate(zip(explicit, shapes, strict=True)):
        letters = list(sub)
        for p, (c, n) in enumerate(zip(sub, shape, strict=True)):
            if n == 1 and longest[c] > 1:
                if not unused:
                    raise ValueError("einsum: too many broadcast axes for the letters left")
                letters[p] = unused.pop(0)
        explicit[i] = "".join(letters)
    return explicit, out


def einsum(subscripts: str, *operands) -> Tensor:
    """`einsum('ij,jk->ik', a, b)`: NumPy's and PyTorch's einsum, differentiable in every operand.

    Implicit output ('ij,jk' means 'ij,jk->ik'), repeated indices ('ii->i' diagonal, 'ii->'
    trace, 'ii' trace) and '...' with broadcasting, as in NumPy. Operands may also be passed
    as one list (PyTorch's `einsum(eq, [a, b])`).
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: needs at least one operand")
    tensors = [as_tensor(x) for x in operands]
    subs, out = _parse(subscripts, [t.shape for t in tensors])
    for sub, t in zip(subs, tensors, strict=True):
        for c in set(sub):  # a repeated index must have one size: it walks a diagonal
            sizes = {n for ch, n in zip(sub, t.shape, strict=True) if ch == c}
            if len(sizes) > 1:
                raise ValueError(
                    f"einsum: index '{c}' repeats in one operand with different sizes {sorted(sizes)} (shape {t.shape})"
                )
    return einsum_explicit(tuple(subs), out, *tensors)
