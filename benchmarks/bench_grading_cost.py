"""What one grading costs in CPU: the grading service's throughput, and where that CPU goes.

    python benchmarks/bench_grading_cost.py                         # a02, 3 rounds of 5 gradings
    python benchmarks/bench_grading_cost.py --baseline main --rounds 3 -k 5

Counted: the CPU (user + system) of the whole process tree, from a cgroup (v2) the measured process
runs in: the service, the workers' forkserver, the workers, bubblewrap and the sandboxes. Not from
``getrusage`` or psutil: a sandbox is killed once its exercise is judged, and the Python inside it
(in a PID namespace of its own, behind bubblewrap) is then reaped by no process of the grader, so its
CPU reaches no parent's rusage; in one run here, rusage and psutil counted 2.2 CPU-s of a grading
whose cgroup counted 4.8. Hence root (to make the cgroup).

One *side* (this tree, or ``--baseline REV`` from a detached git worktree of REV: its code, this
script) is one process: a scratch copy of the course and a scratch exchange (as
``benchmarks/bench_serve.py``), the service (:class:`autograder.commands.serve.Service`, the code of
``autograder serve``, ``--jobs 1``) in it; ``--warmup`` gradings first (they start the workers'
forkserver), not counted; then ``-k`` students each submit the assignment's source notebooks (every
test cell runs) and are graded and sent their feedback page, one after the other, each grading
alone on the service. Per grading: the whole tree's CPU, and the service process's own (collect,
gradebook writes, the feedback page); the rest is the worker and its sandboxes. The sides run in
blocks, never interleaved, ``--rounds`` times in alternating order; reported per side: the minimum
over rounds of a block's mean (the block least disturbed by the rest of the machine) and the median
over every grading, with the load average.

Then what a sandbox's start costs (``--starts N`` times each, the minimum): bubblewrap starting
``python -c pass`` with the sandbox's flags, the same importing NumPy, and a whole bare session as
the judge makes one per exercise (the runner started, an empty setup, closed)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class CgroupUnavailable(Exception):
    pass


class Cgroup:
    """A cgroup (v2) of its own for this process and everything it starts; its CPU in seconds."""

    def __init__(self) -> None:
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
        roots = [fields[1] for fields in mounts if len(fields) > 2 and fields[2] == "cgroup2"]
        if not roots:
            raise CgroupUnavailable("no cgroup v2 hierarchy is mounted: the CPU of the sandboxes cannot be counted")
        self.root = Path(roots[0])
        self.path = self.root / f"bench-grading-cost-{os.getpid()}"
        try:
            self.path.mkdir()
            (self.path / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as error:
            raise CgroupUnavailable(f"cannot make a cgroup in {self.root} ({error.strerror}): run as root") from None

    def cpu(self) -> float:
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def close(self) -> None:
        """Move this process and whatever is left (the forkserver exiting) out, and remove the cgroup."""
        for _ in range(50):
            with contextlib.suppress(OSError):
                for pid in (self.path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.root / "cgroup.procs").write_text(pid)
                self.path.rmdir()
                return
            time.sleep(0.1)


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def side(args) -> dict:
    """One side's block of gradings (this process's tree alone in its cgroup); one JSON line."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_serve import scratch, submit

    import autograder
    from autograder.commands.serve import Service

    group = Cgroup()
    root = Path(tempfile.mkdtemp(prefix="bench-grading-cost-"))
    try:
        course = scratch(root, args.assignment)
        service = Service(course, jobs=1)

        def grading(student: str) -> tuple[float, float]:
            submit(course, args.assignment, student)
            time.sleep(0.2)  # a sandbox killed just now is counted in the grading it belongs to
            tree, own = group.cpu(), own_cpu()
            graded = len(service.state.history)
            while len(service.state.history) == graded:
                service.step()
            time.sleep(0.2)
            return group.cpu() - tree, own_cpu() - own

        for w in range(args.warmup):
            grading(f"warmup{w}")
        results = [grading(f"s{k:03d}") for k in range(args.k)]
        failed = [key for key, entry in service.state.students.items() if entry["status"] != "done"]
        return {"tree": [t for t, _ in results], "service": [s for _, s in results], "failed": failed,
                "load": os.getloadavg()[0], "code": autograder.__file__}
    finally:
        shutil.rmtree(root, ignore_errors=True)
        group.close()


