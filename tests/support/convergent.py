"""A class of a02 answers written the way a real class writes them, for the similarity's tests.

Honest students converge: most of them write an exercise's idiomatic line the same way, a few take
one of several other natural styles, and each adds small choices of their own (operand order, a
temporary or not, ``self.inputs[0]`` or unpacking, a guard on ``needs_input_grad`` or none, their own
names and comments). :func:`honest` draws one student's answers from those styles (a per-exercise
list of weighted templates; ``«first|second|…»`` is a choice, the first option the usual one);
:func:`copied` plants a copy of a student's answers under one of :data:`DISGUISES`; :func:`make_class`
builds a class of honest students and planted copying pairs.

Every template is a correct answer, written for this test apart from the catalogue of alternatives
(``assignments/mutants``), so that the class does not reuse the answers the other tests measure.
"""
from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from dataclasses import dataclass

from autograder.course import notebook

from support.classes import answer_cells, disguise, source_notebooks

ASSIGNMENT = "a02_broadcasting"
CHOICE = re.compile(r"«([^«»]*)»")
USUAL = 0.6          # the first option of a choice: the way most of the class writes it

# exercise -> [(weight, body)]; a body is the solution region, indented as in the cell (4 spaces a level
# below the ``def``); for Softmax, the forward's and the backward's regions apart, by "\n---\n".
STYLES: dict[str, list[tuple[float, str]]] = {
    "a02-unbroadcast": [
        (0.45, """\
    «while grad.ndim > len(shape):|while len(grad.shape) > len(shape):»
        grad = grad.sum(axis=0)
    for i, n in enumerate(shape):
        if «n == 1|n == 1 and grad.shape[i] != 1|n == 1 and grad.shape[i] > 1»:
            grad = grad.sum(axis=i, keepdims=True)
    return grad"""),
        (0.25, """\
    extra = grad.ndim - len(shape)
    axes = «tuple(range(extra))|list(range(extra))»
    «axes = axes + tuple(i + extra for i, n in enumerate(shape) if n == 1)|for i, n in enumerate(shape):
        if n == 1:
            axes.append(i + extra)»
    «out|summed|g» = grad.sum(axis=tuple(axes), keepdims=True)
    return «out|summed|g».reshape(shape)"""),
        (0.2, """\
    if grad.shape == tuple(shape):
        return grad
    lead = len(grad.shape) - len(shape)
    «g|out» = grad
    «for _ in range(lead):
        «g|out» = «g|out».sum(axis=0)|if lead > 0:
        «g|out» = «g|out».sum(axis=tuple(range(lead)))»
    for i, n in enumerate(shape):
        if n == 1 and «g|out».shape[i] != 1:
            «g|out» = «g|out».sum(axis=i, keepdims=True)
    return «g|out»"""),
        (0.1, """\
    shape = tuple(shape)
    ndim_added = grad.ndim - len(shape)
    padded = (1,) * ndim_added + shape
    axes = tuple(i for i, (want, have) in enumerate(zip(padded, grad.shape)) if want == 1 and have != 1)
    summed = grad.sum(axis=axes, keepdims=True) if axes else grad
    return summed.reshape(shape)"""),
    ],
    "a02-add": [
        (0.5, """\
        x, y = self.inputs
        return unbroadcast(grad, x.shape), unbroadcast(grad, y.shape)"""),
        (0.3, """\
        «x, y = self.inputs|x = self.inputs[0]
        y = self.inputs[1]»
        «gx|dx|grad_x» = unbroadcast(grad, x.shape)«| if self.needs_input_grad[0] else None»
        «gy|dy|grad_y» = unbroadcast(grad, y.shape)«| if self.needs_input_grad[1] else None»
        return «gx|dx|grad_x», «gy|dy|grad_y»"""),
        (0.2, """\
        return «tuple(unbroadcast(grad, t.shape) for t in self.inputs)|(unbroadcast(grad, self.inputs[0].shape), \
unbroadcast(grad, self.inputs[1].shape))»"""),
    ],
    "a02-mul": [
        (0.5, """\
        x, y = self.inputs
        return unbroadcast(«grad * y|y * grad», x.shape), unbroadcast(«grad * x|x * grad», y.shape)"""),
        (0.35, """\
        «x, y = self.inputs|x = self.inputs[0]
        y = self.inputs[1]»
        «gx|dx|grad_x» = unbroadcast(«grad * y|y * grad», x.shape)«| if self.needs_input_grad[0] else None»
        «gy|dy|grad_y» = unbroadcast(«grad * x|x * grad», y.shape)«| if self.needs_input_grad[1] else None»
        return «gx|dx|grad_x», «gy|dy|grad_y»"""),
        (0.15, """\
        a, b = self.inputs
        «ga|da» = None
        «gb|db» = None
        if self.needs_input_grad[0]:
            «ga|da» = unbroadcast(grad * b, a.shape)
        if self.needs_input_grad[1]:
            «gb|db» = unbroadcast(grad * a, b.shape)
        return «ga|da», «gb|db»"""),
    ],
    "a02-div": [
        (0.45, """\
        x, y = self.inputs
        return unbroadcast(grad / y, x.shape), unbroadcast(«-grad * x / (y * y)|-grad * x / y ** 2|\
-(grad * x) / (y * y)», y.shape)"""),
        (0.35, """\
        «x, y = self.inputs|x = self.inputs[0]
        y = self.inputs[1]»
        «gx|dx» = unbroadcast(grad / y, x.shape)«| if self.needs_input_grad[0] else None»
        «gy|dy» = unbroadcast(«-grad * x / (y * y)|-grad * x / y ** 2|grad * (-x) / (y * y)», y.shape)«| \
if self.needs_input_grad[1] else None»
        return «gx|dx», «gy|dy»"""),
        (0.2, """\
        x, y = self.inputs
        «inv|recip» = 1.0 / y
        «gx|dx» = unbroadcast(grad * «inv|recip», x.shape)
        «gy|dy» = unbroadcast(-grad * x * «inv|recip» * «inv|recip», y.shape)
        return «gx|dx», «gy|dy»"""),
    ],
    "a02-pow-scalar": [
        (0.55, """\
        «(x,) = self.inputs|x = self.inputs[0]|x, = self.inputs»
        «if self.exponent == 0:
            return grad * 0.0
        |»return grad * self.exponent * x ** (self.exponent - 1)"""),
        (0.3, """\
        «(x,) = self.inputs|x = self.inputs[0]»
        p = self.exponent
        «if p == 0:
            return grad * 0.0
        |»return «grad * p * x ** (p - 1)|p * x ** (p - 1) * grad»"""),
        (0.15, """\
        x = self.inputs[0]
        if self.exponent == 0:
            return grad * 0
        «local_grad|d|deriv» = self.exponent * x ** (self.exponent - 1)
        return grad * «local_grad|d|deriv»"""),
    ],
    "a02-exp": [
        (0.75, """\
        return «grad * self.output|self.output * grad»"""),
        (0.25, """\
        «(x,) = self.inputs|x = self.inputs[0]»
        return grad * x.exp()"""),
    ],
    "a02-log": [
        (0.7, """\
        «(x,) = self.inputs|x = self.inputs[0]|x, = self.inputs»
        return grad / x"""),
        (0.3, """\
        return «grad / self.inputs[0]|grad * self.inputs[0] ** -1»"""),
    ],
    "a02-tanh": [
        (0.55, """\
        «t|y|out» = self.output
        return grad * (1«.0|» - ««t|y|out» * «t|y|out»|«t|y|out» ** 2»)"""),
        (0.45, """\
        return grad * (1«.0|» - «self.output * self.output|self.output ** 2»)"""),
    ],
    "a02-sigmoid": [
        (0.6, """\
        «s|y|out» = self.output
        return grad * «s|y|out» * (1«.0|» - «s|y|out»)"""),
        (0.4, """\
        return «grad * self.output * (1 - self.output)|self.output * (1 - self.output) * grad»"""),
    ],
    "a02-sum": [
        (0.55, """\
        «(x,) = self.inputs|x = self.inputs[0]»
        return broadcast_to(grad.reshape(kept_shape(x.shape, self.axes)), x.shape)"""),
        (0.3, """\
        «(x,) = self.inputs|x = self.inputs[0]»
        «shape|kept|new_shape» = kept_shape(x.shape, self.axes)
        «g|out» = grad.reshape(«shape|kept|new_shape»)
        return broadcast_to(«g|out», x.shape)"""),
        (0.15, """\
        x = self.inputs[0]
        if not self.keepdims:
            grad = grad.reshape(kept_shape(x.shape, self.axes))
        return «broadcast_to(grad, x.shape)|grad.broadcast_to(x.shape)»"""),
    ],
    "a02-broadcast-to": [
        (0.7, """\
        «(x,) = self.inputs|x = self.inputs[0]»
        return unbroadcast(grad, x.shape)"""),
        (0.3, """\
        return unbroadcast(grad, self.inputs[0].shape)"""),
    ],
    "a02-transpose": [
        (0.6, """\
        return grad.transpose(«tuple(np.argsort(self.axes))|np.argsort(self.axes)»)"""),
        (0.4, """\
        «inverse|inv|back» = «tuple(np.argsort(self.axes))|[0] * len(self.axes)
        for i, a in enumerate(self.axes):
            «inverse|inv|back»[a] = i»
        return grad.transpose(«tuple(inverse)|tuple(inv)|tuple(back)»)"""),
    ],
    "a02-getitem": [
        (0.7, """\
        «(x,) = self.inputs|x = self.inputs[0]»
        return scatter_add(grad, self.index, x.shape)"""),
        (0.3, """\
        return scatter_add(grad, self.index, self.inputs[0].shape)"""),
    ],
    "a02-matmul": [
        (0.4, """\
        a, b = self.inputs
        «a2|A» = a.reshape((1,) + a.shape) if a.ndim == 1 else a
        «b2|B» = b.reshape(b.shape + (1,)) if b.ndim == 1 else b
        «g|G» = grad
        if b.ndim == 1:
            «g|G» = «g|G».expand_dims(-1)
        if a.ndim == 1:
            «g|G» = «g|G».expand_dims(-2)
        ga = unbroadcast(«g|G» @ swapaxes(«b2|B», -1, -2), «a2|A».shape).reshape(a.shape)
        gb = unbroadcast(swapaxes(«a2|A», -1, -2) @ «g|G», «b2|B».shape).reshape(b.shape)
        return ga, gb"""),
        (0.35, """\
        a, b = self.inputs
        «vec_a|a_was_vector» = a.ndim == 1
        «vec_b|b_was_vector» = b.ndim == 1
        if «vec_a|a_was_vector»:
            a = a.reshape((1, a.shape[0]))
            grad = grad.expand_dims(-2)
        if «vec_b|b_was_vector»:
            b = b.reshape((b.shape[0], 1))
            grad = grad.expand_dims(-1)
        «da|ga» = unbroadcast(grad @ swapaxes(b, -1, -2), a.shape)
        «db|gb» = unbroadcast(swapaxes(a, -1, -2) @ grad, b.shape)
        if «vec_a|a_was_vector»:
            «da|ga» = «da|ga».reshape((a.shape[1],))
        if «vec_b|b_was_vector»:
            «db|gb» = «db|gb».reshape((b.shape[0],))
        return «da|ga», «db|gb»"""),
        (0.25, """\
        a, b = self.inputs
        a_m = a if a.ndim > 1 else a.reshape((1, -1))
        b_m = b if b.ndim > 1 else b.reshape((-1, 1))
        g = grad
        if b.ndim == 1:
            g = g.expand_dims(-1)
        if a.ndim == 1:
            g = g.expand_dims(-2)
        «grad_a = g @ swapaxes(b_m, -1, -2)
        grad_b = swapaxes(a_m, -1, -2) @ g|grad_b = swapaxes(a_m, -1, -2) @ g
        grad_a = g @ swapaxes(b_m, -1, -2)»
        grad_a = unbroadcast(grad_a, a_m.shape).reshape(a.shape)
        grad_b = unbroadcast(grad_b, b_m.shape).reshape(b.shape)
        return grad_a, grad_b"""),
    ],
    "a02-softmax": [
        (0.5, """\
        «e|ex|exps» = np.exp(x - «np.max(x, axis=self.axis, keepdims=True)|x.max(axis=self.axis, keepdims=True)»)
        return «e|ex|exps» / «np.sum(«e|ex|exps», axis=self.axis, keepdims=True)|«e|ex|exps».sum(axis=self.axis, \
keepdims=True)»
---
        «s|y» = self.output
        return «s|y» * (grad - (grad * «s|y»).sum(axis=self.axis, keepdims=True))"""),
        (0.3, """\
        «shifted|z» = x - x.max(axis=self.axis, keepdims=True)
        «e|ex» = np.exp(«shifted|z»)
        «total|denom» = «e|ex».sum(axis=self.axis, keepdims=True)
        return «e|ex» / «total|denom»
---
        «s|y» = self.output
        «dot|inner» = (grad * «s|y»).sum(axis=self.axis, keepdims=True)
        return «s|y» * (grad - «dot|inner»)"""),
        (0.2, """\
        m = np.max(x, axis=self.axis, keepdims=True)
        e = np.exp(x - m)
        return e / np.sum(e, axis=self.axis, keepdims=True)
---
        s = self.output
        «gs|weighted» = grad * s
        return «gs|weighted» - s * «gs|weighted».sum(axis=self.axis, keepdims=True)"""),
    ],
    "a02-log-softmax": [
        (0.55, """\
        return grad - «self.output.exp()|exp(self.output)» * grad.sum(axis=self.axis, keepdims=True)"""),
        (0.3, """\
        «p|probs|s» = self.output.exp()
        «total|g_sum» = grad.sum(axis=self.axis, keepdims=True)
        return grad - «p|probs|s» * «total|g_sum»"""),
        (0.15, """\
        softmax = exp(self.output)
        return grad - softmax * sum(grad, axis=self.axis, keepdims=True)"""),
    ],
}
COMMENTS = ["# chain rule", "# d/dx", "# gradient of the op", "# backward pass", "# local derivative times grad"]


