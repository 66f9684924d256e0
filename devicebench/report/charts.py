"""Charts for the HTML report, drawn by matplotlib (the optional ``report`` extra) and
inlined as SVG: the file stays self-contained and works offline, with no JavaScript.

Each chart is a :class:`Chart`: the ``<svg>`` markup and the number of data series in
it. Every series is drawn with a ``gid`` of ``<chart id>-series-<i>``, so the SVG
elements can be found (and counted) in the page's DOM. Text goes into the SVG as text
(``svg.fonttype: none``), XML-escaped by matplotlib, with mathtext off: a ``$`` or a
``<script>`` in a workload name is drawn as it is, never interpreted.

Formatting only: every figure plotted comes from :mod:`devicebench.results.run_report`.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from devicebench.errors import InputError
from devicebench.results.run_report import ConfigFigures, OpsFigures

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")


@dataclass(frozen=True)
class Chart:
    """An inline ``<svg>`` and how many series it draws."""

    id: str
    svg: str
    series: int


def require_matplotlib() -> None:
    """Raise :class:`InputError` (with the install command) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("the HTML report needs matplotlib, which is not installed",
                         why="its charts are drawn by matplotlib as inline SVG",
                         fix="pip install 'devicebench[report]'  (or use --md / --json)"
                         ) from None


def _svg(fig: Any, salt: str) -> str:
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight",
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    start = text.find("<svg")
    svg = text[start:] if start >= 0 else text
    # matplotlib's ids (clip paths, glyph defs) are unique within one SVG; salt them so
    # several charts inlined in one page never share an id.
    # Series ids (set by us, already starting with the chart id) are kept as they are.
    return re.sub(r'(id="|url\(#|href="#)(?!' + re.escape(salt) + r'-)([A-Za-z])',
                  rf"\g<1>{salt}-\g<2>", svg)


def _figure(width: float, height: float) -> Any:
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams["text.parse_math"] = False  # user strings are text, not TeX
    fig = Figure(figsize=(width, height), dpi=100)
    return fig


def _legend_below(ax: Any, entries: int, chart_id: str) -> None:
    """The legend under the axes, never over the data, in the charts' text size (the
    figure's tight bounding box grows to hold it). The legend and the plotting area carry
    ids (``<chart>-legend``, ``<chart>-axes``) so a browser test can check they are apart."""
    legend = ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(0.0, -0.2),
                       ncol=2 if entries > 3 else 1, frameon=False, borderaxespad=0.0)
    legend.set_gid(f"{chart_id}-legend")
    ax.patch.set_gid(f"{chart_id}-axes")


