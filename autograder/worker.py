"""One grading worker: autograde one student's submission inside a scratch course.

The parent (:mod:`autograder.grade`) prepares a scratch course for the student (a copy of the
source folder, a copy of the submission and a private SQLite gradebook) and runs :func:`run` in
a fresh process forked from a multiprocessing forkserver that has already imported this module,
hence nbgrader: importing nbgrader costs seconds of CPU, a fork costs milliseconds. The worker
only ever sees the scratch course: it runs nbgrader's autograde there and writes
``result.json``. Recording the grades in the real gradebook is the parent's job.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
import warnings
from pathlib import Path

import jsonschema
import nbgrader.nbgraderformat.common
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from nbgrader.converters import Autograde
from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades
from sqlalchemy.exc import SAWarning

from autograder.course import Course

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its parent dies (even by kill -9).

    The parent is the forkserver, which exits when the grader does; without this an orphaned
    worker would go on grading into a scratch folder nobody reads. The kernel follows on its
    own: ipykernel exits when its parent process (this worker) goes away.
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def limit_memory(megabytes: int) -> None:
    """Cap the address space; the kernel started below inherits the cap (per process, not shared).

    A student's ``np.ones(10**11)`` then fails with MemoryError in their cell instead of pushing
    the machine into swap or the OOM killer.
    """
    limit = megabytes * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class _SchemaCheckedOnce:
    """``jsonschema.validate`` for nbgrader's cell-metadata check, checking each schema once.

    nbgrader validates every cell's metadata twice per notebook with ``jsonschema.validate``,
    which first validates the *schema itself* against its meta-schema: on a 75-cell notebook
    that is 0.6 s of a worker's ~4 s, spent re-proving one constant. Same checks, same errors
    otherwise. Installed in the worker process only (the kernel is another process).
    """

    def __init__(self) -> None:
        self._validators: dict[int, tuple[dict, jsonschema.protocols.Validator]] = {}

    def validate(self, instance, schema, cls=None, *args, **kwargs) -> None:
        if cls is not None or args or kwargs:
            return jsonschema.validate(instance, schema, cls, *args, **kwargs)
        if id(schema) not in self._validators:
            checker = validator_for(schema)
            checker.check_schema(schema)
            self._validators[id(schema)] = (schema, checker(schema))  # the schema kept alive: id stays its own
        error = best_match(self._validators[id(schema)][1].iter_errors(instance))
        if error is not None:
            raise error


def _fast_metadata_validation() -> None:
    nbgrader.nbgraderformat.common.jsonschema = _SchemaCheckedOnce()


def _without_saving_grades(config) -> None:
    """Autograde here only executes and scores; the parent saves the grades into the gradebook.

    The parent runs SaveAutoGrades and AssignLatePenalties on the autograded notebook against
    the real gradebook anyway, so running them here too (into the scratch gradebook nobody
    reads) only cost a third of a second per student.
    """
    configured = config.Autograde.get("autograde_preprocessors") or Autograde.autograde_preprocessors.default()
    config.Autograde.autograde_preprocessors = [
        p for p in configured
        if getattr(p, "__name__", str(p).rpartition(".")[2]) not in (SaveAutoGrades.__name__, AssignLatePenalties.__name__)]


def run(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    with contextlib.suppress(OSError):  # a process group of our own: the parent kills it whole
        os.setsid()
    die_with_parent()
    # The forkserver was started earlier, maybe with another environment (the kernel reads
    # AUTOGRADER_EXERCISES from it) and another working directory: take the grader's.
    os.environ.clear()
    os.environ.update(spec["env"])
    os.chdir(spec["root"])
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if spec.get("memory_mb"):
        limit_memory(spec["memory_mb"])
    warnings.simplefilter("ignore", SAWarning)  # harmless with nbgrader 0.9.6 + SQLAlchemy 2

    course = Course.open(spec["root"], spec["db_url"])
    config = course.config()
    # Unix sockets, not TCP: kernels started at the same moment by parallel workers race for TCP
    # ports ("Address already in use", seen with --jobs 3), and a student's kernel then listens
    # on no network port at all. The socket path must be absolute (the kernel runs in another
    # folder) and short (a Unix socket path has at most ~107 bytes).
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = os.path.join(spec["sockets"], "kernel")
    if spec.get("cell_timeout"):
        config.Execute.timeout = spec["cell_timeout"]
    _without_saving_grades(config)
    _fast_metadata_validation()
    result = course.api(config).autograde(spec["assignment"], spec["student"], force=True, create=True)
    Path(spec["result"]).write_text(json.dumps({
        "success": bool(result["success"]),
        "log": result.get("log") or "",
        "error": result.get("error") or "",
    }))