def _expand(template: str, rng: random.Random) -> str:
    """Resolve every choice of ``template``, the innermost first (a choice may hold choices); one
    draw per distinct choice text, so that a name chosen once is the same name everywhere."""
    drawn: dict[str, str] = {}

    def pick(match: re.Match) -> str:
        if match.group(1) not in drawn:
            options = match.group(1).split("|")
            drawn[match.group(1)] = options[0] if len(options) == 1 or rng.random() < USUAL \
                else rng.choice(options[1:])
        return drawn[match.group(1)]

    while CHOICE.search(template):
        template = CHOICE.sub(pick, template)
    return template


def _regions(cell: str) -> tuple[list[str], list[str]]:
    """The code around the solution regions of a model answer cell, and the regions' indentation."""
    outside, indents, inside = [[]], [], False
    for line in cell.split("\n"):
        if line.strip() == "### BEGIN SOLUTION":
            inside = True
            indents.append(line[: len(line) - len(line.lstrip())])
        elif line.strip() == "### END SOLUTION":
            inside = False
            outside.append([])
        elif not inside:
            outside[-1].append(line)
    return ["\n".join(part) for part in outside], indents


def _with_comments(body: str, rng: random.Random) -> str:
    lines = body.split("\n")
    if rng.random() < 0.4:
        at = rng.randrange(len(lines))
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines.insert(at, f"{indent}{rng.choice(COMMENTS)}")
    return "\n".join(lines)


