"""Classic student bugs in a01_graphs (part 1: the scalar engine; part 2: the tensor engine's graph
walk), one solution region each.

`autograder check a01_graphs` plants each one in the source notebook and expects it to lose points
on its own exercise only; `tests/grader/test_exercises.py` plants each one in solutions/scalar.py and
expects the hidden check to fail with a message containing its `expect` phrase (the kind of
mistake, as the student will read it).
"""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(
        id="add-overwrites-grad",
        expect="instead of accumulate",
        exercise="a01-add",
        find="a.grad += out.grad\n        b.grad += out.grad",
        replace="a.grad = out.grad\n        b.grad = out.grad",
        why="`=` instead of `+=`: a value used twice keeps only the last contribution",
    ),
    Mutant(
        id="mul-overwrites-grad",
        expect="instead of accumulate",
        exercise="a01-mul",
        find="a.grad += b.data * out.grad\n        b.grad += a.data * out.grad",
        replace="a.grad = b.data * out.grad\n        b.grad = a.data * out.grad",
        why="`=` instead of `+=`: mul(a, a) gets a instead of 2a",
    ),
    Mutant(
        id="mul-swapped",
        expect="the inputs are swapped",
        exercise="a01-mul",
        find="a.grad += b.data * out.grad",
        replace="a.grad += a.data * out.grad",
        why="d(ab)/da taken as a instead of b",
    ),
    Mutant(
        id="power-off-by-one",
        expect="off by one",
        exercise="a01-power",
        find="exponent * a.data ** (exponent - 1) * out.grad",
        replace="exponent * a.data ** exponent * out.grad",
        why="the power rule without lowering the exponent",
    ),
    Mutant(
        id="power-no-zero-exponent-guard",
        expect="guard the case p = 0",
        exercise="a01-power",
        find="        if exponent == 0:  # c = 1 whatever a is: nothing to send (and 0.0 ** -1 would raise)\n"
             "            return\n",
        replace="",
        why="no guard for exponent 0: at a = 0 the gradient becomes 0 * inf (or a ZeroDivisionError)",
    ),
    Mutant(
        id="power-zero-exponent-nan",
        expect="guard the case p = 0",
        exercise="a01-power",
        find="        if exponent == 0:  # c = 1 whatever a is: nothing to send (and 0.0 ** -1 would raise)\n"
             "            return\n",
        replace="        if exponent == 0:\n            a.grad += 0 * math.inf * out.grad\n            return\n",
        why="exponent 0 at a = 0 computed as 0 * inf: nan",
    ),
    Mutant(
        id="power-no-infinite-slope",
        expect="infinite slope",
        exercise="a01-power",
        find="if a.data == 0 and exponent < 1:",
        replace="if False:",
        why="no guard at a = 0 for p < 1: Python's 0.0 ** -0.5 raises ZeroDivisionError",
    ),
    Mutant(
        id="exp-uses-input",
        expect="use out.data",
        exercise="a01-exp",
        find="a.grad += out.data * out.grad",
        replace="a.grad += a.data * out.grad",
        why="exp'(a) = exp(a), not a",
    ),
    Mutant(
        id="tanh-squares-input",
        expect="square the output",
        exercise="a01-tanh",
        find="(1.0 - t * t)",
        replace="(1.0 - a.data * a.data)",
        why="tanh' written as 1 - x^2 instead of 1 - tanh(x)^2",
    ),
    Mutant(
        id="relu-no-mask",
        expect="only where its input is > 0",
        exercise="a01-relu",
        find="a.grad += (1.0 if a.data > 0 else 0.0) * out.grad",
        replace="a.grad += out.grad",
        why="relu passes gradient for negative inputs too",
    ),
    Mutant(
        id="topo-no-visited-set",
        expect="more than once",
        exercise="a01-topological-order",
        find="elif node not in visited:",
        replace="else:",
        why="no visited set: shared nodes are listed (and expanded) once per path",
    ),
    Mutant(
        id="topo-preorder",
        expect="before one of its children",
        exercise="a01-topological-order",
        find=("if children_done:\n            order.append(node)\n        elif node not in visited:\n"
              "            visited.add(node)"),
        replace=("if children_done:\n            pass\n        elif node not in visited:\n"
                 "            visited.add(node)\n            order.append(node)"),
        why="a node is listed before its children (pre-order), so the root comes first",
    ),
    Mutant(
        id="topo-recursive",
        expect="recursion limit",
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
        expect="more than once",
        exercise="a01-backward",
        find="for node in reversed(order):\n        node._backward()",
        replace=("def visit(node):\n        node._backward()\n        for child in node._children:\n"
                 "            visit(child)\n\n    visit(root)"),
        why="a recursive backward: every path is walked, shared nodes send gradient "
            "many times (too large) and a diamond ladder takes exponential time",
    ),
    Mutant(
        id="backward-forward-order",
        expect="reverse topological order",
        exercise="a01-backward",
        find="for node in reversed(order):",
        replace="for node in order:",
        why="closures called leaves first, before any gradient has arrived",
    ),
    Mutant(
        id="backward-no-seed",
        expect="seed",
        exercise="a01-backward",
        find="root.grad = 1.0",
        replace="pass",
        why="the root's gradient is never set to 1, so nothing flows",
    ),
    # -- part 2: the tensor engine's graph walk ------------------------------------------------
    Mutant(
        id="toposort-recursive",
        expect="recursion limit",
        exercise="a01-toposort",
        find=("    stack = [(root, False) for root in reversed(roots)]\n    while stack:\n"
              "        node, inputs_done = stack.pop()\n        if inputs_done:\n"
              "            order.append(node)  # every input of node is already in order\n"
              "        elif id(node) not in visited:  # Tensor's == is elementwise: compare identities\n"
              "            visited.add(id(node))\n            stack.append((node, True))\n"
              "            if node.grad_fn is not None:\n                for x in node.grad_fn.inputs:\n"
              "                    if x.requires_grad:\n                        stack.append((x, False))\n"),
        replace=("\n    def visit(node):\n        if id(node) not in visited:\n            visited.add(id(node))\n"
                 "            if node.grad_fn is not None:\n                for x in node.grad_fn.inputs:\n"
                 "                    if x.requires_grad:\n                        visit(x)\n"
                 "            order.append(node)\n\n    for root in roots:\n        visit(root)\n"),
        why="a recursive depth-first search: correct, but a long chain exceeds Python's recursion limit",
    ),
    Mutant(
        id="toposort-no-visited-set",
        expect="more than once",
        exercise="a01-toposort",
        find="elif id(node) not in visited:",
        replace="else:",
        why="no visited set: a shared tensor is listed (and expanded) once per path",
    ),
    Mutant(
        id="toposort-equality",
        expect="id(t)",
        exercise="a01-toposort",
        find=("    order, visited = [], set()\n    stack = [(root, False) for root in reversed(roots)]\n"
              "    while stack:\n        node, inputs_done = stack.pop()\n        if inputs_done:\n"
              "            order.append(node)  # every input of node is already in order\n"
              "        elif id(node) not in visited:  # Tensor's == is elementwise: compare identities\n"
              "            visited.add(id(node))"),
        replace=("    order, visited = [], []\n    stack = [(root, False) for root in reversed(roots)]\n"
                 "    while stack:\n        node, inputs_done = stack.pop()\n        if inputs_done:\n"
                 "            order.append(node)\n"
                 "        elif node not in visited:\n"
                 "            visited.append(node)"),
        why="visited kept in a list: `t in a_list` compares tensors with ==, elementwise",
    ),
    Mutant(
        id="toposort-preorder",
        expect="before one of its inputs",
        exercise="a01-toposort",
        find=("        if inputs_done:\n            order.append(node)  # every input of node is already in order\n"
              "        elif id(node) not in visited:  # Tensor's == is elementwise: compare identities\n"
              "            visited.add(id(node))"),
        replace=("        if inputs_done:\n            pass\n"
                 "        elif id(node) not in visited:  # Tensor's == is elementwise: compare identities\n"
                 "            visited.add(id(node))\n            order.append(node)"),
        why="a tensor is listed before its inputs (pre-order), so the root comes first",
    ),
    Mutant(
        id="toposort-keeps-constants",
        expect="does not require grad",
        exercise="a01-toposort",
        find="                    if x.requires_grad:\n                        stack.append((x, False))",
        replace="                    stack.append((x, False))",
        why="constants (tensors that do not require grad) are listed too",
    ),
    Mutant(
        id="run-backward-overwrites",
        expect="instead of overwriting",
        exercise="a01-run-backward",
        find="pending[id(x)] = gx if total is None else add_grads(total, gx)",
        replace="pending[id(x)] = gx",
        why="the gradient arriving at a tensor replaces the ones it already received",
    ),
    Mutant(
        id="run-backward-forward-order",
        expect="reverse topological order",
        exercise="a01-run-backward",
        find="for node in reversed(toposort(roots)):",
        replace="for node in toposort(roots):",
        why="the walk starts at the leaves, before any gradient has reached them",
    ),
    Mutant(
        id="run-backward-naive-recursion",
        expect="once per path",
        exercise="a01-run-backward",
        find=("    with set_grad_enabled(create_graph):  # record the backward pass only to differentiate it\n"
              "        for node in reversed(toposort(roots)):\n"
              "            g = pending.pop(id(node), None)\n"
              "            if g is None:  # no consumer sent it a gradient\n"
              "                continue\n"),
        replace=("    def visit(node, g):\n"
                 "        fn = node.grad_fn\n"
                 "        if fn is None or node.retains_grad:\n"
                 "            node.grad = g.clone() if node.grad is None else add_grads(node.grad, g)\n"
                 "        if fn is not None:\n"
                 "            for x, gx in input_grads(fn, g):\n"
                 "                visit(x, gx)\n\n"
                 "            if not retain_graph:\n"
                 "                fn.free()\n\n"
                 "    with set_grad_enabled(create_graph):\n"
                 "        for k, root in enumerate(roots):\n"
                 "            visit(root, Tensor(np.ones_like(root.data)) if grads is None else grads[k])\n"
                 "        for node in []:\n"
                 "            g = None\n"),
        why="a recursive walk: every path is followed, with no order and no limit",
    ),
    Mutant(
        id="run-backward-grad-overwritten",
        expect="across backward calls",
        exercise="a01-run-backward",
        find="node.grad = g.clone() if node.grad is None else add_grads(node.grad, g)",
        replace="node.grad = g.clone()",
        why="a leaf's .grad is replaced at each backward call instead of accumulating",
    ),
    Mutant(
        id="run-backward-no-clone",
        expect="g.clone()",
        exercise="a01-run-backward",
        find="node.grad = g.clone() if node.grad is None else add_grads(node.grad, g)",
        replace="node.grad = g if node.grad is None else add_grads(node.grad, g)",
        why="the first gradient is stored as it is: two leaves (or the caller's grad) share one Tensor",
    ),
    Mutant(
        id="run-backward-retains-every-grad",
        expect="retain_grad()",
        exercise="a01-run-backward",
        find="if fn is None or node.retains_grad:  # a leaf, or a tensor asked to keep its gradient",
        replace="if True:",
        why="every intermediate tensor keeps its .grad",
    ),
    Mutant(
        id="run-backward-ignores-retain-grad",
        expect="retains_grad",
        exercise="a01-run-backward",
        find="if fn is None or node.retains_grad:  # a leaf, or a tensor asked to keep its gradient",
        replace="if fn is None:",
        why="retain_grad() has no effect",
    ),
    Mutant(
        id="run-backward-scalar-seed",
        expect="seed",
        exercise="a01-run-backward",
        find="g = Tensor(np.ones_like(root.data)) if grads is None else grads[k]",
        replace="g = Tensor(1.0) if grads is None else grads[k]",
        why="the scalar engine's seed, 1.0: the wrong shape (and dtype) for a one-element tensor",
    ),
    Mutant(
        id="run-backward-duplicate-root",
        expect="listed twice",
        exercise="a01-run-backward",
        find="pending[id(root)] = g if total is None else add_grads(total, g)",
        replace="pending[id(root)] = g",
        why="a root listed twice (or several roots sharing one) keeps only its last seed",
    ),
    Mutant(
        id="run-backward-never-frees",
        expect="fn.free()",
        exercise="a01-run-backward",
        find="            if not retain_graph:\n                fn.free()",
        replace="            pass",
        why="the graph is never freed: a second backward silently reuses it",
    ),
    Mutant(
        id="run-backward-frees-with-retain-graph",
        expect="retain_graph=True must keep the graph",
        exercise="a01-run-backward",
        find="            if not retain_graph:\n                fn.free()",
        replace="            fn.free()",
        why="retain_graph=True is ignored: the graph is freed anyway",
    ),
    Mutant(
        id="run-backward-frees-too-early",
        expect="freed before its backward ran",
        exercise="a01-run-backward",
        find=("                pending[id(x)] = gx if total is None else add_grads(total, gx)\n"
              "            if not retain_graph:\n                fn.free()"),
        replace=("                pending[id(x)] = gx if total is None else add_grads(total, gx)\n"
                 "                if not retain_graph and x.grad_fn is not None:\n"
                 "                    x.grad_fn.free()"),
        why="an op is freed as soon as a consumer sends it a gradient, before its own backward ran",
    ),
    Mutant(
        id="run-backward-sums-data",
        expect="not from .data",
        exercise="a01-run-backward",
        find="pending[id(x)] = gx if total is None else add_grads(total, gx)",
        replace="pending[id(x)] = gx if total is None else Tensor(total.data + gx.data)",
        why="gradients summed from .data: the sum is not recorded, so create_graph loses it",
    ),
    Mutant(
        id="run-backward-never-records",
        expect="create_graph=True",
        exercise="a01-run-backward",
        find="with set_grad_enabled(create_graph):",
        replace="with set_grad_enabled(False):",
        why="create_graph is ignored: the backward pass is never recorded",
    ),
    Mutant(
        id="run-backward-skips-the-check",
        expect="input_grads",
        exercise="a01-run-backward",
        find="for x, gx in input_grads(fn, g):",
        replace=("for x, gx in [(x, gx) for x, gx, needed in zip(fn.inputs, fn.backward(g) if len(fn.inputs) > 1 "
                 "else (fn.backward(g),), fn.needs_input_grad) if needed and gx is not None]:"),
        why="fn.backward called directly instead of through input_grads: nothing checks the gradients",
    ),
    Mutant(
        id="no-grad-switches-on",
        expect="restore the mode that was on before",
        exercise="a01-no-grad",
        find="set_grad_enabled(self.previous)",
        replace="set_grad_enabled(True)",
        why="leaving a block always switches recording on, even inside an outer no_grad",
    ),
    Mutant(
        id="no-grad-previous-on-the-class",
        expect="not on the class",
        exercise="a01-no-grad",
        find="self.previous = is_grad_enabled()",
        replace="no_grad.previous = is_grad_enabled()",
        why="the previous mode is kept on the class: a nested block overwrites the outer one's",
    ),
    Mutant(
        id="no-grad-not-restored-on-error",
        expect="even when the block raises",
        exercise="a01-no-grad",
        find="set_grad_enabled(self.previous)",
        replace="if exc[0] is None:\n            set_grad_enabled(self.previous)",
        why="the mode is restored only when the block ends normally",
    ),
    Mutant(
        id="no-grad-swallows-exceptions",
        expect="swallows",
        exercise="a01-no-grad",
        find="set_grad_enabled(self.previous)",
        replace="set_grad_enabled(self.previous)\n        return True",
        why="__exit__ returns True, which swallows every exception raised in the block",
    ),
    Mutant(
        id="no-grad-records",
        expect="record nothing",
        exercise="a01-no-grad",
        find="set_grad_enabled(False)",
        replace="set_grad_enabled(True)",
        why="recording is never switched off",
    ),
    Mutant(
        id="no-grad-toggles",
        expect="not flip it",
        exercise="a01-no-grad",
        find="set_grad_enabled(False)",
        replace="set_grad_enabled(not self.previous)",
        why="__enter__ flips the mode instead of switching recording off: a nested block records again",
    ),
    Mutant(
        id="topo-cuts-the-graph",
        expect="must not change the graph",
        exercise="a01-topological-order",
        find="stack = [(root, False)]",
        replace="root._children = ()  # walked from here: nothing below\n    stack = [(root, False)]",
        why="the walk detaches the root from its children, so the graph left behind is the root alone",
    ),
    Mutant(
        id="topo-cuts-while-walking",
        expect="must not change the graph",
        exercise="a01-topological-order",
        find="            for child in node._children:\n                stack.append((child, False))",
        replace=("            for child in node._children:\n                stack.append((child, False))\n"
                 "            node._children = ()  # expanded: done with it"),
        why="each node's _children are emptied once expanded: the order is right, the graph is gone",
    ),
    Mutant(
        id="backward-cuts-the-graph",
        expect="must not change the graph",
        exercise="a01-backward",
        find="root.grad = 1.0",
        replace="root.grad = 1.0\n    root._children = ()",
        why="backward detaches the root from its children after the walk is planned",
    ),
    Mutant(
        id="toposort-cuts-the-graph",
        expect="must not change the graph",
        exercise="a01-toposort",
        find="            order.append(node)  # every input of node is already in order\n",
        replace=("            order.append(node)  # every input of node is already in order\n"
                 "            node.grad_fn = None  # listed: detach it\n"),
        why="each tensor is detached from its op once listed: the order is right, the graph is gone",
    ),
    Mutant(
        id="toposort-cuts-the-roots",
        expect="must not change the graph",
        exercise="a01-toposort",
        find="    stack = [(root, False) for root in reversed(roots)]\n",
        replace=("    for root in roots:\n        root.grad_fn = None\n"
                 "    stack = [(root, False) for root in reversed(roots)]\n"),
        why="the roots are detached before the walk, so the order is the roots alone",
    ),
]


