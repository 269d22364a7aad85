"""Layer-wise bar charts (PNG, 180 DPI, tight layout), written atomically.

Uses matplotlib's Agg canvas directly (no pyplot, no global backend switch), so it works
headless and does not disturb a user's interactive session.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgeprof.core.io import write_with

DPI = 180


def plot_layerwise(frame, column: str, path: str | os.PathLike, title: str, *,
                   scale: float = 1.0, ylabel: str | None = None, color: str = "tab:blue") -> Path:
    """Bar chart of ``frame[column] * scale`` per ``frame['layer']``, saved to ``path``.

    ``layerwise_macs.png`` uses ``column="macs", scale=1e-6`` (millions of MACs) and
    ``layerwise_activation_memory.png`` ``column="activation_bytes", scale=1e-6`` (MB).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if column not in frame.columns or "layer" not in frame.columns:
        raise ValueError(f"plot_layerwise needs columns 'layer' and '{column}'; "
                         f"got {', '.join(map(str, frame.columns))}")
    labels = [str(x) for x in frame["layer"]]
    values = [float(v) * scale for v in frame[column].fillna(0)]
    n = len(labels)
    fig = Figure(figsize=(max(7.0, min(0.22 * n + 2.0, 40.0)), 5.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(n), values, color=color)
    ax.set_xticks(range(n))
    ax.set_xticklabels(labels, rotation=90 if n > 6 else 0, fontsize=7 if n > 20 else 9)
    ax.set_ylabel(ylabel or column)
    ax.set_title(title)
    fig.tight_layout()
    return write_with(path, lambda p: fig.savefig(p, dpi=DPI, format="png"))
