"""``devicebench advise`` and the main job (``devicebench`` with no command)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.cli.calls import calls
from devicebench.jobs import default_of
from devicebench.jobs.advise_any import advise as advise_job
from devicebench.jobs.main import main_job as main_job_of
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


@app.command(help=ADVISE_HELP, context_settings={"allow_extra_args": True})
@user_errors
@calls(advise_job, cli_only=("json_out",), renamed={"workload": "workload_or_model"})
def advise(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="train.py, a built-in name or "
                                   "path/file.py:function."),
    baseline: str | None = typer.Option(
        None, "--baseline", help="Your current configuration, e.g. "
        "backend=tensorflow,device=gpu:0,jit=auto (default: the workload's own settings on "
        "the Keras backend you use, on its default device)."),
    budget: float = typer.Option(default_of(advise_job, "budget"), "--budget",
                                 min=LIMITS["advise_budget"].lo,
                                 help="Seconds for the whole search and comparison, "
                                 "kept to within 10% past the least: the baseline's set-up "
                                 "and three interleaved rounds, which always run (a budget "
                                 "below what they cost here before is refused)."),
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
    from devicebench.cli.progress import progress

    with progress(not json_out) as on_progress:
        advice = advise_job(workload, budget=budget, baseline=baseline,
                            allow_batch_change=allow_batch_change, epochs=epochs, db=db,
                            script_args=ctx.args, on_progress=on_progress)
    if json_out:
        print(json.dumps(advice.to_dict(), indent=2, default=str))
    elif hasattr(advice, "capture"):  # a script's: the advice, then the patch
        from devicebench.report.script import render_script_advice

        render_script_advice(advice)
    else:
        from devicebench.report.advise import render_advice

        render_advice(advice)


def main_job(db: Path | None = None, **kwargs: Any) -> int:
    """``devicebench`` alone: the main job (:func:`devicebench.jobs.main.main_job`,
    ``kwargs`` its own), each part printed as it is ready; returns the exit code."""
    from devicebench.cli.progress import progress
    from devicebench.report.advise import render_advice
    from devicebench.report.console import make_console

    con = make_console()
    con.print("[bold]devicebench[/bold]: is this machine's accelerator speeding up training? "
              "(doctor, then advise on two built-in workloads; `devicebench --help` for more)")

    def show(step) -> None:
        if step.kind == "doctor":
            _doctor_summary(con, step.value)
        elif step.kind == "probe" and step.value:
            con.print(f"  {step.value}", markup=False, highlight=False)
        elif step.kind == "advice":
            render_advice(step.value, console=con, brief=True)

    with progress() as on_progress:
        outcome = main_job_of(db=db, on_step=show, on_progress=on_progress, **kwargs)
    con.print("\n[bold]Summary[/bold]")
    for advice in outcome.advice:
        con.print(f"  {advice.workload}: {advice.headline.text if advice.headline else ''}",
                  markup=False, highlight=False)
        con.print(f"    {advice.verdict}", markup=False, highlight=False)
    return outcome.exit_code


def _doctor_summary(con: Any, found: Any) -> None:
    """The doctor's part of the main job: the devices each framework sees, then its
    errors and warnings."""
    snap, findings = found.snapshot, found.findings
    devices = sorted({f"{name}: " + ", ".join(d.kind for d in p.physical_devices)
                      for name, p in snap.frameworks.items() if p.status == "ok"})
    con.print("doctor: " + ("; ".join(devices) or "no framework imported"), highlight=False)
    for f in found.errors + [f for f in findings if f.severity == "warning"]:
        con.print(f"  {f.severity}: [{f.id}] {f.title} — fix: {f.fix}", markup=False,
                  highlight=False)
    con.print(f"  ({len(findings)} findings; `devicebench doctor` for details)")
