"""Render the op sweep (``devicebench ops``) for the terminal: one table per op, then its
verdict. Formatting only: every figure comes from :mod:`devicebench.ops.analysis`."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from devicebench.fmt import fmt_pct, fmt_rate, fmt_ratio, fmt_seconds
from devicebench.ops.analysis import OpAnalysis, OpsAnalysis, PathStat
from devicebench.ops.spec import OP_DESCRIPTIONS, fmt_size
from devicebench.report.console import make_console

MAX_SIZE_COLUMNS = 6


def _columns(sizes: list[int]) -> list[int]:
    """All sizes when few, else an even spread that keeps the first and the last."""
    if len(sizes) <= MAX_SIZE_COLUMNS:
        return sizes
    step = (len(sizes) - 1) / (MAX_SIZE_COLUMNS - 1)
    return sorted({sizes[round(i * step)] for i in range(MAX_SIZE_COLUMNS)})


def _t(seconds: float) -> str:
    return fmt_seconds(seconds).replace(" ", "")


def _cell(path: PathStat, size: int) -> str:
    p = path.at(size)
    if p is not None:
        if path.mode == "in-graph" and not p.usable:
            return f"<{_t(p.ci_high)}" if p.ci_high > 0 else "~0"
        text = _t(p.median)
        return f"[yellow]{text}~[/]" if p.noisy else text
    if any(s == size for s, _ in path.skipped):
        return "[dim]skip[/]"
    if any(s == size for s, _ in path.errors):
        return "[red]error[/]"
    return ""


def _versus(path: PathStat) -> str:
    ratios = [(s, r) for s, r in path.speedups if r is not None]
    if path.ref is None or not ratios:
        return "reference" if path.backend == "numpy" else "-"
    last = ratios[-1][1]
    if path.crossover is not None:
        return f"from {path.crossover} ({fmt_ratio(last.value)})"
    return f"never ({fmt_ratio(last.value)})"


def _table(op: OpAnalysis) -> Table:
    sizes = sorted({p.size for path in op.paths for p in path.points}
                   | {s for path in op.paths for s, _ in path.skipped})
    shown = _columns(sizes)
    table = Table(title=f"{op.op}: {OP_DESCRIPTIONS[op.op]} — seconds per call "
                        "(in-graph: per op inside the chain)", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("path", no_wrap=True)
    for s in shown:
        table.add_column(f"n={s}" if s == shown[0] else str(s), justify="right")
    for col in ("overhead", "rate", "% peak", "vs ref"):
        table.add_column(col, justify="right")
    for path in op.paths:
        fit = path.fit
        pct = fmt_pct(path.pct_of_peak)
        rate = fmt_rate(fit.rate, op.unit) if fit else "-"
        if path.mode == "naive" and (path.pct_of_peak or 0) > 100:
            pct = "[red]impossible[/]"  # unsynced loops time the dispatch, not the work
        elif path.fit_above_peak:  # the fit overstates: the largest size's own rate
            rate = f"[yellow]{fmt_rate(path.largest_rate, op.unit)}*[/]"
            pct = f"[yellow]{fmt_pct(path.largest_pct_of_peak)}*[/]"
        table.add_row(
            path.label, *[_cell(path, s) for s in shown],
            _t(fit.overhead) if fit else "-", rate, pct, _versus(path))
    return table


def render_ops(analysis: OpsAnalysis, *, console: Console | None = None) -> None:
    """Tables and verdicts for every op, then the peak and the notes."""
    con = console or make_console()
    con.print("[bold]devicebench ops[/] — median seconds per call over timed blocks, each "
              "ending with a device sync (naive: none, as a typical benchmark times it); "
              "overhead and rate from t(n) = overhead + work(n) / rate")
    for device, peak in analysis.peaks.items():
        math = f"; float32 inputs in {peak.math} math" if peak.math else ""
        con.print(f"measured matmul peak on {device}: "
                  f"{fmt_rate(peak.flops_per_s, 'flops')} ({peak.label} at "
                  f"{fmt_size('matmul', peak.size)}{math})")
    con.print("vs ref: the size from which the path is faster than its reference (95% CI "
              "above 1) — numpy for CPU paths, the same path on the CPU for accelerators — "
              "and its speed-up at the largest size; ~ marks a point whose blocks spread by "
              "more than half the median; naive % peak above 100 (impossible): an unsynced "
              "loop timed the dispatch, not the work; in-graph figures include the "
              "compiler's fusion of the chain")
    over = [(op, p) for op in analysis.ops for p in op.paths if p.fit_above_peak]
    if over:
        fits = ", ".join(f"{p.label} {op.op} {fmt_rate(p.fit.rate, op.unit)} "
                         f"({fmt_pct(p.pct_of_peak)})" for op, p in over if p.fit)
        con.print(f"* fitted rate above the measured peak ({fits}): there the call's fixed "
                  "cost overlaps the work (asynchronous dispatch), so t(n) = overhead + "
                  "work(n) / rate does not hold; shown instead: the rate at the largest size "
                  "(work / time)")
    for op in analysis.ops:
        con.print()
        con.print(_table(op))
        for line in op.verdict:
            con.print(f"  • {line}")
    failed = [w for w in analysis.workers if w.status not in ("ok", "unavailable")]
    if analysis.notes or failed:
        con.print()
        for note in analysis.notes:
            con.print(f"note: {note}")
        for w in failed:
            con.print(f"[red]{w.label}: {w.status}[/]: {w.error}")
