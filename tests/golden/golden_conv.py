"""PyTorch golden fixtures for convolution and pooling (run in the torch venv only).

`make(rng)` returns {case name: {array name: ndarray}}; `tests/golden/make_golden.py` saves
them as `tests/golden/conv.npz` with keys "case/array", and `tests/engine/test_conv_golden.py`
checks the engine against them. Nothing in the test suite imports torch.

Inputs are multiples of 1/8 in [-2, 2]: every product and sum is then exact in float64, so the
fixtures compress well (the file stays small) and the engine can be held to tight tolerances.

Arrays per case (float64):
  conv2d / conv1d: x, w, [b], gout (upstream gradient), z (output), dx, dw, [db];
      second derivatives of h = <dx, u> + <dw, v> (u, v fixed random): hx, hw, hgout;
      params: stride, dilation (int arrays), padding (int array, or a 0-d string 'same'/'valid'),
      groups (0-d int).
  max_pool2d / avg_pool2d: x, gout, out, dx; hgout = d<dx, u>/d gout (the scatter's adjoint);
      params: kernel_size, stride, padding (int arrays).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

Case = dict[str, np.ndarray]

# name: (N, C, H, W), (K, KH, KW), stride, padding, dilation, groups, bias
CONV2D = {
    "conv2d_basic": ((2, 3, 7, 6), (4, 3, 3), 1, 0, 1, 1, True),
    "conv2d_stride2_pad1": ((2, 3, 8, 7), (5, 3, 3), 2, 1, 1, 1, True),
    "conv2d_stride_not_dividing": ((1, 2, 8, 9), (3, 3, 2), 3, 0, 1, 1, True),
    "conv2d_dilation2": ((2, 2, 9, 8), (3, 3, 3), 1, 1, 2, 1, True),
    "conv2d_dilation_stride": ((2, 2, 11, 10), (2, 3, 2), (2, 3), (1, 2), (2, 3), 1, True),
    "conv2d_nonsquare": ((1, 3, 6, 9), (2, 2, 4), (1, 2), (0, 1), 1, 1, False),
    "conv2d_stride_gt_kernel": ((2, 2, 9, 9), (3, 2, 2), 3, 0, 1, 1, True),
    "conv2d_1x1": ((2, 4, 5, 5), (6, 1, 1), 1, 0, 1, 1, True),
    "conv2d_1x1_stride2_pad1": ((1, 3, 5, 6), (2, 1, 1), 2, 1, 1, 1, True),
    "conv2d_groups2": ((2, 4, 6, 6), (6, 3, 3), 1, 1, 1, 2, True),
    "conv2d_depthwise": ((2, 3, 7, 7), (6, 3, 3), 2, 1, 1, 3, True),
    "conv2d_same_odd": ((2, 2, 6, 7), (3, 3, 5), 1, "same", 1, 1, True),
    "conv2d_same_even": ((2, 2, 6, 7), (3, 4, 2), 1, "same", 1, 1, True),
    "conv2d_same_even_dilated": ((1, 2, 7, 7), (2, 2, 4), 1, "same", (3, 2), 1, False),
    "conv2d_valid": ((1, 1, 5, 5), (2, 3, 3), 1, "valid", 1, 1, True),
    "conv2d_batch1_channel1": ((1, 1, 6, 6), (1, 3, 3), 2, 2, 1, 1, True),
}

# name: (N, C, L), (K, KL), stride, padding, dilation, groups, bias
CONV1D = {
    "conv1d_basic": ((2, 3, 10), (4, 3), 1, 0, 1, 1, True),
    "conv1d_stride_pad_dilation": ((2, 2, 13), (3, 3), 2, 2, 2, 1, True),
    "conv1d_groups_same": ((2, 4, 9), (4, 4), 1, "same", 1, 2, False),
}

# name: kind, (N, C, H, W), kernel_size, stride, padding, input kind
POOLS = {
    "max_pool2d_2x2": ("max", (2, 3, 8, 8), 2, None, 0, "normal"),
    "max_pool2d_ties": ("max", (2, 2, 6, 6), 2, None, 0, "ties"),
    "max_pool2d_ties_overlap": ("max", (2, 2, 7, 7), 3, 1, 1, "ties"),
    "max_pool2d_pad_nonsquare": ("max", (1, 2, 7, 8), (3, 2), (2, 1), (1, 1), "normal"),
    "max_pool2d_neg_inf": ("max", (1, 2, 6, 6), 3, 2, 1, "neg_inf"),
    "max_pool2d_nan": ("max", (1, 2, 6, 6), 2, 1, 0, "nan"),
    "avg_pool2d_2x2": ("avg", (2, 3, 8, 8), 2, None, 0, "normal"),
    "avg_pool2d_pad_overlap": ("avg", (2, 2, 7, 6), 3, 2, 1, "normal"),
    "avg_pool2d_nonsquare": ("avg", (1, 2, 9, 7), (3, 2), (1, 2), (1, 0), "normal"),
}


def _draw(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-16, 17, shape) / 8.0


def _t(a: np.ndarray, grad: bool = False) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def _params(stride, padding, dilation, groups) -> Case:
    return {
        "stride": np.atleast_1d(np.asarray(stride, dtype=np.int64)),
        "padding": (np.asarray(padding) if isinstance(padding, str)
                    else np.atleast_1d(np.asarray(padding, dtype=np.int64))),
        "dilation": np.atleast_1d(np.asarray(dilation, dtype=np.int64)),
        "groups": np.asarray(groups, dtype=np.int64),
    }


def _conv_case(rng: np.random.Generator, fn, x_shape, w_shape, stride, padding, dilation, groups, bias) -> Case:
    x = _draw(rng, x_shape)
    w = _draw(rng, w_shape)
    b = _draw(rng, w_shape[0]) if bias else None
    xt, wt = _t(x, True), _t(w, True)
    bt = _t(b, True) if bias else None
    z = fn(xt, wt, bt, stride, padding, dilation, groups)
    gout = _draw(rng, tuple(z.shape))
    gt = _t(gout, True)
    wanted = [xt, wt] + ([bt] if bias else [])
    grads = torch.autograd.grad(z, wanted, gt, create_graph=True)
    dx, dw = grads[0], grads[1]
    u, v = _draw(rng, x_shape), _draw(rng, w_shape)
    h = (dx * _t(u)).sum() + (dw * _t(v)).sum()
    hx, hw, hg = torch.autograd.grad(h, [xt, wt, gt])
    case = dict(x=x, w=w, gout=gout, z=z.detach().numpy(), dx=dx.detach().numpy(), dw=dw.detach().numpy(),
                u=u, v=v, hx=hx.numpy(), hw=hw.numpy(), hgout=hg.numpy())
    if bias:
        case.update(b=b, db=grads[2].detach().numpy())
    case.update(_params(stride, padding, dilation, groups))
    return case


def _pool_input(rng: np.random.Generator, shape, kind: str) -> np.ndarray:
    if kind == "normal":
        return _draw(rng, shape)
    x = rng.integers(-1, 2, shape).astype(np.float64)  # three values: ties in almost every window
    if kind == "neg_inf":
        x[rng.random(shape) < 0.4] = -np.inf
    if kind == "nan":
        x[rng.random(shape) < 0.15] = np.nan
    return x


def _pool_case(rng: np.random.Generator, kind, shape, kernel, stride, padding, input_kind) -> Case:
    x = _pool_input(rng, shape, input_kind)
    xt = _t(x, True)
    fn = F.max_pool2d if kind == "max" else F.avg_pool2d
    out = fn(xt, kernel, stride, padding)
    gout = _draw(rng, tuple(out.shape))
    gt = _t(gout, True)
    (dx,) = torch.autograd.grad(out, [xt], gt, create_graph=True)
    u = _draw(rng, shape)
    (hg,) = torch.autograd.grad((dx * _t(u)).sum(), [gt])
    kernel_ = np.atleast_1d(np.asarray(kernel, dtype=np.int64))
    stride_ = kernel_ if stride is None else np.atleast_1d(np.asarray(stride, dtype=np.int64))
    return dict(x=x, gout=gout, out=out.detach().numpy(), dx=dx.detach().numpy(), u=u, hgout=hg.numpy(),
                kernel_size=kernel_, stride=stride_, padding=np.atleast_1d(np.asarray(padding, dtype=np.int64)))


def make(rng: np.random.Generator) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for name, ((N, C, H, W), (K, KH, KW), s, p, d, g, bias) in CONV2D.items():
        cases[name] = _conv_case(rng, F.conv2d, (N, C, H, W), (K, C // g, KH, KW), s, p, d, g, bias)
    for name, ((N, C, L), (K, KL), s, p, d, g, bias) in CONV1D.items():
        cases[name] = _conv_case(rng, F.conv1d, (N, C, L), (K, C // g, KL), s, p, d, g, bias)
    for name, spec in POOLS.items():
        cases[name] = _pool_case(rng, *spec)
    return cases


def save(path: str = "tests/golden/conv.npz", seed: int = 20261121) -> None:
    """Write the fixtures with keys "case/array" (what make_golden.py does for every module)."""
    cases = make(np.random.default_rng(seed))
    np.savez_compressed(path, **{f"{case}/{name}": a for case, arrays in cases.items() for name, a in arrays.items()})


if __name__ == "__main__":
    save()
