"""What the checks of a01_graphs share."""
from __future__ import annotations

from autograder.judge.checks import (
    Proxy,
    kind,
    student_module,
)

TIME_LIMIT = 3.0  # seconds for the graph walks on the checks' largest graphs
SOURCE = "solutions.scalar"


def _S():
    """The sandbox's scalar engine (the kit's `coursekit.engine.scalar`, the answer plugged in)."""
    return student_module(SOURCE)


def _R():
    """The reference scalar engine, here."""
    import solutions.scalar
    return solutions.scalar


def _callable(x) -> bool:
    return kind(x) in ("function", "type") if isinstance(x, Proxy) else callable(x)


def _children_of(node) -> list:
    """A node's `_children` as a list ([] if it has none, or none that can be listed)."""
    try:
        children = getattr(node, "_children", ())
        return list(children) if isinstance(children, (Proxy, tuple, list)) else []
    except (TypeError, AttributeError):  # a student's `_children` that is not a collection
        return []


def _data(x):
    """A Value's number (fetched from the sandbox), or a plain number as it is."""
    return x.data if isinstance(x, Proxy) else x


# --------------------------------------------------------------------------------------------
