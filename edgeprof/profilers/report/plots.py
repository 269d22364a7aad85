"""Layer-wise bar charts (PNG, 180 DPI, tight layout), written atomically.

Uses matplotlib's Agg canvas directly (no pyplot, no global backend switch), so it works
headless and does not disturb a user's interactive session.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgeprof.core.io import write_with

DPI = 180


def new_axes(figsize: tuple[float, float]):
    """A figure on matplotlib's Agg canvas (no pyplot) and its one axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def save_png(fig, path: str | os.PathLike) -> Path:
    """``fig`` with a tight layout, written atomically to ``path`` as a PNG at :data:`DPI`."""
    fig.tight_layout()
    return write_with(path, lambda p: fig.savefig(p, dpi=DPI, format="png"))


def plot_layerwise(frame, column: str, path: str | os.PathLike, title: str, *,
                   scale: float = 1.0, ylabel: str | None = None, color: str = "tab:blue") -> Path:
    """Bar chart of ``frame[column] * scale`` per ``frame['layer']``, saved to ``path``.

    ``layerwise_macs.png`` uses ``column="macs", scale=1e-6`` (millions of MACs) and
    ``layerwise_activation_memory.png`` ``column="activation_bytes", scale=1e-6`` (MB).
    """
    if column not in frame.columns or "layer" not in frame.columns:
        raise ValueError(f"plot_layerwise needs columns 'layer' and '{column}'; "
                         f"got {', '.join(map(str, frame.columns))}")
    labels = [str(x) for x in frame["layer"]]
    values = [float(v) * scale for v in frame[column].fillna(0)]
    n = len(labels)
    fig, ax = new_axes((max(7.0, min(0.22 * n + 2.0, 40.0)), 5.0))
    ax.bar(range(n), values, color=color)
    ax.set_xticks(range(n))
    ax.set_xticklabels(labels, rotation=90 if n > 6 else 0, fontsize=7 if n > 20 else 9)
    ax.set_ylabel(ylabel or column)
    ax.set_title(title)
    return save_png(fig, path)


# ------------------------------------------------------------------------------ roofline
def roofline_points(layers) -> list[dict]:
    """Each layer with MACs as a roofline point (analytic): ``intensity`` in MAC per byte
    moved (weights + input + output bytes, what the estimate's memory time counts) and
    ``attainable`` in MAC/s = macs / roofline latency, i.e. ``min(peak, intensity x
    bandwidth)``. ``layers`` is the estimate's rows (records or a DataFrame). Layers without
    MACs (activations, pooling, elementwise) have no intensity and are left out."""
    records = layers.to_dict(orient="records") if hasattr(layers, "to_dict") and \
        hasattr(layers, "columns") else list(layers)
    out = []
    for r in records:
        macs = r.get("macs") or 0
        moved = sum(float(r.get(k) or 0) for k in ("parameter_bytes", "input_bytes",
                                                    "activation_bytes"))
        ms = r.get("roofline_latency_ms")
        if not macs or macs <= 0 or moved <= 0 or not ms or ms <= 0:
            continue
        out.append({"layer": str(r.get("layer")), "op_type": str(r.get("op_type")),
                    "macs": float(macs), "bytes": moved, "intensity": float(macs) / moved,
                    "attainable": float(macs) / (float(ms) / 1e3), "bound": r.get("bound"),
                    "roofline_latency_ms": float(ms)})
    return out


def roofline_roof(peak_macs_per_s: float, bandwidth_bytes_per_s: float,
                  lo: float, hi: float) -> tuple[list[float], list[float]]:
    """The roof from intensity ``lo`` to ``hi`` (MAC/B): the bandwidth slope up to the ridge
    point ``peak / bandwidth``, flat at ``peak`` after it."""
    ridge = peak_macs_per_s / bandwidth_bytes_per_s
    lo, hi = min(lo, ridge / 10), max(hi, ridge * 10)
    xs = [lo, ridge, hi]
    return xs, [min(peak_macs_per_s, x * bandwidth_bytes_per_s) for x in xs]


def plot_roofline(layers, peak_macs_per_s: float | None, bandwidth_bytes_per_s: float | None,
                  path: str | os.PathLike, title: str) -> Path:
    """``roofline.png``: the target's roofline (log-log, GMAC/s vs MAC/byte) with each layer
    that has MACs as a point, memory-bound layers in one colour, compute-bound in another.
    Without a peak or a bandwidth the chart says so instead of drawing a roof."""
    pts = roofline_points(layers)
    fig, ax = new_axes((8.0, 5.5))
    if pts:
        for bound, color in (("memory", "tab:blue"), ("compute", "tab:red")):
            sel = [p for p in pts if p["bound"] == bound]
            if sel:
                ax.scatter([p["intensity"] for p in sel], [p["attainable"] / 1e9 for p in sel],
                           s=14, color=color, label=f"{bound}-bound layers (analytic)", zorder=3)
    if peak_macs_per_s and bandwidth_bytes_per_s:
        xs_pts = [p["intensity"] for p in pts] or [peak_macs_per_s / bandwidth_bytes_per_s]
        xs, ys = roofline_roof(peak_macs_per_s, bandwidth_bytes_per_s, min(xs_pts) / 2,
                               max(xs_pts) * 2)
        ax.plot(xs, [y / 1e9 for y in ys], color="black", lw=1.2,
                label=f"roof: {peak_macs_per_s / 1e9:.4g} GMAC/s, "
                      f"{bandwidth_bytes_per_s / 1e9:.4g} GB/s")
    else:
        ax.text(0.5, 0.5, "no peak compute or bandwidth in the target's descriptor",
                ha="center", va="center", transform=ax.transAxes)
    if pts or (peak_macs_per_s and bandwidth_bytes_per_s):
        ax.set_xscale("log")
        ax.set_yscale("log")
    skipped = len(layers) - len(pts)
    ax.set_xlabel("arithmetic intensity (MAC per byte moved)")
    ax.set_ylabel("attainable GMAC/s")
    ax.set_title(title + (f"\n({skipped} layers without MACs not shown)" if skipped else ""),
                 fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    return save_png(fig, path)