def honest(rng: random.Random, skip: float = 0.05) -> dict[str, str]:
    """One student's answers: exercise -> answer cell (some exercises left unanswered)."""
    out = {}
    for nb in source_notebooks(ASSIGNMENT).values():
        for cell in nb["cells"]:
            exercise = notebook.grade_id(cell)
            if cell["cell_type"] != "code" or not notebook.is_answer(cell) or exercise not in STYLES:
                continue
            if rng.random() < skip:
                continue
            styles = STYLES[exercise]
            template = rng.choices([b for _, b in styles], weights=[w for w, _ in styles])[0]
            outside, _ = _regions(notebook.text(cell["source"]))
            bodies = _with_comments(_expand(template, rng), rng).split("\n---\n")
            assert len(bodies) == len(outside) - 1, exercise
            parts = [outside[0]]
            for body, after in zip(bodies, outside[1:], strict=True):
                parts += [body, after]
            out[exercise] = "\n".join(p for p in parts if p != "")
    return out


# -- planted copies ----------------------------------------------------------------------------------

def _locals(code: str) -> list[str]:
    tree = ast.parse(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    args = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg) and a.arg not in ("self", "ctx")}
    return sorted(stored | args)


def renamed(code: str) -> str:
    """Every argument and local variable renamed (not attributes, keyword arguments or strings),
    the layout kept."""
    names = {name: f"v{i}_{name[::-1]}" for i, name in enumerate(_locals(code))}
    tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits, depth = [], 0
    for before, t, after in zip([None, *tokens[:-1]], tokens, [*tokens[1:], None], strict=True):
        depth += t.string in "([{" if t.type == tokenize.OP else 0
        depth -= t.string in ")]}" if t.type == tokenize.OP else 0
        keyword_argument = depth > 0 and after is not None and after.string == "="
        if t.type == tokenize.NAME and t.string in names and not keyword_argument \
                and not (before is not None and before.string == "."):
            at = starts[t.start[0] - 1] + t.start[1]
            edits.append((at, at + len(t.string), names[t.string]))
    for start, end, new in reversed(edits):
        code = code[:start] + new + code[end:]
    return code


