"""The instructor's commands, one module each, run in the grader's own process (``cli.py`` parses
the command line and calls them): ``release``, ``collect``, ``grade``, ``feedback``, ``report`` and
``demo``. What ``grade`` runs beneath it is :mod:`autograder.grading`."""
