"""The hidden checks: one module per assignment, `aNN_<name>.py`, run by the trusted judge.

The registry (`autograder.judge.registry.find`) imports these modules by path the first time an
exercise of their assignment is judged; each declares its exercises with `autograder.spec.graded`,
which registers the check and records the exercise's spec (reference source, solution regions,
points). A check receives a proxy of the student's answer (it runs in a sandbox) and decides from
plain data: see `autograder.judge.checks`.
"""
