"""The book's own Sphinx extension: the chapters run on the students' API, and each is downloadable.

1. **The reference behind the kit's API.** Chapters import what students import
   (`coursekit.engine`, `coursekit.testing`, `coursekit.data`), never the private `solutions`
   package. At the start of a build this writes the *reference kit* (`autograder.kit
   .build_reference_kit`: the kit's modules with the whole reference behind them, never released)
   into `reference-kit/` beside the build's `html/` (`_build/reference-kit/` for `make book`) and
   puts it on the `PYTHONPATH` of the kernels that execute the chapters. Each build output folder
   gets its own: the kit is deleted and rewritten at every build start, so a shared one would
   vanish under a concurrent build's kernels (`No module named 'coursekit'`). On a student's
   machine the same imports reach the kit beside their notebook: their own engine.
2. **Each chapter as a notebook.** Every chapter page gets a "download this chapter as a notebook"
   link at its top; the notebook (:func:`chapter_notebook`) is the chapter's cells, carrying what
   the book reads from its own folders: the figure helpers (`_code/bookfig.py`) inlined, and the
   data files a cell reads (`Path("_data/NAME").read_text()`) embedded in a cell of their own. So
   it runs anywhere a `coursekit/` folder is importable: in any of the student's assignment folders,
   where importing the kit loads the answers of every assignment notebook beside it.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
from docutils import nodes

BOOK = Path(__file__).resolve().parents[1]
ROOT = BOOK.parent
DOWNLOADS = "_downloads/chapters"
PLUMBING = 'sys.path.insert(0, os.path.abspath("_code"))'
# How a chapter reads a data file of book/_data (the build runs chapters in book/); the notebook
# reads the embedded copy instead: BOOK_DATA["_data/NAME"].
DATA_READ = re.compile(r'Path\("(_data/[\w.-]+)"\)\.read_text\(\)')
LOADER = ("import coursekit  # in one of your assignment folders: your answers, "
          "from every assignment notebook there")


def chapter_notebook(md_path: Path) -> nbformat.NotebookNode:
    """The chapter `md_path` (a MyST markdown notebook) as a standalone .ipynb for students."""
    from myst_nb.core.read import read_myst_markdown_notebook

    nb = read_myst_markdown_notebook(md_path.read_text(encoding="utf-8"), path=str(md_path))
    bookfig = (BOOK / "_code" / "bookfig.py").read_text(encoding="utf-8")
    for cell in nb.cells:
        if cell.cell_type == "code" and PLUMBING in cell.source:
            # The book imports its figure helpers from book/_code; the notebook carries them.
            cell.source = cell.source.replace(
                PLUMBING + "\nimport bookfig",
                "import types\n\nbookfig = types.ModuleType(\"bookfig\")  # the book's figure helpers, inlined\n"
                f"exec({bookfig!r}, vars(bookfig))\nsys.modules[\"bookfig\"] = bookfig")
    _embed_data(nb)
    directive = re.compile(r"```\{assignment-exercises\}\s+(\w+)\s*```")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = directive.sub(lambda m: "\n".join(exercise_lines(m.group(1))), cell.source)
    title = next((line[2:] for line in md_path.read_text(encoding="utf-8").splitlines() if line.startswith("# ")),
                 md_path.stem)
    nb.cells.insert(0, nbformat.v4.new_code_cell(LOADER))
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(
        f"*{title}*, a chapter of the course book, as a notebook. Run it in one of your assignment "
        "folders (next to its `coursekit/`): its code then runs on **your** engine, with the answers "
        "you wrote in all your assignment notebooks. Where it reaches an exercise you have not done "
        "yet, the error names that exercise."))
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    for cell in nb.cells:  # a clean notebook: no outputs, ids of its own
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def _embed_data(nb: nbformat.NotebookNode) -> None:
    """Carry the `book/_data` files the chapter's cells read: a cell holding their text goes before
    the first cell that reads one, and each read becomes a lookup in it."""
    names = sorted({m.group(1) for cell in nb.cells if cell.cell_type == "code"
                    for m in DATA_READ.finditer(cell.source)})
    if not names:
        return
    first = next(k for k, cell in enumerate(nb.cells) if cell.cell_type == "code" and DATA_READ.search(cell.source))
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = DATA_READ.sub(lambda m: f"BOOK_DATA[{m.group(1)!r}]", cell.source)
    entries = "".join(f"    {name!r}: {(BOOK / name).read_text(encoding='utf-8')!r},\n" for name in names)
    data = nbformat.v4.new_code_cell(
        "# The book's data files this chapter reads, carried by the notebook (the book reads them from\n"
        f"# its own folder, book/_data/).\nBOOK_DATA = {{\n{entries}}}")
    data.metadata["jupyter"] = {"source_hidden": True}   # JupyterLab shows it collapsed
    nb.cells.insert(first, data)


def _points(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def exercise_lines(assignment: str) -> list[str]:
    """One markdown line per graded exercise of an assignment, in the notebook's order: what the
    chapter's "Assignment" section lists (generated, so it always says what the notebook has)."""
    from autograder.course import catalogue, notebook

    nb = notebook.read(ROOT / "assignments" / "source" / assignment / f"{assignment}.ipynb")
    by_id = {s.id: s for s in catalogue.assignment(assignment)}
    lines, seen = [], set()
    for cell in nb.cells:
        meta = notebook.nbgrader(cell)
        grade_id = meta.get("grade_id", "")
        if not meta.get("grade") or not grade_id or re.search(r"-visible(-\d+)?$", grade_id):
            continue
        points = meta.get("points", 0)
        if grade_id.endswith("-written"):
            question = notebook.exercise_of(grade_id)
            lines.append(f"- a written answer, `{question}` ({_points(points)}, graded by hand)")
            continue
        exercise = notebook.exercise_of(grade_id)
        if exercise in seen:
            continue
        seen.add(exercise)
        spec = by_id.get(exercise)
        title = spec.title if spec is not None and spec.title else exercise
        lines.append(f"- `{title}` ({_points(points)}, `{exercise}`)")
    return lines


