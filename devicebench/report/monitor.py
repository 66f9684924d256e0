"""A monitored fit in the report: its figures (steady step time with CI and caution,
throughput, compilation apart, memory, GPU busy, how it ended), per-epoch rows, and its
blocks as a chart of step time, samples/s and memory over the fit's steps. The first
execution (compilation inside) is stated apart and kept off the chart's axis."""

from __future__ import annotations

from html import escape

from devicebench.fmt import fmt_bytes, fmt_duration
from devicebench.report import charts
from devicebench.results.monitor_report import MonitorFigures

MAX_MD_ROWS = 12  # per-epoch rows in Markdown (first and last ones beyond that)


def figure_rows(m: MonitorFigures) -> list[tuple[str, str]]:
    """(label, value) rows, the same in Markdown and HTML."""
    steady = "-"
    if m.steady_step_s is not None:
        steady = f"{fmt_duration(m.steady_step_s)}/step"
        if m.steady_ci_s:
            lo, hi = m.steady_ci_s
            steady += f" [95% CI {fmt_duration(lo)}–{fmt_duration(hi)}]"
        steady += f" over {m.steady_blocks} blocks"
    rows = [
        ("script", " ".join(m.argv) or m.script),
        ("fit", f"fit {m.fit} of the script" if m.fit else "-"),
        ("ended", m.ended + (f" ({m.end_detail})" if m.end_detail else "")),
        ("model", f"{m.model or '-'} ({m.params:,} parameters)" if m.params else
         (m.model or "-")),
        ("backend", m.backend or "-"),
        ("steps", f"{m.steps:,} in {fmt_duration(m.train_seconds)} of training"),
        ("steady step time", steady),
        ("throughput", f"{m.samples_per_s:,.0f} samples/s (batch {m.batch_size})"
         if m.samples_per_s else "unknown (batch size unknown)"),
        ("first step (compilation inside)", fmt_duration(m.first_step_s)),
        ("first epoch beyond the steady rate", fmt_duration(m.compile_s)),
        ("peak memory", f"{fmt_bytes(m.peak_memory_bytes)} ({m.memory_label})"
         if m.peak_memory_bytes else "unknown"),
        ("GPU busy", f"{m.gpu_busy * 100:.0f}% of the step" if m.gpu_busy is not None
         else "not sampled"),
    ]
    if m.overhead_fraction is not None:
        rows.append(("monitor overhead", f"{m.overhead_fraction * 100:.2f}% of training"))
    return rows


def _epoch_cells(e: dict) -> list[str]:
    return [str(int(e["epoch"]) + 1), str(e["steps"]), fmt_duration(e["train_seconds"]),
            fmt_duration(e.get("step_seconds")) + "/step" if e.get("step_seconds") else "-",
            f"{e['samples_per_s']:,.0f}" if e.get("samples_per_s") else "-",
            "warm-up" if e.get("warmup") else "steady"]


EPOCH_HEAD = ["epoch", "steps", "train time", "step time (median)", "samples/s", "kind"]


def monitor_markdown(m: MonitorFigures, e) -> list[str]:  # noqa: ANN001 - md_escape
    """Markdown lines (``e``: the renderer's escape function)."""
    out = [f"### Monitored fit (run {m.run_id}): {e(m.script)}", ""]
    if m.spread_caution:
        out += [f"> **{e(m.spread_caution)}**", ""]
    out += [f"- {e(n)}" for n in m.notes + m.alerts]
    out += ["", "| | |", "|---|---|"] + [f"| {e(k)} | {e(v)} |" for k, v in figure_rows(m)]
    epochs = m.epochs
    if len(epochs) > MAX_MD_ROWS:
        epochs = epochs[:MAX_MD_ROWS // 2] + epochs[-MAX_MD_ROWS // 2:]
    if epochs:
        out += ["", "| " + " | ".join(EPOCH_HEAD) + " |", "|---:|---:|---:|---:|---:|---|"]
        out += ["| " + " | ".join(e(c) for c in _epoch_cells(ep)) + " |" for ep in epochs]
    out += ["", f"{len(m.points)} timed blocks after the first step (`devicebench report "
                f"{m.run_id} --html` draws them; `--json` lists them)."]
    return out


def monitor_chart(chart_id: str, m: MonitorFigures) -> charts.Chart | None:
    """Step time, samples/s and (when known) peak memory per block over the fit's steps;
    the first execution is left out (its time is in the table)."""
    if not m.points:
        return None
    panels = [("step time (ms)", [p.ms_per_step for p in m.points])]
    if any(p.samples_per_s for p in m.points):
        panels.append(("samples/s", [p.samples_per_s or float("nan") for p in m.points]))
    if any(p.memory_peak_bytes for p in m.points):
        # MiB, as fmt_bytes writes the table's peak memory
        panels.append(("peak memory (MiB)", [(p.memory_peak_bytes or float("nan")) / 2**20
                                             for p in m.points]))
    fig = charts._figure(7.5, 1.0 + 1.6 * len(panels))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    steps = [p.step for p in m.points]
    for i, (ax, (label, values)) in enumerate(zip(axes, panels, strict=True)):
        (line,) = ax.plot(steps, values, marker="o", markersize=2, lw=1,
                          color=charts.COLORS[i])
        line.set_gid(f"{chart_id}-series-{i}")
        ax.set_ylabel(label, fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0].set_title(f"{m.script}: per timed block over the fit (first step, with "
                      "compilation, left out)", fontsize=10, loc="left")
    axes[-1].set_xlabel("training step (end of the block)")
    return charts.Chart(chart_id, charts._svg(fig, chart_id), len(panels))


def monitor_html(m: MonitorFigures) -> str:
    """The monitored fit's section of the HTML page."""
    def e(text: object) -> str:
        return escape(str(text), quote=True)

    out = [f"<h2>Monitored fit (run {m.run_id}): {e(m.script)}</h2>"]
    if m.spread_caution:
        out.append(f'<p class="answer unclear"><b>{e(m.spread_caution)}</b></p>')
    notes = m.notes + m.alerts
    if notes:
        out.append('<ul class="note">' + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    out.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>"
                                   for k, v in figure_rows(m)) + "</table>")
    chart = monitor_chart("monitor-blocks", m)
    if chart is not None:
        out.append(f'<figure class="chart" id="{e(chart.id)}" data-series="{chart.series}">'
                   f"{chart.svg}<figcaption>{len(m.points)} timed blocks, each ended by a "
                   "device sync; the first step (compilation inside) took "
                   f"{e(fmt_duration(m.first_step_s))} and is not drawn.</figcaption></figure>")
    if m.epochs:
        head = "".join(f"<th>{e(h)}</th>" for h in EPOCH_HEAD)
        rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in _epoch_cells(ep))
                       + "</tr>" for ep in m.epochs)
        out.append(f"<h3>Per epoch</h3><table><tr>{head}</tr>{rows}</table>")
    return "\n".join(out)
