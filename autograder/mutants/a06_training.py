"""Classic bugs of a06's train_step (see autograder/mutants/__init__.py)."""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(id="no-zero-grad", expect="call optimizer.zero_grad() before loss.backward()", exercise="a06-train-step",
           find="    optimizer.zero_grad()\n", replace="",
           why="gradients of every earlier step accumulate into each update"),
    Mutant(id="zero-grad-after-backward", expect="did not change", exercise="a06-train-step",
           find="    optimizer.zero_grad()\n    loss.backward()\n",
           replace="    loss.backward()\n    optimizer.zero_grad()\n",
           why="the gradients are wiped before the step uses them: nothing trains"),
    Mutant(id="step-before-backward", expect="the order is zero_grad, backward, step", exercise="a06-train-step",
           find="    loss.backward()\n    optimizer.step()\n", replace="    optimizer.step()\n    loss.backward()\n",
           why="each update uses no gradient (the first step) or the previous batch's"),
    Mutant(id="backward-twice", expect="2 times what one backward pass gives", exercise="a06-train-step",
           find="    loss.backward()\n", replace="    loss.backward(retain_graph=True)\n    loss.backward()\n",
           why="the second backward adds the batch's gradient again: every update is twice too large"),
    Mutant(id="no-step", expect="did not change", exercise="a06-train-step",
           find="    optimizer.step()\n", replace="",
           why="the parameters never change"),
    Mutant(id="returns-loss-only", expect="(loss, logits)", exercise="a06-train-step",
           find="return loss, logits", replace="return loss",
           why="the training loop unpacks (loss, logits)"),
    Mutant(id="logits-after-the-step", expect="not model(x) before the update", exercise="a06-train-step",
           find="return loss, logits", replace="return loss, model(x)",
           why="the returned logits come from a second forward pass, after the update"),
]


# Correct answers in other legitimate styles: each must keep full marks (tests/grader/test_exercises.py).
ALTERNATIVES = [
    Mutant(id="zero-grad-first-forward-method-list", exercise="a06-train-step",
           find=("    logits = model(x)\n    loss = loss_fn(logits, y)\n    optimizer.zero_grad()\n"
                 "    loss.backward()\n    optimizer.step()\n    return loss, logits\n"),
           replace=("    optimizer.zero_grad()\n    logits = model.forward(x)\n    loss = loss_fn(logits, y)\n"
                    "    loss.backward()\n    optimizer.step()\n    return [loss, logits]\n"),
           why="zero_grad before the forward pass, model.forward(x), and a list [loss, logits] (the loop unpacks it)"),
    Mutant(id="helper-and-bound-method", exercise="a06-train-step",
           find=("    logits = model(x)\n    loss = loss_fn(logits, y)\n    optimizer.zero_grad()\n"
                 "    loss.backward()\n    optimizer.step()\n    return loss, logits\n"),
           replace=("    def forward_and_loss(inputs, targets):\n"
                    "        out = model(inputs)\n"
                    "        return loss_fn.__call__(out, targets), out\n"
                    "\n"
                    "    loss, logits = forward_and_loss(x, y)\n"
                    "    optimizer.zero_grad()\n"
                    "    Tensor.backward(loss)\n"
                    "    step = optimizer.step  # a bound method, called below\n"
                    "    step()\n"
                    "    result = (loss, logits)\n"
                    "    return result\n"),
           why="a helper defined inside the answer, the loss through a bound __call__, Tensor.backward(loss) and "
               "optimizer.step through a bound method"),
]
