"""The fleet's answers in the terminal: where to train (one row per machine), the
doctor's machines x frameworks x devices table, the lines for nodes left out."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from devicebench.fleet.answer import INDEPENDENT_NOTE, MachineAnswer, reference_name
from devicebench.fmt import fmt_duration, fmt_ratio
from devicebench.report.console import make_console


def _ci(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "-"
    return fmt_duration(value) + (f" [{fmt_duration(ci[0])}–{fmt_duration(ci[1])}]"
                                  if ci else "")


def _vs(a: MachineAnswer) -> str:
    r = a.vs_user
    if a.is_reference:
        return "1x (reference)"
    if r is None:
        return "-"
    return f"{fmt_ratio(r.value)} [{fmt_ratio(r.ci_low)}–{fmt_ratio(r.ci_high)}]"


def headline(answers: list[MachineAnswer], workload: str) -> str:
    """The answer in one sentence: which machine, which configuration, how much faster."""
    done = [a for a in answers if a.epoch_s is not None]
    if not done:
        return f"{workload}: no machine of the fleet gave an answer (see the lines below)"
    best = done[0]
    text = (f"Train {workload} on {best.facts.label} with {best.best}: an epoch takes "
            f"{_ci(best.epoch_s, best.epoch_ci)}")
    if best.facts.is_user:
        return text + " — that is your own machine, the fastest of the fleet"
    if best.vs_user is not None:
        r = best.vs_user
        sure = "" if r.significant else " (not distinguishable from 1x: the CI holds it)"
        text += (f", {fmt_ratio(r.value)} faster than {reference_name(answers)} "
                 f"[95% CI {fmt_ratio(r.ci_low)}–{fmt_ratio(r.ci_high)}, independent "
                 f"samples]{sure}")
    return text


def answer_rows(answers: list[MachineAnswer]) -> list[list[str]]:
    """The table's cells, one list per machine (shared by Markdown-like renderers)."""
    rows = []
    for a in answers:
        f = a.facts
        status = f.status + (f" ({len(f.trials)} trials stored)" if f.status != "ok" else "")
        rows.append([f.label + (" (yours)" if f.is_user else ""), status, a.best or "-",
                     _ci(a.step_s, a.step_ci), _ci(a.epoch_s, a.epoch_ci), _vs(a),
                     a.accelerator_short or f.reason or "-"])
    return rows


COLUMNS = ("machine", "status", "fastest configuration", "step [95% CI]",
           "epoch [95% CI]", "vs your machine", "accelerator / why no answer")


def render_fleet_advice(fleet: Any, console=None) -> None:
    """Print ``fleet advise``'s answer: the sentence, the per-machine table, then what
    was left out, lost or failed, and where it is stored."""
    con = console or make_console()
    answers = fleet.answer()
    con.print(f"[bold]Where should {fleet.workload} train?[/bold] "
              f"({len(fleet.machines)} machines, {fleet.elapsed_s:.0f} s)", highlight=False)
    con.print(headline(answers, fleet.workload), markup=False, highlight=False)
    table = Table(show_lines=False)
    for col in COLUMNS:
        table.add_column(col, overflow="fold")
    for row in answer_rows(answers):
        table.add_row(*map(escape, row))
    con.print(table)
    ref = reference_name(answers)
    if ref:
        con.print(f"  vs: each machine's epoch against {ref}; " + INDEPENDENT_NOTE,
                  markup=False, highlight=False)
    for a in answers:
        if a.accelerator:
            con.print(f"  {a.facts.name}: {a.accelerator}", markup=False, highlight=False)
    for m in fleet.machines:
        if m.status != "ok" and m.reason:
            con.print(f"  {m.report.name}: {m.status}: {m.reason}", markup=False,
                      highlight=False)
    for line in fleet.notes:
        con.print(f"  left out: {line}", markup=False, highlight=False)
    for line in fleet.same:
        con.print(f"  {line}", markup=False, highlight=False)
    runs = ", ".join(f"#{m.run_id} {m.report.name}" for m in fleet.machines)
    con.print(f"  stored as runs {runs}: devicebench report --run N; devicebench fleet "
              f"report --html FILE (machines as columns)", markup=False, highlight=False)
    if fleet.interrupted:
        con.print("  interrupted (Ctrl-C): the fleet's tasks were cancelled; the trials "
                  "that finished are stored", markup=False, highlight=False)


def _framework_cell(snapshot, name: str) -> str:
    p = snapshot.frameworks.get(name)
    if p is None:
        return f"{snapshot.version_of(name)} (not probed)" if snapshot.has(name) else "-"
    if p.status != "ok":
        return f"{p.status}: {(p.error or '').splitlines()[0][:60] if p.error else ''}"
    kinds = ", ".join(sorted({d.kind.lower() for d in p.physical_devices})) or "no device"
    return f"{p.version}: {kinds}"


def render_fleet_doctor(reports: list[Any], console=None) -> None:
    """One table of machines x frameworks x devices, then each machine's findings."""
    con = console or make_console()
    ok = [r for r in reports if not r.problem and r.snapshot is not None]
    names = sorted({n for r in ok for n in r.snapshot.frameworks} |
                   {n for r in ok for n in ("tensorflow", "jax", "torch") if r.snapshot.has(n)})
    table = Table(title="fleet doctor: machines x frameworks x devices", title_justify="left")
    for col in ("machine", "node", "devices", *names, "findings"):
        table.add_column(col, overflow="fold")
    for r in ok:
        errors = sum(f.severity == "error" for f in r.findings)
        warnings = sum(f.severity == "warning" for f in r.findings)
        cells = [r.label, f"{r.node.ip} [{r.node.short_id}]" +
                 (" (yours)" if r.node.is_driver else ""), ", ".join(r.node.devices),
                 *[_framework_cell(r.snapshot, n) for n in names],
                 f"{errors} errors, {warnings} warnings"]
        table.add_row(*map(escape, cells))
    con.print(table)
    for r in ok:
        shown = [f for f in r.findings if f.severity in ("error", "warning")]
        for f in shown:
            con.print(f"  {r.name}: {f.severity}: [{f.id}] {f.title} — fix: {f.fix}",
                      markup=False, highlight=False)
    for r in reports:
        if r.problem:
            con.print(f"  left out: {r.problem}", markup=False, highlight=False)
