"""Tools for whoever writes the course, run from its repository: ``sync`` (the notebooks' answer
cells from ``solutions/`` and their hidden test cells from ``@graded``: ``autograder sync``) and
``selfcheck`` (``autograder check``: the solutions at full marks, the unanswered notebook at zero,
each mutant caught by its own exercise with its phrase, each alternative at full marks)."""
