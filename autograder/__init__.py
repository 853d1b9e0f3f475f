"""autograder: the instructor's tools for the course, a command line over nbgrader's Python API.

    python -m autograder release a02_broadcasting      # student version + leak scan (or: --all)
    python -m autograder check a02_broadcasting        # self-test: solutions, unanswered, mutants
    python -m autograder collect a02_broadcasting export.zip [--map ids.csv]
    python -m autograder grade a02_broadcasting --jobs 2   # resumable; rerun after an interruption
    python -m autograder feedback a02_broadcasting     # HTML, hidden tests removed, math offline
    python -m autograder report a02_broadcasting       # reports/<assignment>/: the instructor's page, grades.csv
    python -m autograder demo [a02_broadcasting]       # the whole loop on synthetic submissions

Global options: ``--course DIR`` (default ``assignments/``), ``--db URL`` (any SQLAlchemy URL;
default the SQLite ``gradebook.db`` of the course).

Who runs what, a folder each:

* ``cli.py`` and ``commands/``: the instructor's commands, in the grader's own process
  (``release``, ``collect``, ``grade``, ``feedback``, ``report``, ``demo``);
* ``grading/``: what ``grade`` runs beneath it (``run``: the run's lock, the students it grades
  and its loop, ``executors``: this machine or a Dask cluster,
  ``workers``: one per student, ``record``: the ledger and the gradebook writes, ``control``: the
  run's time limits and its stop on Ctrl-C);
* ``analytics/``: what ``report`` shows the instructor (statistics, the judge's messages grouped
  by bug, code similarity, the page and its data), from the gradebook and the ledger;
* ``course/``: the course model (``directory``: ``Course``, its folders and gradebook, through
  nbgrader's API; ``catalogue``: every
  exercise's spec and check, found by id, and its ``title``; ``notebook``: cells, their
  nbgrader metadata, solution and hidden-test regions, the judge's message on a test cell;
  ``regions``, ``codelines``: code lines as the release scan and the judge compare them,
  ``students``: student ids, ``nbgrader_glue``, ``lms``);
* ``judge/``: the trusted judge, in the grading workers, never running student code (``worker``:
  one student, ``submission``: a whole submission, ``restore``: its structure from the source
  notebook, ``judge``: one exercise, ``context``: the exercise being judged, ``session``: the
  sandbox, its channel and the proxies, ``sealed``: the other exercises' references, ``scrub``:
  what a message may not quote, ``checks``: what checks are built from, the judge's failure type
  included);
* ``exercises/`` and ``mutants/``: the catalogue of checks (one module per assignment) and of
  mutants and alternatives;
* ``sandbox/``: inside the sandbox, beside student code (standard library and NumPy only);
* ``kit/``: the students' ``coursekit/``, built from ``solutions/``; ``kit/shipped/`` holds the
  files it ships as they are (its ``__init__`` and its answer loader), which run beside student
  code and import nothing of the grader;
* ``authoring/``: for whoever writes the course (``sync``, ``selfcheck`` = ``autograder check``).

The folders stand on floors, the ground first: ``course/`` and ``sandbox/``; ``kit/``; ``judge/``;
``exercises/``, ``mutants/`` and ``grading/``; ``analytics/``; ``commands/``; ``authoring/``; ``cli.py``.
No module imports a later floor, and none comes back to itself through its imports
(``tests/grader/test_grader_layers.py``, which a new folder must join): what two floors share lives
on the lower.


Conventions for assignment writers (the files of an assignment, exercise ids, the nbgrader cells
of an exercise, the rules the tools rely on, adding an exercise step by step) are written once,
in ``assignments/README.md``.
"""
