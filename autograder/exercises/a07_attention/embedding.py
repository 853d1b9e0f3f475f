"""Hidden checks of a07_attention: the embedding's backward, a scatter-add."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    graded,
    in_sandbox,
    judged,
    run,
    student_engine,
    time_limit,
    type_name,
)

from .common import TIME_LIMIT, _grads, _kept, _slow


@graded("a07-embedding-backward", "solutions.ops.attention:embedding_backward_array", points=2)
def check_embedding_backward(embedding_backward_array, rng):
    import solutions as R
    S = student_engine()
    f = embedding_backward_array
    reference = judged().reference()
    cases = [("ids (N, T) = (2, 6) with repeated tokens, V = 5, E = 3", (2, 6), 5, 3, np.float64),
             ("every token the same (one id repeated 8 times)", (1, 8), 4, 2, np.float64),
             ("ids (N, T) = (3, 5), a vocabulary larger than the batch, V = 20", (3, 5), 20, 4, np.float64),
             ("1-D ids", (7,), 4, 3, np.float64),
             ("float32 gradients", (2, 5), 6, 4, np.float32)]
    with time_limit(TIME_LIMIT, _slow("embedding_backward_array")):
        for label, ids_shape, V, E, dtype in cases:
            ids = np.zeros(ids_shape, dtype=np.int64) if label.startswith("every") else \
                rng.integers(0, min(V, 4) if V < 10 else V, ids_shape)
            g = rng.standard_normal(ids_shape + (E,)).astype(dtype)
            there = {"grad": (in_sandbox(g), g.copy()), "indices": (in_sandbox(ids), ids.copy())}
            got = run(f"{label}: embedding_backward_array", f, there["grad"][0], there["indices"][0], V)
            _kept("embedding_backward_array", there, label)
            want = reference(g, ids, V)
            if not isinstance(got, np.ndarray):
                raise GradingFailure(f"{label}: embedding_backward_array returned {type_name(got)}; return an ndarray")
            if got.shape != want.shape:
                raise GradingFailure(f"{label}: dW must have shape (num_embeddings, E), one row per token of the "
                                     "table")
            if got.dtype != want.dtype:
                raise GradingFailure(f"{label}: dW is {got.dtype} for {want.dtype} gradients; keep grad's dtype")
            if close(got, want, dtype):
                continue
            last = np.zeros_like(want)
            last[ids.reshape(-1)] = g.reshape(-1, E)
            if close(got, last, dtype):
                raise GradingFailure(f"{label}: a repeated token's gradient is assigned, not accumulated: "
                                     "`dW[ids] += g` (or `=`) keeps only one of its rows (NumPy's buffered fancy "
                                     "indexing); add every one, with np.add.at or a loop")
            raise GradingFailure(f"{label}: wrong dW; row v is the sum of the gradients of every position whose "
                                 "token is v")
        # inside the engine: the embedding's backward runs the kernel
        ids = rng.integers(0, 3, (2, 4))
        w = rng.standard_normal((5, 3))
        upstream = rng.standard_normal((2, 4, 3))
        ws, wr = S.Tensor(w.copy(), requires_grad=True), R.Tensor(w.copy(), requires_grad=True)
        mine = run("the engine's embedding with your kernel", _grads, S, S.ops.embedding(ids, ws), [ws], upstream)[0]
        if mine is None or not close(mine, _grads(R, R.ops.embedding(ids, wr), [wr], upstream)[0]):
            raise GradingFailure("the engine's embedding, running your kernel in its backward, gives a wrong "
                                 "gradient: the kernel must not depend on anything but its arguments")
