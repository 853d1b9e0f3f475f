"""The hidden checks: one module per assignment, `aNN_<name>.py`, run by the trusted judge.

The catalogue (`autograder.course.catalogue`) imports these modules by path the first time an
exercise of their assignment is looked up; each declares its exercises with `graded`, the one
place an exercise's id, reference, solution regions, points and budget are stated. A check
receives a proxy of the student's answer (it runs in a sandbox) and decides from plain data; it
imports everything it uses from `autograder.judge.checks`.
"""
