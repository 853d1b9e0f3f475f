"""Figure helpers for the book's chapters: one house style, boxes-and-arrows graphs, array grids.

Plotting only: nothing here computes a gradient. The chapters import it from a hidden set-up
cell (`sys.path.insert(0, "_code")`; notebooks execute with `book/` as their working directory).

Note for editors: the build caches executed chapters by the source of their code cells, so after
changing this module run `jupyter-book clean --all .` (or touch a chapter's code) to redraw.
"""
from __future__ import annotations

import matplotlib as mpl
from matplotlib.patches import FancyBboxPatch, Rectangle

# One palette for the whole book (colour-blind-safe Okabe-Ito hues).
BLUE, ORANGE, GREEN, RED, PURPLE, GREY = "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#7f7f7f"
LIGHT = {BLUE: "#d6e8f5", ORANGE: "#fbecc8", GREEN: "#cdeee4", RED: "#f7dccb", PURPLE: "#f3e0ec", GREY: "#eeeeee"}


def setup() -> None:
    """House style: SVG output (sharp at any width), light grid, no top/right spines."""
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        # No date in the SVG: with the fixed id salt below, the same figure is the same bytes,
        # so its file name (a hash of the bytes) is too, however often a chapter is executed.
        set_matplotlib_formats("svg", metadata={"Date": None})
    except ImportError:  # outside IPython: the style below still applies
        pass
    mpl.rcParams.update({
        "figure.figsize": (7.0, 3.6),
        "figure.dpi": 100,
        "font.size": 10.5,
        "axes.titlesize": 11,
        "axes.labelsize": 10.5,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.color": "#e5e5e5",
        "grid.linewidth": 0.8,
        "axes.prop_cycle": mpl.cycler(color=[BLUE, ORANGE, GREEN, RED, PURPLE, GREY]),
        "legend.frameon": False,
        "lines.linewidth": 2.0,
        "svg.fonttype": "path",
        "svg.hashsalt": "autograd-course",  # clip-path ids from a fixed salt, not a random one
    })


# --------------------------------------------------------------------------------------------
# Boxes and arrows
# --------------------------------------------------------------------------------------------
def box(ax, x: float, y: float, text: str, color: str = BLUE, width: float = 0.9, height: float = 0.5,
        fontsize: float = 10) -> FancyBboxPatch:
    """A rounded box centred at (x, y) with (multi-line) text; returns the patch for arrows."""
    patch = FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                           boxstyle="round,pad=0.02,rounding_size=0.08",
                           facecolor=LIGHT.get(color, "white"), edgecolor=color, linewidth=1.6, zorder=2)
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=3)
    return patch


def arrow(ax, start: FancyBboxPatch, end: FancyBboxPatch, label: str = "", color: str = GREY,
          rad: float = 0.0, label_pos: float = 0.5, label_offset: tuple[float, float] = (0, 0.0),
          fontsize: float = 9, style: str = "-|>") -> None:
    """An arrow from box `start` to box `end`, clipped at both borders, with an optional label."""
    (x0, y0), (x1, y1) = _centre(start), _centre(end)
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                arrowprops=dict(arrowstyle=style, color=color, lw=1.5, patchA=start, patchB=end,
                                shrinkA=2, shrinkB=2, connectionstyle=f"arc3,rad={rad}", mutation_scale=12),
                zorder=1)
    if label:
        lx = x0 + (x1 - x0) * label_pos + label_offset[0]
        ly = y0 + (y1 - y0) * label_pos + label_offset[1]
        ax.text(lx, ly, label, ha="center", va="center", fontsize=fontsize, color=color, zorder=4,
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.9))


def _centre(patch: FancyBboxPatch) -> tuple[float, float]:
    return patch.get_x() + patch.get_width() / 2, patch.get_y() + patch.get_height() / 2


