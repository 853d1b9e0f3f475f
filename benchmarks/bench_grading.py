"""Grading throughput: N copies of one submission, graded with --jobs 1 and then --jobs 2.

    python benchmarks/bench_grading.py                          # 100 copies, first assignment of assignments/
    python benchmarks/bench_grading.py -n 20 --course tests/fixtures/toy_course
    python benchmarks/bench_grading.py --assignment a02_broadcasting --jobs 1,2,4
    python benchmarks/bench_grading.py --assignment a02_broadcasting --jobs 2 --paths sandbox \
        --baseline 90377dc --rounds 2

Paths compared, each in its own block (all its job counts, then the next path's), same run:
``sandbox`` (the real one: every exercise in a bubblewrap sandbox), ``unsafe`` (the same judge
with the sandboxes as plain subprocesses: what the sandbox itself costs) and, with
``--baseline REV``, the grading path of an earlier commit, run from a git worktree of it (its
own copy of this script, in a subprocess): what the whole change costs.

The submission is the assignment's source notebooks (solutions in), so every test cell runs. For
each job count the N copies are graded from scratch in a fresh copy of the course (its own
gradebook; released first, as `autograder release` does, not timed), through
:func:`autograder.commands.grade.grade`, the same code as ``autograder grade``. A warm-up
grading of two copies first starts the worker forkserver and fills the OS caches, so neither
timed run pays for that. Reported: wall time, seconds per submission, and the speed-up of each
job count over the first.

``--dask``: instead, a Dask scheduler and two workers on 127.0.0.1 (``grade --scheduler``) against
``grade --jobs 2``, the same N copies, each path in its own block; ``--rounds R`` repeats both
blocks R times, their order alternating (local first, then Dask first, ...), each path warmed up
once before its first block; the min over rounds is compared. The idle cluster stays up during
the local blocks (0.02 CPU-s per second with QUIET_DASK, measured: about 1 % of one core, so the
comparison leans that much in Dask's favour). Then a model of a real cluster built from the
parts measured in the Dask blocks: seconds per task on a worker, bytes sent and returned per
task, and the client's recording time per student (the gradebook writes, serial in the one client).

    python benchmarks/bench_grading.py --assignment a02_broadcasting --dask -n 100 --rounds 2

``--recording``: the serial part alone, the gradebook writes of each student (what the one client
does per student whatever the number of workers), on the autograded notebooks of n copies graded
once beforehand: nbgrader's own way (:func:`record_as_nbgrader`: its SaveAutoGrades and
AssignLatePenalties, a Gradebook of their own each, a commit per cell: the path before issue 33)
against one transaction a student (:func:`autograder.grading.record.write_grades`), each path a block
of all n students on a fresh gradebook, ``--rounds`` blocks each in alternating order; per student
the wall time and this thread's CPU time, min and median. ``--db URL`` times a PostgreSQL gradebook.

    python benchmarks/bench_grading.py --assignment a02_broadcasting --recording -n 20 --rounds 3

Measured 2026-11-27 (a02, n = 10, 2 rounds, a 2-core machine shared with other engineers' runs), median
wall / median CPU per student, nbgrader's way -> one transaction:
  SQLite at load 4.5:                1024 / 344 ms -> 130 / 62 ms (min 69 ms wall)
  SQLite at load 9-10:               1885 / 279 ms -> 352 / 40 ms
  PostgreSQL 15, fsync on, load 5:   1555 / 436 ms -> 287 / 87 ms
  PostgreSQL 15, fsync on, load 8:   2237 / 445 ms -> 305 / 87 ms
The load multiplies the wall times (two cores shared by 5-10 runnable processes); the CPU times are what
an idle client pays.

A course folder without ``nbgrader_config.py`` (the toy fixture) borrows the course's
``assignments/nbgrader_config.py``; the toy fixture's hidden checks are found through
``--exercises`` (default: the ``exercises/`` folder next to the course's ``source/``, if any).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from autograder.commands.grade import grade
from autograder.commands.release import add_release_files
from autograder.course.directory import Course
from autograder.grading.executors import ClusterAccess
from autograder.grading.workers import Limits

REPO = Path(__file__).resolve().parents[1]

TIMESTAMP = "2026-01-01 00:00:00.000000 UTC"
LOOPBACK = ClusterAccess(single_user_machine=True)  # the bench's cluster: 127.0.0.1, for this run alone


def scratch_course(source_course: Path, assignment: str, root: Path, copies: int) -> Course:
    """A fresh course in ``root`` with ``copies`` students who all handed in the source notebooks."""
    root.mkdir(parents=True)
    config = source_course / "nbgrader_config.py"
    shutil.copy(config if config.exists() else REPO / "assignments" / "nbgrader_config.py", root)
    shutil.copytree(source_course / "source" / assignment, root / "source" / assignment)
    course = Course.open(root)
    result = course.api().generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        sys.exit(f"generate_assignment failed:\n{result.get('log')}")
    add_release_files(course, assignment)  # the course kit, if the notebooks use it, as `release` does
    notebooks = sorted(course.source_dir(assignment).glob("*.ipynb"))
    for i in range(copies):
        folder = course.submitted_dir(f"student{i:03d}", assignment)
        folder.mkdir(parents=True)
        for notebook in notebooks:
            shutil.copy(notebook, folder)
        (folder / "timestamp.txt").write_text(TIMESTAMP)
    return course


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--course", default=str(REPO / "assignments"), help="course folder holding source/")
    parser.add_argument("--assignment", help="default: the first one in source/")
    parser.add_argument("-n", type=int, default=100, help="number of submissions (default: %(default)s)")
    parser.add_argument("--jobs", default="1,2", help="job counts to compare (default: %(default)s)")
    parser.add_argument("--exercises", help="folder of hidden-check modules ($AUTOGRADER_EXERCISES)")
    parser.add_argument("--paths", default="sandbox,unsafe", help="grading paths to time (default: %(default)s)")
    parser.add_argument("--baseline", help="also time the grading path of this git revision (a worktree of it)")
    parser.add_argument("--dask", action="store_true",
                        help="loopback Dask (scheduler + 2 workers) against --jobs 2, and the cluster model")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of every path's block, in alternating order; the min is reported "
                             "(default: %(default)s)")
    parser.add_argument("--capstone-seconds", type=float, default=10.0,
                        help="model: seconds per capstone task (not measured here; default: %(default)s)")
    parser.add_argument("--recording", action="store_true",
                        help="time the gradebook writes per student: nbgrader's commits per cell against one "
                             "transaction")
    parser.add_argument("--db", help="with --recording: the gradebook's SQLAlchemy URL (default: SQLite in the course)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one JSON line: for --baseline
    args = parser.parse_args()

    source_course = Path(args.course).resolve()
    assignments = sorted(p.name for p in (source_course / "source").glob("*") if any(p.glob("*.ipynb")))
    if not assignments:
        sys.exit(f"no assignments in {source_course / 'source'}; try --course tests/fixtures/toy_course")
    assignment = args.assignment or assignments[0]
    exercises = args.exercises or (source_course / "exercises")
    if Path(exercises).is_dir():
        os.environ["AUTOGRADER_EXERCISES"] = str(Path(exercises).resolve())
    job_counts = [int(j) for j in args.jobs.split(",")]
    if args.recording:
        compare_recording(source_course, assignment, args.n, args.rounds, args.db)
        return
    if args.dask:
        compare_dask(source_course, assignment, args.n, args.capstone_seconds, args.rounds)
        return

    print(f"grading {args.n} copies of {assignment} (source notebooks) from {source_course}")
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    results: dict[str, dict[int, float]] = {}
    paths = [*([f"baseline {args.baseline}"] if args.baseline else []), *args.paths.split(",")]
    if args.rounds > 1:
        print(f"method: {args.rounds} rounds, the paths' blocks in alternating order (forwards, then backwards, ...); "
              "the min over rounds is reported")
    for r in range(args.rounds):
        for path in (paths if r % 2 == 0 else paths[::-1]):
            if path.startswith("baseline "):
                times = baseline(args, assignment)
            else:
                times = time_path(source_course, assignment, args.n, job_counts, unsafe=(path == "unsafe"))
            results[path] = {j: min(t, results.get(path, {}).get(j, t)) for j, t in times.items()}
    results = {path: results[path] for path in paths}

    print(f"\n{'path':<22}" + "".join(f"{'--jobs ' + str(j):>16}" for j in job_counts)
          + "   (wall s, s per submission)")
    for path, times in results.items():
        print(f"{path:<22}" + "".join(f"{times[j]:8.1f} {times[j] / args.n:6.2f}s" for j in job_counts))
    first = next(iter(results))
    for path in list(results)[1:]:
        print(f"{path} / {first}: " + ", ".join(f"--jobs {j}: {results[path][j] / results[first][j]:.2f}x"
                                                for j in job_counts))
    print(json.dumps({"assignment": assignment, "n": args.n, "seconds": results}))


def time_path(source_course: Path, assignment: str, n: int, job_counts: list[int], unsafe: bool) -> dict[int, float]:
    """Wall seconds to grade n copies with each job count, after a warm-up of two copies."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        warm = scratch_course(source_course, assignment, Path(tmp) / "warm-up", 2)
        grade(warm, assignment, jobs=1, progress=False, unsafe=unsafe)
        for jobs in job_counts:
            course = scratch_course(source_course, assignment, Path(tmp) / f"jobs{jobs}", n)
            started = time.perf_counter()
            outcomes = grade(course, assignment, jobs=jobs, limits=Limits(), progress=True, unsafe=unsafe)
            elapsed = time.perf_counter() - started
            failed = [o.student for o in outcomes if o.status != "graded"]
            scores = sorted({o.score for o in outcomes if o.score is not None})
            results[jobs] = elapsed
            print(f"{'unsafe' if unsafe else 'sandbox'} --jobs {jobs}: {elapsed:7.1f} s for {len(outcomes)} "
                  f"submissions, {elapsed / len(outcomes):5.2f} s each; scores {scores}; failed: {len(failed)}",
                  flush=True)
    return results


