"""The course kit: the engine you are building, with the exercises left for you.

    from coursekit.engine import Tensor, Function      # the engine (exercises raise NotImplementedError)
    from coursekit.testing import gradcheck            # numerical gradient checks
    from coursekit import use                          # plug your own code into the engine
    import coursekit; coursekit.status()               # your answers, from your assignment notebooks
    coursekit.diagnose()                               # which of your ops fails a gradient check

`use(Mul)` makes the engine use *your* `Mul` everywhere it used the kit's (so `a * b` and every
backward that multiplies now run your class); `use(add, mul)` for several at once. The engine
looks each op up by name when it runs, which is what makes this work (`engine/overrides.py`).

Importing the kit plugs in your answers from every one of your assignment notebooks beside this
assignment's folder, this one's own included (`coursekit/answers.py` says how;
`coursekit.load_answers(folder)` if your notebooks live elsewhere).
"""
# Shipped as coursekit/__init__.py, as it is (autograder/kit/shipped/coursekit_init.py in the course's
# repository); the exercise table beside it, _exercises.py, is written by the kit's builder.
from __future__ import annotations

from . import engine, testing
from ._exercises import AUTOLOAD, EXERCISES
from .engine import overrides

__all__ = ["engine", "testing", "use", "status", "load_answers", "diagnose"]


def use(*objs) -> None:
    """Make the kit's engine use each of `objs` (your classes and functions) by its name."""
    overrides.use(*objs, homes={name: module for name, (module, _) in EXERCISES.items()})


from . import answers  # noqa: E402  (it needs use and EXERCISES)
from .answers import diagnose, load_answers, status  # noqa: E402

if AUTOLOAD:
    # Your answers from your assignment notebooks beside this folder (coursekit/answers.py).
    answers.autoload()
