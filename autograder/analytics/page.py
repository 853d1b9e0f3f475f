"""The instructor's page for one assignment, and the data behind it, in ``reports/<assignment>/``.

* ``class_report.html``: one self-contained page (styles and figures inside it, no script, a
  Content-Security-Policy that lets nothing load from elsewhere; it opens from disk, offline):
  the scores, each exercise's statistics, what went wrong (:mod:`~autograder.analytics.misconceptions`),
  the code similarity (:mod:`~autograder.analytics.similarity`) and the course so far.
* ``similarity/<a>--<b>.html``: a page per listed pair, the matching passages side by side.
* the data: ``exercise_stats.csv``, ``misconceptions.csv``, ``similarity.csv`` (every pair with code
  in common), ``model_answer.csv``, ``course_scores.csv`` and everything in ``class_report.json``.

Everything a student wrote (code, the messages that quote it) and every name is escaped: the page
runs nothing a student wrote, and holds no hidden test (the judge's messages never quote one).
"""
from __future__ import annotations

import base64
import html
import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from autograder.analytics import plots, similarity
from autograder.analytics.gradebook import Row, course_scores
from autograder.analytics.statistics import ExerciseStats, exercise_stats
from autograder.course import notebook as nbfile
from autograder.course import safe_csv
from autograder.course.directory import Course
from autograder.course.files import replacing

