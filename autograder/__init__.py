"""autograder: the instructor's tools for the course, a command line over nbgrader's Python API.

    python -m autograder release a02_broadcasting      # student version + leak scan (or: --all)
    python -m autograder check a02_broadcasting        # self-test: solutions, unanswered, mutants
    python -m autograder collect a02_broadcasting export.zip [--map ids.csv]
    python -m autograder grade a02_broadcasting --jobs 2   # resumable; rerun after an interruption
    python -m autograder feedback a02_broadcasting     # HTML, hidden tests removed, math offline
    python -m autograder report a02_broadcasting       # reports/<assignment>/grades.csv + plots
    python -m autograder demo [a02_broadcasting]       # the whole loop on synthetic submissions

Global options: ``--course DIR`` (default ``assignments/``), ``--db URL`` (any SQLAlchemy URL;
default the SQLite ``gradebook.db`` of the course).

Who runs what, a folder each:

* ``cli.py`` and ``commands/``: the instructor's commands, in the grader's own process
  (``release``, ``collect``, ``grade``, ``feedback``, ``report``, ``demo``);
* ``grading/``: what ``grade`` runs beneath it (``executors``: this machine or a Dask cluster,
  ``workers``: one per student, ``record``: the ledger and the gradebook writes);
* ``course/``: the course model (``Course``: folders and gradebook; ``notebook``: cells, their
  nbgrader metadata, solution and hidden-test regions, the judge's message on a test cell;
  ``regions``, ``nbgrader_glue``, ``lms``);
* ``judge/``: the trusted judge, in the grading workers, never running student code (``worker``:
  one student, ``submission``: a whole submission, ``restore``: its structure from the source
  notebook, ``judge``: one exercise, ``session``: the sandbox, its channel and the proxies,
  ``sealed``: the other exercises' references, ``scrub``: what a message may not quote,
  ``catalogue``: every exercise's spec and check, found by id, ``checks``: what checks are built
  from);
* ``exercises/`` and ``mutants/``: the catalogue of checks (one module per assignment) and of
  mutants and alternatives;
* ``sandbox/``: inside the sandbox, beside student code (standard library and NumPy only);
* ``kit/``: the students' ``coursekit/``, built from ``solutions/``; ``kit/shipped/`` holds the
  files it ships as they are (its ``__init__`` and its answer loader), which run beside student
  code and import nothing of the grader;
* ``authoring/``: for whoever writes the course (``sync``, ``selfcheck`` = ``autograder check``).


Conventions for assignment writers
----------------------------------

Files::

    assignments/nbgrader_config.py                 course configuration (owned by the tools)
    assignments/source/aNN_name/aNN_name.ipynb     source notebook: solutions and hidden tests in
    assignments/source/aNN_name/<helper files>     released with the notebook (.py, data); no solutions
    autograder/exercises/aNN_name.py               hidden checks, ``@graded("aNN-...", ...)`` (see judge/catalogue.py);
                                                   or a package ``aNN_name/`` (a05_layers/)
    autograder/mutants/aNN_name.py                 ``MUTANTS = [Mutant(...)]`` (see autograder.mutants)

An exercise is one function or class the student writes. Its id is ``aNN-<name>``: lowercase,
words joined by ``-``, starting with the assignment's ``aNN`` (e.g. ``a02-mul``). Its
cells, by nbgrader cell type and ``grade_id``:

=============================  =====================  ============================================
nbgrader cell type             grade_id               content
=============================  =====================  ============================================
"Autograded answer" (code)     ``aNN-name``           the student's function or class: signature
                                                      and docstring, then ``### BEGIN SOLUTION`` /
                                                      ``### END SOLUTION`` around the body
"Autograder tests" (points)    ``aNN-name-visible``   asserts the student can read and run
"Autograder tests" (points)    ``aNN-name-hidden``    ``### BEGIN HIDDEN TESTS``
                               (more cells:           ``# judged outside the notebook, by the``
                               ``-hidden-2``, ...)    ``# check "aNN-name" on Name``
                                                      ``### END HIDDEN TESTS``
"Manually graded answer"       ``aNN-name-written``   a written answer; the question goes in a
(markdown, points)                                    separate markdown cell above it, because
                                                      nbgrader replaces the whole answer cell
=============================  =====================  ============================================

Rules the tools rely on:

* Every ``grade_id`` is unique in its source notebook (a student's duplicates are repaired).
* The suffixes ``-visible``, ``-hidden[-k]``, ``-written`` are how the tools map a cell to its
  exercise (:func:`autograder.course.notebook.exercise_of`); other cells of an exercise must not use
  them in another sense.
* The tests of one exercise depend only on that exercise's code: no state shared between the
  cells of different exercises, no later exercise calling an earlier one (give it the reference
  implementation in a locked cell instead). ``autograder check`` fails a mutant that costs points
  outside its exercise.
* A hidden check's failure message names the kind of mistake, never the hidden inputs or the
  expected values; it is what the student reads in the feedback.
* A verdict is per exercise and decides all of its test cells; test cells never run at grading.
* Before an assignment is released: ``check`` passes (solutions score full marks, the unanswered
  notebook scores 0 on every test, each mutant is caught by its own exercise only) and
  ``release`` reports no leak (no solution region, hidden test or secret line of the reference
  engine in any released file, see :mod:`autograder.commands.release`; a line that must quote one on
  purpose ends with ``# release-scan: allow``).
* Notebooks may import the course kit (``coursekit``, :mod:`autograder.kit`): ``release``
  generates it into the release folder; the judge gives each sandbox the kit with only the
  judged exercise stubbed.
"""