def start_cluster(logs: Path) -> tuple[str, list]:
    """A scheduler and two one-thread workers on 127.0.0.1 (one under a non-daemonic nanny, one without)."""
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    from autograder.grading.executors import QUIET_DASK
    env = {**os.environ, "PYTHONPATH": str(REPO), **QUIET_DASK}  # the settings deploy/dask.md gives
    worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
              "--no-dashboard", "--host", "127.0.0.1"]
    commands = [([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                  str(port), "--no-dashboard"], {}),
                ([*worker, "--nanny"], {}),
                ([*worker, "--no-nanny"], {})]
    processes = [subprocess.Popen(command, env={**env, **extra}, cwd=REPO, stderr=subprocess.STDOUT,
                                  stdout=(logs / f"dask{i}.log").open("w"))
                 for i, (command, extra) in enumerate(commands)]
    from distributed import Client
    with Client(address, timeout=120) as client:
        client.wait_for_workers(2, timeout=180)
    return address, processes


def stop_cluster(processes: list) -> None:
    import psutil
    found = []
    for process in processes:
        try:
            found += [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
        except psutil.Error:
            pass
    for p in found:
        try:
            p.kill()
        except psutil.Error:
            pass
    for process in processes:
        process.wait()


def compare_dask(source_course: Path, assignment: str, n: int, capstone_seconds: float, rounds: int) -> None:
    """Local --jobs 2 against loopback Dask on n copies, ``rounds`` times in alternating order (local
    first in odd rounds, Dask first in even ones: a drift of the machine over the run favours
    neither); then the cluster model from the parts measured in the Dask blocks."""
    import statistics

    import autograder.grading.run as grading  # GradingRun records each student through its module's _record
    from autograder.grading.executors import pack
    print(f"method: {rounds} round(s); each round one block per path, each block grading n fresh copies from "
          "scratch; blocks not interleaved, their order alternating between rounds (local, Dask; Dask, local; ...); "
          "each path warmed up once (two copies) before its first block; the idle cluster stays up during the "
          "local blocks (~1 % of one core); wall time of grade() only; "
          "reported: min and median over rounds, ratio of the mins", flush=True)
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    times: dict[str, list[float]] = {"local": [], "dask": []}
    recording: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as tmp:
        root = Path(tmp)
        address, processes = start_cluster(root)
        try:
            grade(scratch_course(source_course, assignment, root / "warm-local", 2), assignment, jobs=2,
                  progress=False)
            grade(scratch_course(source_course, assignment, root / "warm-dask", 2), assignment, progress=False,
                  scheduler=address, access=LOOPBACK)
            record = grading._record

            def timed_record(*args, **kwargs):
                began = time.perf_counter()
                try:
                    return record(*args, **kwargs)
                finally:
                    recording.append(time.perf_counter() - began)

            for r in range(rounds):
                for path in (("local", "dask") if r % 2 == 0 else ("dask", "local")):
                    course = scratch_course(source_course, assignment, root / f"{path}{r}", n)
                    grading._record = timed_record if path == "dask" else record
                    started = time.perf_counter()
                    outcomes = grade(course, assignment, progress=True,
                                     **({"scheduler": address, "access": LOOPBACK} if path == "dask" else {"jobs": 2}))
                    elapsed = time.perf_counter() - started
                    grading._record = record
                    times[path].append(elapsed)
                    print(f"round {r + 1} {path + (' 2 workers' if path == 'dask' else ' --jobs 2')}: "
                          f"{elapsed:7.1f} s for {len(outcomes)}, {elapsed / n:5.2f} s each; "
                          f"failed: {sum(o.status != 'graded' for o in outcomes)}; load average "
                          f"{os.getloadavg()[0]:.1f}", flush=True)
                    if path == "dask":
                        dask_outcomes, dask_course = outcomes, course
        finally:
            stop_cluster(processes)
        local, dask = min(times["local"]), min(times["dask"])
        print(f"local --jobs 2: min {local:.1f} s, median {statistics.median(times['local']):.1f} s; "
              f"dask 2 workers: min {dask:.1f} s, median {statistics.median(times['dask']):.1f} s")
        print(f"dask / local: {dask / local:.3f}x (min over {rounds} round(s); the issue asks at most 1.15x)")

        outcomes, course = dask_outcomes, dask_course
        task = sum(o.seconds or 0 for o in outcomes) / n
        sent = sum(len(b) for b in pack(course.submitted_dir(outcomes[0].student, assignment)).values())
        back = sum(len(b) for b in pack(course.autograded_dir(outcomes[0].student, assignment)).values())
        record_s = sum(recording) / max(1, len(recording))
        source_bytes = sum(len(b) for b in pack(course.source_dir(assignment)).values())
        print(f"\nmeasured parts ({assignment}): {task:.2f} s per task on a worker core; {sent / 1e3:.0f} kB sent "
              f"and {back / 1e3:.0f} kB returned per task (+ {source_bytes / 1e6:.1f} MB of source once per "
              f"worker); client recording {record_s * 1e3:.0f} ms per student")
        cluster_model(task, capstone_seconds, record_s, sent + back)


def cluster_model(task: float, capstone: float, record: float, task_bytes: float) -> None:
    """500 students x 6 assignments: five like the measured one, one capstone of ``capstone`` s a task.

    wall = max(workers' share, the client's serial recording, the client's network), the three
    overlapping; the client is the bottleneck from W = task seconds / recording seconds workers on."""
    students, bandwidth = 500, 125e6  # a 1 Gbit/s link at the client
    tasks = [task] * 5 + [capstone]
    print(f"\nmodel: {students} students x 6 assignments (5 at {task:.2f} s a task, a capstone at "
          f"{capstone:.1f} s: not measured here), client link {bandwidth * 8 / 1e9:.0f} Gbit/s")
    print(f"{'workers':>8} {'compute':>10} {'client':>10} {'network':>10} {'predicted':>10}  bound")
    for workers in (10, 50, 100):
        compute = sum(students * t / workers for t in tasks)
        client = 6 * students * record
        network = 6 * students * task_bytes / bandwidth
        wall = max(compute, client, network)
        bound = "client recording" if wall == client else "network" if wall == network else "workers"
        print(f"{workers:>8} {compute / 60:9.1f}m {client / 60:9.1f}m {network / 60:9.1f}m {wall / 60:9.1f}m  {bound}")
    for name, t in (("a02-like", task), ("capstone", capstone)):
        print(f"the client becomes the bottleneck for {name} tasks from {t / record:.0f} workers on "
              f"({t:.2f} s per task / {record * 1e3:.0f} ms recording per student)")


def record_as_nbgrader(course: Course, assignment: str, student: str, autograded: Path, stamp, config) -> None:
    """A student's gradebook rows as ``grade`` wrote them before issue 33, nbgrader's own way: the
    student and the submission, then nbgrader's SaveAutoGrades and AssignLatePenalties on each
    notebook, each opening a Gradebook of its own and committing after every cell. The reference
    that the one-transaction path must match row for row (tests/grader/test_autograder_record.py)."""
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

    from autograder.course import notebook
    from autograder.grading.record import submission_rows
    with course.gradebook() as gb:
        submission_rows(gb, assignment, student, autograded, stamp)  # nbgrader's methods commit each write
        gb.db.commit()
    for path in sorted(autograded.glob("*.ipynb")):
        nb = notebook.read(path)
        resources = {"nbgrader": {"notebook": path.stem, "assignment": assignment, "student": student,
                                  "db_url": course.db_url}}
        for preprocessor in (SaveAutoGrades(config=config), AssignLatePenalties(config=config)):
            nb, resources = preprocessor.preprocess(nb, resources)


def fresh_gradebook(course: Course, assignment: str) -> None:
    """Empty the course's gradebook (any URL) and put the assignment back in, its due date kept."""
    from nbgrader.api import Base, MissingEntry
    from sqlalchemy import create_engine, text
    try:
        with course.gradebook() as gb:
            due = gb.find_assignment(assignment).duedate
    except MissingEntry:
        due = None
    engine = create_engine(course.db_url)
    Base.metadata.drop_all(engine)
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
    engine.dispose()
    result = course.api().generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        sys.exit(f"generate_assignment failed:\n{result.get('log')}")
    with course.gradebook() as gb:
        gb.update_or_create_assignment(assignment, duedate=due)


def compare_recording(source_course: Path, assignment: str, n: int, rounds: int, db: str | None) -> None:
    """Per-student recording time, nbgrader's commits per cell against one transaction (blocks)."""
    import statistics
    import warnings

    from sqlalchemy.exc import SAWarning

    from autograder.grading.record import Ledger, _graded_outcome, write_grades
    print(f"method: {n} autograded copies of {assignment}, graded once beforehand; per path a block recording all "
          f"{n} into a fresh gradebook ({'SQLite in the course' if db is None else db.split('@')[0] + '@...'}), "
          f"{rounds} round(s), the paths' order alternating; per student: wall time and the recording thread's CPU "
          "time (the load of the machine inflates the first, not the second); reported: min and median", flush=True)
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    walls: dict[str, list[float]] = {"nbgrader, a commit per cell": [], "one transaction a student": []}
    cpus: dict[str, list[float]] = {path: [] for path in walls}
    with tempfile.TemporaryDirectory(prefix="bench-recording-") as tmp:
        course = scratch_course(source_course, assignment, Path(tmp) / "course", n)
        if db:
            course = Course.open(course.root, db)
            fresh_gradebook(course, assignment)
        grade(course, assignment, jobs=2, progress=True)
        students = sorted(p.name for p in course.autograded_dir("*", assignment).parent.parent.iterdir())
        config = course.config()
        stamps = {s: course.coursedir().get_existing_timestamp(str(course.submitted_dir(s, assignment)))
                  for s in students}
        paths = list(walls)
        for r in range(rounds):
            for path in (paths if r % 2 == 0 else paths[::-1]):
                fresh_gradebook(course, assignment)
                ledger = Ledger(course, assignment)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SAWarning)
                    for student in students:
                        autograded = course.autograded_dir(student, assignment)
                        began, cpu = time.perf_counter(), time.thread_time()
                        if path.startswith("nbgrader"):
                            record_as_nbgrader(course, assignment, student, autograded, stamps[student], config)
                            _graded_outcome(course, assignment, student, "graded")
                        else:
                            gb = ledger.gradebook()
                            write_grades(gb, course, assignment, student, autograded, stamps[student], config)
                            _graded_outcome(course, assignment, student, "graded", gb)
                            gb.db.close()
                        walls[path].append(time.perf_counter() - began)
                        cpus[path].append(time.thread_time() - cpu)
                ledger.close()
                print(f"round {r + 1} {path}: median {statistics.median(walls[path][-n:]) * 1e3:.0f} ms a student; "
                      f"load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\n{'path':<28}{'wall min':>10}{'median':>10}{'CPU min':>10}{'median':>10}   (ms per student)")
    for path in paths:
        print(f"{path:<28}{min(walls[path]) * 1e3:10.0f}{statistics.median(walls[path]) * 1e3:10.0f}"
              f"{min(cpus[path]) * 1e3:10.0f}{statistics.median(cpus[path]) * 1e3:10.0f}")
    before, after = (statistics.median(walls[p]) for p in paths)
    print(f"one transaction / nbgrader: {after / before:.3f}x (median wall); load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def baseline(args, assignment: str) -> dict[int, float]:
    """Time an earlier commit's grading path: its own bench script, in a worktree, in a subprocess."""
    import subprocess
    tree = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), args.baseline],
                   check=True, capture_output=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        command = [sys.executable, str(tree / "benchmarks" / "bench_grading.py"), "--assignment", assignment,
                   "-n", str(args.n), "--jobs", args.jobs, "--course", str(tree / "assignments"), "--paths", "sandbox"]
        out = subprocess.run(command, env=env, cwd=tree, check=True, capture_output=True, text=True).stdout
        print("\n".join(f"baseline | {line}" for line in out.splitlines()[:-1]), flush=True)
        seconds = json.loads(out.splitlines()[-1])["seconds"]["sandbox"]  # its own sandbox path only
        return {int(j): float(t) for j, t in seconds.items()}
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)


if __name__ == "__main__":  # required: grading workers come from a multiprocessing forkserver
    main()