def step_time_chart(chart_id: str, workload: str, configs: list[ConfigFigures]) -> Chart | None:
    """Horizontal bars: median step time per configuration, 95% CI as error bars."""
    measured = [c for c in configs if c.median_s]
    if not measured:
        return None
    fig = _figure(7.5, 0.9 + 0.45 * len(measured))
    ax = fig.add_subplot()
    ys = list(range(len(measured)))
    scale, unit = (1e3, "ms") if max(c.median_s or 0 for c in measured) < 1 else (1.0, "s")
    for i, c in enumerate(measured):
        med = (c.median_s or 0) * scale
        lo, hi = (c.ci_low_s or c.median_s or 0) * scale, (c.ci_high_s or c.median_s or 0) * scale
        color = "#7f7f7f" if c.is_reference else COLORS[0]
        bar = ax.barh([i], [med], color=color, height=0.6)
        for patch in bar.patches:
            patch.set_gid(f"{chart_id}-series-{i}")
        err = ax.errorbar([med], [i], xerr=[[med - lo], [hi - med]], fmt="none",
                          ecolor="black", capsize=4, lw=1)
        for line in err.lines[2]:
            line.set_gid(f"{chart_id}-ci-{i}")
        ax.annotate(f"{med:.3g} {unit}", (hi, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_yticks(ys, [c.label + (" (reference)" if c.is_reference else "") for c in measured])
    ax.invert_yaxis()
    ax.set_xlabel(f"median step time ({unit}), 95% CI")
    ax.set_title(f"{workload}: step time per configuration (shorter is faster)", fontsize=10,
                 loc="left")
    ax.margins(x=0.15)
    ax.grid(axis="x", alpha=0.3)
    return Chart(chart_id, _svg(fig, chart_id), len(measured))


def loss_chart(chart_id: str, workload: str, configs: list[ConfigFigures]) -> Chart | None:
    """Loss per step, one line per configuration, overlaid (the equivalence check)."""
    curves = [c for c in configs if len(c.loss_curve) >= 2]
    if len(curves) < 1:
        return None
    fig = _figure(7.5, 3.2)
    ax = fig.add_subplot()
    styles = ("-", "--", ":", "-.")
    for i, c in enumerate(curves):
        steps, losses = zip(*c.loss_curve, strict=True)
        (line,) = ax.plot(steps, losses, styles[i % len(styles)], marker="o", markersize=3,
                          color=COLORS[i % len(COLORS)], label=f"{c.label} ({c.loss_verdict})",
                          lw=1.5)
        line.set_gid(f"{chart_id}-series-{i}")
    ax.set_xlabel("training step (same initial weights, same batches)")
    ax.set_ylabel("loss")
    ax.set_title(f"{workload}: loss per step, overlaid (lines on top of each other = the "
                 "same training)", fontsize=10, loc="left")
    _legend_below(ax, len(curves), chart_id)
    ax.grid(alpha=0.3)
    return Chart(chart_id, _svg(fig, chart_id), len(curves))


def ops_chart(chart_id: str, op: OpsFigures) -> Chart | None:
    """Speed-up over the reference vs size (log-log), CI band, crossover marked."""
    if not op.curves:
        return None
    fig = _figure(7.5, 3.6)
    ax = fig.add_subplot()
    for i, c in enumerate(op.curves):
        color = COLORS[i % len(COLORS)]
        sizes = [p[0] for p in c.points]
        (line,) = ax.plot(sizes, [p[1] for p in c.points], marker="o", markersize=3,
                          color=color, lw=1.5, label=f"{c.label} vs {c.reference}")
        line.set_gid(f"{chart_id}-series-{i}")
        ax.fill_between(sizes, [p[2] for p in c.points], [p[3] for p in c.points],
                        color=color, alpha=0.15, lw=0)
        if c.crossover is not None:
            at = next(p[1] for p in c.points if p[0] == c.crossover)
            (mark,) = ax.plot([c.crossover], [at], marker="D", markersize=8, color=color,
                              markeredgecolor="black", linestyle="none")
            mark.set_gid(f"{chart_id}-crossover-{i}")  # sizes listed under the chart
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # Plain-text tick labels: the default log formatter writes mathtext, which is off.
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel("size n (n×n tensors)")
    ax.set_ylabel("speed-up over reference (>1: faster)")
    ax.set_title(f"{op.op}: speed-up vs size (band: 95% CI; ◆ crossover: faster from here on)",
                 fontsize=10, loc="left")
    _legend_below(ax, len(op.curves), chart_id)
    ax.grid(alpha=0.3, which="both")
    return Chart(chart_id, _svg(fig, chart_id), len(op.curves))


def memory_chart(chart_id: str, workload: str, configs: list[ConfigFigures]) -> Chart | None:
    """Peak RSS and (where known) peak device memory per configuration, in MiB."""
    rows = [c for c in configs if c.status == "ok" and (c.peak_rss_bytes
                                                        or c.peak_device_memory_bytes)]
    if not rows:
        return None
    fig = _figure(7.5, 0.9 + 0.45 * len(rows))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))
    series = 0
    rss = [(c.peak_rss_bytes or 0) / 2**20 for c in rows]
    dev = [(c.peak_device_memory_bytes or 0) / 2**20 for c in rows]
    for values, name, off in ((rss, "peak RSS (host)", -0.18), (dev, "peak device memory",
                                                                 0.18)):
        if not any(values):
            continue
        bars = ax.barh([y + off for y in ys], values, height=0.34, label=name,
                       color=COLORS[series + 1])
        for j, patch in enumerate(bars.patches):  # one id per series, unique ids per bar
            patch.set_gid(f"{chart_id}-series-{series}" if j == 0 else
                          f"{chart_id}-s{series}-bar-{j}")
        series += 1
    ax.set_yticks(ys, [c.label for c in rows])
    ax.invert_yaxis()
    ax.set_xlabel("MiB (device memory: unknown where the backend cannot tell)")
    ax.set_title(f"{workload}: peak memory per configuration", fontsize=10, loc="left")
    _legend_below(ax, series, chart_id)
    ax.grid(axis="x", alpha=0.3)
    return Chart(chart_id, _svg(fig, chart_id), series)
