"""Render a comparison (``devicebench run``) for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from devicebench.fmt import fmt_bytes, fmt_duration
from devicebench.report.console import make_console
from devicebench.trials.summary import ComparisonRow


def fmt_epoch(row: ComparisonRow) -> str:
    """The epoch as Keras' log shows it, with its parts when it validates:
    ``"710.00 ms = 600.00 ms + val 110.00 ms"``."""
    f = row.fit
    if f is None:
        return fmt_duration(row.result.epoch_seconds)
    if f.validation_s is None:
        return fmt_duration(f.epoch_s)
    return (f"{fmt_duration(f.epoch_s)} = {fmt_duration(f.train_s)} + val "
            f"{fmt_duration(f.validation_s)}")


def fmt_fit(row: ComparisonRow) -> str:
    """A whole fit of the script's N epochs with its CI: ``"14.6 s [14.1–15.2]"``."""
    f = row.fit
    if f is None or f.fit_s is None or f.fit_ci is None:
        return "-"
    lo, hi = f.fit_ci
    return f"{fmt_duration(f.fit_s)} [{fmt_duration(lo)}–{fmt_duration(hi)}]"


def fit_notes(rows: list[ComparisonRow]) -> list[str]:
    """One line per workload saying what the epoch and whole-fit figures hold."""
    lines = []
    seen: set[str] = set()
    for row in rows:
        f, r = row.fit, row.result
        if f is None or r.spec.workload in seen:
            continue
        seen.add(r.spec.workload)
        epoch = ("epoch = training pass + validation pass over "
                 f"{f.validation_samples:,} samples (as Keras' log shows it)"
                 if f.validation_s is not None else "epoch = training pass (no validation)")
        if f.fit_s is not None:
            epoch += (f"; a fit of {f.epochs} epochs = its one-time cost (compilation and "
                      f"warm-up: {fmt_duration(f.one_time_s)} for {r.spec.label}) + "
                      f"{f.epochs} epochs at the mean epoch time (slow epochs add up in a "
                      "total), as a stopwatch around fit() reads it")
        lines.append(f"{r.spec.workload}: {epoch}")
    return lines


def render_comparison(rows: list[ComparisonRow], *, console: Console | None = None,
                      notes: list[str] | None = None) -> None:
    """The final table: step time ± CI, samples/s, epoch, speed-up, memory, loss, status."""
    con = console or make_console()
    table = Table(title="Training speed: median step time [95% CI], interleaved rounds",
                  title_justify="left")
    epochs = {row.fit.epochs for row in rows if row.fit is not None and row.fit.epochs}
    fit_col = (f"fit of {next(iter(epochs))} epochs [95% CI]" if len(epochs) == 1
               else "whole fit [95% CI]")
    for col in ("configuration", "status", "step time [95% CI]", "samples/s", "epoch",
                fit_col, "1st step", "speed-up [95% CI]", "memory", "loss"):
        table.add_column(col, overflow="fold")
    workloads = list(dict.fromkeys(row.result.spec.workload for row in rows))
    for workload in workloads:
        if len(workloads) > 1:
            table.add_section()
            table.add_row(f"[bold]{workload}[/]")
        for row in (r for r in rows if r.result.spec.workload == workload):
            r = row.result
            st = row.step_time
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
                fmt_epoch(row), fmt_fit(row), fmt_duration(r.first_step_seconds), speed,
                memory, r.loss_verdict,
            )
    con.print(table)
    lines: list[str] = list(notes or []) + fit_notes(rows)
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
            lines.append(f"{r.spec.workload}: data: {plain_data_note(r.data_note)}")
    for line in lines:
        con.print(f"  {line}", markup=False, highlight=False)


# Notes stored by earlier versions (and in the shipped profiles and bundles) named the
# forum report by the project's own label; a user never saw that name.
_LEGACY_NOTE_WORDS = {"seed 000's generator": "the forum script's generator"}


def plain_data_note(note: str) -> str:
    """A trial's data note as the user reads it (legacy project labels worded out)."""
    for old, new in _LEGACY_NOTE_WORDS.items():
        note = note.replace(old, new)
    return note
