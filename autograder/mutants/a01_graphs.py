"""Classic student bugs in a01_graphs (the scalar engine), one solution region each.

`autograder check a01_graphs` plants each one in the source notebook and expects it to lose points
on its own exercise only; `tests/test_exercises.py` plants each one in solutions/scalar.py and
expects the hidden check to fail with a message containing `EXPECTED[mutant id]` (the kind of
mistake, as the student will read it).
"""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(
        id="add-overwrites-grad",
        exercise="a01-add",
        find="a.grad += out.grad\n        b.grad += out.grad",
        replace="a.grad = out.grad\n        b.grad = out.grad",
        why="`=` instead of `+=`: a value used twice keeps only the last contribution",
    ),
    Mutant(
        id="mul-overwrites-grad",
        exercise="a01-mul",
        find="a.grad += b.data * out.grad\n        b.grad += a.data * out.grad",
        replace="a.grad = b.data * out.grad\n        b.grad = a.data * out.grad",
        why="`=` instead of `+=`: mul(a, a) gets a instead of 2a",
    ),
    Mutant(
        id="mul-swapped",
        exercise="a01-mul",
        find="a.grad += b.data * out.grad",
        replace="a.grad += a.data * out.grad",
        why="d(ab)/da taken as a instead of b",
    ),
    Mutant(
        id="power-off-by-one",
        exercise="a01-power",
        find="exponent * a.data ** (exponent - 1) * out.grad",
        replace="exponent * a.data ** exponent * out.grad",
        why="the power rule without lowering the exponent",
    ),
    Mutant(
        id="exp-uses-input",
        exercise="a01-exp",
        find="a.grad += out.data * out.grad",
        replace="a.grad += a.data * out.grad",
        why="exp'(a) = exp(a), not a",
    ),
    Mutant(
        id="tanh-squares-input",
        exercise="a01-tanh",
        find="(1.0 - t * t)",
        replace="(1.0 - a.data * a.data)",
        why="tanh' written as 1 - x^2 instead of 1 - tanh(x)^2",
    ),
    Mutant(
        id="relu-no-mask",
        exercise="a01-relu",
        find="a.grad += (1.0 if a.data > 0 else 0.0) * out.grad",
        replace="a.grad += out.grad",
        why="relu passes gradient for negative inputs too",
    ),
    Mutant(
        id="topo-no-visited-set",
        exercise="a01-topological-order",
        find="elif node not in visited:",
        replace="else:",
        why="no visited set: shared nodes are listed (and expanded) once per path",
    ),
    Mutant(
        id="topo-preorder",
        exercise="a01-topological-order",
        find=("if children_done:\n            order.append(node)\n        elif node not in visited:\n"
              "            visited.add(node)"),
        replace=("if children_done:\n            pass\n        elif node not in visited:\n"
                 "            visited.add(node)\n            order.append(node)"),
        why="a node is listed before its children (pre-order), so the root comes first",
    ),
    Mutant(
        id="topo-recursive",
        exercise="a01-topological-order",
        find=("stack = [(root, False)]\n    while stack:\n        node, children_done = stack.pop()\n"
              "        if children_done:\n            order.append(node)\n        elif node not in visited:\n"
              "            visited.add(node)\n            stack.append((node, True))\n"
              "            for child in node._children:\n                stack.append((child, False))"),
        replace=("def visit(node):\n        if node not in visited:\n            visited.add(node)\n"
                 "            for child in node._children:\n                visit(child)\n"
                 "            order.append(node)\n\n    visit(root)"),
        why="a recursive depth-first search: correct, but a long chain exceeds Python's recursion limit",
    ),
    Mutant(
        id="backward-naive-recursion",
        exercise="a01-backward",
        find="for node in reversed(order):\n        node._backward()",
        replace=("def visit(node):\n        node._backward()\n        for child in node._children:\n"
                 "            visit(child)\n\n    visit(root)"),
        why="the seed article's recursive backward: every path is walked, shared nodes send gradient "
            "many times (too large) and a diamond ladder takes exponential time",
    ),
    Mutant(
        id="backward-forward-order",
        exercise="a01-backward",
        find="for node in reversed(order):",
        replace="for node in order:",
        why="closures called leaves first, before any gradient has arrived",
    ),
    Mutant(
        id="backward-no-seed",
        exercise="a01-backward",
        find="root.grad = 1.0",
        replace="pass",
        why="the root's gradient is never set to 1, so nothing flows",
    ),
]

# The kind of mistake each mutant's hidden-test message must name (checked by tests/test_exercises.py).
EXPECTED = {
    "add-overwrites-grad": "instead of accumulate",
    "mul-overwrites-grad": "instead of accumulate",
    "mul-swapped": "the inputs are swapped",
    "power-off-by-one": "off by one",
    "exp-uses-input": "use out.data",
    "tanh-squares-input": "square the output",
    "relu-no-mask": "only where its input is > 0",
    "topo-no-visited-set": "more than once",
    "topo-preorder": "before one of its children",
    "topo-recursive": "recursion limit",
    "backward-naive-recursion": "more than once",
    "backward-forward-order": "reverse topological order",
    "backward-no-seed": "seed",
}