PAGE = "class_report.html"
PAIRS = "similarity"
MAX_PAIR_PAGES = 200   # the most similar pairs get a page each; similarity.csv lists every pair
NEXT_PAIRS = 10        # the most similar pairs below the line, shown apart, for a sense of the scale
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1180px; padding: 16px 24px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 2em; }
h3 { margin-bottom: 0.3em; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; word-break: break-word; }
th { background: #f4f4f4; }
td.n, th.n { text-align: right; width: 6em; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: 6px 10px; }
.kind { font-size: 0.8em; padding: 1px 6px; border-radius: 8px; background: #eee; white-space: nowrap; }
.kind.bug { background: #fde2e1; } .kind.crash { background: #ffe0b2; } .kind.time-out { background: #e1bee7; }
pre, code { font: 13px/1.35 ui-monospace, monospace; white-space: pre-wrap; overflow-wrap: anywhere; }
pre { background: #f7f7f7; padding: 6px; margin: 0; max-width: 100%; box-sizing: border-box; }
.side { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 12px; }
mark { background: #ffe08a; }
details summary { cursor: pointer; }
nav a { margin-right: 1em; }
/* at 200 % zoom (640 px of a laptop's window) the exercises' eight columns still fit */
@media (max-width: 800px) { td.n, th.n { width: 4.2em; } body { padding: 8px 12px; } }
a:focus-visible, summary:focus-visible { outline: 3px solid #1d5a8c; outline-offset: 2px; }
.skip { position: absolute; left: -10000px; top: 0; }
.skip:focus { left: 8px; top: 8px; background: #fff; padding: 4px 8px; }
"""


@dataclass
class Report:
    page: Path
    files: list[Path]
    groups: int
    flagged_pairs: int


def _write(path: Path, text: str) -> None:
    with replacing(path) as handle:
        handle.write(text)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _doc(title: str, body: str, top: str = "") -> str:
    """A page: its language, its title and links (`top`) as a banner that a skip link jumps past,
    the rest as its main landmark (a screen reader's user goes there, then from heading to
    heading), the keyboard's focus in sight."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
            f'<a class="skip" href="#main">Skip to the content</a><header>{top}</header>'
            f'<main id="main" tabindex="-1">{body}</main></body></html>\n')


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} %" if whole else ""


# -- the answers compared ----------------------------------------------------------------------------

def _without_markers(source: str) -> str:
    return "\n".join(line for line in source.split("\n")
                     if nbfile.BEGIN_SOLUTION not in line and nbfile.END_SOLUTION not in line)


def answers(course: Course, assignment: str, students: list[str]) -> tuple[dict, list[str], dict[str, str]]:
    """(exercise -> student -> the answer cell as graded, the released code cells, exercise -> the
    model answer), from the autograded notebooks (restored on the source: every answer cell is there)
    and the source notebooks (what a release makes of them is the boilerplate)."""
    by_exercise: dict[str, dict[str, str]] = {}
    given, model = [], {}
    for name in course.notebooks(assignment):
        source = nbfile.read(course.source_dir(assignment) / f"{name}.ipynb")
        stubs = {}
        for cell in source.cells:
            if cell.cell_type != "code":
                continue
            given.append(nbfile.released(cell))
            if nbfile.is_answer(cell) and nbfile.grade_id(cell):
                stubs[nbfile.grade_id(cell)] = given[-1].strip()
                model[nbfile.grade_id(cell)] = _without_markers(cell.source)
        for student in students:
            path = course.autograded_dir(student, assignment) / f"{name}.ipynb"
            if not path.is_file():
                continue
            for cell in nbfile.read(path).cells:
                grade_id, code = nbfile.grade_id(cell), nbfile.text(cell.get("source"))
                if cell.get("cell_type") == "code" and grade_id in stubs and code.strip() != stubs[grade_id]:
                    by_exercise.setdefault(grade_id, {})[student] = code   # the stub, untouched, is no answer
    return by_exercise, given, model


# -- data files --------------------------------------------------------------------------------------

def _data(folder: Path, assignment: str, rows: list[Row], stats: list[ExerciseStats], sim: similarity.Similarity,
          assignments: list[str], scores: dict) -> list[Path]:
    paths = [folder / n for n in ("exercise_stats.csv", "misconceptions.csv", "similarity.csv",
                                  "model_answer.csv", "course_scores.csv", "class_report.json")]
    safe_csv.write(paths[0], [["exercise", "title", "points", "graded", "full", "partial", "zero", "answered",
                               "answered_late", "mean_points"]]
                   + [[s.exercise, s.title, f"{s.points:g}", s.graded, s.full, s.partial, s.zero, s.answered, s.late,
                       f"{s.mean:.3g}"] for s in stats])
    safe_csv.write(paths[1], [["exercise", "rank", "kind", "students", "what", "key", "example_message", "who"]]
                   + [[s.exercise, rank, g.kind, len(g.students), g.title, g.key, g.example, " ".join(g.students)]
                      for s in stats for rank, g in enumerate(s.groups, 1)])
    listed = {(p.left, p.right) for p in sim.pairs}
    safe_csv.write(paths[2], [["student_a", "student_b", "similarity", "tokens", "matching_tokens", "listed"]]
                   + [[a, b, f"{score:.3f}", tokens, fewer, "yes" if (a, b) in listed else ""]
                      for a, b, score, tokens, fewer in sorted(sim.scores, key=lambda t: -t[2])])
    safe_csv.write(paths[3], [["student", "exercise", "similarity", "tokens"]]
                   + [[c.left, c.exercise, f"{c.similarity:.3f}", c.tokens[0]] for c in sim.model])
    safe_csv.write(paths[4], [["student", *assignments, "total", "max"]]
                   + [[student, *(f"{scores[student][a][0]:g}" if a in scores[student] else "" for a in assignments),
                       f"{sum(s for s, _ in scores[student].values()):g}",
                       f"{sum(m for _, m in scores[student].values()):g}"] for student in sorted(scores)])
    data = {
        "assignment": assignment,
        "made": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "students": [{"student": r.student, "status": r.status, "score": r.score, "max_score": r.max_score,
                      "late_penalty": r.late_penalty, "seconds_late": r.seconds_late} for r in rows],
        "exercises": [{"exercise": s.exercise, "title": s.title, "points": s.points, "graded": s.graded,
                       "full": s.full, "partial": s.partial, "zero": s.zero, "answered": s.answered,
                       "answered_late": s.late, "mean_points": s.mean,
                       "groups": [{"kind": g.kind, "what": g.title, "key": g.key, "example": g.example,
                                   "students": g.students}
                                  for g in s.groups]} for s in stats],
        "similarity": {"threshold": sim.threshold, "min_tokens": similarity.MIN_TOKENS,
                       "common_share": similarity.COMMON_SHARE, "pairs_compared": sim.compared,
                       "listed": [{"students": [p.left, p.right], "similarity": p.similarity, "tokens": p.tokens,
                                   "matching_tokens": list(p.matched),
                                    "exercises": [{"exercise": c.exercise, "similarity": c.similarity,
                                                   "tokens": c.tokens, "matched": c.matched}
                                                  for c in p.comparisons]} for p in sim.pairs],
                       "close_to_model_answer": [{"student": c.left, "exercise": c.exercise,
                                                  "similarity": c.similarity} for c in sim.model]},
        "course": {"assignments": assignments,
                   "scores": {s: {a: list(v) for a, v in by.items()} for s, by in scores.items()}},
    }
    with replacing(paths[5]) as handle:
        json.dump(data, handle, indent=1)
    return paths


# -- the pages ---------------------------------------------------------------------------------------

def _marked(code: str, spans: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in spans:
        out += [_e(code[at:start]), f"<mark>{_e(code[start:end])}</mark>"]
        at = end
    return "".join(out) + _e(code[at:])


def pair_name(pair: similarity.Pair) -> str:
    return f"{pair.left}--{pair.right}.html"


def _pair_page(assignment: str, sim: similarity.Similarity, pair: similarity.Pair) -> str:
    parts = [f'<p><a href="../{PAGE}">&larr; {_e(assignment)}: the class report</a></p>',
             f"<h1>{_e(pair.left)} and {_e(pair.right)}</h1>",
             '<p class="note">Evidence for a person to read, never an automatic penalty: similar code can be '
             "written independently, above all for short answers and for the natural way to write a small "
             "function. The highlighted passages are the same once names, comments and spacing are set aside; "
             "what the course gave (the released notebook) is never counted.</p>",
             f"<p>Over the assignment: <b>{_pct(pair.similarity, 1)}</b> of both students' code matches the "
             f"other's, each passage weighed by how few in the class wrote it ({pair.matched[0]} and "
             f"{pair.matched[1]} of their {pair.tokens} Python tokens outside the class's common passages "
             "match).</p>"]
    for c in pair.comparisons:
        ex = sim.exercises[c.exercise]
        left, right = ex.passages(pair.left, pair.right)
        parts += [f"<h2>{_e(c.exercise)}: {_pct(c.similarity, 1)}</h2>",
                  '<div class="side">',
                  f"<div><h3>{_e(pair.left)} ({c.tokens[0]} tokens, {c.matched[0]} matching)</h3>"
                  f"<pre>{_marked(ex.code[pair.left], left)}</pre></div>",
                  f"<div><h3>{_e(pair.right)} ({c.tokens[1]} tokens, {c.matched[1]} matching)</h3>"
                  f"<pre>{_marked(ex.code[pair.right], right)}</pre></div></div>"]
    return _doc(f"{assignment}: {pair.left} and {pair.right}", "".join(parts[2:]), "".join(parts[:2]))


def _model_page(assignment: str, sim: similarity.Similarity, student: str, comparisons) -> str:
    parts = [f'<p><a href="../{PAGE}">&larr; {_e(assignment)}: the class report</a></p>',
             f"<h1>{_e(student)} and the model answer</h1>",
             '<p class="note">Evidence for a person to read: these answers repeat the course\'s own solution, '
             "names included, in passages few of the class wrote that way. A leaked solution, or a student "
             "who writes as the course does: ask before concluding.</p>"]
    for c in comparisons:
        ref = sim.reference[c.exercise]
        left, right = ref.passages(student, similarity.MODEL)
        parts += [f"<h2>{_e(c.exercise)}: {_pct(c.similarity, 1)}</h2>", '<div class="side">',
                  f"<div><h3>{_e(student)}</h3><pre>{_marked(ref.code[student], left)}</pre></div>",
                  f"<div><h3>the model answer</h3><pre>{_marked(ref.code[similarity.MODEL], right)}</pre></div></div>"]
    return _doc(f"{assignment}: {student} and the model answer", "".join(parts[2:]), "".join(parts[:2]))


def _groups_html(s: ExerciseStats) -> str:
    if not s.groups:
        return "<p>Every graded student has full marks.</p>"
    rows = []
    for g in s.groups:
        shown = ", ".join(g.students)
        who = _e(shown) if len(g.students) <= 12 else \
            f"<details><summary>{len(g.students)} students</summary>{_e(shown)}</details>"
        rows.append(f'<tr><td class="n">{len(g.students)}</td><td class="n">{_pct(len(g.students), s.graded)}</td>'
                    f'<td><span class="kind {_e(g.kind.replace(" ", "-"))}">{_e(g.kind)}</span> {_e(g.title)}'
                    f"<details><summary>one student's message</summary><code>{_e(g.example)}</code></details></td>"
                    f"<td>{who}</td></tr>")
    return ('<table><tr><th class="n">students</th><th class="n">of graded</th><th>what went wrong</th>'
            '<th style="width:30%">who</th></tr>' + "".join(rows) + "</table>")


def _page(course: Course, assignment: str, rows: list[Row], stats: list[ExerciseStats], sim: similarity.Similarity,
          figures: dict[str, Path], assignments: list[str], scores: dict, model_pages: dict[str, str],
          pair_pages: dict[tuple[str, str], str], data: list[Path], points: dict[str, float]) -> str:
    graded = [r for r in rows if r.score is not None]
    failed = [r for r in rows if r.status.startswith("failed")]
    late = [r for r in graded if r.seconds_late > 0]
    out = [f"<h1>{_e(assignment)}: what the class did, and what it got wrong</h1>",
           '<nav aria-label="Sections">' + "".join(f'<a href="#{a}">{t}</a>' for a, t in
                             [("scores", "Scores"), ("exercises", "Exercises"), ("mistakes", "What went wrong"),
                              ("similarity", "Similarity"), ("course", "The course")]) + "</nav>",
           f"<p>{len(rows)} students handed something in; {len(graded)} graded, {len(failed)} whose grading failed, "
           f"{len(late)} late. Made {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from the gradebook and the "
           "judge's verdicts. The data behind this page: "
           + ", ".join(f'<a href="{_e(p.name)}">{_e(p.name)}</a>' for p in data) + ".</p>",
           '<h2 id="scores">Scores</h2>']
    waiting = plots.pending(rows, points)
    if waiting:
        out.append(f'<p class="note">Not final yet: {_e(waiting)}.</p>')
    out += [_img(figures["scores"], "total scores" + (f" ({waiting})" if waiting else "")),
           _img(figures["exercises"], "marks per exercise"),
           '<h2 id="exercises">Exercises</h2>',
           '<table><tr><th>exercise</th><th class="n">points</th><th class="n">full</th><th class="n">partial</th>'
           '<th class="n">zero</th><th class="n">answered</th><th class="n">late</th><th class="n">mean</th></tr>']
    for s in stats:
        out.append(f'<tr><td><a href="#ex-{_e(s.exercise)}">{_e(s.exercise)}</a> {_e(s.title)}</td>'
                   f'<td class="n">{s.points:g}</td><td class="n">{_pct(s.full, s.graded)}</td>'
                   f'<td class="n">{_pct(s.partial, s.graded)}</td><td class="n">{_pct(s.zero, s.graded)}</td>'
                   f'<td class="n">{s.answered}/{s.graded}</td><td class="n">{s.late}</td>'
                   f'<td class="n">{s.mean:.2g}</td></tr>')
    out.append("</table>")
    out += ['<h2 id="mistakes">What went wrong, per exercise</h2>',
            "<p>The students who lost points on an exercise, grouped by what the judge's message names (the "
            "failing case and the values it quotes set aside), largest group first, each described by one "
            "student's message. An exception raised at a line of the student's code is a bug, grouped by what "
            "was raised; not answered, crashes (the code's process died) and time-outs are groups of their "
            "own.</p>",
            _img(figures["mistakes"], "the most common mistakes")]
    for s in stats:
        out += [f'<h3 id="ex-{_e(s.exercise)}">{_e(s.exercise)} {_e(s.title)}: {s.failing} of {s.graded} lost '
                "points</h3>", _groups_html(s)]
    listed, shown = sim.pairs[:MAX_PAIR_PAGES], len(sim.pairs) > MAX_PAIR_PAGES
    out += ['<h2 id="similarity">Code similarity</h2>',
            '<p class="note">Evidence for a person to read, never an automatic penalty. Every student\'s answer to '
            "each exercise is compared with every other's (winnowing, as MOSS does, through copydetect; names, "
            "comments, spacing and the order of independent lines set aside; the released notebook's code "
            "removed). A passage weighs by how few students wrote it: one that more than "
            f"{_pct(similarity.COMMON_SHARE, 1)} of the class wrote is the natural way to write it and weighs "
            f"nothing. A pair is listed when at least {_pct(sim.threshold, 1)} of both students' code, so "
            f"weighed, matches over the assignment, and at least {similarity.MIN_TOKENS} Python tokens of "
            "each one's code match (one natural line in common, such as <code>return grad * self.output</code>, "
            "lists no one).</p>",
            f'<p class="listed"><b>{sim.compared} pairs of students compared; {len(sim.pairs)} listed</b>'
            + (f" (the {MAX_PAIR_PAGES} most similar are shown, each with a page; similarity.csv lists every pair)"
               if shown else "") + ".</p>"]
    if listed:
        out.append('<table><tr><th>students</th><th class="n" style="width:7em">similarity</th>'
                   "<th>exercises with code in common (each one's similarity)</th></tr>")
        for p in listed:
            link = pair_pages.get((p.left, p.right))
            who = f"{_e(p.left)} and {_e(p.right)}"
            out.append(f"<tr><td>{f'<a href={chr(34)}{_e(link)}{chr(34)}>{who}</a>' if link else who}</td>"
                       f'<td class="n">{_pct(p.similarity, 1)}</td><td>'
                       + ", ".join(f"{_e(c.exercise)} ({_pct(c.similarity, 1)})" for c in p.comparisons) + "</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No pair of students is listed.</p>")
    below = [t for t in sorted(sim.scores, key=lambda t: -t[2]) if (t[0], t[1]) not in pair_pages][:NEXT_PAIRS]
    if below:
        out.append(f"<details><summary>For comparison, the {len(below)} most similar pairs not listed</summary>"
                   '<table><tr><th>students</th><th class="n" style="width:7em">similarity</th>'
                   '<th class="n" style="width:9em">matching tokens</th></tr>'
                   + "".join(f'<tr><td>{_e(a)} and {_e(b)}</td><td class="n">{_pct(score, 1)}</td>'
                             f'<td class="n">{fewer}</td></tr>' for a, b, score, _, fewer in below)
                   + "</table></details>")
    out.append("<h3>Close to the model answer</h3>")
    if sim.model:
        by_student: dict[str, list] = {}
        for c in sim.model:
            by_student.setdefault(c.left, []).append(c)
        out.append('<table><tr><th>student</th><th>exercises (similarity to the course\'s own solution)</th></tr>')
        for student, found in sorted(by_student.items(), key=lambda kv: -len(kv[1])):
            name = f'<a href="{_e(model_pages[student])}">{_e(student)}</a>' if student in model_pages else _e(student)
            out.append(f"<tr><td>{name}</td><td>"
                       + ", ".join(f"{_e(c.exercise)} ({_pct(c.similarity, 1)})" for c in found) + "</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No student's answers repeat the model answer in passages the class did not converge on.</p>")
    out += ['<h2 id="course">The course so far</h2>', _img(figures["course"], "the course so far"),
            f"<details><summary>Every student's score per assignment ({len(scores)} students)</summary><table>"
            "<tr><th>student</th>" + "".join(f'<th class="n">{_e(a)}</th>' for a in assignments) + "</tr>"]
    for student in sorted(scores):
        out.append(f"<tr><td>{_e(student)}</td>" + "".join(
            f'<td class="n">{scores[student][a][0]:g}/{scores[student][a][1]:g}</td>' if a in scores[student]
            else '<td class="n"></td>' for a in assignments) + "</tr>")
    out.append("</table></details>")
    return _doc(f"{assignment}: the class report", "".join(out[2:]), "".join(out[:2]))


def write(course: Course, assignment: str, rows: list[Row], cells: list[tuple[str, str, float]],
          figures: dict[str, Path], threshold: float = similarity.THRESHOLD) -> Report:
    """Compute the statistics, the groups and the similarity; write the page, the pairs' pages, the
    figures the page shows (``figures`` already holds the scores' histogram) and the data."""
    folder = course.reports_dir(assignment)
    stats = exercise_stats(rows, cells)
    graded = [r.student for r in rows if r.score is not None]
    by_exercise, given, model = answers(course, assignment, graded)
    sim = similarity.compare_class(by_exercise, given, model, threshold)
    assignments, scores = course_scores(course)
    figures = {**figures, "exercises": folder / "exercises.png", "mistakes": folder / "mistakes.png",
               "course": folder / "course.png"}
    plots.exercises(figures["exercises"], assignment, stats)
    plots.misconceptions(figures["mistakes"], assignment, stats)
    plots.course(figures["course"], assignments, scores)
    data = _data(folder, assignment, rows, stats, sim, assignments, scores)
    pages = folder / PAIRS
    if pages.is_symlink():   # a link, even to a folder, is removed, never followed
        pages.unlink()
    shutil.rmtree(pages, ignore_errors=True)   # a pair no longer listed loses its page
    pages.mkdir()
    pair_pages = {}
    for pair in sim.pairs[:MAX_PAIR_PAGES]:
        _write(pages / pair_name(pair), _pair_page(assignment, sim, pair))
        pair_pages[pair.left, pair.right] = f"{PAIRS}/{pair_name(pair)}"
    model_pages = {}
    by_student: dict[str, list] = {}
    for c in sim.model:
        by_student.setdefault(c.left, []).append(c)
    for student, found in by_student.items():
        _write(pages / f"{student}--model-answer.html", _model_page(assignment, sim, student, found))
        model_pages[student] = f"{PAIRS}/{student}--model-answer.html"
    page = folder / PAGE
    _write(page, _page(course, assignment, rows, stats, sim, figures, assignments, scores, model_pages,
                       pair_pages, data, {g: p for _, g, p in cells}))
    return Report(page, [*data, figures["exercises"], figures["mistakes"], figures["course"]],
                  sum(len(s.groups) for s in stats), len(sim.pairs))
