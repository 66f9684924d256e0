"""Render a comparison (``devicebench run``) for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from devicebench.fmt import fmt_bytes, fmt_duration
from devicebench.report.console import make_console
from devicebench.trials.summary import ComparisonRow


def render_comparison(rows: list[ComparisonRow], *, console: Console | None = None,
                      notes: list[str] | None = None) -> None:
    """The final table: step time ± CI, samples/s, epoch, speed-up, memory, loss, status."""
    con = console or make_console()
    table = Table(title="Training speed: median step time [95% CI], interleaved rounds",
                  title_justify="left")
    for col in ("configuration", "status", "step time [95% CI]", "samples/s", "epoch",
                "1st step", "speed-up [95% CI]", "memory", "loss"):
        table.add_column(col, overflow="fold")
    workloads = list(dict.fromkeys(row.result.spec.workload for row in rows))
    for workload in workloads:
        if len(workloads) > 1:
            table.add_section()
            table.add_row(f"[bold]{workload}[/]")
        for row in (r for r in rows if r.result.spec.workload == workload):
            r = row.result
            st = r.step_time
            step = (f"{fmt_duration(st.median)} [{fmt_duration(st.ci_low)}–"
                    f"{fmt_duration(st.ci_high)}]") if st else "-"
            if row.is_reference:
                speed = "reference"
            elif row.speedup is not None:
                s = row.speedup
                speed = f"{s.value:.2f}x [{s.ci_low:.2f}–{s.ci_high:.2f}]"
            else:
                speed = "-"
            status = r.status if r.status == "ok" else f"[bold red]{r.status}[/]"
            memory = (f"device {fmt_bytes(r.peak_device_memory_bytes)}"
                      if r.peak_device_memory_bytes else "device unknown")
            if r.peak_rss_bytes:
                memory += f", RSS {fmt_bytes(r.peak_rss_bytes)}"
            if r.status != "ok":
                memory = "-"
            table.add_row(
                r.spec.label, status, step,
                f"{r.samples_per_second:,.0f}" if r.samples_per_second else "-",
                fmt_duration(r.epoch_seconds), fmt_duration(r.first_step_seconds), speed,
                memory, r.loss_verdict,
            )
    con.print(table)
    lines: list[str] = list(notes or [])
    for row in rows:
        r = row.result
        who = f"{r.spec.workload} {r.spec.label}"
        if r.status != "ok":
            lines.append(f"{who}: {r.status}: {r.error.splitlines()[0] if r.error else ''}")
        if r.spread_warning:
            lines.append(f"{who}: {r.spread_warning}")
        if r.loss_verdict in ("differs", "nan"):
            lines.append(f"{who}: loss {r.loss_verdict}: {r.loss_detail}")
        elif r.loss_verdict == "same" and row.speedup is not None:
            lines.append(f"{who}: loss same as the reference ({r.loss_detail})")
    seen_data: set[str] = set()
    for row in rows:
        r = row.result
        if r.data_note and r.spec.workload not in seen_data:
            seen_data.add(r.spec.workload)
            lines.append(f"{r.spec.workload}: data: {r.data_note}")
    for line in lines:
        con.print(f"  {line}", markup=False, highlight=False)