# Correct answers in other styles: each must keep full marks (tests/grader/test_exercises.py, `check`).
ALTERNATIVES = [
    Mutant(id="seed-with-an-int", exercise="a01-backward",
           find="root.grad = 1.0", replace="root.grad = 1",
           why="the contract says seed the root with 1; an int is a legitimate 1"),
]
ALTERNATIVES += [
    Mutant(id="add-int-local-derivative-and-a-print", exercise="a01-add",
           find="a.grad += out.grad\n        b.grad += out.grad",
           replace=("print('add backward:', out.grad)\n        a.grad = a.grad + 1 * out.grad\n"
                    "        b.grad = b.grad + 1 * out.grad"),
           why="an int local derivative, `x = x + ...` instead of `+=`, and a print in the closure"),
    Mutant(id="mul-numpy-scalars", exercise="a01-mul",
           find="a.grad += b.data * out.grad\n        b.grad += a.data * out.grad",
           replace="a.grad += np.float64(out.grad) * b.data\n        b.grad += np.multiply(out.grad, a.data)",
           why="NumPy scalars instead of Python floats: a grad that is an np.float64 is still a number"),
    Mutant(id="power-one-expression", exercise="a01-power",
           find=("        if exponent == 0:  # c = 1 whatever a is: nothing to send (and 0.0 ** -1 would raise)\n"
                 "            return\n"
                 "        if a.data == 0 and exponent < 1:  # a^(p-1) is infinite at 0: the slope is p * inf, as "
                 "NumPy's\n"
                 "            a.grad += math.copysign(math.inf, exponent) * out.grad\n"
                 "        else:\n"
                 "            a.grad += exponent * a.data ** (exponent - 1) * out.grad\n"),
           replace=("        def slope(x, p):  # a helper defined inside the answer\n"
                    "            if not p:\n                return 0\n"
                    "            if x == 0 and p < 1:\n"
                    "                return float('inf') if p > 0 else float('-inf')\n"
                    "            return p * pow(x, p - 1)\n"
                    "        a.grad += slope(a.data, exponent) * out.grad\n"),
           why="the guards in a helper defined inside the answer, an int 0, float('inf') and pow()"),
    Mutant(id="exp-math-e", exercise="a01-exp",
           find="a.grad += out.data * out.grad",
           replace="a.grad += math.exp(a.data) * out.grad",
           why="recomputing exp(a) instead of reusing the output: the same number"),
    Mutant(id="tanh-from-exp", exercise="a01-tanh",
           find="t = math.tanh(a.data)",
           replace="t = 1.0 - 2.0 / (math.exp(2 * a.data) + 1.0)",
           why="tanh from its exponential formula (in a form that does not overflow for large inputs)"),
    Mutant(id="relu-max-and-bool-mask", exercise="a01-relu",
           find="a.grad += (1.0 if a.data > 0 else 0.0) * out.grad",
           replace="a.grad += (out.data > 0) * out.grad",
           why="a bool mask (True * g) taken from the output instead of a float from the input"),
    Mutant(id="topological-order-kahn", exercise="a01-topological-order",
           find=("stack = [(root, False)]\n    while stack:\n        node, children_done = stack.pop()\n"
                 "        if children_done:\n            order.append(node)\n        elif node not in visited:\n"
                 "            visited.add(node)\n            stack.append((node, True))\n"
                 "            for child in node._children:\n                stack.append((child, False))\n"
                 "    return order"),
           replace=("nodes, stack = [], [root]  # Kahn's algorithm: count each node's users first\n"
                    "    visited.add(root)\n    while stack:\n        node = stack.pop()\n        nodes.append(node)\n"
                    "        for child in node._children:\n            if child not in visited:\n"
                    "                visited.add(child)\n                stack.append(child)\n"
                    "    users = {node: 0 for node in nodes}\n    for node in nodes:\n"
                    "        for child in node._children:\n            users[child] += 1\n"
                    "    ready = [root]\n    while ready:\n        node = ready.pop()\n        order.append(node)\n"
                    "        for child in node._children:\n            users[child] -= 1\n"
                    "            if users[child] == 0:\n                ready.append(child)\n"
                    "    return tuple(reversed(order))"),
           why="Kahn's algorithm (count users, then peel from the root), returned as a tuple"),
    Mutant(id="backward-index-loop", exercise="a01-backward",
           find="for node in reversed(order):\n        node._backward()",
           replace="for i in range(len(order) - 1, -1, -1):\n        order[i]._backward()",
           why="an index loop from the end instead of reversed()"),
    Mutant(id="toposort-iterators", exercise="a01-toposort",
           find=("    stack = [(root, False) for root in reversed(roots)]\n    while stack:\n"
                 "        node, inputs_done = stack.pop()\n        if inputs_done:\n"
                 "            order.append(node)  # every input of node is already in order\n"
                 "        elif id(node) not in visited:  # Tensor's == is elementwise: compare identities\n"
                 "            visited.add(id(node))\n            stack.append((node, True))\n"
                 "            if node.grad_fn is not None:\n                for x in node.grad_fn.inputs:\n"
                 "                    if x.requires_grad:\n                        stack.append((x, False))\n"),
           replace=("    def inputs(t):  # a helper defined inside the answer\n"
                    "        return iter([x for x in t.grad_fn.inputs if x.requires_grad] if t.grad_fn else [])\n\n"
                    "    for root in roots:\n        if id(root) in visited:\n            continue\n"
                    "        visited.add(id(root))\n        stack = [(root, inputs(root))]\n"
                    "        while stack:\n            node, pending = stack[-1]\n"
                    "            for x in pending:\n                if id(x) not in visited:\n"
                    "                    visited.add(id(x))\n                    stack.append((x, inputs(x)))\n"
                    "                    break\n            else:\n                stack.pop()\n"
                    "                order.append(node)\n"),
           why="a depth-first search with a stack of iterators (each input visited as it is met)"),
    Mutant(id="run-backward-ones-of-shape", exercise="a01-run-backward",
           find="g = Tensor(np.ones_like(root.data)) if grads is None else grads[k]",
           replace=("if grads is None:\n            g = Tensor(np.ones(root.shape, dtype=root.data.dtype))\n"
                    "        else:\n            g = grads[k]"),
           why="np.ones(shape, dtype) instead of np.ones_like, in an if statement"),
    Mutant(id="run-backward-kit-no-grad", exercise="a01-run-backward",
           find="    with set_grad_enabled(create_graph):",
           replace=("    from coursekit.engine import enable_grad, no_grad\n"
                    "    with (enable_grad() if create_graph else no_grad()):"),
           why="the kit's no_grad and enable_grad (an exercise of this assignment, so sealed while "
               "run_backward is judged: its __enter__ must still switch the sandbox's mode and keep its state)"),
    Mutant(id="no-grad-previous-from-the-switch", exercise="a01-no-grad",
           find="set_grad_enabled(self.previous)",
           replace="set_grad_enabled(self.previous)\n        return False",
           why="__exit__ returning False explicitly (a false value does not swallow the exception)"),
    Mutant(id="power-zero-exponent-default-backward", exercise="a01-power",
           find=("    def _backward():\n"
                 "        if exponent == 0:  # c = 1 whatever a is: nothing to send (and 0.0 ** -1 would raise)\n"
                 "            return\n"),
           replace=("    if exponent == 0:  # c = 1 is a constant: the default _backward (sends nothing) is right\n"
                    "        return out\n\n"
                    "    def _backward():\n"),
           why="p = 0 returns the output with its default _backward (it sends nothing, as the contract asks)"),
]