def _directive():
    from docutils.statemachine import StringList
    from sphinx.util.docutils import SphinxDirective

    class Directive(SphinxDirective):
        required_arguments = 1

        def run(self):
            assignment = self.arguments[0]
            notebook = ROOT / "assignments" / "source" / assignment / f"{assignment}.ipynb"
            self.env.note_dependency(str(notebook))
            container = nodes.container(classes=["assignment-exercises"])
            self.state.nested_parse(StringList(exercise_lines(assignment)), self.content_offset, container)
            return [container]

    return Directive


def _reference_kit(app, config) -> None:
    from autograder.kit import build_reference_kit

    kit = Path(app.outdir).parent / "reference-kit"
    build_reference_kit(kit)
    paths = [str(kit)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def _chapters(app) -> list[str]:
    return [doc for doc in app.env.found_docs if doc.startswith("book/") and doc[5:7].isdigit()]


def _link(app, doctree, docname) -> None:
    if docname not in _chapters(app):
        return
    target = f"{'../' * docname.count('/')}{DOWNLOADS}/{Path(docname).name}.ipynb"
    para = nodes.paragraph(classes=["chapter-notebook"])
    para += nodes.Text("Run this chapter yourself: ")
    para += nodes.reference("", "download it as a notebook", refuri=target, classes=["download"])
    para += nodes.Text(" and open it in one of your assignment folders (it runs on your own engine).")
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is not None:
        title = next(iter(section.findall(nodes.title)), None)
        section.insert(section.index(title) + 1 if title is not None else 0, para)


def _write_notebooks(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / DOWNLOADS
    out.mkdir(parents=True, exist_ok=True)
    from autograder.course import notebook
    for doc in _chapters(app):
        notebook.write(chapter_notebook(ROOT / f"{doc}.md"), out / f"{Path(doc).name}.ipynb")


# A chapter's second page (listed under the chapter's `sections` in _toc.yml, as book/05b_optimizers)
# is numbered as a section of its chapter: 5.12, right after 5.11 References of the first page. It
# is a page of its own, so it gets a number of its own, the chapter's number and a letter: 5b, and
# its sections 5b.1, 5b.2, ...
SECOND_PAGE = re.compile(r"book/(\d\d)b_")


def _number_second_pages(app, env):
    for doc, numbers in env.toc_secnumbers.items():
        match = SECOND_PAGE.match(doc)
        if not match or "" not in numbers:
            continue
        old = numbers[""]  # the page's own number, (5, 12)
        new = (f"{int(match.group(1))}b",)

        def renumber(number, old=old, new=new):
            return new + tuple(number[len(old):]) if tuple(number[:len(old)]) == tuple(old) else number

        env.toc_secnumbers[doc] = {anchor: renumber(n) for anchor, n in numbers.items()}
        for toc in env.tocs.values():  # the numbers the navigation shows: only this page's start so
            for node in toc.findall(nodes.reference):
                if "secnumber" in node:
                    node["secnumber"] = renumber(node["secnumber"])
    return []


def setup(app):
    # ```{assignment-exercises} a02_broadcasting```: the assignment's exercises, read from its notebook
    app.add_directive("assignment-exercises", _directive())
    app.connect("env-get-updated", _number_second_pages, priority=900)  # after Sphinx numbers the sections
    app.connect("config-inited", _reference_kit)
    app.connect("doctree-resolved", _link)
    app.connect("build-finished", _write_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
