"""``devicebench advise`` and the main job (``devicebench`` with no command)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from devicebench.cli import app, user_errors

ADVISE_HELP = """Find the fastest way to train WORKLOAD on this machine, say why, and give the code.

Measures candidate configurations (backend x device x jit x precision x input pipeline x
threads; batch sizes only with --allow-batch-change) in worker processes, prunes them by
successive halving within --budget, then measures the finalists interleaved against the
baseline (your current configuration) for a speed-up with a 95% CI. A candidate that
changes the math (precision, batch size) is recommended only if its loss matches the
baseline's from the same initial weights; one with NaN or a different loss is rejected.

WORKLOAD: a built-in name (devicebench workloads) or path/to/file.py:function.
"""


def run_advice(workload: str, *, baseline: str | None, budget: float, allow_batch_change: bool,
               db: Path | None, snapshot=None, progress: bool = True,
               equivalence_steps: int = 50, epochs: int | None = None):
    """Validate, advise, store; returns the AdviceResult (shared by advise and main job)."""
    from devicebench.advisor.advice import advise_workload, default_baseline, parse_baseline
    from devicebench.advisor.figures import device_figures
    from devicebench.env.probe import probe_host_layer
    from devicebench.store import recorded_run
    from devicebench.store.ops import latest_ops_run
    from devicebench.trials.plan import installed_backends, validate_spec
    from devicebench.workloads import BUILTIN_WORKLOADS
    from devicebench.workloads.loader import check_workload_runs, validate_workload_ref

    validate_workload_ref(workload)
    snapshot = snapshot or probe_host_layer()
    if not installed_backends(snapshot):
        from devicebench.errors import InputError

        raise InputError("no deep-learning framework is installed",
                         fix="pip install 'devicebench[tensorflow,jax]'")
    default, why = default_baseline(snapshot, workload)
    spec = parse_baseline(baseline, workload, default.backend)
    if baseline is None or "device=" not in baseline:
        spec = spec.with_(device=default.device)
    validate_spec(spec, snapshot)  # as `run` refuses --device gpu:7 on a CPU machine
    if baseline is not None:
        why = "given with --baseline" + ("" if "device=" in baseline else
                                         f" ({default.device}: the default device)")
    # A user workload that does not load, returns the wrong thing or whose data does not
    # fit its model is bad input (exit 2), found in a throwaway worker before searching.
    check_workload_runs(workload, spec.backend)
    builtin = BUILTIN_WORKLOADS.get(workload)
    options = {"argv": sys.argv[1:], "workload": workload, "budget": budget}
    with recorded_run(db, snapshot, "advise", options) as rec:
        # `devicebench ops` figures of this machine (same hardware and versions), if any.
        found = latest_ops_run(rec.store, rec.machine_id)
        every = {d: f for d in {w.device for w in found[1]}
                 if (f := device_figures(*found, d))} if found else {}
        bar = _Spinner(workload) if progress else None
        try:
            advice = advise_workload(
                workload, snapshot, baseline=spec, budget_s=budget,
                allow_batch_change=allow_batch_change, equivalence_steps=equivalence_steps,
                workload_batch_size=builtin.batch_size if builtin else None,
                workload_tags=builtin.tags if builtin else (),
                workload_flops_per_step=builtin.flops_per_step() if builtin else None,
                workload_epochs=builtin.epochs if builtin else None,
                workload_timesteps=builtin.params.get("timesteps") if builtin else None,
                epochs=epochs, figures=every.get(spec.device), device_figures=every,
                baseline_reason=why,
                on_result=lambda r: rec.store.add_trial(rec.run_id, r),
                on_event=bar.event if bar else None)
        finally:
            if bar:
                bar.stop()
        rec.summary = advice.to_dict()
    return advice


class _Spinner:
    def __init__(self, workload: str) -> None:
        from rich.console import Console
        from rich.status import Status

        self.workload = workload
        self.status = Status(f"advise {workload}: starting", console=Console(stderr=True))
        self.status.start()

    def event(self, kind: str, spec, info: dict) -> None:
        if kind == "setup":
            self.status.update(f"advise {self.workload}: setting up {spec.label}")
        elif kind == "round":
            self.status.update(f"advise {self.workload}: round {info['round']}")

    def stop(self) -> None:
        self.status.stop()


@app.command(help=ADVISE_HELP)
@user_errors
def advise(
    workload: str = typer.Argument(..., help="Built-in name or path/file.py:function."),
    baseline: str | None = typer.Option(
        None, "--baseline", help="Your current configuration, e.g. "
        "backend=tensorflow,device=gpu:0,jit=auto (default: the workload's own settings on "
        "the Keras backend you use, on its default device)."),
    budget: float = typer.Option(120.0, "--budget", min=10.0,
                                 help="Seconds for the whole search and comparison."),
    allow_batch_change: bool = typer.Option(
        False, "--allow-batch-change", help="Also try larger batch sizes (changes the "
        "training; recommended only if the loss matches)."),
    epochs: int | None = typer.Option(
        None, "--epochs", min=1, help="Epochs you plan to train: a candidate whose extra "
        "compilation or warm-up does not pay back within them is not recommended "
        "(default: the workload's own, else 10)."),
    db: Path | None = typer.Option(None, "--db", help="SQLite results file (default: "
                                   "$DEVICEBENCH_DB, else the user data directory)."),
    json_out: bool = typer.Option(False, "--json", help="Print the advice as JSON."),
) -> None:
    advice = run_advice(workload, baseline=baseline, budget=budget,
                        allow_batch_change=allow_batch_change, db=db, progress=not json_out,
                        epochs=epochs)
    if json_out:
        print(json.dumps(advice.to_dict(), indent=2, default=str))
    else:
        from devicebench.report.advise import render_advice

        render_advice(advice)


MAIN_WORKLOADS = ("seed-rnn", "mnist-cnn")
MAIN_BUDGET_S = 40.0
MAIN_EQUIVALENCE_STEPS = 20


def main_job(db: Path | None = None) -> int:
    """``devicebench`` alone: a doctor summary, then advise on seed-rnn and mnist-cnn."""
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
    verdicts = []
    for name in MAIN_WORKLOADS:
        advice = run_advice(name, baseline=None, budget=MAIN_BUDGET_S,
                            allow_batch_change=False, db=db, snapshot=snap,
                            equivalence_steps=MAIN_EQUIVALENCE_STEPS)
        render_advice(advice, console=con, brief=True)
        verdicts.append(f"{name}: {advice.headline.text if advice.headline else ''}")
        verdicts.append(f"  {advice.verdict}")
    con.print("\n[bold]Summary[/bold]")
    for v in verdicts:
        con.print(f"  {v}", markup=False, highlight=False)
    return 1 if errors else 0
