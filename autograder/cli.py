"""Command line: ``python -m autograder <command>`` (or the ``autograder`` console script).

Exit status: 0 success; 1 the command ran and found a problem (a leak in a release, a failed
self-check, a submission that could not be graded); 2 a usage or course error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from autograder import kit
from autograder.analytics import THRESHOLD
from autograder.authoring import sync
from autograder.course import DEFAULT_COURSE, DEFAULT_SOLUTIONS, CourseError, written
from autograder.course.directory import Course
from autograder.course.owner import OwnerError, act_as_owner, controllers, without_course
from autograder.course.students import printable

# Once workers are forked, grading is CPU-bound: one worker per CPU (benchmarks/bench_grading.py
# measured 1.8x with 2 workers on 2 CPUs, and nothing more from a third).
CPUS = os.cpu_count() or 1


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _score(score: float | None, max_score: float | None) -> str:
    return "" if score is None else f"{score:g}/{max_score:g}"


def _assignments(course: Course, args) -> list[str]:
    if getattr(args, "all", False):
        if not course.assignments():
            raise CourseError(f"no assignments in {course.source_dir('*').parent}")
        return course.assignments()
    if not args.assignment:
        raise CourseError("name an ASSIGNMENT or pass --all")
    return [course.require_assignment(args.assignment)]


# -- commands ------------------------------------------------------------------------------------

def cmd_release(course: Course, args) -> int:
    from autograder.commands.release import parse_due, publish, release

    if args.due:
        parse_due(args.due)  # a typo fails before anything is generated
    if args.exchange is not None:
        course.exchange_config(args.exchange)  # and so does a missing exchange
    status = 0
    for assignment in _assignments(course, args):
        leaks = release(course, assignment, args.solutions, due=args.due)
        folder = course.release_dir(assignment)
        if leaks:
            status = 1
            print(f"{assignment}: RELEASE LEAKS {len(leaks)} line(s) — do not distribute {folder}"
                  + (" (not published to the exchange)" if args.exchange is not None else ""))
            for leak in leaks:
                print(f"  {leak}")
            continue
        due = f"; due {parse_due(args.due):%Y-%m-%d %H:%M} UTC" if args.due else ""
        print(f"{assignment}: released to {folder}; scan clean (no solutions, no hidden tests){due}")
        if args.exchange is not None:
            print(f"{assignment}: published to the nbgrader exchange {publish(course, assignment, args.exchange)}"
                  " (students fetch it from JupyterLab's Assignments tab)")
    return status


def cmd_collect(course: Course, args) -> int:
    from autograder.commands.collect import collect, collect_exchange

    assignment = course.require_assignment(args.assignment)
    if (args.path is None) == (args.exchange is None):
        raise CourseError("collect from a PATH (folder or .zip) or from the nbgrader exchange (--exchange), "
                          "one of them")
    if args.exchange is not None:
        if args.map:
            raise CourseError("--map names the files of an export; the exchange already knows its students")
        report = collect_exchange(course, assignment, args.exchange)
    else:
        report = collect(course, assignment, args.path, args.map, lms=args.lms)
    # Names come from the export: control characters in them must not reach the terminal.
    print(printable(f"collect {report.assignment} from {report.source}: {len(report.imported)} student(s) "
                    f"imported, {len(report.skipped)} file(s) skipped"))
    if report.imported:
        print(format_table(["student", "notebooks", "status"],
                           [[printable(cell) for cell in row] for row in report.imported]))
    if report.released_ignored:  # the kit a fetched assignment carries back: expected, one line
        print("released helper files ignored: " + ", ".join(
            f"{printable(student)} {n}" for student, n in sorted(report.released_ignored.items())))
    if report.skipped:
        print("skipped:")
        print(format_table(["file", "reason"], [[printable(cell) for cell in row] for row in report.skipped]))
    return 0


def cmd_grade(course: Course, args) -> int:
    from autograder.commands.grade import grade
    from autograder.grading.workers import Limits

    limits = Limits(cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout,
                    memory_mb=args.memory_mb or None)
    students = [s.strip() for s in args.students.split(",") if s.strip()] if args.students else None
    if args.exercise is not None and not args.regrade:
        raise CourseError("--exercise names what a --regrade was for: add --regrade")
    if args.regrade:
        from autograder.commands import regrade
        regrade.require_exercise(course, args.assignment, args.exercise)
        before = regrade.snapshot(course, args.assignment)
        if not before:
            raise CourseError(f"nobody graded on {args.assignment} yet: nothing to regrade")
        students = sorted(set(before) & set(students or before))
        kept = regrade.keep(course, args.assignment, before)
    try:
        access = None
        if args.scheduler:
            from autograder.grading.executors import ClusterAccess
            access = ClusterAccess(args.tls_ca_file, args.tls_cert, args.tls_key, args.single_user_machine)
        outcomes = grade(course, course.require_assignment(args.assignment), students, jobs=args.jobs,
                         limits=limits, force=args.force or args.regrade, unsafe=args.unsafe,
                         scheduler=args.scheduler, access=access)
    except KeyboardInterrupt:
        print(f"\ninterrupted: the students recorded so far are kept; rerun "
              f"`autograder grade {args.assignment}` to grade the rest", file=sys.stderr)
        return 130
    if not outcomes:
        print(f"no submissions of {args.assignment} in {course.submitted_dir('*', args.assignment).parent.parent}")
        return 0
    print(format_table(["student", "score", "status", "detail", "time"],
                       [(o.student, _score(o.score, o.max_score), o.status, o.detail,
                         "" if o.seconds is None else f"{o.seconds:.1f} s") for o in outcomes]))
    failed = [o for o in outcomes if o.status == "failed"]
    counts = {s: sum(o.status == s for o in outcomes) for s in ("graded", "already graded", "failed")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    if args.regrade:
        _print_regrade(course, args, before, kept)
    return 1 if failed else 0


def _print_regrade(course: Course, args, before, kept) -> None:
    from autograder.commands import regrade

    changes = regrade.compare(before, regrade.snapshot(course, args.assignment), args.exercise)
    path = regrade.write(course, args.assignment, changes)
    what = f" on {args.exercise}" if args.exercise else ""
    print(f"\nregrade{what}: {len(changes.rows)} result(s) changed for {len(changes.changed)} student(s) "
          f"(the table: {path}; the scores before: {kept})")
    if changes.rows:
        print(format_table(["student", "exercise", "old", "new", "old message", "new message"],
                           [[printable(c) for c in row] for row in changes.rows]))
    if changes.elsewhere:
        print(f"and {changes.elsewhere} change(s) on other exercises than {args.exercise}: rerun without "
              "--exercise to see them")
    if changes.manual:
        print("scores set by hand in the formgrader, kept (not overwritten):")
        print(format_table(["student", "exercise", "score kept", "the judge now says"],
                           [[printable(c) for c in row] for row in changes.manual]))
    if changes.changed:
        print(f"feedback for them only: autograder feedback {args.assignment} --students {','.join(changes.changed)}"
              " [--exchange]")


def cmd_feedback(course: Course, args) -> int:
    from autograder.commands.feedback import feedback

    students = [s.strip() for s in args.students.split(",") if s.strip()] if args.students else None
    report = feedback(course, course.require_assignment(args.assignment), args.exchange, students)
    for path in report.pages:
        print(path)
    print(f"{len(report.pages)} feedback file(s) for {args.assignment} (hidden tests removed, student HTML "
          "sanitized, math offline)")
    if args.exchange is not None and report.released:
        print(f"{args.assignment}: feedback released to the nbgrader exchange for {len(report.released)} student(s) "
              "(students: Fetch Feedback)")
    if report.waiting:
        print(written.warning(args.assignment, report.waiting))
    if report.failed:
        print(f"no feedback for {len(report.failed)} student(s):")
        print(format_table(["student", "reason"], [(s, printable(r)) for s, r in report.failed]))
    if report.unreleased:
        print(f"feedback written but not released to the exchange for {len(report.unreleased)} student(s):")
        print(format_table(["student", "reason"], [(s, printable(r)) for s, r in report.unreleased]))
    return 1 if report.failed or report.unreleased else 0


def cmd_serve(course: Course, args) -> int:
    from autograder.commands.serve import command

    return command(course, args, format_table)


def cmd_report(course: Course, args) -> int:
    from autograder.commands.report import report
    from autograder.course.lms import parse_lms_list

    notes: list[str] = []
    lms = None if args.lms is None else parse_lms_list(args.lms)
    if not 0 < args.similarity_threshold <= 100:
        raise CourseError(f"--similarity-threshold {args.similarity_threshold:g}: a percentage above 0, at most 100")
    paths = report(course, course.require_assignment(args.assignment), lms, args.canvas_assignment_id, notes,
                   threshold=args.similarity_threshold / 100)
    for path in paths[1:]:
        print(path)
    for note in notes:
        print(note)
    _print_late_days(course)
    print(f"the instructor's page (statistics, what went wrong, code similarity; opens offline): {paths[0].as_uri()}")
    return 0


def cmd_extend(course: Course, args) -> int:
    from autograder.commands.extend import extend, rows
    from autograder.course.term import Term

    settled = extend(course, args.student, args.assignment, args.until, args.by, args.remove)
    what = f"on {args.assignment}" if args.assignment else "on every assignment (standing)"
    print(f"{args.student}: extension {what} " + ("removed" if args.remove else "recorded")
          + "; late penalties re-applied from the stored scores (nothing judged again)")
    if settled:
        print(format_table(["assignment", "due (UTC)", "their due date", "late days", "late", "penalty", "note"],
                           rows(course, settled, Term.load(course).budget)))
    else:
        print(f"{args.student} has no graded submission yet: the extension applies when they are graded")
    if args.assignment is None and args.by and args.by.strip().endswith("%"):
        unknown = [a for a in course.assignments() if a not in Term.load(course).opens]
        if unknown:
            print(f"no release time kept for {', '.join(unknown)} (not released yet, or before release times were "
                  f"kept): {args.by} gives nothing there; give a length for those "
                  f"(autograder extend {args.student} ASSIGNMENT --by 2d)")
    return 0


def cmd_late_days(course: Course, args) -> int:
    from autograder.commands.extend import late_days
    from autograder.course.term import Term

    late_days(course, args.budget, args.student, args.assignment, args.spend)
    if Term.load(course).budget is None:
        print("no late days in this course (autograder late-days --budget N to give some)")
    _print_late_days(course)
    return 0


def _print_late_days(course: Course) -> None:
    """Each student's late days used and left, when the course has them."""
    from autograder.course.term import Term, standings

    term = Term.load(course)
    if term.budget is not None:
        with course.gradebook() as gb:
            everyone = standings(gb, term)
        print(f"late days ({term.budget} per student, whole course):")
        print(late_days_table(everyone, term.budget))


