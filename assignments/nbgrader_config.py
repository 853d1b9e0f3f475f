# nbgrader configuration of the course. The instructor's tool (`python -m autograder`, see
# autograder/__init__.py and assignments/README.md) loads this file and forces the course root and
# the gradebook URL itself, so neither is set here.

c = get_config()  # noqa: F821 (injected by traitlets when the file is loaded)

c.CourseDirectory.course_id = "autograd-course"

# Wall-clock budget of one exercise while grading (`autograder grade --cell-timeout` overrides it):
# the student's cells above its tests and the hidden check together, in the exercise's sandbox.
# Grading does not run nbgrader's autograde (no student code runs in the grader: see
# autograder/commands/grade.py), so nbgrader's own execution settings (IgnorePattern, OverwriteCells) do
# not apply; only this value is read.
c.Execute.timeout = 60

# Files that are never released, collected or copied into autograded/feedback folders.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store"]
