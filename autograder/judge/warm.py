"""The forkserver's preload: import the worker and warm what every worker needs, once.

Only the grading forkserver imports this module (``set_forkserver_preload`` in
:mod:`autograder.grading.workers`); the workers it forks start warm. Anything else imports
:mod:`autograder.judge.worker` itself, which warms nothing.
"""
from autograder.judge import worker

worker.preload()