def reordered(code: str) -> str:
    """The first pair of adjacent independent one-line statements of a body swapped, the layout kept."""
    lines = code.split("\n")
    for i in range(len(lines) - 1):
        a, b = lines[i], lines[i + 1]
        indent = a[: len(a) - len(a.lstrip())]
        if not indent or b[: len(b) - len(b.lstrip())] != indent:
            continue
        try:
            sa, sb = ast.parse(a.strip()).body, ast.parse(b.strip()).body
        except SyntaxError:
            continue
        if not (len(sa) == len(sb) == 1 and isinstance(sa[0], ast.Assign) and isinstance(sb[0], ast.Assign)):
            continue
        names = [({n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)},
                  {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})
                 for s in (sa[0], sb[0])]
        (wa, ra), (wb, rb) = names
        if not (wa & (rb | wb) or wb & ra):
            lines[i], lines[i + 1] = b, a
            return "\n".join(lines)
    return code


def recommented(code: str) -> str:
    """Other comments and blank lines: every comment removed, one of the copier's own before each return."""
    out = []
    for line in code.split("\n"):
        stripped = line.split("#")[0].rstrip() if "#" in line and '"' not in line else line
        if not stripped.strip():
            continue
        if stripped.lstrip().startswith("return"):
            indent = stripped[: len(stripped) - len(stripped.lstrip())]
            out += ["", f"{indent}# my own work: the gradient"]
        out.append(stripped)
    return "\n".join(out)


