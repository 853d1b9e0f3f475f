"""One grading worker: judge one student's submission, write the autograded notebooks and a result.

The grading run (:mod:`autograder.grading.run`) runs :func:`run` in a fresh process forked from a
multiprocessing forkserver that has already imported this module, hence the judge, the hidden
checks and the reference engine, and warmed them (:mod:`autograder.judge.warm` calls :func:`preload`):
that costs seconds of CPU, a fork milliseconds. Importing this module warms nothing, so the
grader's own process (and anything that imports the grader) does not pay for it.
The worker is trusted: it reads the student's notebooks as data and runs none of their code,
which runs only in the sandboxes the judge starts (one per exercise). It writes into a scratch
folder of the parent's that no sandbox can see; recording the grades in the gradebook is the
parent's job.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import multiprocessing
import os
import signal
import sys
from pathlib import Path

import autograder.judge.submission as submission
from autograder.course import catalogue
from autograder.judge.bubblewrap import Sandbox, SandboxLimits

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its parent dies (even by kill -9).

    The parent is the forkserver, which exits when the grader does; without this an orphaned
    worker would go on grading into a scratch folder nobody reads. Its sandboxes follow on
    their own (bubblewrap's --die-with-parent).
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # The parent died before prctl took effect; or the forkserver died even before this worker read
    # its parent's pid (then the "parent" above is whoever adopted it, and prctl watches that one):
    # the forkserver dies only after the grader, so a grader gone ends this worker too.
    if os.getppid() != parent or grader_gone():
        os._exit(1)


def grader_gone() -> bool:
    """Whether the grader that asked for this worker has died (the end of the pipe multiprocessing
    gives each child of a process is closed). Its forkserver, and with it this worker, may outlive
    it by a fraction of a second (measured: a worker ended 0.4 s after its grader's kill -9)."""
    grader = multiprocessing.parent_process()
    return grader is not None and not grader.is_alive()


def preload() -> None:
    """What every worker needs, made once in the forkserver: the checks, the reference, each
    exercise's compiled sandbox kit (about 25 ms apiece) and its oracle's engine (a few, shared),
    for a student who answered every exercise, and the forms of the reference code a verdict's
    message is scrubbed of. And the libraries a grading imports on its way (nbgrader's release
    preprocessors, which restore a notebook's stubs, import nbgrader, nbconvert and Jupyter Server;
    IPython's input transformer): imported in each worker they were about a thousand modules and
    1.1-1.5 CPU-s of every a02 grading (benchmarks/bench_grading_cost.py)."""
    with contextlib.suppress(Exception):
        import nbformat

        import solutions  # noqa: F401
        from autograder.course import notebook
        from autograder.judge import sealed
        from autograder.judge.judge import _engine, transform
        from autograder.judge.scrub import forms
        for s in catalogue.in_engine():
            sealed.engine(_engine(s.id)[3])
            forms(s.prefix)
        notebook.released(nbformat.v4.new_code_cell("x = 1"))
        transform("x = 1")



def run(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    with contextlib.suppress(OSError):  # a process group of our own: the parent kills it whole
        os.setsid()
    die_with_parent()
    # The forkserver was started earlier, maybe with another environment (the catalogue of hidden
    # checks is found through AUTOGRADER_EXERCISES) and another working directory: take the grader's.
    os.environ.clear()
    os.environ.update(spec["env"])
    os.chdir(spec["root"])
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    limits = SandboxLimits(memory_mb=spec.get("memory_mb") or SandboxLimits.memory_mb)
    sandbox = Sandbox(unsafe=bool(spec.get("unsafe")), limits=limits)

    def progress(verdict) -> None:
        if grader_gone():  # write nothing: the next run may have removed this scratch area (and a
            os._exit(1)    # write would make it again, outside any run: test_resume_after_ctrl_c_and_kill_9)
        status = "passed" if verdict.passed else "failed"
        print(f"{verdict.exercise}: {status} in {verdict.seconds:.2f} s", flush=True)
        if verdict.detail:
            print(verdict.detail, flush=True)

    result = submission.grade_submission(Path(spec["source"]), Path(spec["submitted"]), Path(spec["out"]),
                                      sandbox=sandbox, budget=spec["budget"], on_exercise=progress)
    result["success"] = True
    if grader_gone():
        os._exit(1)
    submission.write_result(Path(spec["result"]), result)
