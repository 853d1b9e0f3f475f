# nbgrader configuration of the course. The instructor's tool (`python -m autograder`, see
# autograder/__init__.py and assignments/README.md) loads this file and forces the course root and
# the gradebook URL itself, so neither is set here.

c = get_config()  # noqa: F821 (injected by traitlets when the file is loaded)

c.CourseDirectory.course_id = "autograd-course"

# Per-cell limit while autograding: nbgrader interrupts the kernel and scores the cell 0. Tests of
# a NumPy engine run in well under a second; a minute leaves room for a slow machine and a slow
# but correct student. `autograder grade` adds a whole-notebook wall limit and a memory limit.
c.Execute.timeout = 60

# nbgrader fails a test cell that writes anything to stderr. Warnings from correct code
# (a RuntimeWarning on overflow, a DeprecationWarning from a library, a student's warnings.warn)
# must not cost points, so stderr output that is a Python warning is dropped before scoring.
# nbgrader 0.9.6 has one IgnorePattern regex (re.search on each stderr output), off by default.
# It also covers the SQLAlchemy SAWarning and nbgrader's "checksum has changed" message in case
# they ever reach a cell's stderr; errors (tracebacks) are not stderr streams and still fail.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"\b\w*Warning: |SAWarning|checksum has changed"

# A student who deletes a test cell still gets that test run (by default nbgrader leaves it out
# and the score becomes "needs manual grade").
c.OverwriteCells.add_missing_cells = True

# Files that are never released, collected or copied into autograded/feedback folders.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store"]
