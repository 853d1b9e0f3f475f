"""Hidden checks of a01_graphs.

Part 1, the scalar engine of `solutions/scalar.py` (micrograd-like): every function is graded by
the trusted judge: the student's answer runs in the sandbox's engine
(`student_module("solutions.scalar")`), where `Value`, `as_value` and every other exercise are the
reference ones, so a wrong `mul` does not cost points in `backward`; the reference runs here, and
only plain numbers cross. Ops are called on the sandbox's Values whose `grad` already holds some
gradient (as if another consumer had sent its share), which tells an overwrite (`=`) from an
accumulation (`+=`). Graphs for `topological_order` and `backward` are built in the sandbox with
its engine's ops (the reference ones there) and walked through proxies: a node is known by its
handle, not by `is`. The same graphs built here with the reference engine give the expected
gradients.

Part 2, the tensor engine's graph walk of `solutions/graph.py` (`toposort`, `run_backward`,
`no_grad`), checked the same way on Tensors: the sandbox's ops are the reference ones, so only
the walk is the student's.
"""
# The parts in the notebook's order: @graded declares each exercise as its module is imported.
from . import scalar, tensor_graph  # noqa: F401, I001
