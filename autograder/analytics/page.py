"""The instructor's page for one assignment, and the data behind it, in ``reports/<assignment>/``.

* ``class_report.html``: one self-contained page (styles and figures inside it, no script, a
  Content-Security-Policy that lets nothing load from elsewhere; it opens from disk, offline):
  the scores, each exercise's statistics, what went wrong (:mod:`~autograder.analytics.misconceptions`),
  the code similarity (:mod:`~autograder.analytics.similarity`) and the course so far.
* ``similarity/<a>--<b>.html``: a page per listed pair, the matching passages side by side.
* the data: ``exercise_stats.csv``, ``misconceptions.csv``, ``similarity.csv`` (every pair with code
  in common), ``model_answer.csv``, ``course_scores.csv`` and everything in ``class_report.json``.

The pages are Jinja2 templates (``autograder/templates/class_report/``, as the feedback page is
nbconvert's), which escape every value they show: everything a student wrote (code, the messages
that quote it) and every name. The page runs nothing a student wrote, and holds no hidden test
(the judge's messages never quote one).
"""
from __future__ import annotations

import base64
import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import jinja2

from autograder.analytics import plots, similarity
from autograder.analytics.gradebook import Row, course_scores
from autograder.analytics.statistics import ExerciseStats, exercise_stats
from autograder.course import notebook as nbfile
from autograder.course import safe_csv
from autograder.course.catalogue import title
from autograder.course.directory import Course
from autograder.course.files import replacing

PAGE = "class_report.html"
PAIRS = "similarity"
MAX_PAIR_PAGES = 200   # the most similar pairs get a page each; similarity.csv lists every pair
NEXT_PAIRS = 10        # the most similar pairs below the line, shown apart, for a sense of the scale
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "class_report"   # the pages' templates and style

@dataclass
class Report:
    page: Path
    files: list[Path]
    groups: int
    flagged_pairs: int


def _write(path: Path, text: str) -> None:
    with replacing(path) as handle:
        handle.write(text)


def _figure(path: Path) -> str:
    """A figure as the page holds it: inside it, so that the page opens alone, offline."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} %" if whole else ""


# Every value a template shows is escaped (autoescape): a student's code and names, the judge's
# messages; a template says nothing else of its own than the course's words.
PAGES = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True,
                           lstrip_blocks=True, undefined=jinja2.StrictUndefined)
PAGES.filters["pct"] = lambda part, whole=1: _pct(part, whole)
PAGES.filters["title"] = title  # an exercise by its title, as the notebooks name it (the id only in anchors)


def _render(template: str, **values: object) -> str:
    return PAGES.get_template(template).render(csp=CSP, page=PAGE, **values)


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

def _marked(code: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """``code`` in pieces, each marked or not: the spans that match the other side's code."""
    pieces, at = [], 0
    for start, end in spans:
        pieces += [(code[at:start], False), (code[start:end], True)]
        at = end
    return [*pieces, (code[at:], False)]


def pair_name(pair: similarity.Pair) -> str:
    return f"{pair.left}--{pair.right}.html"


def _pair_page(assignment: str, sim: similarity.Similarity, pair: similarity.Pair) -> str:
    sides = []
    for c in pair.comparisons:
        ex = sim.exercises[c.exercise]
        left, right = ex.passages(pair.left, pair.right)
        sides.append((c, _marked(ex.code[pair.left], left), _marked(ex.code[pair.right], right)))
    return _render("pair.html.j2", assignment=assignment, pair=pair, sides=sides)


def _model_page(assignment: str, sim: similarity.Similarity, student: str, comparisons) -> str:
    sides = []
    for c in comparisons:
        ref = sim.reference[c.exercise]
        left, right = ref.passages(student, similarity.MODEL)
        sides.append((c, _marked(ref.code[student], left), _marked(ref.code[similarity.MODEL], right)))
    return _render("model_answer.html.j2", assignment=assignment, student=student, sides=sides)


def _page(assignment: str, rows: list[Row], stats: list[ExerciseStats], sim: similarity.Similarity,
          figures: dict[str, Path], assignments: list[str], scores: dict, model_pages: dict[str, str],
          pair_pages: dict[tuple[str, str], str], close: dict[str, list], data: list[Path],
          points: dict[str, float]) -> str:
    """The class page; ``close``: student -> their answers close to the model answer."""
    graded = [r for r in rows if r.score is not None]
    return _render(
        "class_report.html.j2", assignment=assignment, rows=rows, graded=len(graded),
        failed=sum(r.status.startswith("failed") for r in rows), late=sum(r.seconds_late > 0 for r in graded),
        made=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}", data=[p.name for p in data],
        waiting=plots.pending(rows, points), figures={k: _figure(v) for k, v in figures.items()}, stats=stats,
        sim=sim, listed=sim.pairs[:MAX_PAIR_PAGES], pair_pages=pair_pages,
        below=[t for t in sorted(sim.scores, key=lambda t: -t[2]) if (t[0], t[1]) not in pair_pages][:NEXT_PAIRS],
        close=sorted(close.items(), key=lambda kv: -len(kv[1])), model_pages=model_pages,
        common_share=similarity.COMMON_SHARE, min_tokens=similarity.MIN_TOKENS, scores=scores,
        assignments=assignments)


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
    _write(page, _page(assignment, rows, stats, sim, figures, assignments, scores, model_pages,
                       pair_pages, by_student, data, {g: p for _, g, p in cells}))
    return Report(page, [*data, figures["exercises"], figures["mistakes"], figures["course"]],
                  sum(len(s.groups) for s in stats), len(sim.pairs))
