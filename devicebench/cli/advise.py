"""``devicebench advise`` and the main job (``devicebench`` with no command)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.validate import LIMITS

ADVISE_HELP = """Find the fastest way to train WORKLOAD on this machine, say why, and give the code.

Measures candidate configurations (backend x device x jit x precision x input pipeline x
threads; batch sizes only with --allow-batch-change) in worker processes, prunes them by
successive halving within --budget, then measures the finalists interleaved against the
baseline (your current configuration) for a speed-up with a 95% CI. A candidate that
changes the math (precision, batch size) is recommended only if its loss matches the
baseline's from the same initial weights; one with NaN or a different loss is rejected.

WORKLOAD: your training script (train.py; its arguments after --: devicebench advise
train.py -- --epochs 5), a built-in name (devicebench workloads), path/to/file.py:function
or a saved model.keras::data.npz. A script runs up to its first fit() (never to its end);
the change to make comes as a patch to it.
"""


def _with_progress(workload: str, progress: bool, **kwargs: Any):
    """:func:`devicebench.jobs.advise.run_advice` with a spinner on stderr."""
    from devicebench.jobs.advise import run_advice
    from devicebench.report.advise import with_spinner

    return with_spinner(workload, progress,
                        lambda on_event: run_advice(workload, on_event=on_event, **kwargs))


@app.command(help=ADVISE_HELP, context_settings={"allow_extra_args": True})
@user_errors
def advise(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="train.py, a built-in name or "
                                   "path/file.py:function."),
    baseline: str | None = typer.Option(
        None, "--baseline", help="Your current configuration, e.g. "
        "backend=tensorflow,device=gpu:0,jit=auto (default: the workload's own settings on "
        "the Keras backend you use, on its default device)."),
    budget: float = typer.Option(120.0, "--budget", min=LIMITS["advise_budget"].lo,
                                 help="Seconds for the whole search and comparison; a "
                                 "floor, not a cut-off: the baseline's set-up and three "
                                 "interleaved rounds always run, and the advice says when "
                                 "they took longer."),
    allow_batch_change: bool = typer.Option(
        False, "--allow-batch-change", help="Also try larger batch sizes (changes the "
        "training; recommended only if the loss matches)."),
    epochs: int | None = typer.Option(
        None, "--epochs", min=LIMITS["epochs"].lo, max=LIMITS["epochs"].hi,
        help="Epochs you plan to train: a candidate whose extra "
        "compilation or warm-up does not pay back within them is not recommended "
        "(default: the workload's own, else 10)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the advice as JSON."),
) -> None:
    from devicebench.workloads.script import is_script_ref

    if is_script_ref(workload) or ctx.args:
        from devicebench.cli.script import advise_script_command

        advise_script_command(workload, ctx.args, baseline=baseline, budget=budget,
                              allow_batch_change=allow_batch_change, db=db, epochs=epochs,
                              json_out=json_out)
        return
    advice = _with_progress(workload, not json_out, baseline=baseline, budget=budget,
                            allow_batch_change=allow_batch_change, db=db, epochs=epochs)
    if json_out:
        print(json.dumps(advice.to_dict(), indent=2, default=str))
    else:
        from devicebench.report.advise import render_advice

        render_advice(advice)


MAIN_WORKLOADS = ("seed-rnn", "mnist-cnn")
MAIN_BUDGET_S = 40.0
MAIN_EQUIVALENCE_STEPS = 20


def main_job(db: Path | None = None, workloads: tuple[str, ...] = MAIN_WORKLOADS,
             budget: float = MAIN_BUDGET_S) -> int:
    """``devicebench`` alone: a doctor summary, then advise on seed-rnn and mnist-cnn
    (``workloads``, each under ``budget`` seconds)."""
    from devicebench.env.checks import run_checks
    from devicebench.env.probe import probe_environment
    from devicebench.report.advise import render_advice
    from devicebench.report.console import make_console

    con = make_console()
    con.print("[bold]devicebench[/bold]: is this machine's accelerator speeding up training? "
              "(doctor, then advise on two built-in workloads; `devicebench --help` for more)")
    snap = probe_environment(None)
    findings = run_checks(snap)
    devices = sorted({f"{name}: " + ", ".join(d.kind for d in p.physical_devices)
                      for name, p in snap.frameworks.items() if p.status == "ok"})
    con.print("doctor: " + ("; ".join(devices) or "no framework imported"), highlight=False)
    errors = [f for f in findings if f.severity == "error"]
    for f in errors + [f for f in findings if f.severity == "warning"]:
        con.print(f"  {f.severity}: [{f.id}] {f.title} — fix: {f.fix}", markup=False,
                  highlight=False)
    con.print(f"  ({len(findings)} findings; `devicebench doctor` for details)")
    from devicebench.advisor.advice import default_baseline
    from devicebench.jobs.advise import ensure_dispatch_figures

    # The per-op cost behind the accelerator verdict's reasons, once per machine.
    probed = ensure_dispatch_figures(db, snap, default_baseline(snap, workloads[0])[0].backend)
    if probed:
        con.print(f"  {probed}", markup=False, highlight=False)
    verdicts = []
    for name in workloads:
        advice = _with_progress(name, True, baseline=None, budget=budget,
                                allow_batch_change=False, db=db, snapshot=snap,
                                equivalence_steps=MAIN_EQUIVALENCE_STEPS)
        render_advice(advice, console=con, brief=True)
        verdicts.append(f"{name}: {advice.headline.text if advice.headline else ''}")
        verdicts.append(f"  {advice.verdict}")
    con.print("\n[bold]Summary[/bold]")
    for v in verdicts:
        con.print(f"  {v}", markup=False, highlight=False)
    return 1 if errors else 0
