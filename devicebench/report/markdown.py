"""Render reports and comparisons as Markdown, to paste into a GitHub issue or a forum
post. User strings are escaped so that they render as text (no HTML, no table breaks)."""

from __future__ import annotations

import re

from devicebench.fmt import fmt_bytes, fmt_duration
from devicebench.fmt import fmt_ratio_ci as _ratio
from devicebench.results.compare import RunComparison
from devicebench.results.run_report import RunReport

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def md_escape(text: object) -> str:
    """Text that renders as itself in GitHub Markdown, also inside a table cell."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def render_markdown(report: RunReport) -> str:
    """The report as Markdown: answer, environment, findings, per-workload tables, ops."""
    e = md_escape
    out = [f"## devicebench report — {e(report.run_label)}", ""]
    for n in report.notes:
        out.append(f"- {e(n)}")
    if report.monitor is not None:
        from devicebench.report.monitor import monitor_markdown

        out += [""] + monitor_markdown(report.monitor, e)
    else:
        out += ["", "### The answer", ""]
    if not report.workloads and report.monitor is None:
        out.append("No training measured yet (`devicebench run seed-rnn`).")
    for w in report.workloads:
        h = w.headline
        extra = f" — {e(_ratio(h.ratio))}" if h.ratio else ""
        out.append(f"- **{e(w.workload)}**: {e(h.text)}{extra}")
    out += ["", "### Environment", "", "| | |", "|---|---|"]
    out += [f"| {e(k)} | {e(v)} |" for k, v in report.environment]
    out += ["", f"Doctor's findings ({len(report.findings)}):", ""]
    out += [f"- **{e(f.get('severity'))}** {e(f.get('title'))} (`{e(f.get('id'))}`): "
            f"{e(f.get('observed'))} — fix: {e(f.get('fix') or 'nothing to do')}"
            for f in report.findings]
    for w in report.workloads:
        out += ["", f"### {e(w.workload)} (run {w.run_id}, {e(w.command)})", "",
                "| configuration | status | step time [95% CI] | speed-up vs reference | "
                "memory | loss |", "|---|---|---:|---:|---|---|"]
        for c in w.configs:
            step = (f"{fmt_duration(c.median_s)} [{fmt_duration(c.ci_low_s)}–"
                    f"{fmt_duration(c.ci_high_s)}]") if c.median_s else "-"
            speed = "reference" if c.is_reference else _ratio(c.speedup)
            mem = (f"device {fmt_bytes(c.peak_device_memory_bytes)}, RSS "
                   f"{fmt_bytes(c.peak_rss_bytes)}")
            out.append(f"| {e(c.label)} | {e(c.status)} | {e(step)} | {e(speed)} | {e(mem)} | "
                       f"{e(c.loss_verdict)} |")
        out += ["", f"**Recommendation**: {e(w.recommendation or 'none')}"]
        out += [f"- {e(r)}" for r in w.reasons]
        if w.code:
            out += ["", "```python", w.code.replace("```", "ʼʼʼ"), "```"]
    if report.ops is not None:
        s = report.ops
        out += ["", f"### Op sweep (run {s.run_id}): {e(s.against)}", ""]
        for op in s.ops:
            cross = "; ".join(f"{c.label} from n={c.crossover}" if c.crossover is not None
                              else f"{c.label} never" for c in op.curves)
            out.append(f"- **{e(op.op)}** crossover: {e(cross or 'no curves')}")
            out += [f"  - {e(v)}" for v in op.verdict]
    out += ["", f"<sub>devicebench {e(report.devicebench_version)}, "
                f"{e(report.generated_at)}</sub>", ""]
    return "\n".join(out)


def render_comparison_markdown(c: RunComparison) -> str:
    """``devicebench compare`` as Markdown (also its terminal output)."""
    e = md_escape
    out = [f"## devicebench compare: A = {e(c.label_a)}; B = {e(c.label_b)}", "",
           "Speed-up of B over A = median step time A / median step time B; "
           "not interleaved: two independent runs, 95% CI from resampling each run's "
           "blocks separately (drift between the runs is not cancelled).", ""]
    if c.machine_differences:
        out += ["Machines differ: " + e("; ".join(c.machine_differences)), ""]
    out += ["| workload | configuration | A step time [95% CI] | B step time [95% CI] | "
            "B vs A [95% CI] | verdict |", "|---|---|---:|---:|---:|---|"]
    for r in c.rows:
        label = r.a.label if r.a.label == r.b.label else f"{r.a.label} vs {r.b.label}"
        sa = f"{fmt_duration(r.a.median)} [{fmt_duration(r.a.ci_low)}–{fmt_duration(r.a.ci_high)}]"
        sb = f"{fmt_duration(r.b.median)} [{fmt_duration(r.b.ci_low)}–{fmt_duration(r.b.ci_high)}]"
        s = r.speedup
        out.append(f"| {e(r.workload)} | {e(label)} | {e(sa)} | {e(sb)} | "
                   f"{s.value:.2f}x [{s.ci_low:.2f}–{s.ci_high:.2f}] | {e(r.verdict)} |")
    for r in c.rows:
        if r.spec_differences:
            out.append(f"\n**Flagged**: {e(r.workload)}: the configurations differ — "
                       + e("; ".join(r.spec_differences)))
    if c.only_in_a:
        out.append("\nOnly in A: " + e(", ".join(c.only_in_a)))
    if c.only_in_b:
        out.append("\nOnly in B: " + e(", ".join(c.only_in_b)))
    out += [f"\n{e(n)}" for n in c.notes]
    return "\n".join(out) + "\n"
