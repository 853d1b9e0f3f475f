"""Beneath ``autograder grade``, on the instructor's side (trusted; no student code runs here):

* ``run``: the grading run (its lock, the students it grades, the loop that records each one);
* ``executors``: where the grading workers run, this machine (a forkserver) or a Dask cluster;
* ``workers``: one worker per student, its scratch folder, its limits, killing it whole;
* ``record``: the ledger and the gradebook writes, made only by the one process that drives the run;
* ``control``: the run's time limits (an exercise's budget, a student's wall clock) and its stop on Ctrl-C.

Inside each worker, the judge (:mod:`autograder.judge`) grades the submission exercise by exercise,
each in a sandbox of its own (:mod:`autograder.sandbox`)."""
