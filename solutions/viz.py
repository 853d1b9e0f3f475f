"""Draw the graph a computation built, as SVG, with no graphviz: `draw_graph(y)`.

Book: chapter 1 (`book/01_graphs.md`, *Nodes and edges*). Tests: `tests/engine/test_viz.py`.

One box per tensor, an arrow from each input of an operation to its output, the operation's name
on the output's box. The layout is a hand-made layered drawing: an operation's column is the length
of the longest path from a leaf to it, so every arrow points rightwards, a leaf or a constant
stands in the column just before its first consumer, and the nodes of one column are stacked in
the order the engine's `toposort` lists them. A tensor without a name is labelled `t<k>`, its
place in that order. That is enough for the small graphs
a reader builds by hand; a graph of more than a few hundred tensors is refused with its size.

In a notebook the returned object draws itself (`_repr_svg_`); `.svg` is the text of the drawing.
"""
from __future__ import annotations

from html import escape

import numpy as np

from .graph import Tensor, toposort

__all__ = ["GraphDrawing", "draw_graph"]

BOX_W, BOX_H = 112, 40  # px, one tensor
GAP_X, GAP_Y = 48, 16  # px between columns, between boxes of a column
MAX_NODES = 200  # beyond this a drawing is unreadable: refuse, and say how big the graph is


class GraphDrawing:
    """An SVG drawing of a graph; Jupyter shows it through `_repr_svg_`."""

    def __init__(self, svg: str, nodes: int, edges: int):
        self.svg, self.nodes, self.edges = svg, nodes, edges

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return f"<GraphDrawing: {self.nodes} tensors, {self.edges} edges>"


def _graph(roots: list[Tensor]) -> tuple[list[Tensor], list[tuple[int, int]]]:
    """Every tensor of the graph, inputs before outputs, and the edges as index pairs (input,
    output). The order is the engine's own `toposort` (on a student's kit, the student's), which
    walks only the tensors that need a gradient; the constants an op keeps as inputs are added
    just before their first consumer."""
    order: list[Tensor] = []
    index: dict[int, int] = {}

    def add(t: Tensor) -> None:
        if id(t) not in index:
            index[id(t)] = len(order)
            order.append(t)

    for node in toposort([r for r in roots if r.requires_grad]):
        for x in node.grad_fn.inputs if node.grad_fn is not None else ():
            add(x)  # a constant, met first here; a walked input is already in place
        add(node)
    for r in roots:  # a root that needs no gradient is a graph of one tensor
        add(r)
    edges = [(index[id(x)], index[id(node)]) for node in order if node.grad_fn is not None
             for x in node.grad_fn.inputs]
    return order, edges


def _label(t: Tensor, k: int) -> tuple[str, str]:
    """The two lines of a tensor's box: its name (or t<k>) and its value or shape; the op below."""
    name = getattr(t, "name", None) or f"t{k}"
    if t.data.size == 1:
        value = f"{float(np.asarray(t.data).reshape(())):.4g}"
    else:
        value = "(" + ", ".join(map(str, t.data.shape)) + ")"
    return name, value


def draw_graph(*roots: Tensor, title: str | None = None) -> GraphDrawing:
    """The graph that computed `roots` (usually one loss), as an SVG drawing.

    Leaves are drawn with a thick border, blue when they require a gradient, dashed grey for a
    constant (an input an op keeps for its backward, which `backward` never visits); outputs of
    operations carry the operation's name; arrows run from inputs to outputs."""
    if not roots:
        raise ValueError("draw_graph: give at least one tensor, e.g. draw_graph(loss)")
    for k, r in enumerate(roots):
        if not isinstance(r, Tensor):
            raise TypeError(f"draw_graph: argument {k} is a {type(r).__name__}, not a Tensor")
    order, edges = _graph(list(roots))
    if len(order) > MAX_NODES:
        raise ValueError(f"draw_graph: the graph has {len(order)} tensors, more than the {MAX_NODES} a "
                         "drawing can show; draw a smaller piece (a few steps of the loop)")
    column = [0] * len(order)
    for src, dst in edges:  # order is topological, so every src is final before dst is reached
        column[dst] = max(column[dst], column[src] + 1)
    consumers: dict[int, list[int]] = {}
    for src, dst in edges:
        consumers.setdefault(src, []).append(dst)
    for k, t in enumerate(order):  # a leaf or constant stands just before its first consumer, so that
        if t.grad_fn is None and k in consumers:  # its arrow does not run under the boxes between
            column[k] = min(column[d] for d in consumers[k]) - 1
    rows: dict[int, int] = {}
    row = []
    for k in range(len(order)):
        row.append(rows.get(column[k], 0))
        rows[column[k]] = row[k] + 1
    height_rows = max(rows.values())
    x = [8 + c * (BOX_W + GAP_X) for c in column]
    # each column centred vertically, so a short column sits beside the middle of a tall one
    y = [8 + (height_rows - rows[column[k]]) * (BOX_H + GAP_Y) / 2 + row[k] * (BOX_H + GAP_Y)
         for k in range(len(order))]
    top = 24 if title else 0
    width = 16 + (max(column) + 1) * BOX_W + max(column) * GAP_X
    height = top + 16 + height_rows * BOX_H + (height_rows - 1) * GAP_Y
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height:.0f}" '
             f'width="{width}" height="{height:.0f}" style="max-width: 100%; height: auto" '
             'font-family="sans-serif" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/>'
             '</marker></defs>']
    if title:
        parts.append(f'<text x="8" y="16" font-weight="bold">{escape(title)}</text>')
    for src, dst in edges:
        parts.append(f'<line x1="{x[src] + BOX_W}" y1="{top + y[src] + BOX_H / 2:.1f}" x2="{x[dst]}" '
                     f'y2="{top + y[dst] + BOX_H / 2:.1f}" stroke="#555" stroke-width="1.2" '
                     'marker-end="url(#arrow)"/>')
    for k, t in enumerate(order):
        name, value = _label(t, k)
        leaf = t.grad_fn is None
        stroke = "#1f77b4" if leaf and t.requires_grad else "#333" if t.requires_grad else "#999"
        # an input that needs no gradient: kept by its op for the backward, never visited by it
        made_by = t.grad_fn.name if t.grad_fn is not None else "leaf" if t.requires_grad else "constant"
        op = "" if leaf else f" · {made_by}"
        dash = "" if t.requires_grad else ' stroke-dasharray="4 3"'
        parts.append(f'<g class="{"leaf" if leaf else "op"}"><title>{escape(name)}: {escape(value)}'
                     f'{escape(op)}</title>'
                     f'<rect x="{x[k]}" y="{top + y[k]:.1f}" width="{BOX_W}" height="{BOX_H}" rx="6" '
                     f'fill="{"#eef4fb" if leaf else "#fff"}" stroke="{stroke}" '
                     f'stroke-width="{2.5 if leaf else 1.2}"{dash}/>'
                     f'<text x="{x[k] + BOX_W / 2}" y="{top + y[k] + 16:.1f}" text-anchor="middle" '
                     f'font-weight="bold">{escape(name)} = {escape(value)}</text>'
                     f'<text x="{x[k] + BOX_W / 2}" y="{top + y[k] + 32:.1f}" text-anchor="middle" '
                     f'fill="#555">{escape(made_by)}</text></g>')
    parts.append("</svg>")
    return GraphDrawing("".join(parts), len(order), len(edges))
