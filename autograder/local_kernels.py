"""Jupyter kernels started on this machine talk to their client over IPC, not TCP.

Each kernel that a build or a test starts (the book's chapters, through MyST-NB and jupyter-cache;
the notebooks the tests execute through nbclient) used to print ipykernel's warning "Kernel is
running over TCP without encryption ... susceptible to eavesdropping", dozens of times per `make`.
The warning is right for TCP: any local user can connect to a loopback port. IPC transport uses
Unix domain sockets beside the kernel's connection file, in Jupyter's runtime directory (mode
0700), so only this user reaches them, and the warning has nothing left to say.

Those callers build their `KernelManager` themselves with no configuration of ours to pass, so the
transport is set where they all read it: the default of `KernelManager.transport` (a configurable
trait; an explicit `transport=` or configuration still wins).
"""
from __future__ import annotations


def prefer_ipc_transport() -> None:
    """Make IPC the default transport of every `jupyter_client.KernelManager` this process creates."""
    from jupyter_client.manager import KernelManager

    KernelManager.class_traits()["transport"].default_value = "ipc"
