"""``devicebench monitor -- python train.py``: attach the training monitor to an
unmodified script. The parent only starts the child (no framework is imported here)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from devicebench.cli import DB_HELP, app, user_errors
from devicebench.cli.calls import calls
from devicebench.jobs.monitor import run_monitored

MONITOR_HELP = "\n\n".join([
    "Run a training script unchanged with devicebench's TrainingMonitor attached to every "
    "Keras fit() call: step time and samples/s over blocks of steps (each ended by a device "
    "sync), compilation apart, memory, GPU utilisation (NVML), NaN and stall alerts, and one "
    "line at the end (a script that runs no Keras fit() gets one line saying nothing was "
    "timed).",
    "Example: devicebench monitor --csv steps.csv -- python train.py --epochs 3",
    "The script runs with DEVICEBENCH_MONITOR set (its value: the monitor's options as "
    "JSON) and a sitecustomize on PYTHONPATH; a script can also call "
    "devicebench.monitor.install_from_env() itself. Results go to the SQLite store as a "
    "run tagged 'monitor' unless --no-store (devicebench history, devicebench report RUN).",
    "The store, --csv and --tensorboard are checked before the script starts (exit 2 if one "
    "cannot be written); after that the monitor never stops the training: a failure of its "
    "own is one warning line. SIGINT and SIGTERM are passed to the script; a script killed "
    "by signal N exits 128+N.",
])


@app.command("monitor", help=MONITOR_HELP,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@user_errors
@calls(run_monitored, convert={"no_store": ("store", lambda v: not v)})
def monitor(
    command: list[str] = typer.Argument(None, help="The command to run, after --."),
    csv: Path | None = typer.Option(None, "--csv", help="Write blocks and epochs to this CSV."),
    tensorboard: Path | None = typer.Option(None, "--tensorboard",
                                            help="Write TensorBoard scalars to this directory "
                                            "(needs tensorboardX)."),
    stop_on_nan: bool = typer.Option(False, "--stop-on-nan",
                                     help="Stop training when the loss becomes NaN/Inf."),
    block_steps: int | None = typer.Option(None, "--block-steps", min=1,
                                           help="Steps per timed block (default: automatic)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    no_store: bool = typer.Option(False, "--no-store", help="Do not record in the store."),
) -> None:
    outcome = run_monitored(command or [], csv=csv, tensorboard=tensorboard,
                            stop_on_nan=stop_on_nan, block_steps=block_steps, db=db,
                            store=not no_store)
    if outcome.death_line:
        print(f"devicebench monitor: {outcome.death_line}", file=sys.stderr)
    elif outcome.nothing_monitored:
        print(f"devicebench monitor: {outcome.nothing_monitored}", file=sys.stderr)
    raise typer.Exit(outcome.exit_code)