def run_side(name: str, tree: Path, args) -> dict:
    command = [sys.executable, str(REPO / "benchmarks" / Path(__file__).name), "--side", "--assignment",
               args.assignment, "-k", str(args.k), "--warmup", str(args.warmup)]
    env = {**os.environ, "PYTHONPATH": str(tree)}  # that tree's autograder, before the installed one
    done = subprocess.run(command, env=env, cwd=tree, check=True, capture_output=True, text=True)
    out = json.loads(done.stdout.splitlines()[-1])
    if Path(out["code"]).resolve().parents[1] != tree.resolve():
        raise SystemExit(f"{name}: graded with the code of {out['code']}, not of {tree}")
    if out["failed"]:
        raise SystemExit(f"{name}: gradings failed ({', '.join(out['failed'])}): see the service's state")
    mean = statistics.mean(out["tree"])
    print(f"  {name:<22} block mean {mean:5.2f} CPU-s per grading (service process "
          f"{statistics.mean(out['service']):.2f}), load {out['load']:.1f}", flush=True)
    return out


@contextlib.contextmanager
def worktree(rev: str):
    path = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), rev],
                   check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], capture_output=True)


def starts(n: int) -> dict[str, float]:
    """The minimum CPU of each stage of a sandbox's start, in this process's cgroup."""
    from autograder.judge.bubblewrap import Sandbox
    from autograder.judge.session import Session

    sandbox = Sandbox()
    command = sandbox.command()
    at = command.index("-I") - 1  # the sandbox's interpreter; its flags and the runner follow
    head, python, flags = command[:at], command[at], command[at + 1:-1]
    stages = {
        "bubblewrap, python -c pass": [*head, python, *flags, "-c", "pass"],
        "bubblewrap, python -c 'import numpy'": [*head, python, *flags, "-c", "import numpy"],
    }
    group = Cgroup()
    out: dict[str, float] = {}
    try:
        for name, argv in stages.items():
            seen = []
            for _ in range(n):
                before = group.cpu()
                subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=sandbox.env(), check=False)
                time.sleep(0.05)
                seen.append(group.cpu() - before)
            out[name] = min(seen)
        seen = []
        for _ in range(n):
            before = group.cpu()
            with Session(sandbox, budget=60) as session:
                session.setup(modules={}, exercises={}, cells=[], judged="x", others=[])
            time.sleep(0.05)
            seen.append(group.cpu() - before)
        out["a bare session (start, empty setup, close)"] = min(seen)
    finally:
        group.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", default="a02_broadcasting")
    parser.add_argument("-k", type=int, default=5, help="gradings per block (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="blocks per side (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="gradings before a block, not counted")
    parser.add_argument("--baseline", help="also measure the grading of this git revision (a worktree of it)")
    parser.add_argument("--starts", type=int, default=10, help="times each stage of a sandbox's start is run")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)  # one side's block: one JSON line
    args = parser.parse_args()
    try:
        if args.side:
            print(json.dumps(side(args)))
            return
        with contextlib.ExitStack() as stack:
            trees = {"this tree": REPO}
            if args.baseline:
                trees = {f"baseline {args.baseline}": stack.enter_context(worktree(args.baseline)), **trees}
            blocks: dict[str, list[dict]] = {name: [] for name in trees}
            print(f"{args.assignment}: {args.rounds} rounds of {args.k} gradings a side, one at a time, "
                  f"after {args.warmup} not counted; the CPU of the whole process tree (cgroup)", flush=True)
            for r in range(args.rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                print(f"round {r + 1}", flush=True)
                for name in order:
                    blocks[name].append(run_side(name, trees[name], args))
        print(f"\nCPU-s per {args.assignment} grading (min over rounds of a block's mean; median of all)")
        for name, runs in blocks.items():
            best = min(runs, key=lambda b: statistics.mean(b["tree"]))
            every = [t for b in runs for t in b["tree"]]
            print(f"  {name:<22} {statistics.mean(best['tree']):5.2f} (median {statistics.median(every):.2f}); "
                  f"of it the service process {statistics.mean(best['service']):.2f}; load {best['load']:.1f}")
        if args.starts:
            print(f"\nA sandbox's start, CPU-s (min of {args.starts}; load {os.getloadavg()[0]:.1f})")
            for name, seconds in starts(args.starts).items():
                print(f"  {name:<44} {seconds:.3f}")
    except CgroupUnavailable as error:
        raise SystemExit(f"bench_grading_cost: {error}") from None


if __name__ == "__main__":  # required: grading workers come from a multiprocessing forkserver
    main()
