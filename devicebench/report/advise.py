"""Render an AdviceResult for the terminal."""

from __future__ import annotations

from typing import TypeVar

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from devicebench.advisor.advice import AdviceResult
from devicebench.advisor.search import SCREEN_FACTOR
from devicebench.fmt import fmt_duration
from devicebench.report.console import make_console
from devicebench.report.run import render_comparison
from devicebench.trials.stability import brief_lines

T = TypeVar("T")


def render_advice(advice: AdviceResult, *, console: Console | None = None,
                  brief: bool = False) -> None:
    """Ranked candidates, the final interleaved comparison, verdict, reasons and code."""
    con = console or make_console()
    con.print(f"\n[bold]devicebench advise {advice.workload}[/bold] — baseline "
              f"{advice.baseline.label}; {advice.elapsed_s:.0f} s of a {advice.budget_s:.0f} s "
              f"budget; one-time costs weighed over {advice.epochs} epochs")
    if advice.baseline_reason:
        con.print(f"  baseline: {advice.baseline_reason}", markup=False, highlight=False)
    if advice.headline is not None:
        con.print(f"[bold]{escape(advice.headline.text)}[/bold]", highlight=False)
    if not brief:
        table = Table(title="Candidates (screening, successive halving; where each was last "
                      "measured, its median step time and speed-up over the baseline in the "
                      "same rounds)", title_justify="left")
        for col in ("candidate", "measured in", "step time", "vs baseline", "outcome"):
            table.add_column(col, overflow="fold")
        ranked = sorted(advice.outcomes, key=lambda o: (
            bool(o.rejected), not o.final, -(o.speedup or 0.0)))
        for o in ranked:
            if o.untried:
                table.add_row(o.spec.label, "not set up", "-", "-", escape(o.untried))
                continue
            outcome = (f"[red]rejected[/]: {escape(o.rejected)}" if o.rejected else
                       f"screened (≥ {SCREEN_FACTOR:g}x slower than the fastest in set-up)"
                       if o.screened else "pruned (slower)" if o.pruned else "finalist")
            if o.screened:
                where = "set-up steps (one after another, not interleaved)"
            else:
                where = "final" if o.final else f"rung {o.rung}"
                if o.blocks_cut:
                    cut = "whole epochs" if o.blocks_cut == "epochs" else "K-step blocks"
                    where += f" ({cut})"
            table.add_row(o.spec.label, where, fmt_duration(o.median_step_s),
                          f"{o.speedup:.2f}x" if o.speedup else "-", outcome)
        con.print(table)
        render_comparison(advice.rows, console=con, notes=advice.notes)
    else:
        if advice.stop_reason:
            con.print(f"  search: {advice.stop_reason}", markup=False, highlight=False)
        for line in brief_lines(advice.stability):
            con.print(f"  {line}", markup=False, highlight=False)
    con.print(f"\n[bold]Verdict[/bold]: {escape(advice.verdict)}", highlight=False)
    if advice.reasons:
        con.print("[bold]Why[/bold] (from the measurements):")
        for r in advice.reasons:
            con.print(f"  - {r.text}", markup=False, highlight=False)
    if advice.code and not brief:
        con.print("[bold]Apply it[/bold]:")
        for line in advice.code.splitlines():
            con.print(f"    {line}", markup=False, highlight=False)
