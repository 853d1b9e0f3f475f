"""Classic bugs of a06's train_step (see autograder/mutants/__init__.py)."""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(id="no-zero-grad", exercise="a06-train-step",
           find="    optimizer.zero_grad()\n", replace="",
           why="gradients of every earlier step accumulate into each update"),
    Mutant(id="zero-grad-after-backward", exercise="a06-train-step",
           find="    optimizer.zero_grad()\n    loss.backward()\n", replace="    loss.backward()\n    optimizer.zero_grad()\n",
           why="the gradients are wiped before the step uses them: nothing trains"),
    Mutant(id="step-before-backward", exercise="a06-train-step",
           find="    loss.backward()\n    optimizer.step()\n", replace="    optimizer.step()\n    loss.backward()\n",
           why="each update uses no gradient (the first step) or the previous batch's"),
    Mutant(id="no-step", exercise="a06-train-step",
           find="    optimizer.step()\n", replace="",
           why="the parameters never change"),
    Mutant(id="returns-loss-only", exercise="a06-train-step",
           find="return loss, logits", replace="return loss",
           why="the training loop unpacks (loss, logits)"),
]

# A phrase of the message each mutant must get (tests/test_exercises.py).
EXPECTED = {
    "no-zero-grad": "call optimizer.zero_grad() before loss.backward()",
    "zero-grad-after-backward": "did not change",
    "step-before-backward": "the order is zero_grad, backward, step",
    "no-step": "did not change",
    "returns-loss-only": "(loss, logits)",
}