def late_days_table(everyone, budget: int) -> str:
    table = []
    for student, settled in sorted(everyone.items()):
        used = sum(s.late_days for s in settled)
        spent = ", ".join(f"{s.assignment} {s.late_days}" for s in settled if s.late_days)
        table.append([student, used, budget - used, spent, "; ".join(f"{s.assignment}: {s.short}" for s in settled
                                                                     if s.short)])
    return format_table(["student", "used", "left", "spent on", "not covered"], table)


def cmd_students(course: Course, args) -> int:
    from autograder.course.lms import import_roster, load_roster, roster_path, students_table

    if args.action == "import":
        if not args.roster:
            raise CourseError("students import needs the roster CSV: autograder students import roster.csv")
        roster = import_roster(course, args.roster)
        print(f"{len(roster.students)} student(s) imported from {args.roster} into the gradebook and "
              f"{roster_path(course)}")
    else:
        loaded = load_roster(course)
        if loaded is None:
            raise CourseError("no roster yet: autograder students import roster.csv")
        roster = loaded
    print(format_table(["id", "name", "email", "canvas_id", "moodle_id", "sis_id"],
                       [[printable(cell) for cell in row] for row in students_table(roster)]))
    return 0


def cmd_check(course: Course, args) -> int:
    from autograder.authoring.selfcheck import check

    status = 0
    for assignment in _assignments(course, args):
        verdicts = check(course, assignment, jobs=args.jobs, cell_timeout=args.cell_timeout,
                         exercise=args.exercise)
        print(format_table(["mutant", "exercise", "expected to fail", "points lost", "verdict"],
                           [(v.subject, v.exercise, v.expected, v.lost, v.verdict) for v in verdicts]))
        failed = [v for v in verdicts if not v.ok]
        mutants = len(verdicts) - 2
        print(f"check {assignment}: " + (f"FAILED ({len(failed)} of {len(verdicts)})" if failed else "OK")
              + ("" if mutants else f"; no mutants yet (autograder/mutants/{assignment}.py)") + "\n")
        status |= bool(failed)
    return status


