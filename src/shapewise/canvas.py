"""Figures with matplotlib: building one with shapewise's title line, saving it as PNG or SVG.

matplotlib is optional (pip install 'shapewise[plot]') and imported only inside these functions;
figures are built with matplotlib.figure.Figure, never through pyplot's global registry.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import ShapewiseError

FORMATS = {".png": "png", ".svg": "svg"}


def _matplotlib_figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ShapewiseError("figures need matplotlib: pip install 'shapewise[plot]'") from None
    return Figure


def require_matplotlib() -> None:
    """A ShapewiseError now, before a command that draws figures makes any folder or file, when
    matplotlib is missing."""
    _matplotlib_figure_class()


def colormap(name: str):
    import matplotlib

    return matplotlib.colormaps[name]


def figure(what: str, data: dict, size: tuple[float, float] = (8, 4.8)):
    """A figure with one axes, titled with what it shows, the GPU, dtype and data source, and the cost
    model of its predictions."""
    fig = _matplotlib_figure_class()(figsize=size, layout="constrained")
    ax = fig.add_subplot()
    # the cost model of the predictions, to its first clause: "calibrated profile of NVIDIA H200", "spec-only"
    model = f" · {data['cost_model'].split(',')[0]}" if data.get("cost_model") else ""
    ax.set_title(f"{what}\n{data['gpu']} · {data['dtype']} · {data['source']}{model}", fontsize="medium")
    ax.grid(True, axis="y", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax


def _close(fig) -> None:
    """Our figures never enter pyplot's registry; a caller's pyplot figure is dropped from it, so
    that saving many figures does not grow memory. The figure itself can still be saved again."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)


def save(fig, path, *, dpi: int = 110) -> Path:
    """Write the figure as PNG or SVG, by the path's extension; return the path."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ShapewiseError(f"cannot save a figure as {path.name!r}: give a path ending in .png or .svg")
    try:
        fig.savefig(path, format=fmt, dpi=dpi)
    except OSError as err:
        raise ShapewiseError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        _close(fig)
    return path


def png_bytes(fig, dpi: int = 110) -> bytes:
    """The figure as PNG bytes, e.g. to embed in an HTML report."""
    import io

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi)
    finally:
        _close(fig)
    return buffer.getvalue()