def reformatted(code: str) -> str:
    """The code through ``ast.unparse``: comments gone, spacing, parentheses and quotes made canonical."""
    return ast.unparse(ast.parse(code))


DISGUISES = {"renamed": renamed, "reordered": reordered, "recommented": recommented, "reformatted": reformatted,
             "everything": disguise}


def copied(answers: dict[str, str], how: str) -> dict[str, str]:
    return {e: DISGUISES[how](code) for e, code in answers.items()}


@dataclass
class Class:
    answers: dict[str, dict[str, str]]         # exercise -> student -> answer cell
    copies: dict[tuple[str, str], str]         # (copier, victim), sorted -> the disguise
    model: dict[str, str]                      # exercise -> the model answer

    @property
    def students(self) -> list[str]:
        return sorted({s for by in self.answers.values() for s in by})

    def planted(self, left: str, right: str) -> bool:
        return tuple(sorted((left, right))) in self.copies


def make_class(size: int, pairs: int, seed: int = 0) -> Class:
    """``size`` students of whom ``pairs`` copied another (each under the next of :data:`DISGUISES`)."""
    rng = random.Random(seed)
    honest_names = [f"s{i:03d}" for i in range(size - pairs)]
    by_student = {s: honest(rng) for s in honest_names}
    victims = rng.sample(honest_names, pairs)
    copies = {}
    for i, victim in enumerate(victims):
        how = list(DISGUISES)[i % len(DISGUISES)]
        copier = f"c{i:03d}"
        by_student[copier] = copied(by_student[victim], how)
        copies[tuple(sorted((copier, victim)))] = how
    answers: dict[str, dict[str, str]] = {}
    for student, theirs in by_student.items():
        for exercise, code in theirs.items():
            answers.setdefault(exercise, {})[student] = code
    return Class(answers, copies, answer_cells(ASSIGNMENT))