def cmd_sync(course: Course, args) -> int:
    return sync.run(args, course.source_dir(".").resolve())


def cmd_kit(course: Course, args) -> int:
    return kit.run(args)


def cmd_demo(course: Course, args) -> int:
    from autograder.commands.demo import demo

    assignments = course.assignments()
    if not assignments:
        raise CourseError(f"no assignments in {course.source_dir('*').parent}")
    demo(course, course.require_assignment(args.assignment or assignments[0]), main, args.out, jobs=args.jobs)
    return 0


# -- parser --------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autograder", description="Instructor tools over nbgrader for the course.")
    parser.add_argument("--course", default=str(DEFAULT_COURSE),
                        help="nbgrader course directory (default: %(default)s)")
    parser.add_argument("--db", help="gradebook SQLAlchemy URL (default: sqlite gradebook.db in the course)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help):
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(func=func)
        return sub

    sub = add("release", cmd_release,
              "generate the student version (release/) and fail if any released file leaks a solution")
    sub.add_argument("assignment", nargs="?")
    sub.add_argument("--all", action="store_true", help="every assignment in source/")
    sub.add_argument("--solutions", default=str(DEFAULT_SOLUTIONS),
                     help="reference code that must not appear in released files (default: %(default)s)")
    sub.add_argument("--due", help="due date, e.g. '2026-12-01 17:00' (UTC) or '2026-12-01 17:00 Europe/Paris'")
    sub.add_argument("--exchange", nargs="?", const="", metavar="DIR",
                     help="also publish a clean release to nbgrader's exchange, for JupyterLab's Assignments "
                          "tab (DIR, default: c.Exchange.root of the course)")

    sub = add("collect", cmd_collect,
              "import an LMS export (folder or .zip), or the nbgrader exchange, into submitted/")
    sub.add_argument("assignment")
    sub.add_argument("path", nargs="?", help="folder or .zip of student notebooks")
    sub.add_argument("--map", help="CSV with columns file,student to name each file's student")
    sub.add_argument("--lms", choices=["auto", "canvas", "moodle", "none"], default="auto",
                     help="read Canvas's or Moodle's export names through the roster (default: %(default)s, "
                          "either when a name has its layout)")
    sub.add_argument("--exchange", nargs="?", const="", metavar="DIR",
                     help="collect what students submitted from JupyterLab "
                          "(DIR, default: c.Exchange.root of the course)")

    sub = add("grade", cmd_grade, "autograde submissions in parallel; rerun to resume")
    sub.add_argument("assignment")
    sub.add_argument("--students", help="comma-separated student ids (default: all submitted)")
    sub.add_argument("--jobs", type=int, default=CPUS, help="parallel workers (default: the CPUs, %(default)s)")
    sub.add_argument("--cell-timeout", type=int,
                     help="wall seconds per exercise, the student's cells included "
                          "(default: the course's Execute.timeout)")
    sub.add_argument("--notebook-timeout", type=float,
                     help="wall seconds per notebook before the student's grading is killed "
                          "(default: every exercise's budget in full, plus a minute)")
    sub.add_argument("--memory-mb", type=int, default=4096,
                     help="address-space limit of each sandbox, 0 for the default (default: %(default)s)")
    sub.add_argument("--force", action="store_true", help="regrade students that are already graded")
    sub.add_argument("--regrade", action="store_true",
                     help="after a fix to a check or to points: judge every graded student again, keep the old "
                          "scores, and write who gained and who lost (reports/<assignment>/regrade.csv)")
    sub.add_argument("--exercise", metavar="ID", help="with --regrade: the exercise the fix was for (the table "
                                                      "shows it alone)")
    sub.add_argument("--unsafe", action="store_true",
                     help="grade even where no sandbox can be made: student code then runs as you "
                          "(never for real students)")
    sub.add_argument("--scheduler", metavar="tls://HOST:PORT",
                     help="grade on the workers of this Dask scheduler instead of --jobs local ones; this "
                          "machine still records every grade (deploy/dask.md)")
    sub.add_argument("--tls-ca-file", metavar="PEM", help="the grading cluster's CA (deploy/dask_certs.py)")
    sub.add_argument("--tls-cert", metavar="PEM", help="this grader's certificate, signed by the cluster's CA")
    sub.add_argument("--tls-key", metavar="PEM", help="its private key")
    sub.add_argument("--single-user-machine", action="store_true",
                     help="accept a tcp:// scheduler without TLS: only where no one else can reach it (anyone who "
                          "can runs code on its workers)")

    sub = add("feedback", cmd_feedback, "per-student HTML feedback without hidden tests, math offline")
    sub.add_argument("assignment")
    sub.add_argument("--exchange", nargs="?", const="", metavar="DIR",
                     help="also release the pages (MathJax inside them) to nbgrader's exchange, for the "
                          "students' Fetch Feedback (DIR, or the course's c.Exchange.root)")
    sub.add_argument("--students", help="comma-separated student ids (default: every student graded), "
                                        "e.g. those a --regrade changed")

    from autograder.commands.serve import add_arguments as serve_arguments
    serve_arguments(add("serve", cmd_serve, "the grading service: grade each submission in the exchange on submit and "
                        "release its feedback as the course's policy says; --status, --pause, --off"))

    sub = add("report", cmd_report, "the instructor's page (statistics, what the class got wrong, code "
              "similarity), grades CSV, data and plots into reports/<assignment>/")
    sub.add_argument("assignment")
    sub.add_argument("--similarity-threshold", type=float, metavar="PCT", default=100 * THRESHOLD,
                     help="list a pair of students when this share of their code matches (default: %(default)g)")
    sub.add_argument("--lms", metavar="canvas,moodle",
                     help="grade-import CSVs to write (default: both once a roster is imported; none)")
    sub.add_argument("--canvas-assignment-id", metavar="ID",
                     help="Canvas's id of the assignment (its URL's last number): the column then updates "
                          "that assignment instead of matching it by name")

    sub = add("extend", cmd_extend, "give a student more time: on one assignment (--until DATE or --by 2d), or on "
              "every assignment without naming one (--by 3d, or --by 50%% of each assignment's time)")
    sub.add_argument("student")
    sub.add_argument("assignment", nargs="?", help="default: a standing accommodation on every assignment")
    sub.add_argument("--until", metavar="DATE", help="the student's own due date, with its zone: "
                                                     "'2026-12-03 17:00 Europe/Paris'")
    sub.add_argument("--by", metavar="LENGTH", help="2d, 36h, 90m, 1d12h, or 50%% of the assignment's time "
                                                    "(release to due date)")
    sub.add_argument("--remove", action="store_true", help="take the extension (or standing one) back")

    sub = add("late-days", cmd_late_days, "the course's late days: a budget per student, spent on late "
              "submissions in due-date order; shows each student's days used and left")
    sub.add_argument("student", nargs="?")
    sub.add_argument("assignment", nargs="?")
    sub.add_argument("--budget", metavar="N", help="late days per student for the whole course ('none': no late days)")
    sub.add_argument("--spend", metavar="N", help="the days STUDENT spends on ASSIGNMENT, instead of the rule's "
                                                  "('auto': the rule's again)")

    sub = add("students", cmd_students, "the roster: LMS ids to course ids, into nbgrader's student table")
    sub.add_argument("action", choices=["import", "list"])
    sub.add_argument("roster", nargs="?", help="CSV with the columns id, first_name, last_name, email, canvas_id, "
                                                "moodle_id, sis_id, sis_login_id (only id required)")

    sub = add("check", cmd_check,
              "self-test: solutions score full, released scores 0, every mutant loses points on its exercise only")
    sub.add_argument("assignment", nargs="?")
    sub.add_argument("--all", action="store_true", help="every assignment in source/")
    sub.add_argument("--exercise", metavar="ID",
                     help="only this exercise's mutants and alternatives (the solution and the unanswered "
                          "notebook are graded whole, as always): the quick check while writing one")
    sub.add_argument("--jobs", type=int, default=CPUS, help="parallel workers (default: the CPUs, %(default)s)")
    sub.add_argument("--cell-timeout", type=int,
                     help="wall seconds per exercise, the student's cells included "
                          "(default: the course's Execute.timeout)")

    sync.add_arguments(add("sync", cmd_sync,
                           "write the reference (solutions/) into the source notebooks' solution regions, the one "
                           "source of every solution line; --check changes nothing and fails on a region that "
                           "drifted"))
    kit.add_arguments(add("kit", cmd_kit, "write the students' course kit (coursekit/) into a folder, as release does"))

    sub = add("demo", cmd_demo, "the whole loop on synthetic submissions, in a scratch copy of the course")
    sub.add_argument("assignment", nargs="?", help="default: the first assignment")
    sub.add_argument("--out", help="scratch directory (default: a new temporary directory)")
    sub.add_argument("--jobs", type=int, default=CPUS, help="parallel workers (default: the CPUs, %(default)s)")
    return parser


def main(argv: Sequence[str] | None = None, as_command: bool = False) -> int:
    """Run one command. ``as_command``: this process is the command itself (``python -m
    autograder``), which may start again as the course's owner when root runs it on a course a user
    controls (:mod:`autograder.course.owner`); called as a function, it refuses such a course instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        if as_command:
            act_as_owner(args.course, without_course(argv))
        elif os.geteuid() == 0 and controllers(args.course):
            raise OwnerError(f"{os.path.abspath(args.course)} is controlled by a user: run the command as them")
        course = Course.open(args.course, args.db)
        return args.func(course, args)
    except OwnerError as error:
        print(f"autograder: error: {error}", file=sys.stderr)
        return 2
    except CourseError as error:
        print(f"autograder: error: {error}", file=sys.stderr)
        return 2
