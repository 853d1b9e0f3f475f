"""draw_graph (solutions/viz.py): the drawing shows every tensor and every edge of the graph, the
arrows run from inputs to outputs, deep graphs draw without recursion, bad input is named."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from solutions import Tensor
from solutions.viz import draw_graph

SVG = "{http://www.w3.org/2000/svg}"


def boxes(drawing):
    """name -> (x, y, op label) of every tensor box, and the arrows as ((x1, y1), (x2, y2))."""
    root = ET.fromstring(drawing.svg)
    found = {}
    for g in root.iter(f"{SVG}g"):
        rect, first, second = g.find(f"{SVG}rect"), *g.findall(f"{SVG}text")
        found[first.text.split(" = ")[0]] = (float(rect.get("x")), float(rect.get("y")), second.text)
    arrows = [((float(a.get("x1")), float(a.get("y1"))), (float(a.get("x2")), float(a.get("y2"))))
              for a in root.iter(f"{SVG}line")]
    return found, arrows


def running_example():
    a, b, c = (Tensor(v, requires_grad=True, name=n) for v, n in ((2.0, "a"), (3.0, "b"), (4.0, "c")))
    f, g = a + b, b + c
    y = f * g
    f.name, g.name, y.name = "f", "g", "y"
    return y


def test_the_running_example_has_six_boxes_six_arrows_in_three_columns():
    drawing = draw_graph(running_example())
    found, arrows = boxes(drawing)
    assert sorted(found) == ["a", "b", "c", "f", "g", "y"]
    assert (drawing.nodes, drawing.edges, len(arrows)) == (6, 6, 6)
    assert found["a"][2] == "leaf" and found["f"][2] == "Add" and found["y"][2] == "Mul"
    columns = {name: x for name, (x, _, _) in found.items()}
    assert columns["a"] == columns["b"] == columns["c"] < columns["f"] == columns["g"] < columns["y"]
    assert all(x1 < x2 for (x1, _), (x2, _) in arrows), "every arrow points from an input to its output"
    assert "<svg" in drawing._repr_svg_() and re.search(r'viewBox="0 0 \d+ \d+"', drawing.svg)


def test_a_shared_input_gets_one_box_and_two_arrows():
    x = Tensor(1.5, requires_grad=True, name="x")
    y = x * x
    found, arrows = boxes(draw_graph(y))
    assert sorted(found) == ["t1", "x"]  # the unnamed output gets a generated name
    assert len(arrows) == 2


@pytest.mark.slow
def test_a_deep_chain_draws_without_recursion_and_a_huge_one_is_refused():
    x = Tensor(1.0, requires_grad=True)
    y = x
    for _ in range(60):
        y = y * 1.01
    found, _ = boxes(draw_graph(y))
    assert len(found) == 1 + 60 + 60  # x, the constants 1.01 (kept by each Mul), the products
    assert sum(op == "constant" for _, _, op in found.values()) == 60
    for _ in range(5000):  # walked without recursion (no RecursionError), then refused
        y = y * 1.01
    with pytest.raises(ValueError, match=r"draw_graph: the graph has \d+ tensors"):
        draw_graph(y)


def test_a_constant_stands_beside_its_consumer_so_no_arrow_runs_under_a_box():
    # shrink(3.0) of chapter 1: x * 0.5 * 0.5, each 0.5 a constant kept by its Mul
    x = Tensor(3.0, requires_grad=True, name="x")
    drawing = draw_graph(x * 0.5 * 0.5)
    found, arrows = boxes(drawing)
    assert sorted(found) == ["t1", "t2", "t3", "t4", "x"]  # unnamed tensors: t<k>, their place in the order
    column_width = found["t2"][0] - found["x"][0]
    for (x1, _), (x2, _) in arrows:  # every arrow spans one gap between two neighbouring columns
        assert x2 - x1 < column_width, (x1, x2)


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="draw_graph: argument 0 is a float, not a Tensor"):
        draw_graph(1.0)
    with pytest.raises(ValueError, match="at least one tensor"):
        draw_graph()
    one = draw_graph(Tensor([1.0, 2.0], name="w"))
    assert one.nodes == 1 and "w = (2)" in one.svg