def blank(ax, xlim: tuple[float, float], ylim: tuple[float, float], title: str = "",
          equal: bool = False) -> None:
    """An axes with no ticks or grid, for diagrams. `equal` keeps squares square (array grids)."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    if equal:
        ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)


# --------------------------------------------------------------------------------------------
# Arrays as grids of cells
# --------------------------------------------------------------------------------------------
def grid(ax, values, x0: float, y0: float, color: str = BLUE, ghost=None, fmt: str = "{:g}",
         cell: float = 1.0, fontsize: float = 10) -> None:
    """Draw a 2-D array with its top-left corner at (x0, y0), row i going down.

    `ghost[i][j]` True draws that cell as a broadcast copy: pale fill, dashed border.
    """
    rows, cols = len(values), len(values[0])
    for i in range(rows):
        for j in range(cols):
            copy = bool(ghost[i][j]) if ghost is not None else False
            ax.add_patch(Rectangle((x0 + j * cell, y0 - (i + 1) * cell), cell, cell,
                                   facecolor="white" if copy else LIGHT.get(color, "white"),
                                   edgecolor=color, linewidth=1.0 if copy else 1.6,
                                   linestyle=(0, (3, 2)) if copy else "-", zorder=2))
            ax.text(x0 + (j + 0.5) * cell, y0 - (i + 0.5) * cell, fmt.format(values[i][j]),
                    ha="center", va="center", fontsize=fontsize, color=GREY if copy else "black", zorder=3)


def glue(name: str, value) -> None:
    """Store a value for the page's prose, which shows it with {glue:text}`name:format`.

    Emits exactly what `myst_nb.glue(name, value, display=False)` emits (a display message with
    a `scrapbook` name and an `application/papermill.record/` MIME type), without importing
    `myst_nb.ext.glue`, whose nbformat/jsonschema imports cost about two seconds per chapter.
    """
    from IPython.display import display

    text = value if isinstance(value, str) else repr(value)  # a string shows without quotes
    display({"application/papermill.record/text/plain": text}, raw=True,
            metadata={"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}})


def label(ax, x: float, y: float, text: str, **kw) -> None:
    kw.setdefault("ha", "center")
    kw.setdefault("va", "center")
    kw.setdefault("fontsize", 10.5)
    ax.text(x, y, text, **kw)


# ============================================================================================
# Chapters 5 and 6 (layers and optimizers; training on the digits). One block, appended:
# images, optimizer paths on contour plots, confusion matrices.
# ============================================================================================
def show_image(ax, image, title: str = "", color: str = "black", cmap: str = "Greys",
               vlim: tuple[float, float] | None = None, fontsize: float = 9) -> None:
    """One small 2-D array as an image: no ticks, no grid, optional coloured title.

    `vlim` fixes the colour range (a diverging map wants it symmetric about 0)."""
    lo, hi = vlim if vlim is not None else (None, None)
    ax.imshow(image, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if title:
        ax.set_title(title, fontsize=fontsize, color=color, pad=3)


def contour_background(ax, f, xlim: tuple[float, float], ylim: tuple[float, float], levels,
                       n: int = 300, minimum: tuple[float, float] | None = None) -> None:
    """Grey contour lines of f(X, Y) (NumPy arrays in, array out) and a star at `minimum`."""
    import numpy as np

    X, Y = np.meshgrid(np.linspace(*xlim, n), np.linspace(*ylim, n))
    ax.contour(X, Y, f(X, Y), levels=levels, colors=GREY, linewidths=0.6, alpha=0.6)
    if minimum is not None:
        ax.plot(*minimum, marker="*", color="black", ms=11, zorder=5, linestyle="none")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.grid(False)


def optimizer_path(ax, points, color: str, label: str, marker: str = "o", every: int = 1,
                   ms: float = 3.0) -> None:
    """A sequence of 2-D iterates (rows of `points`) as a line with a marker on every
    `every`-th point and a hollow circle at the start."""
    import numpy as np

    points = np.asarray(points)
    ax.plot(points[:, 0], points[:, 1], "-", color=color, lw=1.3, label=label, zorder=3)
    ax.plot(points[::every, 0], points[::every, 1], marker, color=color, ms=ms, zorder=4,
            linestyle="none")
    ax.plot(*points[0], "o", ms=7, mfc="white", mec="black", zorder=6)


def confusion(ax, cm, title: str = "", color: str = BLUE) -> None:
    """A confusion matrix (rows: true class, columns: predicted) with its counts written in.

    The colour is a log-like scale so that a single mistake is visible next to the diagonal's
    tens."""
    import numpy as np
    from matplotlib.colors import LinearSegmentedColormap

    cm = np.asarray(cm)
    cmap = LinearSegmentedColormap.from_list("book", ["white", LIGHT.get(color, "white"), color])
    ax.imshow(np.log1p(cm), cmap=cmap, vmin=0, vmax=np.log1p(cm.max()))
    for (i, j), v in np.ndenumerate(cm):
        if v:
            ax.text(j, i, str(v), ha="center", va="center", fontsize=8,
                    color="white" if v > cm.max() / 3 else ("black" if i == j else RED))
    k = cm.shape[0]
    ax.set_xticks(range(k))
    ax.set_yticks(range(k))
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.tick_params(length=0, labelsize=8.5)
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if title:
        ax.set_title(title)


# --------------------------------------------------------------------------------------------
# Convolution figures (chapters 3 and 4): arrays with cells coloured one by one, outlines
# --------------------------------------------------------------------------------------------
def cells(ax, values, x0: float, y0: float, colors, fmt: str = "{:g}", cell: float = 1.0,
          fontsize: float = 10, ghost=None) -> None:
    """Like `grid`, but `colors[i][j]` picks each cell's colour: a palette colour (pale fill,
    border in the colour), any other colour (used as the fill, e.g. from `shade`), or None
    (white).

    `ghost[i][j]` True draws the cell's border dashed and its text grey (padding, inserted
    zeros); its colour still applies. An empty string from `fmt` leaves the cell blank.
    """
    rows, cols = len(values), len(values[0])
    for i in range(rows):
        for j in range(cols):
            color = colors[i][j]
            copy = bool(ghost[i][j]) if ghost is not None else False
            face = "white" if color is None else LIGHT.get(color, color)
            edge = color if color in LIGHT else GREY  # a heat-map shade gets a grey border
            ax.add_patch(Rectangle((x0 + j * cell, y0 - (i + 1) * cell), cell, cell, facecolor=face,
                                   edgecolor=edge, linewidth=1.0 if (copy or color not in LIGHT) else 1.6,
                                   linestyle=(0, (3, 2)) if copy else "-", zorder=2))
            text = fmt.format(values[i][j])
            if text:
                ax.text(x0 + (j + 0.5) * cell, y0 - (i + 0.5) * cell, text, ha="center", va="center",
                        fontsize=fontsize, color=GREY if copy else "black", zorder=3)


def outline(ax, x0: float, y0: float, rows: float, cols: float, color: str = RED, cell: float = 1.0,
            inset: float = 0.0, lw: float = 2.4, ls="-") -> None:
    """A rectangle around `rows` x `cols` cells whose top-left corner is (x0, y0), drawn above the cells."""
    ax.add_patch(Rectangle((x0 + inset, y0 - rows * cell + inset), cols * cell - 2 * inset,
                           rows * cell - 2 * inset, fill=False, edgecolor=color, linewidth=lw,
                           linestyle=ls, zorder=5))


def shade(value: float, vmax: float, color: str = BLUE) -> str:
    """A hex colour between white (0) and `color` (|value| >= vmax), for heat-map cells."""
    t = 0.0 if vmax == 0 else min(abs(value) / vmax, 1.0)
    rgb = mpl.colors.to_rgb(color)
    mixed = [1 - t * 0.75 * (1 - c) for c in rgb]  # stays light enough for black text
    return mpl.colors.to_hex(mixed)
