"""Shared test configuration: Hypothesis profiles.

The engine's property tests draw shapes and values with Hypothesis. Each example runs a
numerical gradient check, so examples are kept few and small, and the per-example deadline is
off (a loaded 2-core machine would otherwise fail tests for being slow, not wrong).

    HYPOTHESIS_PROFILE=ci pytest ...     # fewer examples, for the grading machines
    HYPOTHESIS_PROFILE=thorough pytest   # many more, before a release
"""
import os

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the non-engine tests do not need Hypothesis
    settings = None

if settings is not None:
    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
    settings.register_profile("default", max_examples=25, **common)
    settings.register_profile("ci", max_examples=10, derandomize=True, **common)
    settings.register_profile("thorough", max_examples=300, **common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
