"""The exercise being judged: the session of its sandbox and its spec, which its check reaches.

:func:`autograder.judge.judge.judge` sets them (:func:`judging`) around the check it calls; a check
reaches them through :mod:`autograder.judge.checks`, which re-exports :func:`current`,
:func:`judged` and :func:`student_module`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from autograder.course.catalogue import Spec
from autograder.judge.session import Session

_CURRENT: list[tuple[Session, Spec]] = []


def current() -> Session:
    """The session of the exercise being judged (hidden checks reach the sandbox through it)."""
    if not _CURRENT:
        raise RuntimeError("no exercise is being judged: call a check through autograder.judge.judge")
    return _CURRENT[-1][0]


def judged() -> Spec:
    """The spec of the exercise being judged: a check's own id, reference and regions."""
    if not _CURRENT:
        raise RuntimeError("no exercise is being judged: call a check through autograder.judge.judge")
    return _CURRENT[-1][1]


# Module prefixes of the students' kit and their reference counterparts.
KIT_TO_REFERENCE = (
    ("coursekit.engine", "solutions"),
    ("coursekit.testing", "solutions.testing"),
    ("coursekit.data", "solutions.data"),
)


def student_module(reference_name: str):
    """The sandbox's counterpart of a reference module: "solutions.ops" -> the kit's "coursekit.engine.ops"."""
    for prefix, ref in sorted(KIT_TO_REFERENCE, key=lambda pair: -len(pair[1])):
        if reference_name == ref or reference_name.startswith(ref + "."):
            return current().module(prefix + reference_name[len(ref):])
    raise ValueError(f"{reference_name} has no counterpart in the course kit")


@contextlib.contextmanager
def judging(session: Session, spec: Spec) -> Iterator[None]:
    """Within the block, ``spec``'s exercise is judged in ``session``."""
    _CURRENT.append((session, spec))
    try:
        yield
    finally:
        _CURRENT.pop()
