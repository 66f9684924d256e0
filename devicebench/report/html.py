"""Render a :class:`RunReport` as one self-contained HTML file: inline CSS, charts as
inline SVG (matplotlib), no script, no external resource — it opens offline.

Order: the headline answer first (does this machine's accelerator speed training up,
per workload, with the ratio), then the environment and doctor's findings, then per
workload the step-time chart, the recommendation and its reasons, loss curves and
memory, then the op sweep's speed-up-vs-size curves. Every string that came from a
user or a stored run passes through :func:`html.escape`.
"""

from __future__ import annotations

from html import escape

from devicebench.fmt import fmt_bytes, fmt_duration
from devicebench.fmt import fmt_ratio_ci as _ratio
from devicebench.report import charts
from devicebench.results.run_report import (
    ConfigFigures,
    RunReport,
    WorkloadFigures,
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:980px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:2em}h3{margin-top:1.5em}
.sub{color:#666;font-size:.9em}
.answer{border-left:6px solid #999;padding:.5em 1em;margin:.6em 0;background:#f7f7f7}
.answer.yes{border-color:#2ca02c}.answer.no{border-color:#d62728}
.answer.unclear{border-color:#ff7f0e}.answer b{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em;max-width:100%}
th,td{border:1px solid #ddd;padding:.25em .55em;text-align:left;vertical-align:top;
overflow-wrap:break-word}
th{background:#f2f2f2}td.num{text-align:right}
.sev-error{color:#b00020;font-weight:bold}.sev-warning{color:#a66300;font-weight:bold}
.sev-info{color:#1f5fa6}
figure.chart{margin:1em 0}figure.chart svg{max-width:100%;height:auto}
figcaption{font-size:.85em;color:#555}
pre{background:#f6f8fa;padding:.6em;white-space:pre-wrap;overflow-wrap:anywhere}
.note{color:#555;font-size:.9em}
@media print{body{max-width:none;margin:0;font-size:10pt}figure.chart,table{break-inside:
avoid}.answer{background:none}}
"""


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _figure(chart: charts.Chart | None, caption: str) -> str:
    if chart is None:
        return ""
    return (f'<figure class="chart" id="{_e(chart.id)}" data-series="{chart.series}">'
            f"{chart.svg}<figcaption>{_e(caption)}</figcaption></figure>")


def _headline(report: RunReport) -> str:
    parts = ["<h2>The answer</h2>"]
    if not report.workloads:
        parts.append('<p class="answer">No training was measured on this machine yet: '
                     "<code>devicebench run seed-rnn</code> measures one.</p>")
    for w in report.workloads:
        h = w.headline
        ratio = f" <span class=\"sub\">{_e(_ratio(h.ratio))}</span>" if h.ratio else ""
        parts.append(f'<p class="answer {_e(h.answer)}"><b>{_e(w.workload)}</b>: '
                     f"{_e(h.text)}{ratio}</p>")
    return "\n".join(parts)


def _environment(report: RunReport) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in report.environment)
    out = [f"<h2>Environment</h2><table>{rows}</table>",
           f"<h3>Doctor's findings ({len(report.findings)})</h3>"]
    if not report.findings:
        out.append("<p>None for this snapshot.</p>")
    else:
        out.append("<table><tr><th>severity</th><th>finding</th><th>observed</th>"
                   "<th>why</th><th>fix</th></tr>")
        for f in report.findings:
            sev = str(f.get("severity", ""))
            out.append(f'<tr><td class="sev-{_e(sev)}">{_e(sev)}</td>'
                       f"<td><b>{_e(f.get('title', ''))}</b><br><span class=\"sub\">"
                       f"{_e(f.get('id', ''))}</span></td><td>{_e(f.get('observed', ''))}</td>"
                       f"<td>{_e(f.get('why', ''))}</td><td><code>{_e(f.get('fix', ''))}"
                       "</code></td></tr>")
        out.append("</table>")
    out.append('<p class="note">Findings come from the environment snapshot stored with the '
               "run; <code>devicebench doctor</code> imports every framework for the full "
               "list.</p>")
    return "\n".join(out)


def _epoch(c: ConfigFigures) -> str:
    """The epoch as Keras' log shows it, with its parts when the workload validates."""
    f = c.fit
    if not f or f.get("validation_s") is None:
        return fmt_duration(c.epoch_s)
    return (f"{fmt_duration(f['epoch_s'])} (train {fmt_duration(f['train_s'])} + val "
            f"{fmt_duration(f['validation_s'])})")


def _fit(c: ConfigFigures) -> str:
    f = c.fit
    if not f or f.get("fit_s") is None:
        return "-"
    lo, hi = f["fit_ci95"]
    return (f"{fmt_duration(f['fit_s'])} [{fmt_duration(lo)}–{fmt_duration(hi)}] "
            f"({f['epochs']} epochs, the first {fmt_duration(f['first_epoch_s'])})")


def _config_tables(configs: list[ConfigFigures]) -> str:
    """The configurations in two tables that fit the page (speed; then time to train and
    memory), each led by the configuration's name."""
    speed_head = ("<tr><th>configuration</th><th>status</th><th>step time [95% CI]</th>"
                  "<th>speed-up vs reference [95% CI]</th><th>samples/s</th></tr>")
    fit_head = ("<tr><th>configuration</th><th>epoch</th><th>whole fit [95% CI]</th>"
                "<th>1st step</th><th>memory</th><th>loss</th></tr>")
    speed, fit = [], []
    for c in configs:
        step = (f"{fmt_duration(c.median_s)} [{fmt_duration(c.ci_low_s)}–"
                f"{fmt_duration(c.ci_high_s)}]") if c.median_s else "-"
        ratio = "reference" if c.is_reference else _ratio(c.speedup)
        mem = (f"device {fmt_bytes(c.peak_device_memory_bytes)}, RSS "
               f"{fmt_bytes(c.peak_rss_bytes)}") if c.status == "ok" else "-"
        status = c.status if c.status == "ok" else f"{c.status}: {c.error}"
        name = f"<td>{_e(c.label)}</td>"
        speed.append(
            f"<tr>{name}<td>{_e(status)}</td><td class=\"num\">{_e(step)}</td>"
            f"<td class=\"num\">{_e(ratio)}</td><td class=\"num\">"
            f"{_e(f'{c.samples_per_s:,.0f}' if c.samples_per_s else '-')}</td></tr>")
        fit.append(
            f"<tr>{name}<td class=\"num\">{_e(_epoch(c))}</td><td class=\"num\">"
            f"{_e(_fit(c))}</td><td class=\"num\">{_e(fmt_duration(c.first_step_s))}</td>"
            f"<td>{_e(mem)}</td><td>{_e(c.loss_verdict)}</td></tr>")
    return (f"<table class=\"configs\">{speed_head}{''.join(speed)}</table>"
            f"<table class=\"configs\">{fit_head}{''.join(fit)}</table>")


def _workload(i: int, w: WorkloadFigures) -> str:
    out = [f"<h2>Workload {_e(w.workload)}</h2>",
           f'<p class="sub">from run {w.run_id} ({_e(w.command)})</p>']
    out.append(_figure(charts.step_time_chart(f"w{i}-step", w.workload, w.configs),
                       "Median step time per configuration; the whisker is the 95% CI of "
                       "the median. Grey: the reference."))
    out.append(_config_tables(w.configs))
    out.append(f"<h3>Recommendation</h3><p><b>{_e(w.recommendation or 'none')}</b></p>")
    if w.reasons:
        out.append("<ul>" + "".join(f"<li>{_e(r)}</li>" for r in w.reasons) + "</ul>")
    if w.code:
        out.append(f"<pre><code>{_e(w.code)}</code></pre>")
    loss = charts.loss_chart(f"w{i}-loss", w.workload, w.configs)
    if loss is not None:
        out.append("<h3>Loss curves (equivalence check)</h3>")
        out.append(_figure(loss, "Loss per step of each configuration from the same initial "
                           "weights; configurations that train the same model lie on top of "
                           "each other."))
    mem = charts.memory_chart(f"w{i}-mem", w.workload, w.configs)
    if mem is not None:
        out.append("<h3>Memory</h3>")
        out.append(_figure(mem, "Peak resident memory of each worker process, and peak "
                           "device memory where the backend reports it."))
    if w.notes:
        out.append("<ul class=\"note\">" + "".join(f"<li>{_e(n)}</li>" for n in w.notes)
                   + "</ul>")
    return "\n".join(x for x in out if x)


def _ops(report: RunReport) -> str:
    s = report.ops
    if s is None:
        return ("<h2>Op sweep</h2><p>No op sweep on this machine yet: <code>devicebench ops"
                "</code> measures where an accelerator starts to win.</p>")
    out = [f"<h2>Op sweep: speed-up vs size</h2><p class=\"sub\">from run {s.run_id} "
           f"({_e(s.started_at[:16])}): {_e(s.against)}</p>"]
    if s.peaks:
        out.append("<p>Measured matmul peak: " + "; ".join(
            f"{_e(d)} {_e(p)}" for d, p in s.peaks.items()) + "</p>")
    for i, op in enumerate(s.ops):
        out.append(f"<h3>{_e(op.op)}</h3>")
        out.append(_figure(charts.ops_chart(f"op{i}", op),
                           "Speed-up of each path over its reference per size; the band is "
                           "the 95% CI; ◆ marks the crossover (faster at every size from "
                           "there on)."))
        cross = [f"{c.label}: " + (f"from n={c.crossover}" if c.crossover is not None
                                   else "never within the sweep") for c in op.curves]
        if cross:
            out.append("<p>Crossover — " + "; ".join(_e(x) for x in cross) + "</p>")
        if op.verdict:
            out.append("<ul>" + "".join(f"<li>{_e(v)}</li>" for v in op.verdict) + "</ul>")
    if s.notes:
        out.append("<ul class=\"note\">" + "".join(f"<li>{_e(n)}</li>" for n in s.notes)
                   + "</ul>")
    return "\n".join(out)


def render_html(report: RunReport) -> str:
    """The whole page as a string (UTF-8 when written).

    Raises:
        InputError: matplotlib (the ``report`` extra) is not installed.
    """
    charts.require_matplotlib()
    body = [f"<h1>devicebench report — {_e(report.run_label)}</h1>",
            f'<p class="sub">generated {_e(report.generated_at)} by devicebench '
            f"{_e(report.devicebench_version)}; machine {_e(report.machine.get('fingerprint'))}"
            "</p>"]
    if report.notes:
        body.append("<ul class=\"note\">" + "".join(f"<li>{_e(n)}</li>" for n in report.notes)
                    + "</ul>")
    if report.monitor is not None:
        from devicebench.report.monitor import monitor_html

        body.append(monitor_html(report.monitor))
    else:
        body.append(_headline(report))
    body.append(_environment(report))
    for i, w in enumerate(report.workloads):
        body.append(_workload(i, w))
    if report.monitor is None:
        body.append(_ops(report))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>devicebench report — {_e(report.run_label)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
