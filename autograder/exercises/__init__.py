"""The registry of hidden checks: one module per assignment, `aNN_<name>.py`.

The harness (`autograder.harness.find`) imports these modules by path when a hidden test cell
calls `check("aNN-...", obj)`; each declares its exercises with `autograder.spec.graded`, which
registers the check and records the exercise's spec (reference source, solution regions, points).
"""
